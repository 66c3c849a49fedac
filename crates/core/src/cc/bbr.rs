//! BBR v1 congestion control (Cardwell et al. 2016), receiver-driven with paced requests.

use std::collections::VecDeque;

use super::{Controller, ControllerFactory, DataArrival, Loss, WindowConfig};
use crate::estimate::FullPipe;
use crate::time::{Duration, Instant};

/// ProbeBW's pacing-gain cycle (paper §"Steady-state behavior"): probe for more bandwidth
/// for one RTprop at 1.25, drain the queue that built at 0.75, then cruise at 1 for six.
pub const PACING_GAIN_CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];

/// BBR's settings; windows are counted in packets of the path's `mss`.
#[derive(Clone, Debug)]
pub struct BbrConfig {
    /// Window before the first bandwidth estimate (10 packets), and floor of the window (4
    /// packets, Linux `bbr_cwnd_min_target`: enough to keep the delivery-rate samples coming
    /// at any rate).
    pub window: WindowConfig,
    /// Startup's pacing and window gain, unitless (2/ln 2 ≈ 2.885: the smallest gain that
    /// doubles the delivery rate every round trip).
    pub high_gain: f64,
    /// ProbeBW's window gain, unitless (2: cwnd = 2·BDP absorbs delayed and stretched
    /// arrivals without starving the pipe).
    pub cwnd_gain: f64,
    /// Length of the BtlBw max filter, round trips (10).
    pub bw_window_rounds: u64,
    /// Length of the RTprop min filter, and so the interval between ProbeRTTs (10 s).
    pub min_rtt_window: Duration,
    /// Time ProbeRTT holds the window down (200 ms).
    pub probe_rtt_duration: Duration,
    /// Window during ProbeRTT, packets (4).
    pub probe_rtt_window_packets: u64,
    /// Startup ends when BtlBw grows less than this factor (1.25) ...
    pub full_bw_growth: f64,
    /// ... for this many round trips in a row (3).
    pub full_bw_rounds: u32,
}

impl Default for BbrConfig {
    fn default() -> Self {
        BbrConfig {
            window: WindowConfig {
                min_packets: 4,
                ..WindowConfig::default()
            },
            high_gain: 2.0 / std::f64::consts::LN_2,
            cwnd_gain: 2.0,
            bw_window_rounds: 10,
            min_rtt_window: Duration::from_secs(10),
            probe_rtt_duration: Duration::from_millis(200),
            probe_rtt_window_packets: 4,
            full_bw_growth: 1.25,
            full_bw_rounds: 3,
        }
    }
}

impl ControllerFactory for BbrConfig {
    fn name(&self) -> &'static str {
        "bbr"
    }
    fn build(&self, now: Instant, mss: u64) -> Box<dyn Controller> {
        Box::new(Bbr::new(self, now, mss))
    }
}

/// BBR's modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BbrState {
    /// Doubling the rate every round trip until BtlBw stops growing.
    Startup,
    /// Draining the queue Startup built, down to one BDP in flight.
    Drain,
    /// Cruising at BtlBw, cycling the pacing gain to probe for more.
    ProbeBw,
    /// Holding the window at 4 packets to let the queue empty and measure RTprop afresh.
    ProbeRtt,
}

/// Windowed maximum of the delivery rate over the last `window` round trips: the best
/// sample of each round, newest last (at most `window` entries). The window ends at the
/// newest sample, not at the current round: as Linux's `minmax_running_max`, old samples
/// give way only to a new one, so rounds without a sample (all application-limited, as in
/// ProbeRTT) keep the estimate instead of emptying it.
#[derive(Clone, Debug)]
struct MaxFilter {
    window: u64,
    rounds: VecDeque<(u64, f64)>,
}

impl MaxFilter {
    fn update(&mut self, round: u64, value: f64) {
        while self.rounds.front().is_some_and(|&(r, _)| r + self.window <= round) {
            self.rounds.pop_front();
        }
        match self.rounds.back_mut() {
            Some((r, best)) if *r == round => *best = best.max(value),
            _ => self.rounds.push_back((round, value)),
        }
    }
    fn max(&self) -> f64 {
        self.rounds.iter().map(|&(_, v)| v).fold(0.0, f64::max)
    }
}

