//! Runs a scenario's runs on every core and averages them into rows, in a fixed order.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pcdn_core::player::PlayerStats;
use serde::{Deserialize, Serialize};

use super::{Run, Scenario, ScenarioError};
use crate::world::{self, Outcome};

/// A `rows.json` without a `transport` field ran on pcdn's own protocol.
fn pull() -> String {
    "pull".to_owned()
}

/// One scheduler × congestion control × sweep point: each metric is the mean over its repeats
/// (definitions in `docs/scenarios.md` and `pcdn_core::stats`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub scheduler: String,
    pub cc: String,
    /// `pull` (pcdn's protocol) or `subflow` (a TCP stream per path), `[client] transport`.
    #[serde(default = "pull")]
    pub transport: String,
    /// The swept value as written in the file, or null without a sweep.
    pub sweep: Option<String>,
    /// Runs averaged (seeds `seed`, `seed + 1`, ...).
    pub repeats: u32,
    /// In-order bytes delivered × 8 ÷ (last in-order delivery − first request), Mbit/s.
    pub goodput_mbps: f64,
    /// Aggregate capacity: Σ paths' bottleneck rate × (1 − loss), or the shared bottleneck's rate.
    pub capacity_mbps: f64,
    /// Goodput ÷ aggregate capacity.
    pub aggregation: f64,
    /// Bytes received but not yet deliverable, sampled at every arrival: mean.
    pub ofo_mean_bytes: f64,
    /// ... and maximum (averaged over repeats).
    pub ofo_max_bytes: f64,
    /// Per packet, in-order delivery time − arrival time: mean, ms.
    pub wait_mean_ms: f64,
    /// ... and 99th percentile, ms.
    pub wait_p99_ms: f64,
    /// First request to last byte, s; null if any repeat did not complete.
    pub completion_s: Option<f64>,
    /// The world's fluid bound on the completion time, s (`WorldSpec::bound_s`); null if the
    /// paths can never carry the content.
    pub bound_s: Option<f64>,
    /// `bound_s` ÷ `completion_s`, per run; null if any repeat did not complete.
    pub efficiency: Option<f64>,
    /// (DATA packets received − packets needed) ÷ packets needed.
    pub waste: f64,
    /// (requests sent − packets needed) ÷ packets needed (Pscheduler's waste).
    pub request_waste: f64,
    /// Bytes from the origin ÷ all bytes received.
    pub cdn_share: f64,
    /// Repeats that completed within the duration.
    pub completed: u32,
}

/// A [`Row`] and, for a scenario with a `[video]`, the player's QoE (the JSON of
/// `pcdn sim --json`: the row's keys, then `player`). Read back (`pcdn sim --from-rows`)
/// without its `runs`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FullRow {
    #[serde(flatten)]
    pub row: Row,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub player: Option<PlayerRow>,
    /// Each repeat's own metrics, in seed order: what a paired comparison of two schedulers
    /// (same seeds, same draws of the links) reads. Left out of the JSON when emptied.
    #[serde(skip_serializing_if = "Vec::is_empty", skip_deserializing)]
    pub runs: Vec<RunRow>,
}

/// One run of a row: its seed and what it measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunRow {
    pub seed: u64,
    #[serde(flatten)]
    pub metrics: RunMetrics,
}

/// The player's QoE, each the mean over the repeats (definitions in `pcdn_core::player`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlayerRow {
    /// From pressing play to the first frame, s; null if any repeat never showed one.
    pub first_frame_s: Option<f64>,
    /// Times the buffer ran dry while playing (Kondo et al.'s buffer underflows).
    pub rebuffer_count: f64,
    /// Stalled time ÷ play time.
    pub rebuffer_ratio: f64,
    /// Stalled time ÷ (play + stalled time) × 100.
    pub stall_percentage: f64,
    /// Segments moved to the CDN ÷ segments.
    pub jump_to_cdn_rate: f64,
    /// GOPs not complete when due ÷ GOPs × 100 (MPRD's pauses).
    pub gop_pause_percentage: f64,
    /// Frames not complete when played (Kondo et al.'s picture discard).
    pub frames_discarded: f64,
    /// `frames_discarded` ÷ frames × 100.
    pub frame_discard_percentage: f64,
    /// Repeats whose playback reached the end of the video within the run.
    pub finished: u32,
}

