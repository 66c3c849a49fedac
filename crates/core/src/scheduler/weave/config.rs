//! `WeaveConfig`: weave's switches, one per mechanism, and its tuning constants, each with
//! its source or the measurement that chose it.

use crate::time::Duration;

/// Everything weave can be tuned by. `Default` is the scheduler `pcdn` ships; scenario files
/// set any field under `[client] weave = { ... }` (docs/scenarios.md, docs/weave.md).
///
/// The switches turn one mechanism off each, leaving the others as they are: the arrival
/// model and the Eq. 7 order are weave itself and have none.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WeaveConfig {
    // ---- switches (all on by default) ----
    /// Pipe cap: at most `pipe_gain · R̂ · rtt ÷ (1 − loss) + pipe_allowance` in flight on a path.
    pub pipe_cap: bool,
    /// Start-up test: the larger `startup_pipe_gain` while a path's answer rate grows.
    pub startup_test: bool,
    /// Loss bursts: the pipe cap lets a path hold its longest run of losses that emptied its
    /// flight, plus the packet threshold, so that answers behind a burst declare it, not the
    /// timeout.
    pub loss_bursts: bool,
    /// End of the queue: a path whose turn lies past the queue takes the last packet only if
    /// it lands before the sooner paths get to it (else it takes it anyway).
    pub tail_wait: bool,
    /// A window cut far below its pipe counts one window per RTT in later paths' offsets, and
    /// a lossy path's at most one window per sRTT.
    pub window_cut: bool,
    /// Copies at the task's tail and, with the buffer full, of overdue or lossy-path requests.
    pub tail_copies: bool,
    /// The first frame's packets at risk on a later path, copied on the soonest one.
    pub first_frame_copies: bool,
    /// Stall shaping: playback about to run dry stalls at a frame's start.
    pub stall_shaping: bool,
    /// Shared-queue trial: a later path waiting in a sooner one's queue is left idle.
    pub shared_trial: bool,

    // ---- arrival model ----
    /// Gain of the model's error and deviation averages: RFC 6298 §2 (1/8, 1/4); 1/4 for both
    /// followed a jittery path closer (Pscheduler Fig. 16).
    pub error_gain: f64,
    /// A path's round trip ends when it runs out of requests, so that a burst's answers (a
    /// long-RTT path's share of a task, sent at once) measure the rate they came at, not the
    /// burst over the idle gap before the next task. Off: on `pcdn sim --random 300 --seed
    /// 7001 --scheduler weave` it moved (by more than 1 %) 13 worlds up and 4 down under
    /// `weft`, 11 up and 8 down under BBR, 5 up and 10 down under CUBIC (docs/weave.md).
    pub idle_rounds: bool,
    /// Least answers after the first in a round trip that `idle_rounds` ends: at 16 two
    /// videos of the seed-7001 worlds (7052 under `weft`, 7158 under CUBIC) waited seconds
    /// longer, at 64 neither moved; world 7277 gained as much at 64 as at 4 and 16.
    pub idle_round_answers: u64,
    /// Round trips over which the peak delivery rate is kept: BBR's bandwidth filter (Cardwell
    /// et al., "BBR: Congestion-Based Congestion Control", ACM Queue 2016).
    pub peak_window_rtts: f64,
    /// Most minimum RTTs one of those round trips counts as: a queue the path's own requests
    /// build (a CUBIC window behind an upload limit that queues rather than drops) stretches
    /// sRTT to seconds, and a window of 10 such round trips kept a burst's rate, 4 times the
    /// limit's, for minutes, so the model drained the queue 4 times too fast (random world
    /// 7020 under CUBIC: sRTT 13 s against 8 ms, rebuffers 2.0 → 0.0). On `pcdn sim --random
    /// 300 --seed 7001 --scheduler weave` it moved (by more than 1 %) 17 worlds up and 6 down
    /// under CUBIC (7059 +130 %, 7020 +245 %, 7294 −8.9 %), 1 and 1 under `weft`, none
    /// under BBR.
    pub peak_window_queue: f64,
    /// Least span one of those round trips counts as: BBR's ProbeRTT, 200 ms (Cardwell et al.
    /// 2016), which the peak must outlast.
    #[serde(deserialize_with = "crate::units::de::duration")]
    pub peak_window_least: Duration,

    // ---- pipe cap and start-up test ----
    /// Gain over the bandwidth-delay product: BBR's 1.25 probing gain (Cardwell et al. 2016).
    pub pipe_gain: f64,
    /// Requests allowed in flight beyond the gain's: chosen with the cap on Pscheduler Figs.
    /// 15-18 (OFO 22-52 kB → 0.7-3.3 kB under `weft`).
    pub pipe_allowance: f64,
    /// Longest run of losses the cap makes room for: 32 covers the random worlds' bursty links
    /// (mean bursts of 1.5-10 packets, docs/scenarios.md); world 7115 under CUBIC (`pcdn sim
    /// --random 1 --seed 7115 --cc cubic`, a 1.8 Mbit/s edge at 7 ms with mean bursts of 6.5)
    /// reached 0.62 at a fixed allowance of 20 and 0.66 at 40, against 0.45 at 4.
    pub max_loss_burst: u64,
    /// Gain while a path starts up: the largest of 2, 1.75, 1.5 that cost no scenario
    /// (at 2, Pscheduler Fig. 5's 1 MB buffer under `weft` finished 0.04 s later).
    pub startup_pipe_gain: f64,
    /// Growth of the round trips' answer rate that keeps the start-up going: BBR's full-pipe
    /// test (1.25, Cardwell et al. 2016).
    pub startup_growth: f64,
    /// Round trips without that growth that end the start-up: BBR's full-pipe test (3).
    pub startup_flat_rounds: u32,
    /// Most queueing the model put ahead of a request whose RTT sizes the cap, as a share of
    /// the RTT: Pscheduler Fig. 16 (BBR) lost 1 % aggregation at 0.1, Fig. 17 (Vivace) its OFO
    /// at 0.3.
    pub pipe_sample_queue: f64,
    /// Spread of a round trip's unqueued RTT samples from which their mean sizes the cap:
    /// Pscheduler Fig. 16 (BBR, 10 seeds, 40 ms jitter) 0.755 against 0.740; at 0.1 Fig. 17's
    /// CUBIC OFO rose from 3.5 to 4.8 kB.
    pub jitter_spread: f64,
    /// Random-loss share the cap makes up for, and Eq. 6's loss penalty is taken at, at most:
    /// set with the cap (Pscheduler Figs. 15-18), a bound that keeps `1 ÷ (1 − loss)` finite;
    /// above it a path is in an outage (the random worlds' links lose at most 10 %).
    pub max_loss: f64,

    /// Idle pacing: requests to a path with nothing in flight go `pipe_gain` times its peak
    /// rate apart until its first answer, not as one burst into its bottleneck's queue (random
    /// world 7190 under CUBIC: a 266-request burst to a 357 ms edge behind a 100-packet queue
    /// lost 166 at each task's start). On `pcdn sim --random 300 --seed 7001 --scheduler
    /// weave`, against off, it moved (by more than 1 %) 52 worlds up and 30 down under CUBIC
    /// (geometric mean +2.2 %, segmented worlds up to +75 %), 10 up and 11 down under `weft`,
    /// 19 up and 16 down under BBR, but videos down to −36 % under CUBIC (7020, 7218, 7104):
    /// off until their cause is found (docs/weave.md, "Bursts into an idle path").
    pub idle_pacing: bool,

    // ---- order ----
    /// A full window cut to this fraction or less of its pipe and of its own peak counts one
    /// window per RTT: BBR's ProbeRTT holds 4 packets (Pscheduler Fig. 5, 64 kB under BBR).
    pub window_cut_factor: u64,

    // ---- copies ----
    /// Most copies as a share of requests: 4 % keeps duplicates under 5 % waste past 3 200
    /// requests; at 5 % Pscheduler Figs. 15-18 wasted 5.1-5.4 % for no OFO or goodput.
    pub copy_share: f64,
    /// Copies allowed beyond the share, for short downloads: under 1 % of requests past 3 200
    /// (chosen with `copy_share`).
    pub copy_allowance: u64,
    /// Loss rate from which a path's requests are copied before they are overdue: MPRD Fig.
    /// 7(e), 2 servers under CUBIC (a lost request held the buffer's cursor, the CDN idled);
    /// and from which its window, cut by losses, bounds the rate Eq. 7 counts it at (`order`).
    pub lossy_path: f64,
    /// Deviations past its modelled answer before a request counts as overdue: RFC 6298 §2's
    /// K = 4 past sRTT (the model holds one); Pscheduler Fig. 5, 64 kB under BBR, 10 seeds.
    pub overdue_deviations: f64,

    // ---- stall shaping ----
    /// Span over which the stall prediction measures the arrivals' rate and the steady
    /// out-of-order share: Kondo's C and E under LIA, OLIA and BALIA, 20 seeds.
    #[serde(deserialize_with = "crate::units::de::duration")]
    pub front_window: Duration,
    /// Least time between two samples of that rate (a bound on the samples kept: 200 a window).
    #[serde(deserialize_with = "crate::units::de::duration")]
    pub front_sample: Duration,
    /// How far past the predicted stall a packet already held stays held: Kondo's C and E
    /// under LIA, OLIA and BALIA, 20 seeds.
    #[serde(deserialize_with = "crate::units::de::duration")]
    pub hold_slack: Duration,

    // ---- shared-queue trial ----
    /// Coherence of two paths' queueing delays from which they are taken to share a queue:
    /// separate links of Pscheduler Figs. 15-18 reach 0.85; at 0.95 Fig. 5 under `weft` lost
    /// 0.6 % aggregation.
    pub shared_coherence: f64,
    /// Least standard deviation of each path's queueing delay (seconds) for the coherence to
    /// count: a queue that does not move shows nothing (1 ms, about a packet at 10 Mbit/s).
    pub shared_queue_floor: f64,
    /// Least ratio of minimum RTTs for a later path to be suspected: Kondo's A (two separate
    /// links of equal RTT filled by one player) is coherent too.
    pub shared_rtt_ratio: f64,
    /// Length of the trial in the kept path's sRTTs: BBR's 8-phase gain cycle, the time for
    /// its control to take the freed share (Cardwell et al. 2016).
    pub shared_trial_rtts: f64,
    /// Share of what both carried (the set trial: the group) that the kept path (the kept
    /// members) must carry alone to confirm the trial (set with the trial on Pscheduler Fig. 5).
    pub shared_confirm: f64,
    /// Least share of the pair's rate the later path must carry for a trial: at a download's
    /// start a smaller share confirmed any trial (Pscheduler Fig. 5).
    pub shared_min_share: f64,
    /// The set trial in place of the pairwise one: paths whose queueing delays move together
    /// form a group (connected components of coherent pairs), and a member is left idle for
    /// a trial, one per group at a time and never behind an idle member, judged by the
    /// group's summed delivered rate: `scenarios/shared-access.toml` (10 seeds) 0.9529 →
    /// 0.9738 under CUBIC, 0.9527 → 0.9525 under BBR, 0.9731 → 0.9737 under `weft`; off
    /// while it costs Pscheduler Fig. 5 (two paths behind one 30 Mbit/s link) 0.004 under
    /// BBR at 2 and 4 MB (docs/weave.md, "A shared access line").
    pub shared_line: bool,
    /// Span of each summed-rate measurement of the set trial (before a member is left idle,
    /// and at the end of its trial), in the members' largest sRTT: half of BBR's 8-phase gain
    /// cycle, so that the trial's first half lets the controls take the freed share.
    pub shared_measure_rtts: f64,
    /// Share of the later path's rate that the kept paths' peaks must have room for, beyond
    /// what they carry, before a trial: half, set with the trial on Pscheduler Fig. 5.
    pub shared_headroom: f64,
}