/// BBR v1 over requests.
///
/// BBR models the path as a bottleneck bandwidth (BtlBw, the windowed maximum of the
/// delivery rate) and a round-trip propagation time (RTprop, the windowed minimum RTT), and
/// paces at `pacing_gain · BtlBw` with `cwnd_gain · BDP` in flight. The state machine and
/// its constants follow the paper ("BBR: Congestion-Based Congestion Control", ACM Queue
/// 14(5), 2016), the IETF draft (draft-cardwell-iccrg-bbr-congestion-control-00) and
/// Linux's `tcp_bbr.c` for the details the paper leaves out. Here the client paces its
/// requests: each asks for one data packet, so the data comes back at the requests' rate.
#[derive(Debug)]
pub struct Bbr {
    config: BbrConfig,
    initial_window: u64,
    min_window: u64,
    probe_rtt_window: u64,
    state: BbrState,
    cwnd: u64,
    /// The window before a loss or ProbeRTT, to return to afterwards.
    prior_cwnd: u64,
    /// Bytes per second; `None` until an RTT is known.
    pacing_rate: Option<f64>,
    pacing_gain: f64,
    cwnd_gain: f64,

    btl_bw: MaxFilter,
    /// Round trips counted in delivered bytes (Linux `rtt_cnt`): a round ends when data
    /// for a request sent after its start arrives.
    round_count: u64,
    next_round_delivered: u64,
    round_start: bool,
    delivered: u64,

    rt_prop: Option<Duration>,
    rt_prop_stamp: Instant,

    /// Startup's plateau detector (BtlBw stopped growing).
    full_pipe: FullPipe,

    cycle_index: usize,
    cycle_stamp: Instant,

    probe_rtt_done: Option<Instant>,
    probe_rtt_round_done: bool,
    /// Requests sent while at most this many bytes were delivered give application-limited
    /// rate samples: ProbeRTT marks everything it sends so (Linux `bbr_update_min_rtt` sets
    /// `tp->app_limited` while in ProbeRTT; `tcp_rate_gen` clears it once delivered passes).
    app_limited_until: Option<u64>,

    /// Losses were reported since the last arrival.
    lost_since_arrival: bool,
    /// Requests sent up to this time belong to the loss episode being recovered from.
    recovery_start: Option<Instant>,
    /// First round of a recovery: keep the window at what is in flight plus what arrives.
    packet_conservation: bool,
    collapsed_at: Option<Instant>,
}

impl Bbr {
    pub fn new(config: &BbrConfig, now: Instant, mss: u64) -> Self {
        let mss = mss.max(1);
        let min_window = config.window.min_bytes(mss);
        let initial_window = config.window.initial_bytes(mss);
        Bbr {
            config: config.clone(),
            initial_window,
            min_window,
            probe_rtt_window: config.probe_rtt_window_packets.max(1) * mss,
            state: BbrState::Startup,
            cwnd: initial_window,
            prior_cwnd: initial_window,
            pacing_rate: None,
            pacing_gain: config.high_gain,
            cwnd_gain: config.high_gain,
            btl_bw: MaxFilter {
                window: config.bw_window_rounds.max(1),
                rounds: VecDeque::new(),
            },
            round_count: 0,
            next_round_delivered: 0,
            round_start: false,
            delivered: 0,
            rt_prop: None,
            rt_prop_stamp: now,
            full_pipe: FullPipe::new(config.full_bw_growth, config.full_bw_rounds),
            cycle_index: 0,
            cycle_stamp: now,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            app_limited_until: None,
            lost_since_arrival: false,
            recovery_start: None,
            packet_conservation: false,
            collapsed_at: None,
        }
    }
    pub fn state(&self) -> BbrState {
        self.state
    }
    /// BtlBw, bytes per second (0 before the first delivery-rate sample).
    pub fn btl_bw(&self) -> f64 {
        self.btl_bw.max()
    }
    /// RTprop, once an RTT has been sampled.
    pub fn rt_prop(&self) -> Option<Duration> {
        self.rt_prop
    }
    pub fn pacing_gain(&self) -> f64 {
        self.pacing_gain
    }
    pub fn cwnd_gain(&self) -> f64 {
        self.cwnd_gain
    }
    /// Round trips counted so far.
    pub fn round_count(&self) -> u64 {
        self.round_count
    }
    /// Startup found the pipe full (BtlBw stopped growing).
    pub fn full_bw_reached(&self) -> bool {
        self.full_pipe.is_full()
    }

