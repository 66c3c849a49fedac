//! `weft`, pcdn's loss-tolerant congestion control: CUBIC that reacts to a loss only when a
//! queue shows it was congestion, and never cuts below the measured pipe.
//!
//! Loss-based controls read every loss as congestion, so 10 % random loss on a path holds
//! CUBIC near the Mathis bound (≈ 1.2·MSS ÷ (RTT·√p)): a 4 Mbit/s edge at 40 ms gives
//! ≈ 0.8 of its 3.6 Mbit/s. `weft` tells random loss from congestive loss the way TCP Veno
//! does (Fu & Liew, IEEE JSAC 2003: a loss while the backlog is small is random), with the
//! backlog measured as queueing delay (the windowed-minimum RTT above the path's minimum RTT,
//! over HyStart++'s threshold, RFC 9406 §4.2: min_rtt ÷ 8, clamped to 4–16 ms):
//!
//! - **Random loss** (no standing queue): the window is kept. The lost request is asked again
//!   by the download anyway, so the path keeps pulling at its loss-adjusted rate.
//! - **Congestive loss** (a standing queue): CUBIC's reduction (RFC 9438 §4.6), but never
//!   below the pipe (Westwood+, Mascolo et al. 2001): the bytes of requests in flight that
//!   keep the link busy without a queue, `max delivery rate ÷ (1 − random loss) × min RTT`.
//!   The delivery rate counts only answered requests, while lost packets use the link too,
//!   hence the division by the measured random-loss rate.
//! - **Slow start** ends when the queue appears (HyStart++), not at the first random loss,
//!   with the window set back to the pipe (the last doubling overshot it), by half at most.
//!   Only a slow start without a threshold does (RFC 9406 §4.3: HyStart++ is for the first).
//! - **Timeout**: CUBIC's collapse to one packet, with slow start climbing back to the pipe:
//!   to its threshold, whatever the queue still draining from before the timeout says.
//! - **A rate that rises**: where slow start ended, or where a congestion event left the
//!   window, is the ceiling. When the requests in flight exceed it by twice the queue
//!   threshold's worth at the measured rate and still no queue stands, the link's rate has
//!   risen (a cellular link out of a fade): slow start begins again, paced, and ends at the
//!   queue as the first did. On a link whose rate holds, that surplus would queue past the
//!   threshold, so it never restarts there. Without it a window left at a fade's pipe
//!   refilled by CUBIC's growth of about a packet per round trip, seconds on a link whose
//!   rate rose 5-fold.
//!
//! - **Cellular links**: with the two rules above, on two LTE captures and a 2 %-loss edge
//!   (`pcdn sim scenarios/cellular-traces.toml`, ten seeds) weave under `weft` completes the
//!   video in 33.3 ± 0.6 s, the best of every scheduler × control there (under BBR the best
//!   is 33.9 ± 0.3 s, under CUBIC 45.9 ± 0.2 s); without them, 42.0 ± 0.2 s. Alone on the
//!   T-Mobile capture, `weft` delivered 10.3 Mbit/s where CUBIC delivers 16.8 and BBR 19.5;
//!   now 19.3.
//! - **Pacing**: requests leave at 2 × window ÷ sRTT in slow start and 1.2 × after it, Linux
//!   TCP's pacing (`tcp_update_pacing_rate`, `tcp_pacing_ss_ratio` = 200 %,
//!   `tcp_pacing_ca_ratio` = 120 %). Unpaced, each answer in slow start releases two
//!   requests at once, so the server gets a round's requests at twice the rate it answered
//!   the last and its link queues half a window: at half the pipe that queue passes the
//!   HyStart++ threshold and slow start ends there, leaving CUBIC's slow growth to fill the
//!   other half (12 s at 350 Mbit/s and 40 ms). Paced, the requests reach the link no faster
//!   than it serves them until the window is the pipe.
//!
//! - **Delay jitter**: a jittery path's RTT samples spread tens of milliseconds above its
//!   minimum RTT, which reads as a queue to both rules above. `weft` measures the jitter J
//!   as RFC 3550 §6.4.1 does for packet arrivals (the smoothed difference of consecutive RTT
//!   samples, less the step a queue makes between two answers, which is about one
//!   serialization and which the smallest recent answer spacing bounds; jitter moves the RTT
//!   by its spread), sizes the pipe by `min RTT + 24·J` once that exceeds the queue
//!   threshold, and reads a loss as congestion only when its RTT also stands within the
//!   threshold of the highest of the last round trip (a queue that overflows is at its
//!   longest). Pscheduler Fig. 16 (±40 ms on the 90 ms path, 0.1 % loss): weave under
//!   `weft` aggregated 0.617 of the capacity before, 0.685 after; the player scenario's
//!   5 ms of jitter with 1 % loss, 0.89–0.91 before, 0.95–0.96 after.
//!
//! On a path without random loss every loss comes with a queue, so `weft` is CUBIC with a
//! Westwood+ floor.

