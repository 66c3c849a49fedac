//! Copa congestion control (Arun & Balakrishnan, NSDI 2018), default mode, receiver-driven.

use super::{Controller, ControllerFactory, DataArrival, Loss, WindowConfig};
use crate::estimate::WindowedMin;
use crate::time::{Duration, Instant};

/// Copa's settings; windows are counted in packets of the path's `mss`.
#[derive(Clone, Debug)]
pub struct CopaConfig {
    /// δ of the paper, unitless (0.5 in default mode): the target rate is 1/(δ·d_q) packets
    /// per second, so each flow keeps about 1/δ packets queued at the bottleneck.
    pub delta: f64,
    /// Length of the RTTmin filter (paper §2.1: 10 s), long enough to see the queue empty.
    pub min_rtt_window: Duration,
    /// Round trips the window must move the same way before the velocity starts doubling
    /// (paper §2.2: 3).
    pub velocity_rounds: u32,
    /// Initial window (10 packets) and floor of the window (2 packets, as mvfst's Copa). A
    /// timeout collapses the window to the floor.
    pub window: WindowConfig,
}

impl Default for CopaConfig {
    fn default() -> Self {
        CopaConfig {
            delta: 0.5,
            min_rtt_window: Duration::from_secs(10),
            velocity_rounds: 3,
            window: WindowConfig::default(),
        }
    }
}

impl ControllerFactory for CopaConfig {
    fn name(&self) -> &'static str {
        "copa"
    }
    fn build(&self, now: Instant, mss: u64) -> Box<dyn Controller> {
        Box::new(Copa::new(self, now, mss))
    }
}

/// Which way the window moved over the last round trip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Up,
    Down,
}

/// Copa over requests, default mode.
///
/// Copa aims the sending rate λ = cwnd/RTTstanding at the target λ_t = 1/(δ·d_q), where the
/// queueing delay d_q = RTTstanding − RTTmin, RTTstanding is the smallest RTT of the last
/// half srtt (the queue that has not drained within it) and RTTmin the smallest of the last
/// 10 s. Each arrival moves the window by v/(δ·cwnd) packets toward the target, about v/δ
/// packets per round trip; the velocity v doubles each round trip once the window has moved
/// the same way for three, and falls back to 1 when the direction changes. At equilibrium
/// the flow keeps 1/δ = 2 packets queued: cwnd/RTT = 1/(δ·d_q) ⇔ d_q·(cwnd/RTT) = 1/δ packets.
///
/// Copa starts in slow start, doubling the window every round trip (one packet per packet
/// answered) until the first arrival that finds λ above λ_t. Requests are paced at
/// 2·cwnd/RTTstanding (paper §2.1).
///
/// Not implemented: the competitive mode (paper §2.3), which detects buffer-filling
/// competitors and then lowers δ AIMD-style; with it absent Copa always uses δ. Copa does
/// not read loss as congestion; only a timeout, which says the flight is gone, collapses the
/// window to its floor (as mvfst's Copa does on persistent congestion).
#[derive(Debug)]
pub struct Copa {
    mss: f64,
    min_window: f64,
    delta: f64,
    min_rtt_window: Duration,
    velocity_rounds: u32,
    /// Bytes of requests the path may have in flight.
    cwnd: f64,
    slow_start: bool,
    min_rtt: WindowedMin<Duration>,
    standing: WindowedMin<Duration>,
    rtt_min: Option<Duration>,
    rtt_standing: Option<Duration>,
    srtt: Duration,
    velocity: f64,
    direction: Direction,
    /// Round trips in a row the window moved in `direction`.
    same_direction: u32,
    /// When the window was last compared with the one a round trip before, and its value.
    last_record: Option<(Instant, f64)>,
    collapsed_at: Option<Instant>,
}