    /// `gain · BtlBw · RTprop` in bytes; the initial window while either is unknown.
    fn bdp(&self, gain: f64) -> u64 {
        match self.rt_prop {
            Some(rt_prop) => (gain * self.btl_bw() * rt_prop.as_secs_f64()) as u64,
            None => self.initial_window,
        }
    }

    /// The arrival's rate sample shows what the path was given to carry, not what it can
    /// carry: the sender had too little to send, or held its flight at ProbeRTT's 4 packets.
    fn app_limited(&self, a: &DataArrival) -> bool {
        a.app_limited
            || self
                .app_limited_until
                .is_some_and(|until| a.delivered_bytes_at_send <= until)
    }

    /// Counts round trips and feeds the delivery-rate sample to the BtlBw filter.
    fn update_bw(&mut self, a: &DataArrival) {
        self.round_start = false;
        if a.delivered_bytes_at_send >= self.next_round_delivered {
            self.next_round_delivered = self.delivered;
            self.round_count += 1;
            self.round_start = true;
            self.packet_conservation = false;
        }
        // Delivery rate (paper §"Delivery rate"; Cheng et al., draft-cheng-iccrg-delivery-
        // rate-estimation): bytes delivered between the send and the arrival, over the time
        // since the delivery preceding the send. The interval spans at least this request's
        // round trip, so a burst of arrivals cannot pass for a fast path; one shorter than
        // the path's min RTT comes from a bad clock or bookkeeping and is dropped.
        let interval = a.now - a.delivered_time_at_send;
        if interval.is_zero() || interval < a.min_rtt {
            return;
        }
        let delivered = a.delivered_bytes.saturating_sub(a.delivered_bytes_at_send);
        let bw = delivered as f64 / interval.as_secs_f64();
        // An application-limited sample shows what the path carried, not what it can carry:
        // it may raise the estimate but never age out a higher one.
        if !self.app_limited(a) || bw >= self.btl_bw() {
            self.btl_bw.update(self.round_count, bw);
        }
    }

    fn enter_probe_bw(&mut self, now: Instant) {
        self.state = BbrState::ProbeBw;
        // Linux starts the cycle at a random phase other than the 0.75 one (index
        // 7 − rand(7), advanced by one), so paths sharing a bottleneck do not probe in
        // lockstep. No generator reaches a controller, so the phase comes from the clock,
        // which differs between paths in practice.
        let r = ((now.as_nanos() / 1_000) % 7) as usize;
        self.cycle_index = (PACING_GAIN_CYCLE.len() - r) % PACING_GAIN_CYCLE.len();
        self.cycle_stamp = now;
    }

    /// Paper §"ProbeBW": each phase lasts one RTprop; the 1.25 phase also waits until the
    /// extra bytes are in flight (or a loss says there is no room), and the 0.75 phase ends
    /// early once the flight is back to one BDP.
    fn update_cycle_phase(&mut self, a: &DataArrival) {
        if self.state != BbrState::ProbeBw {
            return;
        }
        let prior_in_flight = a.in_flight_bytes + a.bytes;
        let full_length = self.rt_prop.is_some_and(|rt_prop| a.now - self.cycle_stamp > rt_prop);
        let gain = PACING_GAIN_CYCLE[self.cycle_index];
        let next = if gain > 1.0 {
            full_length && (self.lost_since_arrival || prior_in_flight >= self.bdp(gain))
        } else if gain < 1.0 {
            full_length || prior_in_flight <= self.bdp(1.0)
        } else {
            full_length
        };
        if next {
            self.cycle_index = (self.cycle_index + 1) % PACING_GAIN_CYCLE.len();
            self.cycle_stamp = a.now;
        }
    }

    /// Paper §"Startup and Drain": the pipe is full once three rounds in a row fail to
    /// raise BtlBw by 25%.
    fn check_full_bw_reached(&mut self, a: &DataArrival) {
        if self.full_pipe.is_full() || !self.round_start || self.app_limited(a) {
            return;
        }
        self.full_pipe.on_round(self.btl_bw());
    }

    fn check_drain(&mut self, a: &DataArrival) {
        if self.state == BbrState::Startup && self.full_pipe.is_full() {
            self.state = BbrState::Drain;
        }
        if self.state == BbrState::Drain && a.in_flight_bytes <= self.bdp(1.0) {
            self.enter_probe_bw(a.now);
        }
    }