use super::cubic::{Cubic, CubicConfig};
use super::{Controller, ControllerFactory, DataArrival, Loss, WindowConfig};
use crate::estimate::{WindowedMax, WindowedMin};
use crate::time::{Duration, Instant};

/// Packets of standing queue Veno still reads as no congestion (Fu & Liew 2003, β = 3).
const VENO_BACKLOG: f64 = 3.0;

/// Gain of the RTT jitter estimator (RFC 3550 §6.4.1's interarrival jitter, 1/16).
const JITTER_GAIN: f64 = 1.0 / 16.0;

/// Smoothed RTTs over which the smallest spacing of consecutive answers is kept.
const SPACING_WINDOW_RTTS: u32 = 4;

/// The delay a request meets above the minimum RTT on a jittery path, in units of the jitter
/// estimate: the pipe is sized by `min_rtt + JITTER_SPAN · J`. Pscheduler Fig. 16's ±40 ms
/// on a 90 ms path gives J ≈ 2.5–3 ms and a mean RTT near 115 ms (min 52–60 ms), 20–24 J
/// above the minimum; with 16, weave's aggregation there was 0.664 against 0.692 with 24
/// (measured before the queue's step was left out of J, which lowered it to 0.685).
const JITTER_SPAN: f64 = 24.0;

/// Queue thresholds' worth of requests (at the measured rate) the flight must exceed the
/// ceiling by, without a queue, for slow start to begin again: twice the threshold, so that
/// on a link whose rate held the surplus queues past the threshold.
const RESTART_QUEUES: f64 = 2.0;

/// `weft`'s settings.
#[derive(Clone, Debug)]
pub struct WeftConfig {
    /// The CUBIC underneath (its growth, its reduction on congestion, its window floor).
    pub cubic: CubicConfig,
    /// Queueing delay above which a loss counts as congestion: min_rtt ÷ `queue_divisor`,
    /// clamped to [`queue_min`, `queue_max`] (RFC 9406 §4.2's MIN_RTT_DIVISOR = 8,
    /// MIN_RTT_THRESH = 4 ms, MAX_RTT_THRESH = 16 ms).
    pub queue_divisor: u32,
    pub queue_min: Duration,
    pub queue_max: Duration,
    /// Round trips the delivery-rate maximum is kept over (BBR's 10, Cardwell et al. 2016).
    pub rate_window_rtts: u32,
    /// Gain of the moving average of the random-loss rate, per packet.
    pub loss_gain: f64,
    /// The random-loss rate used for the pipe is capped here, so a path losing nearly
    /// everything does not make the pipe infinite.
    pub max_loss: f64,
    /// Least share of the window a congestion event takes off, whatever the pipe says.
    pub min_cut: f64,
    /// Pacing rate as a multiple of window ÷ sRTT, in slow start and after it (0: none).
    pub slow_start_pacing: f64,
    pub pacing: f64,
}

impl Default for WeftConfig {
    fn default() -> Self {
        WeftConfig {
            cubic: CubicConfig::default(),
            queue_divisor: 8,
            queue_min: Duration::from_millis(4),
            queue_max: Duration::from_millis(16),
            rate_window_rtts: 10,
            loss_gain: 1.0 / 256.0,
            max_loss: 0.3,
            min_cut: 0.05,
            slow_start_pacing: 2.0,
            pacing: 1.2,
        }
    }
}

impl WeftConfig {
    /// The initial window and floor, as for CUBIC.
    pub fn window(&self) -> WindowConfig {
        self.cubic.window
    }
}

impl ControllerFactory for WeftConfig {
    fn name(&self) -> &'static str {
        "weft"
    }
    fn build(&self, now: Instant, mss: u64) -> Box<dyn Controller> {
        Box::new(Weft::new(self, now, mss))
    }
}

/// The `weft` controller of one path.
#[derive(Debug)]
pub struct Weft {
    cubic: Cubic,
    mss: f64,
    queue_divisor: u32,
    queue_min: Duration,
    queue_max: Duration,
    rate_window_rtts: u32,
    loss_gain: f64,
    max_loss: f64,
    min_cut: f64,
    slow_start_pacing: f64,
    pacing: f64,
    /// Lowest RTT over the last smoothed RTT: the standing part of the RTT, jitter filtered.
    recent_rtt: WindowedMin<Duration>,
    /// Highest RTT over the last smoothed RTT: where a queue that overflows stands.
    recent_max_rtt: WindowedMax<Duration>,
    /// Mean difference of consecutive RTT samples (seconds; RFC 3550 §6.4.1's jitter J).
    jitter: f64,
    /// Highest delivery rate (bytes per second) over the last `rate_window_rtts` round trips.
    max_rate: WindowedMax<f64>,
    min_rtt: Option<Duration>,
    smoothed_rtt: Option<Duration>,
    /// The latest RTT sample: a loss is judged by the queue its evidence went through.
    latest_rtt: Option<Duration>,
    /// When it came.
    latest_arrival: Option<Instant>,
    /// Smallest spacing of consecutive answers over the last `SPACING_WINDOW_RTTS` sRTTs.
    answer_spacing: WindowedMin<Duration>,
    /// Moving average of the share of requests lost at random.
    random_loss: f64,
    random_losses: u64,
    congestive_losses: u64,
    /// The window the path last showed a queue at (where a slow start ended, or where a
    /// congestion event left the window); `None` in the first slow start.
    ceiling: Option<f64>,
    /// When the ceiling was set: only requests sent after it measure the flight above it.
    ceiling_at: Instant,
    /// Slow starts begun again because the path carried more than the ceiling without a queue.
    restarts: u64,
}