impl Copa {
    pub fn new(config: &CopaConfig, _now: Instant, mss: u64) -> Self {
        let min_window = config.window.min_bytes(mss) as f64;
        let cwnd = config.window.initial_bytes(mss) as f64;
        let mss = mss.max(1) as f64;
        Copa {
            mss,
            min_window,
            // δ = 0 would make the target infinite and every step NaN.
            delta: config.delta.max(1e-3),
            min_rtt_window: config.min_rtt_window,
            velocity_rounds: config.velocity_rounds,
            cwnd,
            slow_start: true,
            min_rtt: WindowedMin::default(),
            standing: WindowedMin::default(),
            rtt_min: None,
            rtt_standing: None,
            srtt: Duration::ZERO,
            velocity: 1.0,
            direction: Direction::Up,
            same_direction: 0,
            last_record: None,
            collapsed_at: None,
        }
    }
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }
    pub fn velocity(&self) -> f64 {
        self.velocity
    }
    pub fn direction(&self) -> Direction {
        self.direction
    }
    /// RTTstanding: the smallest RTT of the last srtt/2.
    pub fn rtt_standing(&self) -> Option<Duration> {
        self.rtt_standing
    }
    /// RTTmin: the smallest RTT of the last 10 s.
    pub fn rtt_min(&self) -> Option<Duration> {
        self.rtt_min
    }
    /// d_q = RTTstanding − RTTmin.
    pub fn queueing_delay(&self) -> Option<Duration> {
        Some(self.rtt_standing? - self.rtt_min?)
    }
    /// λ_t = 1/(δ·d_q) packets per second, in bytes per second; infinite with no queue.
    pub fn target_rate(&self) -> Option<f64> {
        let d_q = self.queueing_delay()?.as_secs_f64();
        Some(if d_q > 0.0 {
            self.mss / (self.delta * d_q)
        } else {
            f64::INFINITY
        })
    }
    /// λ = cwnd/RTTstanding, bytes per second.
    pub fn current_rate(&self) -> Option<f64> {
        let standing = self.rtt_standing?.as_secs_f64();
        (standing > 0.0).then(|| self.cwnd / standing)
    }

    /// Paper §2.2: once per round trip, compare the window with the one a round trip ago;
    /// double v once the direction has held for `velocity_rounds` round trips, reset it to 1
    /// when the direction changes.
    fn update_direction(&mut self, now: Instant) {
        let Some((since, recorded)) = self.last_record else {
            self.last_record = Some((now, self.cwnd));
            return;
        };
        if now - since < self.srtt {
            return;
        }
        let direction = if self.cwnd > recorded {
            Direction::Up
        } else {
            Direction::Down
        };
        if direction == self.direction {
            self.same_direction += 1;
            if self.same_direction >= self.velocity_rounds {
                self.velocity *= 2.0;
            }
        } else {
            self.velocity = 1.0;
            self.same_direction = 0;
        }
        self.direction = direction;
        self.last_record = Some((now, self.cwnd));
    }

    /// Paper §2.1: v/(δ·cwnd) packets per packet answered, in bytes v·mss·bytes/(δ·cwnd).
    fn step(&self, bytes: f64) -> f64 {
        self.velocity * self.mss * bytes / (self.delta * self.cwnd)
    }

    /// A decision against the current direction while v > 1 resets v at once (mvfst), so a
    /// velocity built up going one way is not spent going the other.
    fn turn(&mut self, direction: Direction, now: Instant) {
        if self.direction != direction && self.velocity > 1.0 {
            self.direction = direction;
            self.velocity = 1.0;
            self.same_direction = 0;
            self.last_record = Some((now, self.cwnd));
        }
    }
}