    /// RTprop filter and ProbeRTT (paper §"ProbeRTT"): when RTprop has not been seen for
    /// 10 s, hold the window at 4 packets for 200 ms and one round trip, so the queue
    /// empties and the true propagation time shows.
    fn update_min_rtt(&mut self, a: &DataArrival) {
        let expired = self.rt_prop.is_some() && a.now > self.rt_prop_stamp + self.config.min_rtt_window;
        // Only a strictly lower RTT restarts the 10 s (as Linux does; the draft's `<=`
        // would let a path with a steady RTT skip ProbeRTT forever, and with it the check
        // that the propagation time has not grown).
        if let Some(rtt) = a.rtt {
            if self.rt_prop.is_none_or(|rt_prop| rtt < rt_prop) || expired {
                self.rt_prop = Some(rtt);
                self.rt_prop_stamp = a.now;
            }
        }
        if expired && self.state != BbrState::ProbeRtt {
            self.save_cwnd();
            self.state = BbrState::ProbeRtt;
            self.probe_rtt_done = None;
        }
        if self.state != BbrState::ProbeRtt {
            return;
        }
        // ProbeRTT's rounds at 4 packets measure the rate of 4 packets per RTT, not the
        // bottleneck's. On a short path its 200 ms span more rounds than the BtlBw filter
        // keeps (10 at 20 ms), and the filter would forget the bottleneck, leaving ProbeBW
        // to regrow from 4 packets by 1.25 per 8-round cycle (seconds at 30 Mbit/s).
        self.app_limited_until = Some(self.delivered + a.in_flight_bytes);
        match self.probe_rtt_done {
            None if a.in_flight_bytes <= self.probe_rtt_window => {
                self.probe_rtt_done = Some(a.now + self.config.probe_rtt_duration);
                self.probe_rtt_round_done = false;
                self.next_round_delivered = self.delivered;
            }
            None => {}
            Some(done) => {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done && a.now >= done {
                    self.rt_prop_stamp = a.now;
                    self.cwnd = self.cwnd.max(self.prior_cwnd);
                    if self.full_pipe.is_full() {
                        self.enter_probe_bw(a.now);
                    } else {
                        self.state = BbrState::Startup;
                    }
                }
            }
        }
    }

    fn update_gains(&mut self) {
        let high = self.config.high_gain;
        (self.pacing_gain, self.cwnd_gain) = match self.state {
            BbrState::Startup => (high, high),
            // Drain inverts Startup's gain to empty its queue within about one round.
            BbrState::Drain => (1.0 / high, high),
            BbrState::ProbeBw => (PACING_GAIN_CYCLE[self.cycle_index], self.config.cwnd_gain),
            BbrState::ProbeRtt => (1.0, 1.0),
        };
    }

    fn set_pacing_rate(&mut self) {
        let bw = self.btl_bw();
        let rate = if bw > 0.0 {
            self.pacing_gain * bw
        } else if let Some(rt_prop) = self.rt_prop.filter(|d| !d.is_zero()) {
            // No rate sample yet: pace the initial window over one RTT at Startup's gain
            // (Linux `bbr_init_pacing_rate_from_rtt`).
            self.config.high_gain * self.cwnd as f64 / rt_prop.as_secs_f64()
        } else {
            return;
        };
        // Until the pipe is known to be full, a lower rate is noise (a round with few
        // samples), not a signal: Startup's rate only rises.
        if self.full_pipe.is_full() || self.pacing_rate.is_none_or(|r| rate > r) {
            self.pacing_rate = Some(rate);
        }
    }

    fn set_cwnd(&mut self, a: &DataArrival) {
        let acked = a.bytes;
        // Linux `bbr_set_cwnd_to_recover_or_restore`: the episode ends with data for a
        // request sent after it began; the window goes back to where it was.
        if self.recovery_start.is_some_and(|start| a.sent > start) {
            self.recovery_start = None;
            self.packet_conservation = false;
            self.cwnd = self.cwnd.max(self.prior_cwnd);
        }
        if self.packet_conservation {
            self.cwnd = self.cwnd.max(a.in_flight_bytes + acked);
        } else {
            let target = self.bdp(self.cwnd_gain);
            if self.full_pipe.is_full() {
                self.cwnd = (self.cwnd + acked).min(target);
            } else if self.cwnd < target || self.delivered < self.initial_window {
                self.cwnd += acked;
            }
            self.cwnd = self.cwnd.max(self.min_window);
        }
        if self.state == BbrState::ProbeRtt {
            self.cwnd = self.cwnd.min(self.probe_rtt_window);
        }
    }

