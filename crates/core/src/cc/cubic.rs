//! CUBIC congestion control (RFC 9438), receiver-driven.

use super::{Controller, ControllerFactory, DataArrival, Loss, WindowConfig};
use crate::time::Instant;

/// CUBIC's settings; windows are counted in packets of the path's `mss`.
#[derive(Clone, Debug)]
pub struct CubicConfig {
    /// C of RFC 9438 §4.2, packets per second³ (0.4): how fast the window swings back to
    /// W_max and beyond.
    pub c: f64,
    /// β_cubic of RFC 9438 §4.6, unitless (0.7): the window kept on a congestion event.
    pub beta: f64,
    /// Fast convergence (RFC 9438 §4.7): release bandwidth to newer flows by lowering
    /// W_max when a congestion event comes before the window regained the last W_max.
    pub fast_convergence: bool,
    /// Initial window (RFC 6928: 10 packets) and floor of the window after a loss reduction
    /// (2 packets). A timeout still collapses the window to one packet.
    pub window: WindowConfig,
}

impl Default for CubicConfig {
    fn default() -> Self {
        CubicConfig {
            c: 0.4,
            beta: 0.7,
            fast_convergence: true,
            window: WindowConfig::default(),
        }
    }
}

impl ControllerFactory for CubicConfig {
    fn name(&self) -> &'static str {
        "cubic"
    }
    fn build(&self, now: Instant, mss: u64) -> Box<dyn Controller> {
        Box::new(Cubic::new(self, now, mss))
    }
}

/// CUBIC over requests. The window is kept in bytes as a float so the per-arrival
/// increments of §4.4–4.5, each a fraction of a packet, add up; the cubic function itself
/// is evaluated in packets, the unit C is defined in.
///
/// Congestion events and recovery as in [`NewReno`](super::NewReno): one reduction per
/// event (a loss of a request sent before the last reduction is part of it), and no growth
/// from arrivals for requests sent before the reduction.
#[derive(Debug)]
pub struct Cubic {
    mss: f64,
    min_window: f64,
    c: f64,
    beta: f64,
    fast_convergence: bool,
    /// Bytes of requests the path may have in flight.
    cwnd: f64,
    ssthresh: f64,
    /// W_max, bytes: the window just before the last reduction (§4.6), or less under fast
    /// convergence (§4.7).
    w_max: f64,
    /// cwnd_prior of §4.3, bytes: the window before the last reduction.
    cwnd_prior: f64,
    /// W_est of §4.3, bytes: what Reno would have by now.
    w_est: f64,
    /// K of §4.2, seconds: when W_cubic climbs back to W_max.
    k: f64,
    /// Start of the current congestion-avoidance stage, the t = 0 of W_cubic(t).
    epoch_start: Option<Instant>,
    /// The last timeout starts the next stage with K = 0 and W_max = cwnd (§4.8).
    after_timeout: bool,
    last_arrival: Option<Instant>,
    reduced_at: Option<Instant>,
    recovery_start: Option<Instant>,
    collapsed_at: Option<Instant>,
}