impl Weft {
    pub fn new(config: &WeftConfig, now: Instant, mss: u64) -> Self {
        Weft {
            cubic: Cubic::new(&config.cubic, now, mss),
            mss: mss.max(1) as f64,
            queue_divisor: config.queue_divisor.max(1),
            queue_min: config.queue_min,
            queue_max: config.queue_max.max(config.queue_min),
            rate_window_rtts: config.rate_window_rtts.max(1),
            loss_gain: config.loss_gain.clamp(0.0, 1.0),
            max_loss: config.max_loss.clamp(0.0, 0.99),
            min_cut: config.min_cut.clamp(0.0, 1.0),
            slow_start_pacing: config.slow_start_pacing.max(0.0),
            pacing: config.pacing.max(0.0),
            recent_rtt: WindowedMin::default(),
            recent_max_rtt: WindowedMax::default(),
            jitter: 0.0,
            max_rate: WindowedMax::default(),
            min_rtt: None,
            smoothed_rtt: None,
            latest_rtt: None,
            latest_arrival: None,
            answer_spacing: WindowedMin::default(),
            random_loss: 0.0,
            random_losses: 0,
            congestive_losses: 0,
            ceiling: None,
            ceiling_at: now,
            restarts: 0,
        }
    }

    /// The CUBIC underneath.
    pub fn cubic(&self) -> &Cubic {
        &self.cubic
    }

    /// Queueing delay now: the windowed-minimum RTT above the path's minimum RTT.
    pub fn queue_delay(&self) -> Option<Duration> {
        Some(self.recent_rtt.get()?.saturating_sub(self.min_rtt?))
    }

    /// The queueing delay above which a loss is congestion: RFC 9406 §4.2's min_rtt ÷ 8 in
    /// [4, 16] ms, and at least Veno's backlog of 3 packets (Fu & Liew's β) at the measured
    /// rate, since on a slow link one or two packets of queue are a few milliseconds already.
    pub fn queue_threshold(&self) -> Duration {
        let base = self.min_rtt.map_or(self.queue_min, |m| m / self.queue_divisor);
        let backlog = match self.max_rate.get() {
            Some(rate) if rate > 0.0 => Duration::from_secs_f64((VENO_BACKLOG * self.mss / rate).min(1.0)),
            _ => Duration::ZERO,
        };
        base.clamp(self.queue_min, self.queue_max).max(backlog)
    }

    /// A standing queue is there (the windowed minimum RTT is over the threshold): slow
    /// start has filled the path.
    pub fn queue_standing(&self) -> bool {
        self.queue_delay().is_some_and(|q| q > self.queue_threshold())
    }

    /// The path carries more than the ceiling without a queue: the requests in flight exceed
    /// it by what `RESTART_QUEUES` queue thresholds at the measured rate would queue, yet
    /// the windowed-minimum RTT stands within one threshold of the minimum. On a link whose
    /// rate held, those extra requests would stand in its queue for twice the threshold.
    fn carries_more_than_the_ceiling(&self, arrival: &DataArrival) -> bool {
        let (Some(ceiling), Some(rate)) = (self.ceiling, self.max_rate.get()) else {
            return false;
        };
        let excess = RESTART_QUEUES * self.queue_threshold().as_secs_f64() * rate;
        let in_flight = (arrival.in_flight_bytes + arrival.bytes) as f64;
        !arrival.app_limited
            && arrival.sent >= self.ceiling_at
            && in_flight >= ceiling + excess
            && !self.queue_standing()
    }

    /// A loss declared now is congestion: the latest RTT sample, from the requests answered
    /// after the lost one, met a queue over the threshold, and stands within the threshold of
    /// the highest RTT of the last round trip. The latest sample rather than the windowed
    /// minimum, because a burst overflows a queue faster than a round trip. Near the highest,
    /// because a queue that overflows is at its longest: under delay jitter the samples
    /// spread over tens of milliseconds above the minimum RTT, and a random loss found
    /// anywhere in that spread read as congestion held the window to a fraction of the pipe
    /// (Pscheduler Fig. 16 at 20–40 ms). Without jitter a standing queue moves slowly, and
    /// its samples are all near the highest.
    pub fn loss_is_congestion(&self) -> bool {
        let (Some(rtt), Some(min_rtt)) = (self.latest_rtt, self.min_rtt) else {
            return true;
        };
        let threshold = self.queue_threshold();
        let queued = rtt.saturating_sub(min_rtt) > threshold;
        let near_highest = self
            .recent_max_rtt
            .get()
            .is_none_or(|highest| rtt + threshold >= highest);
        queued && near_highest
    }

