//! PCC Vivace congestion control (Dong et al., NSDI 2018), receiver-driven with paced requests.

use std::collections::VecDeque;

use super::{Controller, ControllerFactory, DataArrival, Loss, WindowConfig};
use crate::time::{Duration, Instant};

/// Bits per second in the Mbit/s the utility function is defined over.
const MBIT: f64 = 1e6;

/// Vivace's settings. Rates in the utility are in Mbit/s (the paper's unit), everything the
/// path sees in bytes.
#[derive(Clone, Debug)]
pub struct VivaceConfig {
    /// t of the utility x^t − b·x·dRTT/dT − c·x·L, unitless (0.9): 0 < t < 1 makes the
    /// throughput term concave, which is what lets competing senders converge to a fair share.
    pub exponent: f64,
    /// b, utility per Mbit/s per unit of RTT gradient (900): the weight of latency inflation.
    pub latency_coefficient: f64,
    /// c, utility per Mbit/s per unit of loss rate (11.35): with t = 0.9 a sender keeps
    /// raising its rate through random loss of up to about 5%.
    pub loss_coefficient: f64,
    /// RTT gradients smaller than this in magnitude count as 0 (0.01, libwebrtc's
    /// `kRttGradientThreshold`): jitter must not read as congestion.
    pub rtt_gradient_tolerance: f64,
    /// RTT gradients below this count as this (0). The paper's utility rewards a falling
    /// RTT as much as it penalises a rising one, so while a queue drains the lower probe
    /// always scores better and the rate keeps falling, to about half the link in the model
    /// tests, before the gradient turns; libwebrtc bounds negative gradients for the same
    /// reason (`kDelayGradientNegativeBound`, 0.1). `f64::NEG_INFINITY` restores the paper's
    /// utility.
    pub rtt_gradient_floor: f64,
    /// ε, unitless (0.05): the two monitor intervals of a gradient estimate send at
    /// r·(1 + ε) and r·(1 − ε).
    pub probe_step: f64,
    /// θ0, (Mbit/s)² per unit of utility (1): turns the utility gradient into a rate change.
    pub conversion_factor: f64,
    /// ω0, unitless (0.05): a rate change is bounded to ω·r with ω = ω0 + k·δ ...
    pub initial_boundary: f64,
    /// ... δ, unitless (0.1), where k counts the consecutive changes the bound cut short.
    pub boundary_step: f64,
    /// A monitor interval lasts one smoothed RTT, and at least this many packets at its rate
    /// (10), so that its RTT gradient and loss rate rest on a few samples.
    pub min_interval_packets: u64,
    /// The window is this many times rate·srtt (2): requests are paced, the window only
    /// bounds the flight if answers stop coming.
    pub window_gain: f64,
    /// Window before the first RTT sample (10 packets; the first rate spreads it over that
    /// RTT), and floor of the window (4 packets) and of the rate: that many packets per srtt.
    pub window: WindowConfig,
}

impl Default for VivaceConfig {
    fn default() -> Self {
        VivaceConfig {
            exponent: 0.9,
            latency_coefficient: 900.0,
            loss_coefficient: 11.35,
            rtt_gradient_tolerance: 0.01,
            rtt_gradient_floor: 0.0,
            probe_step: 0.05,
            conversion_factor: 1.0,
            initial_boundary: 0.05,
            boundary_step: 0.1,
            min_interval_packets: 10,
            window_gain: 2.0,
            window: WindowConfig {
                min_packets: 4,
                ..WindowConfig::default()
            },
        }
    }
}

impl VivaceConfig {
    /// The utility of sending at `rate_mbps` (Mbit/s) while the RTT grows by `rtt_gradient`
    /// seconds per second and a fraction `loss` of the packets is lost (paper eq. 1).
    pub fn utility(&self, rate_mbps: f64, rtt_gradient: f64, loss: f64) -> f64 {
        let gradient = if rtt_gradient.abs() < self.rtt_gradient_tolerance {
            0.0
        } else {
            rtt_gradient.max(self.rtt_gradient_floor)
        };
        rate_mbps.max(0.0).powf(self.exponent)
            - self.latency_coefficient * rate_mbps * gradient
            - self.loss_coefficient * rate_mbps * loss
    }
}