impl Cubic {
    pub fn new(config: &CubicConfig, _now: Instant, mss: u64) -> Self {
        let min_window = config.window.min_bytes(mss) as f64;
        let cwnd = config.window.initial_bytes(mss) as f64;
        let mss = mss.max(1) as f64;
        Cubic {
            mss,
            min_window,
            // C = 0 would put K at infinity and W_cubic at NaN.
            c: config.c.max(1e-6),
            beta: config.beta.clamp(0.0, 1.0),
            fast_convergence: config.fast_convergence,
            cwnd,
            ssthresh: f64::INFINITY,
            w_max: cwnd,
            cwnd_prior: cwnd,
            w_est: cwnd,
            k: 0.0,
            epoch_start: None,
            after_timeout: false,
            last_arrival: None,
            reduced_at: None,
            recovery_start: None,
            collapsed_at: None,
        }
    }
    /// K of RFC 9438 eq. 2 for the current congestion-avoidance stage, seconds.
    pub fn k_secs(&self) -> f64 {
        self.k
    }
    /// W_max, bytes.
    pub fn w_max(&self) -> u64 {
        self.w_max as u64
    }
    /// W_est (the Reno-friendly estimate of §4.3), bytes.
    pub fn w_est(&self) -> u64 {
        self.w_est as u64
    }
    /// Slow-start threshold in bytes (`u64::MAX` until the first congestion event).
    pub fn ssthresh(&self) -> u64 {
        if self.ssthresh.is_finite() {
            self.ssthresh as u64
        } else {
            u64::MAX
        }
    }
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }
    /// W_cubic(t) of RFC 9438 eq. 1 in bytes, `t` seconds into the current stage.
    pub fn w_cubic(&self, t: f64) -> f64 {
        self.c * (t - self.k).powi(3) * self.mss + self.w_max
    }

    /// Leaves slow start with the window at `window` bytes if that is less (HyStart++, RFC
    /// 9406 §4.2: the RTT rose, so the path is full; the caller's `window` drains what the
    /// last doubling queued). The next congestion-avoidance stage starts from its plateau.
    pub(crate) fn end_slow_start(&mut self, window: f64) {
        if self.cwnd < self.ssthresh {
            self.cwnd = self.cwnd.min(window).max(self.min_window);
            self.ssthresh = self.cwnd;
            self.w_max = self.cwnd;
            self.epoch_start = None;
        }
    }

    /// Raises the window to at least `floor` bytes after a reduction (Westwood+'s
    /// "back to the measured pipe", Mascolo et al. 2001): congestion avoidance goes on from
    /// there, and W_max is never left below the window.
    pub(crate) fn lift_window(&mut self, floor: f64) {
        if self.cwnd < floor {
            self.cwnd = floor;
            self.ssthresh = self.ssthresh.min(floor).max(self.min_window);
            self.w_max = self.w_max.max(floor);
            self.epoch_start = None;
        }
    }

    /// Raises the slow-start threshold to at least `floor` bytes (Westwood+ after a timeout:
    /// slow start climbs back to the measured pipe rather than to 0.7 of the old window).
    pub(crate) fn lift_ssthresh(&mut self, floor: f64) {
        if self.ssthresh.is_finite() && self.ssthresh < floor {
            self.ssthresh = floor;
        }
    }

    /// Goes back to slow start from the current window, with no threshold (the caller has
    /// evidence that the path carries more than the window that ended the last slow start).
    pub(crate) fn restart_slow_start(&mut self) {
        self.ssthresh = f64::INFINITY;
        self.epoch_start = None;
    }

    /// A new congestion-avoidance stage begins: fix its origin, K and W_est.
    fn start_epoch(&mut self, now: Instant) {
        self.epoch_start = Some(now);
        if self.after_timeout || self.w_max <= self.cwnd {
            // §4.8 after a timeout; and a window that has already passed W_max (slow start
            // overshoot) has nothing to return to, so the plateau is here.
            self.w_max = self.cwnd;
            self.k = 0.0;
        } else {
            // Eq. 2: K = ∛((W_max − cwnd_epoch) / C), in packets.
            self.k = ((self.w_max - self.cwnd) / self.mss / self.c).cbrt();
        }
        self.after_timeout = false;
        self.w_est = self.cwnd;
    }

    fn congestion_avoidance(&mut self, arrival: &DataArrival) {
        let Some(epoch) = self.epoch_start else {
            self.start_epoch(arrival.now);
            return self.congestion_avoidance(arrival);
        };
        let t = (arrival.now - epoch).as_secs_f64();
        let bytes = arrival.bytes as f64;
        // §4.3: W_est grows by α_cubic per window answered; α_cubic = 3(1 − β)/(1 + β)
        // makes the average rate equal Reno's, until W_est regains the window before the
        // reduction, from where Reno's own +1 per round trip applies.
        let alpha = if self.w_est >= self.cwnd_prior {
            1.0
        } else {
            3.0 * (1.0 - self.beta) / (1.0 + self.beta)
        };
        self.w_est += alpha * bytes * self.mss / self.cwnd;
        if self.w_cubic(t) < self.w_est {
            // §4.3: Reno-friendly region.
            self.cwnd = self.w_est;
        } else {
            // §4.4, §4.5: concave and convex regions. The target is one RTT ahead, bounded
            // to [cwnd, 1.5·cwnd] so one round trip at most multiplies the window by 1.5;
            // each packet answered closes (target − cwnd)/cwnd of the gap.
            let rtt = arrival.smoothed_rtt.as_secs_f64();
            let target = self.w_cubic(t + rtt).clamp(self.cwnd, 1.5 * self.cwnd);
            self.cwnd += (target - self.cwnd) / self.cwnd * bytes;
        }
    }

    /// §4.6, §4.7: a congestion event.
    fn reduce(&mut self, now: Instant) {
        self.w_max = if self.fast_convergence && self.cwnd < self.w_max {
            self.cwnd * (1.0 + self.beta) / 2.0
        } else {
            self.cwnd
        };
        self.cwnd_prior = self.cwnd;
        // §4.6 sets ssthresh from the flight size; the window is used instead (as §4.6
        // allows for implementations using cwnd), since a request-limited flight would
        // otherwise cut the window far below what the path showed it can carry.
        self.ssthresh = (self.cwnd * self.beta).max(self.min_window);
        self.cwnd = self.ssthresh;
        self.epoch_start = None;
        self.reduced_at = Some(now);
        self.recovery_start = Some(now);
    }
}

