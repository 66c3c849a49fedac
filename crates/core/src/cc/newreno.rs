//! NewReno congestion control (RFC 5681, RFC 6582), receiver-driven.

use super::{Controller, ControllerFactory, DataArrival, Loss, WindowConfig};
use crate::time::Instant;

/// NewReno's settings; windows are counted in packets of the path's `mss`.
#[derive(Clone, Debug)]
pub struct NewRenoConfig {
    /// Initial window (RFC 6928: 10 packets) and floor of the window after a loss reduction
    /// (RFC 5681 §3.1: 2 packets). A timeout still collapses the window to one packet.
    pub window: WindowConfig,
    /// Factor applied to the window on a congestion event, unitless (RFC 5681 eq. 4: 1/2).
    pub loss_reduction: f64,
}

impl Default for NewRenoConfig {
    fn default() -> Self {
        NewRenoConfig {
            window: WindowConfig::default(),
            loss_reduction: 0.5,
        }
    }
}

impl ControllerFactory for NewRenoConfig {
    fn name(&self) -> &'static str {
        "newreno"
    }
    fn build(&self, now: Instant, mss: u64) -> Box<dyn Controller> {
        Box::new(NewReno::new(self, now, mss))
    }
}

/// NewReno over requests: slow start, one-packet-per-RTT congestion avoidance, one window
/// reduction per congestion event.
///
/// Congestion events and recovery follow RFC 9002 §7.3 (QUIC's NewReno), the form of RFC
/// 6582 that suits per-packet outcomes: a loss of a request sent before the last reduction
/// belongs to the event already answered, and arrivals for such requests do not grow the
/// window.
#[derive(Debug)]
pub struct NewReno {
    mss: u64,
    min_window: u64,
    loss_reduction: f64,
    /// Bytes of requests the path may have in flight.
    cwnd: u64,
    ssthresh: u64,
    /// Bytes answered since the window last grew in congestion avoidance.
    acked_in_avoidance: u64,
    /// When the window was last reduced: losses of requests sent up to then are part of
    /// that congestion event.
    reduced_at: Option<Instant>,
    /// Start of the recovery period: arrivals for requests sent up to then do not grow the
    /// window. Cleared by a timeout, after which every arrival restarts slow start.
    recovery_start: Option<Instant>,
    /// When a timeout last collapsed the window: later timeouts of requests sent before it
    /// are the same outage.
    collapsed_at: Option<Instant>,
}

impl NewReno {
    pub fn new(config: &NewRenoConfig, _now: Instant, mss: u64) -> Self {
        let mss = mss.max(1);
        let min_window = config.window.min_bytes(mss);
        NewReno {
            mss,
            min_window,
            loss_reduction: config.loss_reduction.clamp(0.0, 1.0),
            cwnd: config.window.initial_bytes(mss),
            ssthresh: u64::MAX,
            acked_in_avoidance: 0,
            reduced_at: None,
            recovery_start: None,
            collapsed_at: None,
        }
    }
    /// Slow-start threshold in bytes (`u64::MAX` until the first congestion event).
    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }
}