/// What one run measured, reduced to the row's metrics as soon as it ends (the fields mean
/// what [`Row`]'s do, for this run alone; the player's are its full [`PlayerStats`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunMetrics {
    pub goodput_mbps: f64,
    pub capacity_mbps: f64,
    pub aggregation: f64,
    pub ofo_mean_bytes: f64,
    pub ofo_max_bytes: f64,
    pub wait_mean_ms: f64,
    pub wait_p99_ms: f64,
    pub completion_s: Option<f64>,
    pub bound_s: Option<f64>,
    pub efficiency: Option<f64>,
    pub waste: f64,
    pub request_waste: f64,
    pub cdn_share: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub player: Option<PlayerStats>,
}

impl RunMetrics {
    fn of(outcome: &Outcome, bound_s: Option<f64>) -> RunMetrics {
        let s = &outcome.stats;
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let completion_s = if outcome.completed {
            s.completion_time().map(|d| d.as_secs_f64())
        } else {
            None
        };
        RunMetrics {
            goodput_mbps: s.goodput_bps() / 1e6,
            capacity_mbps: outcome.capacity_bps / 1e6,
            aggregation: s.aggregation(outcome.capacity_bps),
            ofo_mean_bytes: s.ofo_mean_bytes(),
            ofo_max_bytes: s.ofo_max_bytes() as f64,
            wait_mean_ms: ms(s.wait_mean()),
            wait_p99_ms: ms(s.wait_p99()),
            completion_s,
            bound_s,
            efficiency: completion_s.zip(bound_s).map(|(c, b)| b / c),
            waste: s.waste(),
            request_waste: s.request_waste(),
            cdn_share: s.cdn_share(),
            player: s.player.clone(),
        }
    }
}

/// The machine's cores (at least 1).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Scenario {
    /// Runs every run of [`Scenario::runs`] on `threads` threads (0: one per core), calling
    /// `on_run_done` after each, and returns one row per scheduler × congestion control × sweep
    /// point in that order. The output depends only on the scenario, never on the threads.
    pub fn run(&self, threads: usize, on_run_done: &(dyn Fn() + Sync)) -> Result<Vec<Row>, ScenarioError> {
        Ok(self
            .run_full(threads, on_run_done)?
            .into_iter()
            .map(|r| r.row)
            .collect())
    }

    /// [`Scenario::run`], each row with the player's QoE when the scenario has a `[video]`.
    pub fn run_full(&self, threads: usize, on_run_done: &(dyn Fn() + Sync)) -> Result<Vec<FullRow>, ScenarioError> {
        let runs = self.runs();
        let threads = if threads == 0 { default_threads() } else { threads };
        let results = run_parallel(&runs, threads.min(runs.len()).max(1), on_run_done);
        let mut measured = Vec::with_capacity(runs.len());
        for (run, result) in runs.iter().zip(results) {
            match result {
                Some(Ok(m)) => measured.push(m),
                Some(Err(e)) => return Err(self.run_error(run, e)),
                None => unreachable!("every run before a failed one has a result"),
            }
        }
        Ok(aggregate(&runs, &measured))
    }

    fn run_error(&self, run: &Run<'_>, e: world::WorldError) -> ScenarioError {
        let sweep = run.sweep.map(|s| format!(", sweep {s}")).unwrap_or_default();
        ScenarioError {
            file: self.file.clone(),
            line: None,
            key: None,
            message: format!(
                "run of scheduler {} with cc {} on {} (seed {}{sweep}) failed: {e}",
                run.scheduler, run.cc, run.transport, run.seed
            ),
        }
    }
}

type RunResult = Option<Result<RunMetrics, world::WorldError>>;