impl Controller for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }
    fn on_request_sent(&mut self, _now: Instant, _bytes: u64, _in_flight_bytes: u64) {}
    fn on_data(&mut self, arrival: &DataArrival) {
        let since_last = self.last_arrival.map(|last| arrival.now - last);
        self.last_arrival = Some(self.last_arrival.map_or(arrival.now, |last| last.max(arrival.now)));
        if self.recovery_start.is_some_and(|start| arrival.sent <= start) {
            return;
        }
        if arrival.app_limited {
            // §5.8: an application-limited flow does not grow its window, and the time it
            // spends so is taken out of t, so W_cubic does not leap ahead meanwhile.
            if let (Some(epoch), Some(gap)) = (self.epoch_start.as_mut(), since_last) {
                *epoch += gap;
            }
            return;
        }
        if self.cwnd < self.ssthresh {
            // §4.10: slow start, +1 packet per packet answered.
            self.cwnd = (self.cwnd + arrival.bytes as f64).min(self.ssthresh);
        } else {
            self.congestion_avoidance(arrival);
        }
    }
    fn on_loss(&mut self, loss: &Loss) {
        if self.reduced_at.is_none_or(|at| loss.sent > at) {
            self.reduce(loss.now);
        }
        if loss.by_timeout && self.collapsed_at.is_none_or(|at| loss.sent > at) {
            // §4.8: on a timeout CUBIC follows RFC 5681 §3.1 (one-packet window, slow start
            // back to ssthresh) and restarts the cubic curve from where it stops.
            self.cwnd = self.mss;
            self.after_timeout = true;
            self.epoch_start = None;
            self.reduced_at = Some(loss.now);
            self.collapsed_at = Some(loss.now);
            self.recovery_start = None;
        }
    }
    fn window(&self) -> u64 {
        self.cwnd as u64
    }
}

#[cfg(test)]
mod tests {
    use super::super::newreno::test_support::*;
    use super::*;

    fn cubic(initial_packets: u64) -> Cubic {
        let config = CubicConfig {
            window: WindowConfig {
                initial_packets,
                ..WindowConfig::default()
            },
            ..CubicConfig::default()
        };
        Cubic::new(&config, Instant::ZERO, MSS)
    }

    fn packets(cc: &Cubic) -> f64 {
        cc.cwnd / MSS as f64
    }

    #[test]
    fn factory_builds_with_the_initial_window() {
        let cc = CubicConfig::default().build(Instant::ZERO, 1200);
        assert_eq!(cc.name(), "cubic");
        assert_eq!(cc.window(), 12_000);
        assert_eq!(cc.pacing_rate(), None);
    }

    #[test]
    fn slow_start_doubles_every_round_trip() {
        let mut cc = cubic(10);
        let mut t = Instant::ZERO;
        let mut windows = vec![cc.window()];
        for _ in 0..4 {
            t = round(&mut cc, t, ms(100));
            windows.push(cc.window());
        }
        assert_eq!(windows, [10_000, 20_000, 40_000, 80_000, 160_000]);
    }