impl ControllerFactory for VivaceConfig {
    fn name(&self) -> &'static str {
        "vivace"
    }
    fn build(&self, now: Instant, mss: u64) -> Box<dyn Controller> {
        Box::new(Vivace::new(self, now, mss))
    }
}

/// Vivace's two phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VivacePhase {
    /// Doubling the rate every monitor interval while the utility grows.
    Startup,
    /// Gradient ascent on the utility, two monitor intervals per step.
    Learning,
}

/// One rate decision: the monitor intervals it rests on and where it moved the rate.
#[derive(Clone, Debug, PartialEq)]
pub struct VivaceDecision {
    pub phase: VivacePhase,
    /// `(rate in bytes per second, utility)` of each monitor interval.
    pub intervals: Vec<(f64, f64)>,
    /// du/dx of the learning step, utility per Mbit/s (0 in startup).
    pub gradient: f64,
    /// The rate change the gradient asked for and the one the bound let through, bytes per
    /// second (0 in startup).
    pub wanted_change: f64,
    pub change: f64,
    /// The rate after the decision, bytes per second.
    pub rate: f64,
}

/// Least-squares line through (send time, RTT) samples, for the RTT gradient.
#[derive(Clone, Copy, Debug, Default)]
struct Regression {
    n: f64,
    t: f64,
    r: f64,
    tt: f64,
    tr: f64,
}

impl Regression {
    fn add(&mut self, t: f64, r: f64) {
        self.n += 1.0;
        self.t += t;
        self.r += r;
        self.tt += t * t;
        self.tr += t * r;
    }
    /// dRTT/dT, seconds per second; 0 without two samples at different times.
    fn slope(&self) -> f64 {
        let den = self.n * self.tt - self.t * self.t;
        if self.n < 2.0 || den.abs() < 1e-18 {
            return 0.0;
        }
        (self.n * self.tr - self.t * self.r) / den
    }
}

/// A monitor interval: the requests sent at one test rate over [start, end).
#[derive(Clone, Debug)]
struct Interval {
    rate: f64,
    start: Instant,
    end: Instant,
    sent: u64,
    answered: u64,
    lost: u64,
    app_limited: bool,
    rtts: Regression,
    /// Past its deadline: what has not come back by then counts as lost, and later
    /// arrivals are ignored, so every MI of a step is judged after the same wait.
    closed: bool,
}

impl Interval {
    fn contains(&self, t: Instant) -> bool {
        self.start <= t && t < self.end
    }
    /// Closes the MI 2·srtt after its end.
    fn close_if_due(&mut self, now: Instant, srtt: Duration) {
        if now >= self.end + srtt * 2 {
            self.closed = true;
        }
    }
    /// Every request answered or declared lost, or closed.
    fn done(&self, now: Instant) -> bool {
        now >= self.end && (self.closed || self.answered + self.lost >= self.sent)
    }
}