impl Controller for NewReno {
    fn name(&self) -> &'static str {
        "newreno"
    }
    fn on_request_sent(&mut self, _now: Instant, _bytes: u64, _in_flight_bytes: u64) {}
    fn on_data(&mut self, arrival: &DataArrival) {
        if self.recovery_start.is_some_and(|start| arrival.sent <= start) {
            return;
        }
        // RFC 7661 / RFC 9002 §7.8: a window the sender did not fill has not been shown to
        // be safe, so it must not grow.
        if arrival.app_limited {
            return;
        }
        if self.cwnd < self.ssthresh {
            // RFC 5681 §3.1 slow start, counting bytes (RFC 3465): +1 packet per packet
            // answered, which doubles the window every round trip. Capped at ssthresh so
            // the rest of the bytes count toward congestion avoidance.
            let room = self.ssthresh - self.cwnd;
            let grow = arrival.bytes.min(room);
            self.cwnd += grow;
            self.acked_in_avoidance += arrival.bytes - grow;
        } else {
            self.acked_in_avoidance += arrival.bytes;
        }
        // RFC 5681 §3.1 eq. 3 with byte counting: +1 mss per window's worth of bytes
        // answered, i.e. per round trip.
        if self.cwnd >= self.ssthresh && self.acked_in_avoidance >= self.cwnd {
            self.acked_in_avoidance -= self.cwnd;
            self.cwnd += self.mss;
        }
    }
    fn on_loss(&mut self, loss: &Loss) {
        let new_event = self.reduced_at.is_none_or(|at| loss.sent > at);
        if new_event {
            // RFC 5681 §3.1 eq. 4 (ssthresh = FlightSize/2) on the window rather than the
            // flight, as RFC 9002 §7.3.2 does, so a path whose flight was short for want of
            // requests is not punished twice.
            let reduced = (self.cwnd as f64 * self.loss_reduction) as u64;
            self.ssthresh = reduced.max(self.min_window);
            self.cwnd = self.ssthresh;
            self.acked_in_avoidance = 0;
            self.reduced_at = Some(loss.now);
            self.recovery_start = Some(loss.now);
        }
        if loss.by_timeout && self.collapsed_at.is_none_or(|at| loss.sent > at) {
            // RFC 5681 §3.1: after a retransmission timeout the window is one packet (the
            // loss window), and slow start rebuilds it up to ssthresh.
            self.cwnd = self.mss;
            self.acked_in_avoidance = 0;
            self.reduced_at = Some(loss.now);
            self.collapsed_at = Some(loss.now);
            self.recovery_start = None;
        }
    }
    fn window(&self) -> u64 {
        self.cwnd
    }
}

/// Small drivers shared by the congestion-control tests.
#[cfg(test)]
pub(crate) mod test_support {
    use super::super::{Controller, DataArrival, Loss};
    use crate::time::{Duration, Instant};

    pub(crate) const MSS: u64 = 1000;

    pub(crate) fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    pub(crate) fn at(d: Duration) -> Instant {
        Instant::ZERO + d
    }

    /// Data for one `MSS` request sent at `sent` arriving at `now`, on a path whose window is
    /// full (more in flight than any window in the tests).
    pub(crate) fn arrival(sent: Instant, now: Instant) -> DataArrival {
        DataArrival {
            now,
            sent,
            bytes: MSS,
            rtt: Some(now - sent),
            smoothed_rtt: now - sent,
            min_rtt: now - sent,
            in_flight_bytes: 1 << 40,
            delivered_bytes: 0,
            delivered_bytes_at_send: 0,
            delivered_time_at_send: sent,
            app_limited: false,
        }
    }

    pub(crate) fn loss(sent: Instant, now: Instant, by_timeout: bool) -> Loss {
        Loss {
            now,
            sent,
            lost_bytes: MSS,
            in_flight_bytes: 0,
            by_timeout,
        }
    }