    #[test]
    fn loss_keeps_seven_tenths_once_per_event() {
        let mut cc = cubic(10);
        let t = round(&mut cc, Instant::ZERO, ms(100));
        round(&mut cc, t, ms(100)); // 40 packets
        cc.on_loss(&loss(at(ms(150)), at(ms(260)), false));
        // 40 · 0.7 = 28 packets; W_max = 40 packets (no earlier W_max to converge from).
        assert_eq!(cc.window(), 28_000);
        assert_eq!(cc.ssthresh(), 28_000);
        assert_eq!(cc.w_max(), 40_000);
        // Requests sent before the reduction: the same event.
        cc.on_loss(&loss(at(ms(200)), at(ms(270)), false));
        cc.on_loss(&loss(at(ms(260)), at(ms(280)), false));
        assert_eq!(cc.window(), 28_000);
        // Their data does not grow the window.
        cc.on_data(&arrival(at(ms(255)), at(ms(290))));
        assert_eq!(cc.window(), 28_000);
        // A new event before regaining W_max: fast convergence (§4.7) sets
        // W_max = 28 · (1 + 0.7)/2 = 23.8 packets; cwnd = 28 · 0.7 = 19.6 packets.
        cc.on_loss(&loss(at(ms(261)), at(ms(400)), false));
        assert_eq!(cc.w_max(), 23_800);
        assert_eq!(cc.window(), 19_600);
        // The floor is 2 packets.
        for i in 0..20u64 {
            cc.on_loss(&loss(at(ms(401 + 100 * i)), at(ms(450 + 100 * i)), false));
        }
        assert_eq!(cc.window(), 2 * MSS);
    }

    #[test]
    fn fast_convergence_can_be_switched_off() {
        let config = CubicConfig {
            fast_convergence: false,
            ..CubicConfig::default()
        };
        let mut cc = Cubic::new(&config, Instant::ZERO, MSS);
        cc.on_loss(&loss(at(ms(0)), at(ms(100)), false)); // 10 → 7, W_max 10
        cc.on_loss(&loss(at(ms(101)), at(ms(200)), false)); // 7 → 4.9, W_max 7
        assert_eq!(cc.w_max(), 7_000);
        assert_eq!(cc.window(), 4_900);
    }

    #[test]
    fn timeout_collapses_to_one_packet_and_restarts_the_curve() {
        let mut cc = cubic(10);
        let t = round(&mut cc, Instant::ZERO, ms(100)); // 20 packets
        cc.on_loss(&loss(at(ms(50)), t, true));
        // ssthresh = 20 · 0.7 = 14 packets, cwnd = 1 packet.
        assert_eq!(cc.window(), MSS);
        assert_eq!(cc.ssthresh(), 14_000);
        // Slow start: 1 → 2 → 4 → 8 packets, then the fourth round's 8 arrivals: 6 take
        // the window to ssthresh = 14 packets and the last 2 begin congestion avoidance.
        let mut t = t + ms(1);
        for _ in 0..3 {
            t = round(&mut cc, t, ms(100));
        }
        assert_eq!(cc.window(), 8_000);
        round(&mut cc, t, ms(100));
        // The stage after a timeout: §4.8, K = 0 and W_max = the window it starts from.
        assert_eq!(cc.k_secs(), 0.0);
        assert_eq!(cc.w_max(), 14_000);
        assert!((14_001..14_200).contains(&cc.window()), "{}", cc.window());
    }

    #[test]
    fn k_is_the_cube_root_of_the_reduction_over_c() {
        let mut cc = cubic(100);
        cc.on_loss(&loss(at(ms(0)), at(ms(100)), false));
        assert_eq!(cc.window(), 70_000);
        cc.on_data(&arrival(at(ms(101)), at(ms(201))));
        // K = ∛((100 − 70) / 0.4) = ∛75 = 4.2172 s.
        assert!((cc.k_secs() - 4.217_163).abs() < 1e-6, "{}", cc.k_secs());
    }

    /// Rounds of 200 ms from a loss at 100 packets: cwnd in packets at the start of each
    /// round and the time since the stage began.
    fn cubic_trajectory(seconds: f64) -> (Cubic, Vec<(f64, f64)>) {
        let mut cc = cubic(100);
        cc.on_loss(&loss(at(ms(0)), at(ms(100)), false));
        let rtt = ms(200);
        let epoch = at(ms(101)) + rtt; // the first arrival of the first round
        let mut t = at(ms(101));
        let mut points = vec![];
        while (t - epoch).as_secs_f64() < seconds {
            points.push(((t + rtt - epoch).as_secs_f64(), packets(&cc)));
            t = round(&mut cc, t, rtt);
        }
        (cc, points)
    }