impl Default for WeaveConfig {
    fn default() -> Self {
        WeaveConfig {
            pipe_cap: true,
            startup_test: true,
            loss_bursts: true,
            tail_wait: true,
            window_cut: true,
            tail_copies: true,
            first_frame_copies: true,
            stall_shaping: true,
            shared_trial: true,
            error_gain: 0.25,
            idle_rounds: false,
            idle_round_answers: 64,
            peak_window_rtts: 10.0,
            peak_window_queue: 4.0,
            peak_window_least: Duration::from_millis(200),
            pipe_gain: 1.25,
            pipe_allowance: 4.0,
            max_loss_burst: 32,
            startup_pipe_gain: 1.75,
            startup_growth: 1.25,
            startup_flat_rounds: 3,
            pipe_sample_queue: 0.2,
            jitter_spread: 0.25,
            max_loss: 0.3,
            idle_pacing: false,
            window_cut_factor: 4,
            copy_share: 0.04,
            copy_allowance: 32,
            lossy_path: 0.01,
            overdue_deviations: 3.0,
            front_window: Duration::from_secs(2),
            front_sample: Duration::from_millis(10),
            hold_slack: Duration::from_millis(250),
            shared_coherence: 0.9,
            shared_queue_floor: 1e-3,
            shared_rtt_ratio: 2.0,
            shared_trial_rtts: 8.0,
            shared_confirm: 0.9,
            shared_min_share: 0.1,
            shared_line: false,
            shared_measure_rtts: 4.0,
            shared_headroom: 0.5,
        }
    }
}