/// PCC Vivace over requests.
///
/// Vivace is rate-based: it sends at a rate for a monitor interval (MI), scores what came of
/// it with the utility u(x) = x^0.9 − b·x·dRTT/dT − c·x·L (x in Mbit/s, dRTT/dT the slope of
/// the RTTs over the interval, L its loss rate) and moves the rate up the utility's gradient.
/// Startup doubles the rate every MI until the utility falls, then returns to the best rate
/// and learns: two MIs at r(1 ± ε) give γ = (u₊ − u₋)/(2εr), and the rate moves by
/// Δr = m(τ)·θ0·γ, where the confidence amplifier m(τ) grows with the number τ of steps in
/// a row in the same direction (1, 2, 3, then 2τ − 3, libwebrtc's schedule; the paper
/// only asks for m to grow with τ), and |Δr| is bounded by the dynamic change boundary
/// ω·r, ω = ω0 + k·δ, k counting the steps in a row the bound cut short (back to the
/// smallest k that admits the change otherwise, and to 0 when the direction turns).
///
/// Here the client paces its requests at the rate (each asks for one data packet) and the
/// window is 2·rate·srtt, loose enough never to hold the pacing back. An MI lasts one srtt
/// (at least 10 packets) and covers the requests sent in it; data and losses are matched to
/// it by send time, and 2·srtt after its end it closes: what has not come back counts as
/// lost. The two MIs of a step alternate which goes first. While a step's results are still
/// in flight the path sends at the current rate, as libwebrtc's implementation does. A step
/// whose MIs saw application-limited sends is discarded and repeated. Losses count only
/// through L, except a retransmission timeout, which halves the rate and restarts learning
/// from there (libwebrtc does the same on a monitor-interval timeout).
///
/// Departures from the paper: RTT gradients below 0 count as 0 by default (see
/// [`VivaceConfig::rtt_gradient_floor`]); the rate unit is 10⁶ bit/s (PCC's code uses 2²⁰);
/// θ0 = 1 is our choice, the paper leaves it to the implementation. As in any purely
/// rate-based scheme the window, which follows srtt, does not cap the queue: after a sharp
/// drop in capacity behind a very deep buffer the rate comes down one bounded step per
/// MI-and-RTT, and the RTT it waits on grows meanwhile.
#[derive(Debug)]
pub struct Vivace {
    config: VivaceConfig,
    mss: f64,
    initial_window: u64,
    min_window: f64,
    phase: VivacePhase,
    /// The rate, bytes per second; `None` until the first RTT sample.
    rate: Option<f64>,
    /// What requests are paced at now: the running MI's rate, or `rate` between steps.
    pacing: f64,
    srtt: Duration,
    /// Rates of the current step's MIs not yet started.
    pending: VecDeque<f64>,
    /// The current step's started MIs.
    intervals: Vec<Interval>,
    /// The best `(rate, utility)` of startup so far.
    startup_best: Option<(f64, f64)>,
    /// τ: steps in a row in the same direction, signed with it.
    streak: i64,
    /// k of the dynamic change boundary.
    boundary_hits: u32,
    higher_first: bool,
    last_decision: Option<VivaceDecision>,
    collapsed_at: Option<Instant>,
}