    /// The RTT jitter J (RFC 3550 §6.4.1 on consecutive RTT samples): a queue moves the RTT
    /// by at most a packet's serialization from one answer to the next, delay jitter by
    /// its whole spread.
    pub fn jitter(&self) -> Duration {
        Duration::from_secs_f64(self.jitter)
    }

    /// Slow starts begun again after the first (the path's rate rose past the ceiling).
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// Estimated share of requests lost at random.
    pub fn random_loss_rate(&self) -> f64 {
        self.random_loss
    }

    /// Losses counted as random and as congestion so far.
    pub fn losses(&self) -> (u64, u64) {
        (self.random_losses, self.congestive_losses)
    }

    /// The pipe in bytes: requests in flight that keep the link busy without a queue,
    /// `max delivery rate ÷ (1 − random loss) × (min RTT + JITTER_SPAN · J)`; `None` before
    /// it is measured. Under delay jitter a request meets the minimum RTT only at the best,
    /// and a pipe sized by it leaves the link idle while the answers come late.
    pub fn pipe(&self) -> Option<f64> {
        let rate = self.max_rate.get()?;
        let rtt = self.min_rtt?.as_secs_f64() + self.jitter_delay().as_secs_f64();
        let loss = self.random_loss.min(self.max_loss);
        Some(rate / (1.0 - loss) * rtt)
    }

    /// The delay jitter adds to a request's RTT, `JITTER_SPAN · J`; none while that is within
    /// the queue threshold: a jitter weft does not read as a queue is too small to matter,
    /// and a small J from a jitter-free path (a queue's steps the answer spacing did not
    /// cover) would otherwise lift the pipe above the bandwidth-delay product.
    pub fn jitter_delay(&self) -> Duration {
        let delay = Duration::from_secs_f64(JITTER_SPAN * self.jitter);
        if delay > self.queue_threshold() {
            delay
        } else {
            Duration::ZERO
        }
    }

    fn record_rtt(&mut self, arrival: &DataArrival) {
        self.smoothed_rtt = Some(arrival.smoothed_rtt);
        let Some(rtt) = arrival.rtt else { return };
        self.min_rtt = Some(
            self.min_rtt
                .map_or(arrival.min_rtt, |m| m.min(arrival.min_rtt).min(rtt)),
        );
        // Answers a minimum RTT or more apart answer different flights, between which a queue
        // may have moved the RTT by any amount.
        let same_flight = self
            .latest_arrival
            .is_some_and(|last| arrival.now.saturating_duration_since(last) < arrival.min_rtt);
        if let (true, Some(previous), Some(last)) = (same_flight, self.latest_rtt, self.latest_arrival) {
            // Behind a busy bottleneck the answers come one serialization apart, and its queue
            // moves the RTT by about that much from one answer to the next; the smallest
            // spacing of recent answers bounds it, and only the rest of a step is jitter (a
            // 1 Mbit/s link's 11 ms per packet otherwise read as jitter, MPRD Fig. 7(a)).
            // Jitter bunches answers, so there that spacing is near zero.
            let spacing = arrival.now.saturating_duration_since(last);
            self.answer_spacing
                .update(arrival.now, spacing, arrival.smoothed_rtt * SPACING_WINDOW_RTTS);
            let queue_step = self.answer_spacing.get().map_or(0.0, |d| d.as_secs_f64());
            let step = ((rtt.as_secs_f64() - previous.as_secs_f64()).abs() - queue_step).max(0.0);
            self.jitter += JITTER_GAIN * (step - self.jitter);
        }
        self.latest_rtt = Some(rtt);
        self.latest_arrival = Some(arrival.now);
        // One propagation RTT of samples: enough to see past jitter and request bursts,
        // short enough to see a queue within the round trip it builds.
        self.recent_rtt.update(arrival.now, rtt, arrival.min_rtt);
        self.recent_max_rtt.update(arrival.now, rtt, arrival.smoothed_rtt);
    }