/// Work-stealing over an index: each thread takes the next run. Results land in their run's
/// slot, so the order is the runs' order. After a failure no new run starts; the slots of runs
/// never started stay `None` (they all come after some failed run).
fn run_parallel(runs: &[Run<'_>], threads: usize, on_run_done: &(dyn Fn() + Sync)) -> Vec<RunResult> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let slots: Vec<Mutex<RunResult>> = runs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while !failed.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(run) = runs.get(i) else { break };
                    let result = world::run_on(run.world, run.video, run.scheduler, run.cc, run.transport, run.seed)
                        .map(|o| RunMetrics::of(&o, run.world.bound_s()));
                    if result.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    *slots[i].lock().expect("no run panicked holding a slot") = Some(result);
                    on_run_done();
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|m| m.into_inner().expect("not poisoned"))
        .collect()
}

/// Groups consecutive runs of the same point × scheduler × cc × transport (the order of
/// [`Scenario::runs`]) and averages each metric over the group, summing in repeat order.
fn aggregate(runs: &[Run<'_>], measured: &[RunMetrics]) -> Vec<FullRow> {
    let mut rows = Vec::new();
    let mut start = 0;
    while start < runs.len() {
        let first = &runs[start];
        let end = runs[start..]
            .iter()
            .position(|r| {
                (r.point, r.scheduler, r.cc, r.transport) != (first.point, first.scheduler, first.cc, first.transport)
            })
            .map_or(runs.len(), |n| start + n);
        let group = &measured[start..end];
        let n = group.len() as f64;
        let mean = |f: fn(&RunMetrics) -> f64| group.iter().map(f).sum::<f64>() / n;
        let completions: Option<Vec<f64>> = group.iter().map(|m| m.completion_s).collect();
        let efficiencies: Option<Vec<f64>> = group.iter().map(|m| m.efficiency).collect();
        let row = Row {
            scheduler: first.scheduler.to_owned(),
            cc: first.cc.to_owned(),
            transport: first.transport.to_owned(),
            sweep: first.sweep.map(str::to_owned),
            repeats: group.len() as u32,
            goodput_mbps: mean(|m| m.goodput_mbps),
            capacity_mbps: mean(|m| m.capacity_mbps),
            aggregation: mean(|m| m.aggregation),
            ofo_mean_bytes: mean(|m| m.ofo_mean_bytes),
            ofo_max_bytes: mean(|m| m.ofo_max_bytes),
            wait_mean_ms: mean(|m| m.wait_mean_ms),
            wait_p99_ms: mean(|m| m.wait_p99_ms),
            completion_s: completions.map(|c| c.iter().sum::<f64>() / n),
            bound_s: group[0].bound_s,
            efficiency: efficiencies.map(|e| e.iter().sum::<f64>() / n),
            waste: mean(|m| m.waste),
            request_waste: mean(|m| m.request_waste),
            cdn_share: mean(|m| m.cdn_share),
            completed: group.iter().filter(|m| m.completion_s.is_some()).count() as u32,
        };
        let players: Option<Vec<&PlayerStats>> = group.iter().map(|m| m.player.as_ref()).collect();
        let player = players.map(|p| {
            let mean = |f: fn(&PlayerStats) -> f64| p.iter().map(|s| f(s)).sum::<f64>() / n;
            let first: Option<Vec<f64>> = p
                .iter()
                .map(|s| s.first_frame_latency.map(|d| d.as_secs_f64()))
                .collect();
            PlayerRow {
                first_frame_s: first.map(|f| f.iter().sum::<f64>() / n),
                rebuffer_count: mean(|s| s.rebuffer_count as f64),
                rebuffer_ratio: mean(|s| s.rebuffer_ratio),
                stall_percentage: mean(|s| s.stall_percentage),
                jump_to_cdn_rate: mean(|s| s.jump_to_cdn_rate),
                gop_pause_percentage: mean(|s| s.gop_pause_percentage),
                frames_discarded: mean(|s| s.frames_discarded as f64),
                frame_discard_percentage: mean(|s| s.frame_discard_percentage),
                finished: p.iter().filter(|s| s.finished).count() as u32,
            }
        });
        let per_run = runs[start..end]
            .iter()
            .zip(group)
            .map(|(run, metrics)| RunRow {
                seed: run.seed,
                metrics: metrics.clone(),
            })
            .collect();
        rows.push(FullRow {
            row,
            player,
            runs: per_run,
        });
        start = end;
    }
    rows
}