impl Vivace {
    pub fn new(config: &VivaceConfig, _now: Instant, mss: u64) -> Self {
        let min_window = config.window.min_bytes(mss) as f64;
        let initial_window = config.window.initial_bytes(mss);
        let mss = mss.max(1) as f64;
        Vivace {
            config: config.clone(),
            mss,
            initial_window,
            min_window,
            phase: VivacePhase::Startup,
            rate: None,
            pacing: 0.0,
            srtt: Duration::ZERO,
            pending: VecDeque::new(),
            intervals: vec![],
            startup_best: None,
            streak: 0,
            boundary_hits: 0,
            higher_first: true,
            last_decision: None,
            collapsed_at: None,
        }
    }
    pub fn phase(&self) -> VivacePhase {
        self.phase
    }
    /// The rate, bytes per second, once an RTT is known.
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }
    pub fn last_decision(&self) -> Option<&VivaceDecision> {
        self.last_decision.as_ref()
    }

    fn min_rate(&self) -> f64 {
        let srtt = self.srtt.as_secs_f64().max(1e-3);
        self.min_window / srtt
    }

    /// The confidence amplifier m(τ).
    fn amplifier(streak: i64) -> f64 {
        let tau = streak.unsigned_abs().max(1) as f64;
        if tau <= 3.0 { tau } else { 2.0 * tau - 3.0 }
    }

    /// Bounds `change` (bytes per second) at rate `rate` by ω·rate and updates k.
    fn bound(&mut self, change: f64, rate: f64) -> f64 {
        let (omega0, delta) = (self.config.initial_boundary, self.config.boundary_step);
        let omega = omega0 + self.boundary_hits as f64 * delta;
        if change.abs() > omega * rate {
            self.boundary_hits += 1;
            return change.signum() * omega * rate;
        }
        // Within the bound: k falls back to the smallest that admits this change.
        let needed = ((change.abs() / rate - omega0) / delta).ceil().max(0.0);
        self.boundary_hits = self.boundary_hits.min(needed as u32);
        change
    }

    fn utility(&self, mi: &Interval) -> f64 {
        // Requests neither answered nor declared lost by the deadline count as lost.
        let loss = mi.sent.saturating_sub(mi.answered) as f64 / mi.sent.max(1) as f64;
        self.config.utility(mi.rate * 8.0 / MBIT, mi.rtts.slope(), loss)
    }

    /// Plans the next step from the current rate.
    fn plan(&mut self) {
        let rate = self.rate.unwrap_or(0.0);
        self.intervals.clear();
        self.pending.clear();
        match self.phase {
            VivacePhase::Startup => {
                // The first MI measures the starting rate itself; each later one doubles.
                let next = if self.startup_best.is_some() { 2.0 * rate } else { rate };
                self.pending.push_back(next);
            }
            VivacePhase::Learning => {
                let (hi, lo) = (
                    rate * (1.0 + self.config.probe_step),
                    rate * (1.0 - self.config.probe_step),
                );
                let order = if self.higher_first { [hi, lo] } else { [lo, hi] };
                self.pending.extend(order);
                self.higher_first = !self.higher_first;
            }
        }
    }

    /// Starts the next MI of the step if the last one is over, and sets the pacing rate.
    fn advance(&mut self, now: Instant) {
        let Some(rate) = self.rate else { return };
        let running = self.intervals.last().is_some_and(|mi| now < mi.end);
        let next = if running { None } else { self.pending.pop_front() };
        if let Some(next) = next {
            let packets = self.config.min_interval_packets as f64 * self.mss / next.max(1.0);
            let length = self.srtt.max(Duration::from_secs_f64(packets.min(10.0)));
            self.intervals.push(Interval {
                rate: next,
                start: now,
                end: now + length,
                sent: 0,
                answered: 0,
                lost: 0,
                app_limited: false,
                rtts: Regression::default(),
                closed: false,
            });
        }
        self.pacing = match self.intervals.last() {
            Some(mi) if mi.contains(now) => mi.rate,
            _ => rate,
        };
    }

    fn close_due(&mut self, now: Instant) {
        for mi in &mut self.intervals {
            mi.close_if_due(now, self.srtt);
        }
    }

    /// The open MI a request sent at `sent` belongs to.
    fn interval_mut(&mut self, sent: Instant) -> Option<&mut Interval> {
        self.intervals.iter_mut().find(|mi| mi.contains(sent) && !mi.closed)
    }

    /// Decides once every MI of the step is done.
    fn check_step(&mut self, now: Instant) {
        self.close_due(now);
        let complete =
            self.pending.is_empty() && !self.intervals.is_empty() && self.intervals.iter().all(|mi| mi.done(now));
        if !complete {
            return;
        }
        if self.intervals.iter().any(|mi| mi.app_limited || mi.sent == 0) {
            // Nothing learnt about the path: measure again.
            if self.phase == VivacePhase::Learning {
                self.higher_first = !self.higher_first;
            }
            self.plan();
            return;
        }
        let scored: Vec<(f64, f64)> = self.intervals.iter().map(|mi| (mi.rate, self.utility(mi))).collect();
        let rate = self.rate.unwrap_or(0.0);
        let mut decision = VivaceDecision {
            phase: self.phase,
            intervals: scored.clone(),
            gradient: 0.0,
            wanted_change: 0.0,
            change: 0.0,
            rate,
        };
        match self.phase {
            VivacePhase::Startup => {
                let (tested, utility) = scored[0];
                match self.startup_best {
                    Some((best, best_utility)) if utility <= best_utility => {
                        self.rate = Some(best);
                        self.phase = VivacePhase::Learning;
                    }
                    _ => {
                        self.startup_best = Some((tested, utility));
                        self.rate = Some(tested);
                    }
                }
            }
            VivacePhase::Learning => {
                let [(r1, u1), (r2, u2)] = [scored[0], scored[1]];
                // γ = (u₊ − u₋)/(r₊ − r₋), utility per Mbit/s.
                let gradient = (u1 - u2) / ((r1 - r2) * 8.0 / MBIT);
                let direction = gradient.signum() as i64;
                self.streak = if self.streak.signum() == direction && direction != 0 {
                    self.streak + direction
                } else {
                    direction
                };
                if direction != 0 && (self.streak.abs() == 1) {
                    // The direction turned: the bound starts over too.
                    self.boundary_hits = 0;
                }
                let wanted = Self::amplifier(self.streak) * self.config.conversion_factor * gradient * MBIT / 8.0;
                let change = self.bound(wanted, rate);
                self.rate = Some((rate + change).max(self.min_rate()));
                decision.gradient = gradient;
                decision.wanted_change = wanted;
                decision.change = change;
            }
        }
        decision.rate = self.rate.unwrap_or(0.0);
        self.last_decision = Some(decision);
        self.plan();
    }
}