impl WeaveConfig {
    /// The mechanisms' switches by name, in the order docs/weave.md lists them.
    pub const SWITCHES: &'static [&'static str] = &[
        "pipe_cap",
        "startup_test",
        "loss_bursts",
        "tail_wait",
        "window_cut",
        "tail_copies",
        "first_frame_copies",
        "stall_shaping",
        "shared_trial",
    ];

    /// The switch named `name` (one of [`WeaveConfig::SWITCHES`]); `None` if there is none.
    pub fn switch_mut(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "pipe_cap" => &mut self.pipe_cap,
            "startup_test" => &mut self.startup_test,
            "loss_bursts" => &mut self.loss_bursts,
            "tail_wait" => &mut self.tail_wait,
            "window_cut" => &mut self.window_cut,
            "tail_copies" => &mut self.tail_copies,
            "first_frame_copies" => &mut self.first_frame_copies,
            "stall_shaping" => &mut self.stall_shaping,
            "shared_trial" => &mut self.shared_trial,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_switch_is_on_by_default_and_found_by_its_name() {
        let mut config = WeaveConfig::default();
        for name in WeaveConfig::SWITCHES {
            let switch = config.switch_mut(name).unwrap_or_else(|| panic!("{name}"));
            assert!(*switch, "{name}");
            *switch = false;
        }
        assert_ne!(config, WeaveConfig::default());
        assert!(config.switch_mut("pipe_gain").is_none());
    }
}
