//! Compound TCP (Tan, Song, Zhang & Sridharan, INFOCOM 2006), receiver-driven.

use super::{Controller, ControllerFactory, DataArrival, Loss, WindowConfig};
use crate::time::{Duration, Instant};

/// Compound's settings; windows are counted in packets of the path's `mss`.
#[derive(Clone, Debug)]
pub struct CompoundConfig {
    /// α of the dwnd increase α·win^k per round trip, unitless (1/8) ...
    pub alpha: f64,
    /// ... and k, unitless (3/4): together they make the window grow like HighSpeed TCP's
    /// when the path shows no queue.
    pub k: f64,
    /// β, unitless (1/2): a loss leaves win·(1 − β) of the window.
    pub beta: f64,
    /// γ, packets (30): the queue, in packets this flow keeps at the bottleneck (Vegas'
    /// diff), from which on the delay-based window gives way.
    pub gamma_packets: f64,
    /// ζ, unitless (1): how many packets of dwnd each packet of queue beyond γ takes away.
    pub zeta: f64,
    /// Initial window (RFC 6928: 10 packets) and floor of the loss-based window after a
    /// reduction (2 packets). A timeout still collapses the window to one packet.
    pub window: WindowConfig,
}

impl Default for CompoundConfig {
    fn default() -> Self {
        CompoundConfig {
            alpha: 0.125,
            k: 0.75,
            beta: 0.5,
            gamma_packets: 30.0,
            zeta: 1.0,
            window: WindowConfig::default(),
        }
    }
}

impl ControllerFactory for CompoundConfig {
    fn name(&self) -> &'static str {
        "compound"
    }
    fn build(&self, now: Instant, mss: u64) -> Box<dyn Controller> {
        Box::new(Compound::new(self, now, mss))
    }
}

/// Compound TCP over requests: win = cwnd + dwnd.
///
/// cwnd is Reno's loss-based window (slow start, then +1 packet per win answered, i.e. the
/// paper's cwnd += 1/(cwnd + dwnd) per ACK; halved on loss). dwnd is the delay-based part,
/// updated once per round trip from Vegas' estimate of the packets this flow has queued,
/// diff = (win/baseRTT − win/RTT)·baseRTT, with baseRTT the least RTT seen and RTT the mean
/// of the last round trip's samples:
///
/// - diff < γ:  dwnd += (α·win^k − 1)⁺ (the network has room: grow fast),
/// - diff ≥ γ:  dwnd = (dwnd − ζ·diff)⁺ (a queue builds: retreat to Reno),
/// - on loss:   dwnd = (win·(1 − β) − cwnd/2)⁺, so win becomes win·(1 − β) = win/2.
///
/// dwnd stays 0 in slow start (paper §3: the delay-based component only acts in congestion
/// avoidance) and is reset by a timeout. The loss-based slow-start threshold is the halved
/// cwnd (not win/2, which would put cwnd below it and back into slow start). One reduction
/// per congestion event and no growth during recovery, as [`NewReno`](super::NewReno).
/// Not implemented: Windows' TUBE auto-tuning of γ.
#[derive(Debug)]
pub struct Compound {
    mss: f64,
    min_window: f64,
    alpha: f64,
    k: f64,
    beta: f64,
    gamma: f64,
    zeta: f64,
    /// Loss-based window, bytes.
    cwnd: f64,
    /// Delay-based window, bytes.
    dwnd: f64,
    ssthresh: f64,
    base_rtt: Option<Duration>,
    /// Data for a request sent at or after this ends the round trip in progress.
    round_start: Option<Instant>,
    round_rtt_sum: f64,
    round_rtt_count: u32,
    /// Vegas' diff at the last round's end, packets.
    diff: f64,
    reduced_at: Option<Instant>,
    recovery_start: Option<Instant>,
    collapsed_at: Option<Instant>,
}