impl Controller for Vivace {
    fn name(&self) -> &'static str {
        "vivace"
    }
    fn on_request_sent(&mut self, now: Instant, bytes: u64, _in_flight_bytes: u64) {
        self.check_step(now);
        self.advance(now);
        if let Some(mi) = self.interval_mut(now) {
            mi.sent += bytes;
        }
    }
    fn on_data(&mut self, a: &DataArrival) {
        self.srtt = a.smoothed_rtt;
        if self.rate.is_none() {
            // The initial window spread over the first RTT.
            let rtt = a.smoothed_rtt.as_secs_f64().max(1e-3);
            self.rate = Some(self.initial_window as f64 / rtt);
            self.plan();
            self.advance(a.now);
            return;
        }
        self.close_due(a.now);
        if let Some(mi) = self.interval_mut(a.sent) {
            mi.answered += a.bytes;
            mi.app_limited |= a.app_limited;
            let t = (a.sent - mi.start).as_secs_f64();
            if let Some(rtt) = a.rtt {
                mi.rtts.add(t, rtt.as_secs_f64());
            }
        }
        self.check_step(a.now);
        self.advance(a.now);
    }
    fn on_loss(&mut self, loss: &Loss) {
        self.close_due(loss.now);
        if let Some(mi) = self.interval_mut(loss.sent) {
            mi.lost += loss.lost_bytes;
        }
        let outage = loss.by_timeout && self.collapsed_at.is_none_or(|at| loss.sent > at);
        if let (true, Some(rate)) = (outage, self.rate) {
            self.rate = Some((rate / 2.0).max(self.min_rate()));
            self.phase = VivacePhase::Learning;
            self.streak = 0;
            self.boundary_hits = 0;
            self.collapsed_at = Some(loss.now);
            self.plan();
        }
        self.check_step(loss.now);
        self.advance(loss.now);
    }
    fn window(&self) -> u64 {
        if self.rate.is_none() {
            return self.initial_window;
        }
        let rate = self.pacing.max(self.rate.unwrap_or(0.0));
        (self.config.window_gain * rate * self.srtt.as_secs_f64()).max(self.min_window) as u64
    }
    fn pacing_rate(&self) -> Option<u64> {
        self.rate.map(|_| self.pacing as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_model::{MSS, Model, RATE, at, ms};
    use super::*;

    fn vivace() -> Vivace {
        Vivace::new(&VivaceConfig::default(), Instant::ZERO, MSS)
    }

    fn rate_of(v: &Vivace) -> f64 {
        v.rate().unwrap_or(0.0)
    }

    #[test]
    fn factory_builds_with_the_initial_window() {
        let cc = VivaceConfig::default().build(Instant::ZERO, 1200);
        assert_eq!(cc.name(), "vivace");
        assert_eq!(cc.window(), 12_000);
        assert_eq!(cc.pacing_rate(), None);
    }

    #[test]
    fn utility_by_hand() {
        let c = VivaceConfig::default();
        // 8 Mbit/s, nothing lost, RTT flat: 8^0.9 = e^(0.9 · ln 8) = e^1.87150 = 6.49801.
        let clean = c.utility(8.0, 0.0, 0.0);
        assert!((clean - 6.498_01).abs() < 1e-5, "{clean}");
        // 10% loss costs c·x·L = 11.35 · 8 · 0.1 = 9.08.
        assert!((c.utility(8.0, 0.0, 0.1) - (clean - 9.08)).abs() < 1e-9);
        // The RTT growing 20 ms per second costs b·x·dRTT/dT = 900 · 8 · 0.02 = 144.
        assert!((c.utility(8.0, 0.02, 0.0) - (clean - 144.0)).abs() < 1e-9);
        // A draining queue (RTT falling) is not rewarded (the floor, 0) ...
        assert_eq!(c.utility(8.0, -0.02, 0.0), clean);
        // ... unless the floor is lifted, as in the paper: then by as much.
        let paper = VivaceConfig {
            rtt_gradient_floor: f64::NEG_INFINITY,
            ..VivaceConfig::default()
        };
        assert!((paper.utility(8.0, -0.02, 0.0) - (clean + 144.0)).abs() < 1e-9);
        // Gradients under 0.01 are noise.
        assert_eq!(c.utility(8.0, 0.009, 0.0), clean);
        // The loss tolerance: du/dx = 0.9·x^−0.1 − c·L is still positive at 10 Mbit/s with
        // 5% loss (0.9 · 0.794 = 0.715 > 0.5675), negative with 7% (0.7945).
        let slope = |loss: f64| (c.utility(10.01, 0.0, loss) - c.utility(9.99, 0.0, loss)) / 0.02;
        assert!(slope(0.05) > 0.0 && slope(0.07) < 0.0);
    }

    #[test]
    fn regression_slope_by_hand() {
        let mut r = Regression::default();
        assert_eq!(r.slope(), 0.0);
        // RTT 40, 42, 44 ms at 0, 10, 20 ms: the queue grows 2 ms every 10 ms, slope 0.2.
        for (t, rtt) in [(0.0, 0.040), (0.010, 0.042), (0.020, 0.044)] {
            r.add(t, rtt);
        }
        assert!((r.slope() - 0.2).abs() < 1e-9);
    }

    #[test]
    fn confidence_amplifier_and_change_boundary_by_hand() {
        let amplified: Vec<f64> = (1..=6).map(Vivace::amplifier).collect();
        assert_eq!(amplified, [1.0, 2.0, 3.0, 5.0, 7.0, 9.0]);
        assert_eq!(Vivace::amplifier(-4), 5.0);
        let mut v = vivace();
        let r = 1_000_000.0;
        let mut bound = |change: f64| {
            let out = v.bound(change, r);
            (out.round(), v.boundary_hits)
        };
        // ω = 0.05: a 10% change is cut to 5% and k becomes 1.
        assert_eq!(bound(100_000.0), (50_000.0, 1));
        // ω = 0.15 admits 10%; k stays at the smallest that does, 1.
        assert_eq!(bound(100_000.0), (100_000.0, 1));
        // 30% is cut to 15% (k → 2), then to 25% (k → 3).
        assert_eq!(bound(300_000.0), (150_000.0, 2));
        assert_eq!(bound(-300_000.0), (-250_000.0, 3));
        // A small change brings k back to 0.
        assert_eq!(bound(10_000.0), (10_000.0, 0));
    }

    #[test]
    fn startup_doubles_while_the_utility_grows() {
        // 100 Mbit/s, 40 ms: the first rate is 10 packets over the first RTT, 40.1 ms (one
        // packet's transmission included): 311 721 B/s, 2.5 Mbit/s, 40 times below the link.
        let mut m = Model::with_probe(vivace(), 10.0 * RATE, ms(40), rate_of);
        m.run(at(ms(3_000)));
        let mut rates: Vec<f64> = m.samples.iter().map(|s| s.probe).collect();
        rates.dedup();
        assert!((rates[0] - 12_500.0 / 0.0401).abs() < 1.0, "{}", rates[0]);
        // Doubling: 2.5, 5, 10, 20, 40, 80 Mbit/s all have higher utility than the rate
        // before (no queue, no loss: u = x^0.9 grows), 160 Mbit/s overflows the link (the
        // RTT climbs, u falls) and startup returns to 80.
        for k in 1..6 {
            assert_eq!(rates[k], rates[0] * 2f64.powi(k as i32), "{rates:?}");
        }
        assert_eq!(m.cc.phase(), VivacePhase::Learning);
        // From there gradient steps keep the rate near the 12 500 000 B/s link.
        let late = m.cc.rate().unwrap();
        assert!(late > 0.7 * 10.0 * RATE && late < 1.1 * 10.0 * RATE, "{late}");
    }

    #[test]
    fn settles_near_the_bottleneck_with_little_queue() {
        let mut m = Model::with_probe(vivace(), RATE, ms(40), rate_of);
        m.run(at(ms(20_000)));
        // The equilibrium: the r(1 + ε) MI must not build a queue (its RTT gradient would
        // cost 900·x·(r(1+ε)/C − 1)), so r ≈ C/(1 + ε) ≈ 95% of C, give or take steps.
        let goodput = m.goodput(ms(5_000), ms(20_000));
        assert!(goodput > 0.85 * RATE && goodput <= RATE * 1.001, "goodput {goodput}");
        let mean = m.mean_queue(ms(5_000), ms(20_000));
        assert!(mean < 0.005, "mean queue {mean}");
        let max = m.between(ms(5_000), ms(20_000)).map(|s| s.queued).max().unwrap();
        assert!(max < ms(40), "max queue {max:?}");
        // The window is 2·rate·srtt.
        let v = &m.cc;
        let expected = 2.0 * v.pacing * v.srtt.as_secs_f64();
        assert_eq!(v.window(), expected.max(4.0 * MSS as f64) as u64);
    }

    #[test]
    fn raises_the_rate_when_the_link_grows_and_backs_off_when_it_shrinks() {
        let mut m = Model::with_probe(vivace(), RATE, ms(40), rate_of);
        // 10 Mbit/s, then 20 from 5 s, then 5 from 12 s; 100 packets of buffer.
        m.buffer = Some(100 * MSS);
        m.rates.push((at(ms(5_000)), 2.0 * RATE));
        m.rates.push((at(ms(12_000)), RATE / 2.0));
        m.run(at(ms(20_000)));
        let rate_at = |t: u64| m.between(ms(t), ms(t + 100)).last().unwrap().probe;
        // More capacity: no queue at either probe, u = x^0.9 grows with x, the gradient
        // stays positive and the amplifier and the boundary let the steps grow (5%, then
        // 15%, 25%, ... of the rate) until the higher probe meets the new link.
        assert!(rate_at(4_900) < 1.05 * RATE);
        assert!(rate_at(6_000) > 1.6 * RATE, "{}", rate_at(6_000));
        let goodput = m.goodput(ms(7_000), ms(12_000));
        assert!(goodput > 0.85 * 2.0 * RATE, "goodput {goodput}");
        // A quarter of the capacity: the queue builds and overflows; the RTT gradient and
        // the losses make the higher probe worse, and the rate comes down, the bound
        // widening by δ at every step it cuts short.
        assert!(m.losses > 0);
        assert!(rate_at(17_000) < 0.6 * RATE, "{}", rate_at(17_000));
        let goodput = m.goodput(ms(17_000), ms(20_000));
        assert!(goodput > 0.8 * RATE / 2.0, "goodput {goodput}");
        let mean = m.mean_queue(ms(18_000), ms(20_000));
        assert!(mean < 0.010, "mean queue {mean}");
    }

    #[test]
    fn tolerates_light_random_loss_and_backs_off_under_heavy_loss() {
        // 2% loss: du/dx = 0.9·x^−0.1 − 11.35 · 0.02 > 0 up to x ≈ 10^6 Mbit/s, so the
        // rate still climbs to the link (a loss or two per MI makes the steps noisy, and
        // the mean rate settles lower than without loss).
        let mut light = Model::new(vivace(), RATE, ms(40));
        light.loss_every = Some(50);
        light.run(at(ms(15_000)));
        let goodput = light.goodput(ms(5_000), ms(15_000));
        assert!(goodput > 0.7 * RATE, "goodput {goodput}");
        // 12.5% loss: 0.9·x^−0.1 < 11.35 · 0.125 = 1.42 at any rate above 0.01 Mbit/s, so
        // the utility falls with the rate and Vivace backs off to its floor.
        let mut heavy = Model::new(vivace(), RATE, ms(40));
        heavy.loss_every = Some(8);
        heavy.run(at(ms(15_000)));
        let goodput = heavy.goodput(ms(5_000), ms(15_000));
        assert!(goodput < 0.3 * RATE, "goodput {goodput}");
        let decision = heavy.cc.last_decision().unwrap();
        assert_eq!(decision.phase, VivacePhase::Learning);
    }

    #[test]
    fn a_learning_step_by_hand() {
        let mut m = Model::new(vivace(), RATE, ms(40));
        m.run(at(ms(3_000)));
        let d = m.cc.last_decision().unwrap().clone();
        assert_eq!(d.phase, VivacePhase::Learning);
        let [(r1, u1), (r2, u2)] = [d.intervals[0], d.intervals[1]];
        // The two rates are r(1 ± 0.05) around the rate before the step.
        let before = d.rate - d.change;
        assert!((r1.max(r2) - 1.05 * before).abs() < 1e-6 && (r1.min(r2) - 0.95 * before).abs() < 1e-6);
        // γ = (u₁ − u₂)/(r₁ − r₂) per Mbit/s, and the change is m(τ)·θ0·γ bounded to ω·r.
        let gradient = (u1 - u2) / ((r1 - r2) * 8.0 / 1e6);
        assert!((d.gradient - gradient).abs() < 1e-9);
        assert!(d.change.abs() <= d.wanted_change.abs() + 1e-9);
        assert!(d.change.signum() == gradient.signum());
    }

    #[test]
    fn timeout_halves_the_rate() {
        let mut m = Model::new(vivace(), RATE, ms(40));
        m.run(at(ms(3_000)));
        let before = m.cc.rate().unwrap();
        let now = m.now;
        m.cc.on_loss(&Loss {
            now,
            sent: now - ms(300),
            lost_bytes: MSS,
            in_flight_bytes: 0,
            by_timeout: true,
        });
        assert_eq!(m.cc.rate(), Some(before / 2.0));
        // The same outage's other timeouts do not halve again.
        m.cc.on_loss(&Loss {
            now: now + ms(1),
            sent: now - ms(299),
            lost_bytes: MSS,
            in_flight_bytes: 0,
            by_timeout: true,
        });
        assert_eq!(m.cc.rate(), Some(before / 2.0));
    }
}