    #[test]
    fn cubic_growth_is_concave_then_flat_at_w_max_then_convex() {
        let (cc, points) = cubic_trajectory(8.0);
        let k = cc.k_secs();
        // W_cubic(t) = 0.4·(t − 4.217)³ + 100 packets; with a 200 ms RTT W_est stays
        // below it (70 + 0.53 per round), so this is the cubic region throughout.
        let w_cubic = |t: f64| 0.4 * (t - k).powi(3) + 100.0;
        // The window at the start of each round is what the previous round's targets, one
        // RTT ahead, led to: W_cubic at the round's start, to within half a packet.
        for &(t, w) in &points[1..] {
            assert!(
                (w - w_cubic(t)).abs() < 0.5,
                "t {t:.2}: cwnd {w:.2} vs W_cubic {:.2}",
                w_cubic(t)
            );
        }
        let growth = |from: f64, to: f64| {
            let at = |x: f64| points.iter().find(|p| p.0 >= x).unwrap().1;
            at(to) - at(from)
        };
        // Concave: fast at first, slowing toward W_max.
        // W_cubic(1) − W_cubic(0) = 86.7 − 70 = 16.7 packets; W_cubic(4) − W_cubic(3) = 0.7.
        assert!(growth(0.0, 1.0) > 10.0);
        assert!(growth(3.0, 4.0) < 1.5);
        assert!(growth(1.0, 2.0) > growth(2.0, 3.0));
        // Plateau: at t ≈ K the window is W_max.
        let near_k = points
            .iter()
            .min_by(|a, b| (a.0 - k).abs().total_cmp(&(b.0 - k).abs()))
            .unwrap();
        assert!((near_k.1 - 100.0).abs() < 1.0, "{near_k:?}");
        // Convex: probing faster and faster beyond W_max.
        assert!(growth(5.0, 6.0) > growth(4.0, 5.0));
        assert!(growth(6.0, 7.0) > growth(5.0, 6.0));
        assert!(growth(6.0, 7.0) > 2.0);
        assert!(cc.w_est() < cc.cwnd as u64);
    }

    #[test]
    fn reno_friendly_region_when_reno_would_be_faster() {
        // A 1 ms RTT: Reno gains a packet every millisecond, much faster than the cubic
        // curve (K = ∛((20 − 14)/0.4) = 2.47 s), so the window follows W_est (§4.3).
        let mut cc = cubic(20);
        cc.on_loss(&loss(at(ms(0)), at(ms(1)), false)); // 20 → 14, W_max 20
        let mut t = at(ms(2));
        for _ in 0..100 {
            t = round(&mut cc, t, ms(1));
        }
        let elapsed = (t - at(ms(3))).as_secs_f64();
        // W_est: +0.53 per round until it regains cwnd_prior = 20 (≈ 11.3 rounds), then +1
        // per round: 20 + 88.7 ≈ 108.7 packets after 100 rounds (a bit less, since each
        // round sends ⌊cwnd⌋ packets).
        let w = packets(&cc);
        assert!((100.0..=109.0).contains(&w), "{w}");
        assert_eq!(cc.window(), cc.w_est());
        assert!(w > 5.0 * cc.w_cubic(elapsed) / MSS as f64);
    }

    #[test]
    fn app_limited_time_is_taken_out_of_the_curve() {
        let mut cc = cubic(100);
        cc.on_loss(&loss(at(ms(0)), at(ms(100)), false));
        cc.on_data(&arrival(at(ms(101)), at(ms(201)))); // stage starts at 201 ms
        let before = cc.window();
        // Ten seconds of application-limited arrivals: no growth, and the stage clock
        // stands still.
        for i in 1..=100u64 {
            let mut a = arrival(at(ms(101 + 100 * i)), at(ms(201 + 100 * i)));
            a.app_limited = true;
            cc.on_data(&a);
        }
        assert_eq!(cc.window(), before);
        assert_eq!(cc.epoch_start, Some(at(ms(201 + 10_000))));
    }
}