    /// Remembers the window to return to after a loss episode or ProbeRTT; while already
    /// in one, the larger of the two.
    fn save_cwnd(&mut self) {
        if self.recovery_start.is_none() && self.state != BbrState::ProbeRtt {
            self.prior_cwnd = self.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
        }
    }
}

impl Controller for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }
    fn on_request_sent(&mut self, _now: Instant, _bytes: u64, _in_flight_bytes: u64) {}
    fn on_data(&mut self, a: &DataArrival) {
        self.delivered = self.delivered.max(a.delivered_bytes);
        // The order of Linux `bbr_main`: the model first, then the controls.
        self.update_bw(a);
        self.update_cycle_phase(a);
        self.check_full_bw_reached(a);
        self.check_drain(a);
        self.update_min_rtt(a);
        self.update_gains();
        self.set_pacing_rate();
        self.set_cwnd(a);
        self.lost_since_arrival = false;
    }
    fn on_loss(&mut self, loss: &Loss) {
        self.lost_since_arrival = true;
        // BBR does not read loss as congestion; it only keeps the flight from growing
        // while recovering (Linux `bbr_set_cwnd_to_recover_or_restore`): a new episode
        // starts a round and holds the window at what is still in flight.
        if self.recovery_start.is_none_or(|start| loss.sent > start) {
            self.save_cwnd();
            self.recovery_start = Some(loss.now);
            self.packet_conservation = true;
            self.next_round_delivered = self.delivered;
            self.cwnd = loss.in_flight_bytes.max(self.min_window);
        } else {
            self.cwnd = self.cwnd.saturating_sub(loss.lost_bytes).max(self.min_window);
        }
        if loss.by_timeout && self.collapsed_at.is_none_or(|at| loss.sent > at) {
            // A timeout means the flight is gone: restart from the floor, grow by what
            // arrives, and restore the saved window once the episode ends. The plateau
            // detector restarts too (Linux `bbr_set_state` on TCP_CA_Loss).
            self.cwnd = self.min_window;
            self.packet_conservation = false;
            self.full_pipe.restart_growth();
            self.collapsed_at = Some(loss.now);
            self.recovery_start = Some(loss.now);
        }
    }
    fn window(&self) -> u64 {
        self.cwnd
    }
    fn pacing_rate(&self) -> Option<u64> {
        self.pacing_rate.map(|r| r as u64)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::super::test_model::{MSS, Model, RATE, Sample, at, ms};
    use super::*;

    /// BBR's state and model at one arrival, beside what the shared model records.
    #[derive(Clone, Copy, Debug)]
    struct Probe {
        state: BbrState,
        btl_bw: f64,
        pacing_gain: f64,
    }

    fn probe(bbr: &Bbr) -> Probe {
        Probe {
            state: bbr.state(),
            btl_bw: bbr.btl_bw(),
            pacing_gain: bbr.pacing_gain(),
        }
    }

    /// BBR with the default settings through the shared bottleneck (deep buffer, so the
    /// queue it builds shows up as delay, never as loss).
    fn model(rate: f64, rtt: Duration) -> Model<Bbr, Probe> {
        Model::with_probe(Bbr::new(&BbrConfig::default(), Instant::ZERO, MSS), rate, rtt, probe)
    }

    /// The pacing rate at a sample, bytes per second (0 before the first).
    fn pacing(s: &Sample<Probe>) -> f64 {
        s.pacing_rate.unwrap_or(0) as f64
    }

    #[test]
    fn factory_and_initial_state() {
        let cc = BbrConfig::default().build(Instant::ZERO, 1200);
        assert_eq!(cc.name(), "bbr");
        assert_eq!(cc.window(), 12_000);
        // Nothing to pace by before an RTT or a rate is known.
        assert_eq!(cc.pacing_rate(), None);
        let bbr = Bbr::new(&BbrConfig::default(), Instant::ZERO, MSS);
        assert_eq!(bbr.state(), BbrState::Startup);
        assert!((bbr.pacing_gain() - 2.885_390).abs() < 1e-6);
    }

    #[test]
    fn max_filter_keeps_ten_rounds() {
        let mut f = MaxFilter {
            window: 10,
            rounds: VecDeque::new(),
        };
        f.update(1, 100.0);
        f.update(1, 50.0);
        f.update(2, 80.0);
        assert_eq!(f.max(), 100.0);
        // Round 1 is inside the window up to round 10, and out of it from round 11.
        f.update(10, 70.0);
        assert_eq!(f.max(), 100.0);
        f.update(11, 60.0);
        assert_eq!(f.max(), 80.0);
        f.update(12, 10.0);
        assert_eq!(f.max(), 70.0);
        assert!(f.rounds.len() <= 10);
        // Rounds without a sample keep it: the next sample, 30 rounds on, replaces it.
        assert_eq!(f.max(), 70.0);
        f.update(42, 20.0);
        assert_eq!(f.max(), 20.0);
    }

    #[test]
    fn first_sample_paces_startup_at_high_gain() {
        let mut bbr = Bbr::new(&BbrConfig::default(), Instant::ZERO, MSS);
        // A request sent at 0 answered at 40 ms, the path's first delivery:
        // 1250 B / 40 ms = 31 250 B/s; pacing 2.885 · 31 250 = 90 168 B/s.
        bbr.on_data(&DataArrival {
            now: at(ms(40)),
            sent: Instant::ZERO,
            bytes: MSS,
            rtt: Some(ms(40)),
            smoothed_rtt: ms(40),
            min_rtt: ms(40),
            in_flight_bytes: 9 * MSS,
            delivered_bytes: MSS,
            delivered_bytes_at_send: 0,
            delivered_time_at_send: Instant::ZERO,
            app_limited: false,
        });
        assert_eq!(bbr.btl_bw(), 31_250.0);
        assert_eq!(bbr.rt_prop(), Some(ms(40)));
        assert_eq!(bbr.round_count(), 1);
        let expected = 2.0 / std::f64::consts::LN_2 * 31_250.0;
        assert_eq!(bbr.pacing_rate(), Some(expected as u64));
        // Startup grows the window by what arrives.
        assert_eq!(bbr.window(), 11 * MSS);
    }

    #[test]
    fn settles_on_the_bottleneck_rate_with_a_bounded_queue() {
        let mut m = model(RATE, ms(40));
        m.run(at(ms(25_000)));
        let bdp = RATE * 0.040; // 50 000 B = 40 packets

        // Startup exits: it finds the pipe full within a few round trips (~8 at 40 ms),
        // drains, and moves on to ProbeBW.
        let left_startup = m.samples.iter().find(|s| s.probe.state != BbrState::Startup).unwrap();
        assert!(left_startup.now < at(ms(1_000)), "Startup until {:?}", left_startup.now);
        let probe_bw = m.samples.iter().find(|s| s.probe.state == BbrState::ProbeBw).unwrap();
        assert!(probe_bw.now < at(ms(1_500)));
        assert!(m.samples.iter().any(|s| s.probe.state == BbrState::Drain));
        // Startup's queue is bounded by its window: RTprop = 41 ms (propagation and one
        // packet's transmission), BDP = 41 packets, and cwnd stops growing once past
        // 2.885 · 41 = 118.3 packets, at 119: at most 119 − 41 = 78 packets (78 ms) wait.
        let startup_queue = m.between(ms(0), ms(2_000)).map(|s| s.queued).max().unwrap();
        assert!(startup_queue < ms(80), "{startup_queue:?}");

        // Steady state, from 2 s: BtlBw within ±10% of the bottleneck at every arrival.
        let steady: Vec<&Sample<Probe>> = m.between(ms(2_000), ms(25_000)).collect();
        for s in &steady {
            assert!(
                (s.probe.btl_bw / RATE - 1.0).abs() < 0.10,
                "BtlBw {} at {:?}",
                s.probe.btl_bw,
                s.now
            );
        }
        // The pacing rate cycles around R: 1.25·R, 0.75·R and R all show up in ProbeBW.
        let probing: Vec<&&Sample<Probe>> = steady.iter().filter(|s| s.probe.state == BbrState::ProbeBw).collect();
        let near = |gain: f64| probing.iter().any(|s| (pacing(s) / (gain * RATE) - 1.0).abs() < 0.10);
        assert!(near(1.25) && near(0.75) && near(1.0));
        // Its time-weighted mean is R: the gains average 1 over the 8-phase cycle.
        let mut weighted = 0.0;
        for w in probing.windows(2) {
            weighted += pacing(w[0]) * (w[1].now - w[0].now).as_secs_f64();
        }
        let span = (probing.last().unwrap().now - probing[0].now).as_secs_f64();
        let mean = weighted / span;
        assert!((mean / RATE - 1.0).abs() < 0.10, "mean pacing rate {mean}");
        // ... cycling about every 8 RTprops: count the 1.25 phases from 2 s to 9 s
        // (7 s / (8 · 40 ms) ≈ 22).
        let probes = m
            .between(ms(2_000), ms(9_000))
            .collect::<Vec<_>>()
            .windows(2)
            .filter(|w| w[1].probe.pacing_gain == 1.25 && w[0].probe.pacing_gain != 1.25)
            .count();
        assert!((15..=25).contains(&probes), "{probes} bandwidth probes");

        // The queue stays bounded: cwnd = 2·BDP allows at most one BDP (40 ms) of queue;
        // on average it is a few packets.
        let max_queue = steady.iter().map(|s| s.queued).max().unwrap();
        assert!(max_queue < ms(40), "max queue {max_queue:?}");
        let mean_queue = steady.iter().map(|s| s.queued.as_secs_f64()).sum::<f64>() / steady.len() as f64;
        assert!(mean_queue < 0.010, "mean queue {mean_queue}");
        for s in steady.iter().filter(|s| s.probe.state == BbrState::ProbeBw) {
            assert!(s.cwnd as f64 <= 2.0 * bdp * 1.1, "cwnd {} at {:?}", s.cwnd, s.now);
        }

        // The path stays full: ≥ 90% of R delivered from 2 s to 25 s, ProbeRTTs included.
        let (first, last) = (steady[0], steady[steady.len() - 1]);
        let goodput = (last.delivered - first.delivered) as f64 / (last.now - first.now).as_secs_f64();
        assert!(goodput > 0.9 * RATE, "goodput {goodput}");
    }

    #[test]
    fn probes_rtt_every_ten_seconds_with_four_packets() {
        let mut m = model(RATE, ms(40));
        m.run(at(ms(25_000)));
        // ProbeRTT episodes: runs of consecutive arrivals in that state.
        let mut episodes: Vec<(Instant, Instant)> = vec![];
        let mut open: Option<Instant> = None;
        for s in &m.samples {
            match (s.probe.state == BbrState::ProbeRtt, open) {
                (true, None) => open = Some(s.now),
                (false, Some(start)) => {
                    episodes.push((start, s.now));
                    open = None;
                }
                _ => {}
            }
            if s.probe.state == BbrState::ProbeRtt {
                assert!(s.cwnd <= 4 * MSS, "cwnd {} in ProbeRTT", s.cwnd);
            }
        }
        // RTprop was last lowered early on (the first RTTs see no queue), so the filter
        // expires about 10 s later, and again 10 s after that ProbeRTT refreshed it.
        assert_eq!(episodes.len(), 2, "{episodes:?}");
        let (start, end) = episodes[0];
        assert!(start > at(ms(10_000)) && start < at(ms(10_600)), "{start:?}");
        // At least 200 ms and one round trip at 4 packets, plus draining down to them.
        let held = end - start;
        assert!(held >= ms(200) && held < ms(400), "{held:?}");
        assert!(episodes[1].0 - start > ms(10_000) && episodes[1].0 - start < ms(10_600));
        // RTprop is the propagation time plus one packet's transmission (1 ms).
        assert!(m.cc.rt_prop().unwrap() <= ms(42));
        // And back to ProbeBW at the old window afterwards.
        let after = m.samples.iter().find(|s| s.now > end + ms(100)).unwrap();
        assert_eq!(after.probe.state, BbrState::ProbeBw);
        assert!(after.cwnd > 40 * MSS, "cwnd {}", after.cwnd);
    }

    #[test]
    fn probe_rtt_keeps_the_bottleneck_rate_on_a_short_path() {
        // At 20 ms, ProbeRTT's 200 ms at 4 packets span more than the filter's 10 rounds:
        // their samples are application-limited, so BtlBw and the window come back whole.
        let mut m = model(RATE, ms(20));
        m.run(at(ms(25_000)));
        let probe_rtt = m.samples.iter().filter(|s| s.probe.state == BbrState::ProbeRtt).count();
        assert!(probe_rtt > 0, "no ProbeRTT");
        for s in m.between(ms(2_000), ms(25_000)) {
            assert!(
                (s.probe.btl_bw / RATE - 1.0).abs() < 0.10,
                "BtlBw {} at {:?}",
                s.probe.btl_bw,
                s.now
            );
        }
        let steady: Vec<&Sample<Probe>> = m.between(ms(2_000), ms(25_000)).collect();
        let (first, last) = (steady[0], steady[steady.len() - 1]);
        let goodput = (last.delivered - first.delivered) as f64 / (last.now - first.now).as_secs_f64();
        assert!(goodput > 0.95 * RATE, "goodput {goodput}");
    }

    #[test]
    fn follows_a_drop_in_the_bottleneck_rate() {
        let mut m = model(RATE, ms(40));
        // Halve the rate at 5 s. The old rate ages out of the max filter after 10 rounds,
        // which the queue built meanwhile stretches to ~160 ms each: by ~6.6 s.
        m.rates.push((at(ms(5_000)), RATE / 2.0));
        m.run(at(ms(12_000)));
        for s in m.between(ms(7_000), ms(12_000)) {
            assert!(
                (s.probe.btl_bw / (RATE / 2.0) - 1.0).abs() < 0.10,
                "BtlBw {} at {:?}",
                s.probe.btl_bw,
                s.now
            );
        }
        // cwnd = 2·BDP at the new rate again: at most one BDP queued, i.e. one RTprop
        // (41 ms) plus a packet's transmission (2 ms).
        let max_queue = m.between(ms(7_000), ms(12_000)).map(|s| s.queued).max().unwrap();
        assert!(max_queue <= ms(43), "{max_queue:?}");
    }

    fn arrival(now: Instant, sent: Instant, in_flight: u64, delivered: u64) -> DataArrival {
        DataArrival {
            now,
            sent,
            bytes: MSS,
            rtt: Some(now - sent),
            smoothed_rtt: now - sent,
            min_rtt: now - sent,
            in_flight_bytes: in_flight,
            delivered_bytes: delivered,
            delivered_bytes_at_send: delivered.saturating_sub(40 * MSS),
            delivered_time_at_send: sent,
            app_limited: false,
        }
    }

    #[test]
    fn loss_holds_the_flight_and_the_episode_end_restores_the_window() {
        let mut m = model(RATE, ms(40));
        m.run(at(ms(3_000)));
        let before = m.cc.window();
        assert!(before > 60 * MSS);
        let now = m.now;
        let delivered = m.delivered;
        // A loss with 30 packets still in flight: the window holds at the flight.
        m.cc.on_loss(&Loss {
            now,
            sent: now - ms(45),
            lost_bytes: MSS,
            in_flight_bytes: 30 * MSS,
            by_timeout: false,
        });
        assert_eq!(m.cc.window(), 30 * MSS);
        // Packet conservation: one packet out per packet in.
        m.cc.on_data(&arrival(now + ms(1), now - ms(40), 30 * MSS, delivered + MSS));
        assert_eq!(m.cc.window(), 31 * MSS);
        // A second loss of the same episode takes its packet off.
        m.cc.on_loss(&Loss {
            now: now + ms(2),
            sent: now - ms(39),
            lost_bytes: MSS,
            in_flight_bytes: 29 * MSS,
            by_timeout: false,
        });
        assert_eq!(m.cc.window(), 30 * MSS);
        // Data for a request sent after the episode began: back to the saved window.
        m.cc.on_data(&arrival(now + ms(50), now + ms(5), 30 * MSS, delivered + 2 * MSS));
        assert!(m.cc.window() >= before, "{} < {before}", m.cc.window());
        assert_eq!(m.cc.state(), BbrState::ProbeBw);
    }

    #[test]
    fn timeout_restarts_from_the_floor() {
        let mut m = model(RATE, ms(40));
        m.run(at(ms(3_000)));
        let before = m.cc.window();
        let now = m.now;
        m.cc.on_loss(&Loss {
            now,
            sent: now - ms(300),
            lost_bytes: MSS,
            in_flight_bytes: 0,
            by_timeout: true,
        });
        assert_eq!(m.cc.window(), 4 * MSS);
        // The bandwidth model survives: pacing continues at the estimated rate.
        assert!(m.cc.pacing_rate().unwrap() as f64 > 0.7 * RATE);
        // Old requests answered: the window grows by what arrives, up to 2·BDP.
        m.cc.on_data(&arrival(now + ms(1), now - ms(100), 0, m.delivered + MSS));
        assert_eq!(m.cc.window(), 5 * MSS);
        // A request sent after the timeout answered: the saved window is back.
        m.cc.on_data(&arrival(now + ms(45), now + ms(2), 0, m.delivered + 2 * MSS));
        assert!(m.cc.window() >= before);
    }
}