impl Compound {
    pub fn new(config: &CompoundConfig, _now: Instant, mss: u64) -> Self {
        let min_window = config.window.min_bytes(mss) as f64;
        let cwnd = config.window.initial_bytes(mss) as f64;
        let mss = mss.max(1) as f64;
        Compound {
            mss,
            min_window,
            alpha: config.alpha.max(0.0),
            k: config.k,
            beta: config.beta.clamp(0.0, 1.0),
            gamma: config.gamma_packets,
            zeta: config.zeta.max(0.0),
            cwnd,
            dwnd: 0.0,
            ssthresh: f64::INFINITY,
            base_rtt: None,
            round_start: None,
            round_rtt_sum: 0.0,
            round_rtt_count: 0,
            diff: 0.0,
            reduced_at: None,
            recovery_start: None,
            collapsed_at: None,
        }
    }
    /// The loss-based window, bytes.
    pub fn cwnd(&self) -> u64 {
        self.cwnd as u64
    }
    /// The delay-based window, bytes.
    pub fn dwnd(&self) -> u64 {
        self.dwnd as u64
    }
    /// Vegas' diff (packets this flow keeps queued) at the end of the last round trip.
    pub fn diff_packets(&self) -> f64 {
        self.diff
    }
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }
    /// Slow-start threshold of the loss-based window in bytes (`u64::MAX` until the first
    /// congestion event).
    pub fn ssthresh(&self) -> u64 {
        if self.ssthresh.is_finite() {
            self.ssthresh as u64
        } else {
            u64::MAX
        }
    }

    fn win(&self) -> f64 {
        self.cwnd + self.dwnd
    }

    /// Paper §3.2, once per round trip in congestion avoidance.
    fn update_dwnd(&mut self, rtt: f64, base: f64) {
        let win = self.win() / self.mss;
        self.diff = if rtt > 0.0 {
            (win * (1.0 - base / rtt)).max(0.0)
        } else {
            0.0
        };
        if self.diff < self.gamma {
            let grow = (self.alpha * win.powf(self.k) - 1.0).max(0.0);
            self.dwnd += grow * self.mss;
        } else {
            self.dwnd = (self.dwnd - self.zeta * self.diff * self.mss).max(0.0);
        }
    }
}