    /// One round trip from `start`: a full window of requests sent evenly over `rtt`, each
    /// answered `rtt` after it was sent. Returns the time the next round starts.
    pub(crate) fn round(cc: &mut dyn Controller, start: Instant, rtt: Duration) -> Instant {
        let n = (cc.window() / MSS).max(1);
        let gap = rtt / n as u32;
        for i in 0..n {
            cc.on_request_sent(start + gap * i as u32, MSS, (i + 1) * MSS);
        }
        for i in 0..n {
            let sent = start + gap * i as u32;
            cc.on_data(&arrival(sent, sent + rtt));
        }
        start + rtt
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    fn reno() -> NewReno {
        NewReno::new(&NewRenoConfig::default(), Instant::ZERO, MSS)
    }

    #[test]
    fn factory_builds_with_the_initial_window() {
        let cc = NewRenoConfig::default().build(Instant::ZERO, 1200);
        assert_eq!(cc.name(), "newreno");
        assert_eq!(cc.window(), 12_000);
        assert_eq!(cc.pacing_rate(), None);
    }

    #[test]
    fn slow_start_doubles_every_round_trip() {
        let mut cc = reno();
        let mut t = Instant::ZERO;
        let mut windows = vec![cc.window()];
        for _ in 0..4 {
            t = round(&mut cc, t, ms(100));
            windows.push(cc.window());
        }
        // 10, 20, 40, 80, 160 packets.
        assert_eq!(windows, [10_000, 20_000, 40_000, 80_000, 160_000]);
    }

    #[test]
    fn loss_halves_once_per_event() {
        let mut cc = reno();
        let t = round(&mut cc, Instant::ZERO, ms(100)); // 20 packets
        round(&mut cc, t, ms(100)); // 40 packets
        assert_eq!(cc.window(), 40_000);
        // A request sent at 150 ms is found lost at 260 ms: 40 → 20 packets.
        cc.on_loss(&loss(at(ms(150)), at(ms(260)), false));
        assert_eq!(cc.window(), 20_000);
        assert_eq!(cc.ssthresh(), 20_000);
        // Requests sent before 260 ms lost later: the same event, no further reduction.
        cc.on_loss(&loss(at(ms(160)), at(ms(270)), false));
        cc.on_loss(&loss(at(ms(259)), at(ms(300)), false));
        assert_eq!(cc.window(), 20_000);
        // Their data arriving does not grow the window either (still in recovery).
        cc.on_data(&arrival(at(ms(200)), at(ms(300))));
        assert_eq!(cc.window(), 20_000);
        // A request sent after the reduction, then lost: a new event, 20 → 10 packets.
        cc.on_loss(&loss(at(ms(261)), at(ms(400)), false));
        assert_eq!(cc.window(), 10_000);
        // Never below the 2-packet floor.
        for i in 0..10u64 {
            cc.on_loss(&loss(at(ms(401 + 100 * i)), at(ms(450 + 100 * i)), false));
        }
        assert_eq!(cc.window(), 2 * MSS);
    }

    #[test]
    fn congestion_avoidance_adds_one_packet_per_round_trip() {
        let mut cc = reno();
        let t = round(&mut cc, Instant::ZERO, ms(100)); // 20 packets
        cc.on_loss(&loss(at(ms(50)), t, false)); // ssthresh = cwnd = 10 packets
        assert_eq!(cc.window(), 10_000);
        assert!(!cc.in_slow_start());
        let mut t = t + ms(1);
        let mut windows = vec![];
        for _ in 0..5 {
            t = round(&mut cc, t, ms(100));
            windows.push(cc.window() / MSS);
        }
        // Each round answers exactly one window: +1 packet per round.
        assert_eq!(windows, [11, 12, 13, 14, 15]);
    }

    #[test]
    fn slow_start_stops_at_ssthresh() {
        let mut cc = reno();
        let t = round(&mut cc, Instant::ZERO, ms(100)); // 20 packets
        cc.on_loss(&loss(at(ms(50)), t, true)); // ssthresh = 10 packets, cwnd = 1
        assert_eq!(cc.window(), MSS);
        assert_eq!(cc.ssthresh(), 10_000);
        let mut t = t + ms(1);
        let mut windows = vec![];
        for _ in 0..6 {
            t = round(&mut cc, t, ms(100));
            windows.push(cc.window() / MSS);
        }
        // 1 → 2 → 4 → 8 → 10 (capped at ssthresh; 6 bytes-worth left over count toward
        // avoidance) → 11 → 12.
        assert_eq!(windows, [2, 4, 8, 10, 11, 12]);
    }

    #[test]
    fn timeout_collapses_to_one_packet() {
        let mut cc = reno();
        let t = round(&mut cc, Instant::ZERO, ms(100));
        let t = round(&mut cc, t, ms(100)); // 40 packets
        // A reordering loss first (40 → 20), then the same event's timeout: one packet,
        // ssthresh stays at 20 (RFC 5681: ssthresh is not cut twice for one event).
        cc.on_loss(&loss(at(ms(150)), t, false));
        cc.on_loss(&loss(at(ms(160)), t + ms(300), true));
        assert_eq!(cc.window(), MSS);
        assert_eq!(cc.ssthresh(), 20_000);
        // Another request of the same flight timing out does not collapse again after
        // the window has started to regrow.
        cc.on_data(&arrival(t + ms(301), t + ms(400)));
        assert_eq!(cc.window(), 2 * MSS);
        cc.on_loss(&loss(at(ms(170)), t + ms(310), true));
        assert_eq!(cc.window(), 2 * MSS);
        // A timeout of a request sent after the collapse does.
        cc.on_loss(&loss(t + ms(301), t + ms(1400), true));
        assert_eq!(cc.window(), MSS);
        // A new event too: ssthresh = max(2 packets · 1/2, 2 packets).
        assert_eq!(cc.ssthresh(), 2 * MSS);
    }

    #[test]
    fn app_limited_arrivals_do_not_grow_the_window() {
        let mut cc = reno();
        let mut a = arrival(Instant::ZERO, at(ms(100)));
        a.app_limited = true;
        cc.on_data(&a);
        assert_eq!(cc.window(), 10_000);
    }
}