impl Controller for Copa {
    fn name(&self) -> &'static str {
        "copa"
    }
    fn on_request_sent(&mut self, _now: Instant, _bytes: u64, _in_flight_bytes: u64) {}
    fn on_data(&mut self, a: &DataArrival) {
        self.srtt = a.smoothed_rtt;
        if let Some(rtt) = a.rtt {
            self.rtt_min = Some(self.min_rtt.update(a.now, rtt, self.min_rtt_window));
            self.rtt_standing = Some(self.standing.update(a.now, rtt, a.smoothed_rtt / 2));
        }
        let increase = match (self.target_rate(), self.current_rate()) {
            (Some(target), Some(current)) => current <= target,
            // A zero RTT: nothing to aim at, so keep probing upward.
            _ => true,
        };
        if !(increase && self.slow_start) {
            self.update_direction(a.now);
        }
        let bytes = a.bytes as f64;
        if increase {
            // A window the sender did not fill has not been shown to be safe (RFC 7661).
            if a.app_limited {
                return;
            }
            if self.slow_start {
                self.cwnd += bytes;
            } else {
                self.turn(Direction::Up, a.now);
                self.cwnd += self.step(bytes);
            }
        } else {
            self.slow_start = false;
            self.turn(Direction::Down, a.now);
            self.cwnd = (self.cwnd - self.step(bytes)).max(self.min_window);
        }
        // Not in the paper: v is capped so one round trip changes the window by at most its
        // own size (v/δ packets ≤ cwnd), as slow start would; an unbounded v, doubled while
        // the window is pinned at its floor, could otherwise overshoot by orders of magnitude.
        self.velocity = self.velocity.min((self.delta * self.cwnd / self.mss).max(1.0));
    }
    fn on_loss(&mut self, loss: &Loss) {
        if loss.by_timeout && self.collapsed_at.is_none_or(|at| loss.sent > at) {
            self.cwnd = self.min_window;
            self.velocity = 1.0;
            self.same_direction = 0;
            self.last_record = None;
            self.collapsed_at = Some(loss.now);
        }
    }
    fn window(&self) -> u64 {
        self.cwnd as u64
    }
    fn pacing_rate(&self) -> Option<u64> {
        self.current_rate().map(|rate| (2.0 * rate) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_model::{MSS, Model, RATE, at, ms};
    use super::*;

    fn copa() -> Copa {
        Copa::new(&CopaConfig::default(), Instant::ZERO, MSS)
    }

    fn arrival(sent: Instant, now: Instant, srtt: Duration) -> DataArrival {
        DataArrival {
            now,
            sent,
            bytes: MSS,
            rtt: Some(now - sent),
            smoothed_rtt: srtt,
            min_rtt: now - sent,
            in_flight_bytes: 0,
            delivered_bytes: 0,
            delivered_bytes_at_send: 0,
            delivered_time_at_send: sent,
            app_limited: false,
        }
    }

    #[test]
    fn factory_builds_with_the_initial_window() {
        let cc = CopaConfig::default().build(Instant::ZERO, 1200);
        assert_eq!(cc.name(), "copa");
        assert_eq!(cc.window(), 12_000);
        // No RTT yet: nothing to pace by.
        assert_eq!(cc.pacing_rate(), None);
    }

    #[test]
    fn min_filter_keeps_the_window() {
        let mut f = WindowedMin::default();
        assert_eq!(f.update(at(ms(0)), ms(50), ms(100)), ms(50));
        assert_eq!(f.update(at(ms(10)), ms(70), ms(100)), ms(50));
        assert_eq!(f.update(at(ms(100)), ms(60), ms(100)), ms(50));
        // 50 ms (seen at 0) leaves the window after 100 ms; 60 ms (at 100) is the best left.
        assert_eq!(f.update(at(ms(101)), ms(80), ms(100)), ms(60));
        // A shorter window, as when srtt falls: only the newest samples count.
        assert_eq!(f.update(at(ms(200)), ms(90), ms(50)), ms(90));
    }

    #[test]
    fn target_rate_and_step_by_hand() {
        let mut cc = copa();
        // Slow start ends at the first arrival that finds λ above λ_t. RTTmin = 40 ms.
        cc.on_data(&arrival(at(ms(0)), at(ms(40)), ms(40)));
        assert!(cc.in_slow_start());
        assert_eq!(cc.window(), 11 * MSS);
        // 100 ms later an RTT of 50 ms; srtt 50 ms, so RTTstanding is the least of the last
        // 25 ms: 50 ms. d_q = 50 − 40 = 10 ms; λ_t = 1/(0.5 · 0.010 s) = 200 packets/s
        // = 250 000 B/s. λ = 11 · 1250 B / 0.050 s = 275 000 B/s > λ_t: decrease, and slow
        // start ends.
        cc.on_data(&arrival(at(ms(90)), at(ms(140)), ms(50)));
        assert_eq!(cc.queueing_delay(), Some(ms(10)));
        assert!((cc.target_rate().unwrap() - 250_000.0).abs() < 1e-6);
        assert!(!cc.in_slow_start());
        // Step: v·mss·bytes/(δ·cwnd) = 1 · 1250 · 1250 / (0.5 · 13 750) = 227.27 bytes.
        let expected = 11.0 * MSS as f64 - 1250.0 * 1250.0 / (0.5 * 13_750.0);
        assert!((cc.cwnd - expected).abs() < 1e-9, "{}", cc.cwnd);
        // Pacing at 2·cwnd/RTTstanding.
        let pacing = 2.0 * expected / 0.050;
        assert_eq!(cc.pacing_rate(), Some(pacing as u64));
        // The same queue with a window of 8 packets: λ = 10 000/0.05 = 200 000 B/s < λ_t,
        // so the window grows by 1250·1250/(0.5·10 000) = 312.5 bytes.
        cc.cwnd = 8.0 * MSS as f64;
        cc.on_data(&arrival(at(ms(100)), at(ms(150)), ms(50)));
        assert!((cc.cwnd - (10_000.0 + 312.5)).abs() < 1e-9, "{}", cc.cwnd);
    }

    #[test]
    fn no_queue_means_an_infinite_target() {
        let mut cc = copa();
        cc.slow_start = false;
        cc.on_data(&arrival(at(ms(0)), at(ms(40)), ms(40)));
        assert_eq!(cc.queueing_delay(), Some(Duration::ZERO));
        assert_eq!(cc.target_rate(), Some(f64::INFINITY));
        // +1250·1250/(0.5·12 500) = 250 bytes.
        assert_eq!(cc.window(), 12_750);
    }

    #[test]
    fn velocity_doubles_after_three_round_trips_the_same_way() {
        let mut cc = copa();
        cc.slow_start = false;
        // A round trip of 100 ms with no queue: every arrival asks for more.
        let mut t = Instant::ZERO;
        let mut velocities = vec![];
        for _ in 0..7 {
            let n = cc.window() / MSS;
            for i in 0..n {
                let sent = t + ms(100) * i as u32 / n as u32;
                cc.on_data(&arrival(sent, sent + ms(100), ms(100)));
            }
            t += ms(100);
            velocities.push(cc.velocity());
        }
        // The first arrival records the window; each round trip after it is "up" again.
        // Rounds 1–2 count up to 2 the same way, the third doubles v, and every round after.
        assert_eq!(velocities, [1.0, 1.0, 1.0, 2.0, 4.0, 8.0, 16.0]);
        // A queue appears: λ above λ_t turns the window around and v restarts at 1.
        cc.on_data(&arrival(t, t + ms(300), ms(300)));
        assert_eq!(cc.direction(), Direction::Down);
        assert_eq!(cc.velocity(), 1.0);
    }

    #[test]
    fn timeout_collapses_to_the_floor_and_losses_are_ignored() {
        let mut cc = copa();
        cc.on_data(&arrival(at(ms(0)), at(ms(40)), ms(40)));
        let before = cc.window();
        cc.on_loss(&Loss {
            now: at(ms(50)),
            sent: at(ms(5)),
            lost_bytes: MSS,
            in_flight_bytes: 0,
            by_timeout: false,
        });
        assert_eq!(cc.window(), before);
        cc.on_loss(&Loss {
            now: at(ms(300)),
            sent: at(ms(6)),
            lost_bytes: MSS,
            in_flight_bytes: 0,
            by_timeout: true,
        });
        assert_eq!(cc.window(), 2 * MSS);
    }

    #[test]
    fn converges_to_a_small_standing_queue() {
        // 10 Mbit/s (one 1250-byte packet per ms), 40 ms propagation: BDP = 40 packets.
        let mut m = Model::with_probe(copa(), RATE, ms(40), |c| c.velocity());
        m.run(at(ms(20_000)));
        // Slow start ends within the first second.
        assert!(!m.cc.in_slow_start());
        // From 2 s: the queue Copa keeps is small. At equilibrium λ = λ_t, i.e. the queue
        // holds d_q·λ = 1/δ = 2 packets (2 ms); the window oscillates around it by about
        // v/δ packets a round trip and empties the queue every few round trips (which is how
        // RTTmin stays fresh).
        let mean = m.mean_queue(ms(2_000), ms(20_000));
        assert!(mean > 0.000_5 && mean < 0.006, "mean queue {mean}");
        let max = m.between(ms(2_000), ms(20_000)).map(|s| s.queued).max().unwrap();
        assert!(max < ms(20), "max queue {max:?}");
        let emptied = m.between(ms(2_000), ms(20_000)).filter(|s| s.queued.is_zero()).count();
        assert!(emptied > 0);
        // And it keeps the link busy: ≥ 90% of 10 Mbit/s.
        let goodput = m.goodput(ms(2_000), ms(20_000));
        assert!(goodput > 0.9 * RATE, "goodput {goodput}");
        // The window stays near one BDP plus the standing queue: 40 + 2 packets.
        let windows: Vec<u64> = m.between(ms(2_000), ms(20_000)).map(|s| s.cwnd / MSS).collect();
        let mean_window = windows.iter().sum::<u64>() as f64 / windows.len() as f64;
        assert!((38.0..50.0).contains(&mean_window), "mean window {mean_window}");
        // Requests are paced at 2·cwnd/RTTstanding: about twice the link rate, since the
        // window is about what the link carries in RTTstanding.
        let pacing: Vec<f64> = m
            .between(ms(2_000), ms(20_000))
            .map(|s| s.pacing_rate.unwrap() as f64)
            .collect();
        let mean_pacing = pacing.iter().sum::<f64>() / pacing.len() as f64;
        assert!((1.7 * RATE..2.3 * RATE).contains(&mean_pacing), "{mean_pacing}");
    }

    #[test]
    fn follows_a_drop_in_the_bottleneck_rate() {
        let mut m = Model::new(copa(), RATE, ms(40));
        m.rates.push((at(ms(5_000)), RATE / 2.0));
        m.run(at(ms(12_000)));
        // Half the rate: the queue that builds raises d_q and lowers the target until the
        // window halves; then the queue is small again.
        let mean = m.mean_queue(ms(8_000), ms(12_000));
        assert!(mean < 0.010, "mean queue {mean}");
        let goodput = m.goodput(ms(8_000), ms(12_000));
        assert!(goodput > 0.85 * RATE / 2.0, "goodput {goodput}");
    }
}