impl Controller for Compound {
    fn name(&self) -> &'static str {
        "compound"
    }
    fn on_request_sent(&mut self, _now: Instant, _bytes: u64, _in_flight_bytes: u64) {}
    fn on_data(&mut self, a: &DataArrival) {
        if let Some(rtt) = a.rtt {
            self.base_rtt = Some(self.base_rtt.map_or(rtt, |b| b.min(rtt)));
        }
        let in_recovery = self.recovery_start.is_some_and(|start| a.sent <= start);
        // A round trip ends with the data of the first request sent after it began.
        match self.round_start {
            None => self.round_start = Some(a.now),
            Some(start) if a.sent >= start => {
                if let Some(base) = self
                    .base_rtt
                    .filter(|_| self.round_rtt_count > 0 && !in_recovery && !self.in_slow_start() && !a.app_limited)
                {
                    let mean = self.round_rtt_sum / self.round_rtt_count as f64;
                    self.update_dwnd(mean, base.as_secs_f64());
                }
                self.round_start = Some(a.now);
                self.round_rtt_sum = 0.0;
                self.round_rtt_count = 0;
            }
            Some(_) => {}
        }
        if let Some(rtt) = a.rtt {
            self.round_rtt_sum += rtt.as_secs_f64();
            self.round_rtt_count += 1;
        }
        if in_recovery || a.app_limited {
            return;
        }
        let bytes = a.bytes as f64;
        if self.cwnd < self.ssthresh {
            // Slow start, +1 packet per packet answered; the bytes beyond ssthresh count
            // toward congestion avoidance.
            let grow = bytes.min(self.ssthresh - self.cwnd);
            self.cwnd += grow;
            let rest = bytes - grow;
            if rest > 0.0 {
                self.cwnd += self.mss * rest / self.win();
            }
        } else {
            // cwnd += 1/win per packet answered: +1 packet per round trip of win.
            self.cwnd += self.mss * bytes / self.win();
        }
    }
    fn on_loss(&mut self, loss: &Loss) {
        if self.reduced_at.is_none_or(|at| loss.sent > at) {
            let win = self.win();
            let half = self.cwnd / 2.0;
            self.dwnd = (win * (1.0 - self.beta) - half).max(0.0);
            self.cwnd = half.max(self.min_window);
            self.ssthresh = self.cwnd;
            self.reduced_at = Some(loss.now);
            self.recovery_start = Some(loss.now);
        }
        if loss.by_timeout && self.collapsed_at.is_none_or(|at| loss.sent > at) {
            // RFC 5681 §3.1 for the loss-based part; the delay-based part starts over.
            self.cwnd = self.mss;
            self.dwnd = 0.0;
            self.reduced_at = Some(loss.now);
            self.collapsed_at = Some(loss.now);
            self.recovery_start = None;
        }
    }
    fn window(&self) -> u64 {
        self.win() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::super::newreno::test_support::*;
    use super::*;

    fn compound(initial_packets: u64) -> Compound {
        let config = CompoundConfig {
            window: WindowConfig {
                initial_packets,
                ..WindowConfig::default()
            },
            ..CompoundConfig::default()
        };
        Compound::new(&config, Instant::ZERO, MSS)
    }

    fn packets(bytes: f64) -> f64 {
        bytes / MSS as f64
    }

    /// 64 packets, one slow-start round to 128, then a loss: cwnd = 64, ssthresh = 64,
    /// dwnd = (128·0.5 − 64)⁺ = 0. Returns the time of the next round.
    fn after_first_loss() -> (Compound, Instant) {
        let mut cc = compound(64);
        let t = round(&mut cc, Instant::ZERO, ms(100));
        assert_eq!(cc.window(), 128_000);
        cc.on_loss(&loss(at(ms(50)), t, false));
        assert_eq!((cc.cwnd(), cc.dwnd()), (64_000, 0));
        (cc, t + ms(1))
    }

    #[test]
    fn factory_builds_with_the_initial_window() {
        let cc = CompoundConfig::default().build(Instant::ZERO, 1200);
        assert_eq!(cc.name(), "compound");
        assert_eq!(cc.window(), 12_000);
        assert_eq!(cc.pacing_rate(), None);
    }

    #[test]
    fn slow_start_doubles_with_no_delay_window() {
        let mut cc = compound(10);
        let mut t = Instant::ZERO;
        let mut windows = vec![cc.window()];
        for _ in 0..4 {
            t = round(&mut cc, t, ms(100));
            windows.push(cc.window());
        }
        assert_eq!(windows, [10_000, 20_000, 40_000, 80_000, 160_000]);
        assert_eq!(cc.dwnd(), 0);
    }

    #[test]
    fn dwnd_grows_while_the_queue_is_empty() {
        let (mut cc, mut t) = after_first_loss();
        // The RTT stays at baseRTT = 100 ms: diff = 0 < γ. Each round trip ends at the first
        // arrival of the next, which adds (α·win^k − 1)⁺ packets to dwnd, win being the
        // window just before it. The first: 0.125 · 64^0.75 − 1 = 0.125 · 22.627 − 1 = 1.828.
        let mut grown = vec![];
        for _ in 0..10 {
            let win = packets(cc.win());
            let before = packets(cc.dwnd);
            t = round(&mut cc, t, ms(100));
            grown.push((win, packets(cc.dwnd) - before));
        }
        assert_eq!(grown[0].0, 64.0);
        assert!((grown[0].1 - 1.828_427).abs() < 1e-6, "{grown:?}");
        for &(win, added) in &grown {
            let expected = 0.125 * win.powf(0.75) - 1.0;
            assert!((added - expected).abs() < 1e-9, "win {win}: +{added} vs {expected}");
        }
        assert_eq!(cc.diff_packets(), 0.0);
        // So the window grows faster than Reno's one packet per round trip: cwnd gains ≈ 1
        // packet a round, dwnd 1.8 to 2.2 more.
        let win = packets(cc.win());
        assert!(win > 64.0 + 10.0 + 18.0, "{win}");
        assert!(packets(cc.cwnd) < 64.0 + 10.0);
    }

    #[test]
    fn small_windows_have_no_delay_component() {
        // α·win^k < 1 below win = 8^(4/3) = 16 packets: dwnd stays 0, Compound is Reno.
        let mut cc = compound(10);
        let t = round(&mut cc, Instant::ZERO, ms(100)); // 20 packets
        cc.on_loss(&loss(at(ms(50)), t, false)); // 10 packets
        let mut t = t + ms(1);
        for _ in 0..4 {
            t = round(&mut cc, t, ms(100));
        }
        assert_eq!(cc.dwnd(), 0);
        // About Reno's +1 per round: 10 → 13-14 packets (+1/win per packet answered, and a
        // round sends ⌊win⌋ packets).
        assert!((13_000..14_000).contains(&cc.window()), "{}", cc.window());
    }

    #[test]
    fn dwnd_shrinks_when_the_queue_builds() {
        let (mut cc, mut t) = after_first_loss();
        for _ in 0..20 {
            t = round(&mut cc, t, ms(100));
        }
        assert!(packets(cc.dwnd) > 50.0, "dwnd {}", packets(cc.dwnd));
        // A round trip at 110 ms; its end, at the next round's first arrival, sees
        // diff = win·(1 − 100/110) = win/11: under γ = 30 packets for win < 330, so dwnd
        // still grows by α·win^k − 1.
        t = round(&mut cc, t, ms(110));
        let win = packets(cc.win());
        let before = packets(cc.dwnd);
        t = round(&mut cc, t, ms(140));
        assert!((cc.diff_packets() - win / 11.0).abs() < 1e-9);
        assert!(cc.diff_packets() < 30.0);
        let grown = packets(cc.dwnd) - before;
        assert!((grown - (0.125 * win.powf(0.75) - 1.0)).abs() < 1e-9);
        // The 140 ms round: diff = win·(1 − 100/140) = 2·win/7 ≥ 30 for win ≥ 105 packets,
        // so its end takes ζ·diff = diff packets off dwnd.
        let win = packets(cc.win());
        let before = packets(cc.dwnd);
        round(&mut cc, t, ms(100));
        let diff = win * 2.0 / 7.0;
        assert!(diff >= 30.0, "diff {diff}");
        assert!(
            (cc.diff_packets() - diff).abs() < 1e-9,
            "{} vs {diff}",
            cc.diff_packets()
        );
        assert!((packets(cc.dwnd) - (before - diff)).abs() < 1e-9);
        assert!(cc.dwnd > 0.0);
    }

    #[test]
    fn loss_halves_the_whole_window_once_per_event() {
        let (mut cc, mut t) = after_first_loss();
        for _ in 0..20 {
            t = round(&mut cc, t, ms(100));
        }
        let (win, cwnd) = (cc.win(), cc.cwnd);
        assert!(cc.dwnd > 0.0);
        cc.on_loss(&loss(t - ms(50), t, false));
        // cwnd/2, and dwnd = win·(1 − 0.5) − cwnd/2: win/2 in all.
        assert!((cc.cwnd - cwnd / 2.0).abs() < 1e-9);
        assert!((cc.win() - win / 2.0).abs() < 1e-6);
        // The same event: no second cut.
        cc.on_loss(&loss(t - ms(40), t + ms(10), false));
        assert!((cc.win() - win / 2.0).abs() < 1e-6);
    }

    #[test]
    fn timeout_collapses_to_one_packet() {
        let (mut cc, mut t) = after_first_loss();
        for _ in 0..5 {
            t = round(&mut cc, t, ms(100));
        }
        assert!(cc.dwnd > 0.0);
        cc.on_loss(&loss(t - ms(50), t + ms(300), true));
        assert_eq!(cc.window(), MSS);
        assert_eq!(cc.dwnd(), 0);
        assert!(cc.in_slow_start());
    }
}