    fn record_rate(&mut self, arrival: &DataArrival) {
        // BBR's delivery-rate sample: what the path delivered between the latest delivery
        // before this request left and this arrival.
        let interval = arrival.now.saturating_duration_since(arrival.delivered_time_at_send);
        let min_rtt = self.min_rtt.unwrap_or(arrival.min_rtt);
        // Shorter intervals measure bursts, not the link.
        if interval.is_zero() || interval < min_rtt / 2 {
            return;
        }
        let delivered = arrival.delivered_bytes.saturating_sub(arrival.delivered_bytes_at_send);
        let rate = delivered as f64 / interval.as_secs_f64();
        // An application-limited sample under-states the path: only a higher one counts.
        if arrival.app_limited && self.max_rate.get().is_some_and(|max| rate <= max) {
            return;
        }
        let window = arrival.smoothed_rtt.max(min_rtt) * self.rate_window_rtts;
        self.max_rate.update(arrival.now, rate, window);
    }
}

impl Controller for Weft {
    fn name(&self) -> &'static str {
        "weft"
    }
    fn on_request_sent(&mut self, now: Instant, bytes: u64, in_flight_bytes: u64) {
        self.cubic.on_request_sent(now, bytes, in_flight_bytes);
    }
    fn on_data(&mut self, arrival: &DataArrival) {
        self.record_rtt(arrival);
        self.record_rate(arrival);
        self.random_loss -= self.loss_gain * self.random_loss;
        self.cubic.on_data(arrival);
        // Only a slow start without a threshold ends at a queue (RFC 9406 §4.3: HyStart++
        // for the first slow start only). After a timeout the threshold bounds slow start,
        // and the queue that stood before the timeout, still draining, would end it at once,
        // a few packets into it: on a cellular link whose rate falls for a second, a timeout
        // left the window at a tenth of the pipe, for CUBIC's slow growth to refill.
        let unbounded_slow_start = self.cubic.in_slow_start() && self.cubic.ssthresh() == u64::MAX;
        if unbounded_slow_start && self.queue_standing() {
            // The last doubling overshot by up to a window: back toward the pipe, as BBR
            // drains, but by half at most, since the delivery rate measured in slow start
            // lags the window by a round trip and can under-state the pipe.
            let half = self.cubic.window() as f64 / 2.0;
            self.cubic
                .end_slow_start(self.pipe().map_or(half, |pipe| pipe.max(half)));
            self.ceiling = Some(self.cubic.window() as f64);
            self.ceiling_at = arrival.now;
        } else if !self.cubic.in_slow_start() && self.carries_more_than_the_ceiling(arrival) {
            // The queue that ended the last slow start, or the loss that cut the window, was
            // the link's rate falling for a while (a cellular link's fade), not the pipe:
            // find the new pipe as the first slow start did, rather than by CUBIC's growth of
            // about a packet per round trip (seconds to refill a link whose rate rose 5-fold).
            self.restarts += 1;
            self.cubic.restart_slow_start();
        }
    }
    fn on_loss(&mut self, loss: &Loss) {
        if loss.by_timeout {
            // Nothing came back for a whole RTO: not a random loss, whatever the queue.
            self.congestive_losses += 1;
            self.cubic.on_loss(loss);
            if let Some(pipe) = self.pipe() {
                self.cubic.lift_ssthresh(pipe);
            }
            return;
        }
        if !self.loss_is_congestion() {
            self.random_losses += 1;
            self.random_loss += self.loss_gain * (1.0 - self.random_loss);
            return;
        }
        self.congestive_losses += 1;
        let before = self.cubic.window() as f64;
        self.cubic.on_loss(loss);
        if let Some(pipe) = self.pipe() {
            // Each congestion event still takes `min_cut` off, so an over-estimated pipe
            // cannot hold a queue full.
            self.cubic
                .lift_window(pipe.min(before * (1.0 - self.min_cut)).max(self.mss));
        }
        self.ceiling = Some(self.cubic.window() as f64);
        self.ceiling_at = loss.now;
    }
    fn window(&self) -> u64 {
        self.cubic.window()
    }
    fn pacing_rate(&self) -> Option<u64> {
        let ratio = if self.cubic.in_slow_start() {
            self.slow_start_pacing
        } else {
            self.pacing
        };
        let srtt = self.smoothed_rtt?.as_secs_f64();
        (ratio > 0.0 && srtt > 0.0).then(|| (ratio * self.cubic.window() as f64 / srtt) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_model::{MSS, Model, RATE, at, ms};
    use super::*;

    fn weft() -> Weft {
        Weft::new(&WeftConfig::default(), Instant::ZERO, MSS)
    }

    fn cubic() -> Cubic {
        Cubic::new(&CubicConfig::default(), Instant::ZERO, MSS)
    }

    #[test]
    fn factory_builds_with_cubics_initial_window() {
        let cc = WeftConfig::default().build(Instant::ZERO, 1200);
        assert_eq!(cc.name(), "weft");
        assert_eq!(cc.window(), 12_000);
        assert_eq!(cc.pacing_rate(), None);
        assert_eq!(WeftConfig::default().window(), WindowConfig::default());
    }

    /// Window (bytes) when slow start ended on a 100 Mbit/s, 40 ms path losing every 10th
    /// request with 1000 packets of buffer, and the goodput over the first 3 s.
    fn slow_start_exit_on_a_long_fat_lossy_path(config: &WeftConfig) -> (f64, f64) {
        let mut m = Model::new(Weft::new(config, Instant::ZERO, MSS), 10.0 * RATE, ms(40));
        m.loss_every = Some(10);
        m.buffer = Some(1000 * MSS);
        let mut exit = None;
        while exit.is_none() && m.now < at(ms(3_000)) {
            m.run(m.now + ms(1));
            if !m.cc.cubic().in_slow_start() {
                exit = Some(m.cc.window() as f64);
            }
        }
        m.run(at(ms(3_000)));
        (exit.expect("slow start ended"), m.goodput(ms(0), ms(3_000)))
    }

    #[test]
    fn paced_slow_start_runs_on_to_the_pipe() {
        let bdp = 10.0 * RATE * 0.040;
        let (paced_exit, paced) = slow_start_exit_on_a_long_fat_lossy_path(&WeftConfig::default());
        let unpaced_config = WeftConfig {
            slow_start_pacing: 0.0,
            pacing: 0.0,
            ..WeftConfig::default()
        };
        let (unpaced_exit, unpaced) = slow_start_exit_on_a_long_fat_lossy_path(&unpaced_config);
        // Unpaced, the bursts' queue ends slow start before half the pipe, and the first 3 s
        // deliver less than half the link; paced, slow start runs on past the pipe.
        assert!(unpaced_exit < 0.5 * bdp, "unpaced exit at {unpaced_exit} of {bdp}");
        assert!(paced_exit > 0.9 * bdp, "paced exit at {paced_exit} of {bdp}");
        assert!(paced > 1.5 * unpaced, "goodput paced {paced}, unpaced {unpaced}");
    }

    #[test]
    fn requests_are_paced_at_twice_the_window_in_slow_start_and_a_fifth_more_after() {
        let mut m = Model::new(weft(), RATE, ms(40));
        m.run(at(ms(100)));
        assert!(m.cc.cubic().in_slow_start());
        let per_srtt = |cc: &Weft| cc.window() as f64 / cc.smoothed_rtt.unwrap().as_secs_f64();
        let ratio = m.cc.pacing_rate().unwrap() as f64 / per_srtt(&m.cc);
        assert!((ratio - 2.0).abs() < 0.01, "slow start: {ratio}");
        m.run(at(ms(3_000)));
        assert!(!m.cc.cubic().in_slow_start());
        let ratio = m.cc.pacing_rate().unwrap() as f64 / per_srtt(&m.cc);
        assert!((ratio - 1.2).abs() < 0.01, "congestion avoidance: {ratio}");
    }

    #[test]
    fn random_loss_keeps_the_link_full_where_cubic_starves() {
        // 10 Mbit/s, 40 ms, every 10th request lost whatever the queue; 100 packets of buffer.
        let mut lossy = Model::new(weft(), RATE, ms(40));
        lossy.loss_every = Some(10);
        lossy.buffer = Some(100 * MSS);
        lossy.run(at(ms(20_000)));
        let goodput = lossy.goodput(ms(5_000), ms(20_000));
        assert!(goodput > 0.9 * RATE, "weft goodput {goodput}");
        let (random, congestive) = lossy.cc.losses();
        assert!(random > 10 * congestive, "random {random}, congestive {congestive}");
        // No jitter: the pipe is sized by the minimum RTT alone.
        assert_eq!(lossy.cc.jitter_delay(), Duration::ZERO);
        // The random-loss estimate finds the one-in-ten.
        let p = lossy.cc.random_loss_rate();
        assert!((0.06..0.14).contains(&p), "{p}");
        // The same path under CUBIC: every loss is a reduction, and the Mathis bound
        // (1.22 · MSS ÷ (RTT · √0.1) ≈ 0.3 · RATE here) holds it far below the link.
        let mut reference = Model::new(cubic(), RATE, ms(40));
        reference.loss_every = Some(10);
        reference.buffer = Some(100 * MSS);
        reference.run(at(ms(20_000)));
        let cubic_goodput = reference.goodput(ms(5_000), ms(20_000));
        assert!(cubic_goodput < 0.5 * RATE, "cubic goodput {cubic_goodput}");
    }

    #[test]
    fn congestion_still_cuts_the_window_and_drains_the_queue() {
        // No random loss, 100 packets of buffer: every loss is an overflow with a queue.
        let mut m = Model::new(weft(), RATE, ms(40));
        m.buffer = Some(100 * MSS);
        m.rates.push((at(ms(10_000)), RATE / 2.0));
        m.run(at(ms(20_000)));
        let (random, congestive) = m.cc.losses();
        assert!(congestive > 0);
        assert_eq!(random, 0);
        assert!(m.goodput(ms(3_000), ms(10_000)) > 0.95 * RATE);
        // Half the rate: the window comes down with it, and the link stays full.
        assert!(m.goodput(ms(12_000), ms(20_000)) > 0.95 * RATE / 2.0);
        let window = m.cc.window() as f64;
        let bdp = RATE / 2.0 * 0.040;
        // At most the pipe plus the 100-packet buffer, and at least the pipe.
        assert!(window < bdp + 100.0 * MSS as f64, "window {window}, bdp {bdp}");
        assert!(window > 0.9 * bdp, "window {window}, bdp {bdp}");
    }

    #[test]
    fn slow_start_ends_when_the_queue_appears() {
        // An unbounded buffer and no loss: CUBIC would double forever; weft stops once the
        // RTT rises past the threshold (40 ms ÷ 8 = 5 ms).
        let mut m = Model::new(weft(), RATE, ms(40));
        m.run(at(ms(3_000)));
        assert!(!m.cc.cubic().in_slow_start());
        // The overshoot of the last doubling (a 64 ms queue at 0.3 s) drains by half within
        // a round trip, and congestion avoidance is slow to build the queue again.
        let after_exit = m.mean_queue(ms(350), ms(600));
        assert!(after_exit < 0.035, "mean queue {after_exit}");
        assert!(m.goodput(ms(350), ms(3_000)) > 0.95 * RATE);
        // CUBIC doubles on: with no loss to stop it, its queue only grows.
        let mut reference = Model::new(cubic(), RATE, ms(40));
        reference.run(at(ms(1_000)));
        let cubic_queue = reference.mean_queue(ms(350), ms(600));
        assert!(cubic_queue > 0.1, "cubic mean queue {cubic_queue}");
    }

    #[test]
    fn losses_are_random_without_a_queue_and_congestion_with_one() {
        let mut cc = weft();
        // Ten packets delivered per 40 ms round trip: 312.5 kB/s, a pipe of 12.5 kB.
        let mut delivered = 10 * MSS;
        let mut arrival = |now: Instant, rtt: Duration| {
            delivered += MSS;
            DataArrival {
                now,
                sent: now - rtt,
                bytes: MSS,
                rtt: Some(rtt),
                smoothed_rtt: ms(40),
                min_rtt: ms(40),
                in_flight_bytes: 0,
                delivered_bytes: delivered,
                delivered_bytes_at_send: delivered.saturating_sub(10 * MSS),
                delivered_time_at_send: now - ms(40),
                app_limited: false,
            }
        };
        let loss = |now: Instant| Loss {
            now,
            sent: now - ms(40),
            lost_bytes: MSS,
            in_flight_bytes: 0,
            by_timeout: false,
        };
        // RTT at its minimum, the queue 0. The threshold: 40 ÷ 8 = 5 ms, but 3 packets of
        // 1250 bytes at 312.5 kB/s take 12 ms.
        cc.on_data(&arrival(at(ms(100)), ms(40)));
        assert_eq!(cc.queue_threshold(), ms(12));
        assert_eq!(cc.queue_delay(), Some(ms(0)));
        let before = cc.window();
        cc.on_loss(&loss(at(ms(101))));
        assert_eq!((cc.window(), cc.losses()), (before, (1, 0)));
        // 4 ms above: still random. The windowed minimum forgets the 40 ms sample after
        // one minimum RTT.
        cc.on_data(&arrival(at(ms(200)), ms(44)));
        assert_eq!(cc.queue_delay(), Some(ms(4)));
        cc.on_loss(&loss(at(ms(201))));
        assert_eq!(cc.losses(), (2, 0));
        assert!(cc.cubic().in_slow_start());
        // 20 ms above: the queue ends slow start, the window back to the pipe (12.5 kB over
        // 1 − p for the two random losses; half the window, 13 packets, is less).
        cc.on_data(&arrival(at(ms(300)), ms(60)));
        assert!(!cc.cubic().in_slow_start());
        let pipe = cc.pipe().unwrap();
        assert!((12_500.0..12_700.0).contains(&pipe), "{pipe}");
        assert_eq!(cc.window(), pipe as u64);
        // A loss now is congestion: CUBIC cuts to 0.7, and Westwood+'s floor lifts the
        // window back toward the pipe, less the 5 % every congestion event takes at least.
        cc.on_loss(&loss(at(ms(301))));
        assert_eq!(cc.losses(), (2, 1));
        assert_eq!(cc.cubic().ssthresh(), (0.7 * pipe) as u64);
        assert_eq!(cc.window(), (0.95 * pipe as u64 as f64) as u64);
    }

    #[test]
    fn delay_jitter_is_neither_a_queue_nor_congestion() {
        // 10 Mbit/s, 40 ms, up to 40 ms more on the way back (order kept), every 100th
        // request lost whatever the queue, 100 packets of buffer.
        let mut m = Model::new(weft(), RATE, ms(40));
        m.jitter = Some(ms(40));
        m.loss_every = Some(100);
        m.buffer = Some(100 * MSS);
        m.run(at(ms(20_000)));
        let goodput = m.goodput(ms(5_000), ms(20_000));
        // Before weft told jitter from a queue: 0.16 of the link, the pipe sized by the
        // minimum RTT (13.5 kB) and 33 of 34 losses read as congestion. Either half of the
        // change alone (the pipe sized by the jittered RTT, losses judged against the highest
        // RTT) gave 0.35.
        assert!(goodput > 0.6 * RATE, "goodput {goodput}");
        assert!(m.cc.jitter_delay() > ms(20), "{:?}", m.cc.jitter_delay());
        let (random, congestive) = m.cc.losses();
        assert!(random > congestive, "random {random}, congestive {congestive}");
    }

    #[test]
    fn a_link_whose_rate_rises_is_refilled_by_slow_start() {
        // 2 Mbit/s for 2 s, where the first slow start ends, then 20 Mbit/s (a cellular link
        // out of a fade); 40 ms, 100 packets of buffer.
        let mut m = Model::new(weft(), RATE / 5.0, ms(40));
        m.buffer = Some(100 * MSS);
        m.rates.push((at(ms(2_000)), 2.0 * RATE));
        m.run(at(ms(4_000)));
        // The window at the 2 Mbit/s pipe is 8 packets; the new pipe is 80. Over the 1.5 s
        // from 0.5 s after the rise, CUBIC's growth of about a packet per round trip gave
        // 0.51 of the link; slow start begun again gives 0.89.
        let goodput = m.goodput(ms(2_500), ms(4_000));
        assert!(goodput > 0.8 * 2.0 * RATE, "goodput {goodput}");
        assert!(m.cc.restarts() > 0);
    }

    #[test]
    fn a_fade_and_a_timeout_do_not_hold_the_window_down() {
        // 10 Mbit/s, 40 ms, 100 packets of buffer; at 5 s the rate falls to 0.5 Mbit/s for
        // 1 s (the queue stands for seconds) and the path times out; then the rate is back.
        let mut m = Model::new(weft(), RATE, ms(40));
        m.buffer = Some(100 * MSS);
        m.rates.push((at(ms(5_000)), RATE / 20.0));
        m.rates.push((at(ms(6_000)), RATE));
        m.run(at(ms(5_500)));
        let now = m.now;
        m.cc.on_loss(&Loss {
            now,
            sent: now - ms(400),
            lost_bytes: MSS,
            in_flight_bytes: 0,
            by_timeout: true,
        });
        assert_eq!(m.cc.window(), MSS);
        m.run(at(ms(8_000)));
        // Slow start after the timeout climbs to its threshold: when it too ended at the
        // queue that was still draining, the window stayed at a few packets and the link
        // ran at 0.08 of its rate from 0.5 s to 1.5 s after the fade.
        let goodput = m.goodput(ms(6_500), ms(7_500));
        assert!(goodput > 0.9 * RATE, "goodput {goodput}");
    }

    #[test]
    fn a_link_whose_rate_holds_never_restarts_slow_start() {
        // Random loss, congestion, and delay jitter on fixed-rate links: the flight never
        // exceeds the ceiling without a queue, so slow start happens once.
        let mut lossy = Model::new(weft(), RATE, ms(40));
        lossy.loss_every = Some(10);
        lossy.buffer = Some(100 * MSS);
        lossy.run(at(ms(20_000)));
        let mut congested = Model::new(weft(), RATE, ms(40));
        congested.buffer = Some(20 * MSS);
        congested.run(at(ms(20_000)));
        let mut short = Model::new(weft(), RATE, ms(8));
        short.buffer = Some(20 * MSS);
        short.run(at(ms(20_000)));
        let (_, congestive) = congested.cc.losses();
        assert!(congestive > 2, "{congestive}");
        assert_eq!(
            (lossy.cc.restarts(), congested.cc.restarts(), short.cc.restarts()),
            (0, 0, 0)
        );
    }

    #[test]
    fn timeout_collapses_and_slow_start_climbs_back_to_the_pipe() {
        let mut m = Model::new(weft(), RATE, ms(40));
        m.loss_every = Some(10);
        m.buffer = Some(100 * MSS);
        m.run(at(ms(5_000)));
        let pipe = m.cc.pipe().unwrap();
        // RATE · 40 ms = 50 kB, over (1 − p) for the random loss the model charges no rate for.
        assert!((45_000.0..62_000.0).contains(&pipe), "{pipe}");
        let now = m.now;
        m.cc.on_loss(&Loss {
            now,
            sent: now - ms(300),
            lost_bytes: MSS,
            in_flight_bytes: 0,
            by_timeout: true,
        });
        assert_eq!(m.cc.window(), MSS);
        assert!(
            m.cc.cubic().ssthresh() as f64 >= pipe.floor(),
            "{}",
            m.cc.cubic().ssthresh()
        );
    }
}
