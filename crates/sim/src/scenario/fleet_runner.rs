//! Runs a fleet scenario's runs on several threads and averages them into one row per
//! placement × scheduler × congestion control.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;

use super::{FleetScenario, ScenarioError, default_threads};
use crate::fleet::{self, FleetOutcome, ViewerRecord};

/// One row: a placement × scheduler × congestion control, its metrics averaged over repeats.
#[derive(Clone, Debug, Serialize)]
pub struct FleetRow {
    pub placement: String,
    pub scheduler: String,
    pub cc: String,
    /// Viewers per run.
    pub viewers: usize,
    /// Bytes from the origin ÷ all bytes the viewers received.
    pub cdn_share: f64,
    /// 95th percentile of the origin's upload rate over 5-minute windows (what a CDN bills).
    pub cdn_p95_mbps: f64,
    pub first_frame_p50_s: f64,
    pub first_frame_p95_s: f64,
    /// Mean over viewers of stalled time ÷ (stalled + played) time.
    pub rebuffer_ratio: f64,
    /// Fraction of viewers with at least one stall.
    pub stalled_viewers: f64,
    pub jump_to_cdn_rate: f64,
    /// Duplicate packets ÷ packets received.
    pub waste: f64,
    /// Upload the devices used ÷ their capacity while alive.
    pub edge_utilization: f64,
    /// Bytes moved to fill edge caches, per run (placements `none` and `top` move none).
    pub fill_bytes: u64,
    /// The run minute by minute (means over the row's runs), for `--plot`.
    pub timeline: Vec<TimelineRow>,
    /// With `--runs`: each run's seed and its viewers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<FleetRunRecord>,
}

/// One timeline window of a row.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TimelineRow {
    /// End of the window, seconds.
    pub t_s: f64,
    /// The origin's share of the bytes sent in the window (fills included).
    pub cdn_share: f64,
    /// What the devices sent ÷ what the live ones could have.
    pub edge_utilization: f64,
    /// Viewers stalled at the window's end ÷ viewers watching.
    pub stalled_viewers: f64,
}

/// One run of a row, for paired comparisons: every row runs the same seeds.
#[derive(Clone, Debug, Serialize)]
pub struct FleetRunRecord {
    pub seed: u64,
    pub cdn_share: f64,
    pub viewers: Vec<ViewerRecordRow>,
}

/// A viewer as `--runs` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct ViewerRecordRow {
    pub index: usize,
    pub video: usize,
    pub arrived_s: f64,
    pub first_frame_s: Option<f64>,
    pub rebuffer_ratio: f64,
    pub origin_bytes: u64,
    pub edge_bytes: u64,
    pub finished: bool,
}

impl From<&ViewerRecord> for ViewerRecordRow {
    fn from(v: &ViewerRecord) -> ViewerRecordRow {
        ViewerRecordRow {
            index: v.index,
            video: v.video,
            arrived_s: v.arrived_s,
            first_frame_s: v.first_frame_s,
            rebuffer_ratio: v.rebuffer_ratio,
            origin_bytes: v.origin_bytes,
            edge_bytes: v.edge_bytes,
            finished: v.finished,
        }
    }
}

impl FleetScenario {
    /// Runs every run of [`FleetScenario::runs`] on `threads` threads (0: one per core),
    /// calling `on_run_done` after each; one row per placement × scheduler × congestion
    /// control, in that order. The output depends only on the scenario, never on the threads.
    pub fn run(&self, threads: usize, on_run_done: &(dyn Fn() + Sync)) -> Result<Vec<FleetRow>, ScenarioError> {
        let runs = self.runs();
        let threads = if threads == 0 { default_threads() } else { threads }.clamp(1, runs.len().max(1));
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<Result<FleetOutcome, String>>>> = Mutex::new(vec![None; runs.len()]);
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(run) = runs.get(i) else { break };
                        let spec = self.spec(run.placement, run.seed);
                        let outcome = fleet::run(&spec, run.scheduler, run.cc, run.seed).map_err(|e| e.to_string());
                        results.lock().expect("no thread panics holding it")[i] = Some(outcome);
                        on_run_done();
                    }
                });
            }
        });
        let results = results.into_inner().expect("no thread panics holding it");
        let mut rows: Vec<FleetRow> = Vec::new();
        for (run, outcome) in runs.iter().zip(results) {
            let outcome = outcome.expect("every run ran").map_err(|message| ScenarioError {
                file: self.file.clone(),
                line: None,
                key: None,
                message,
            })?;
            let record = FleetRunRecord {
                seed: run.seed,
                cdn_share: outcome.cdn_share(),
                viewers: outcome.viewers.iter().map(ViewerRecordRow::from).collect(),
            };
            let same = |r: &FleetRow| {
                (r.placement.as_str(), r.scheduler.as_str(), r.cc.as_str()) == (run.placement, run.scheduler, run.cc)
            };
            if !rows.last().is_some_and(same) {
                rows.push(FleetRow {
                    placement: run.placement.to_owned(),
                    scheduler: run.scheduler.to_owned(),
                    cc: run.cc.to_owned(),
                    viewers: outcome.viewers.len(),
                    cdn_share: 0.0,
                    cdn_p95_mbps: 0.0,
                    first_frame_p50_s: 0.0,
                    first_frame_p95_s: 0.0,
                    rebuffer_ratio: 0.0,
                    stalled_viewers: 0.0,
                    jump_to_cdn_rate: 0.0,
                    waste: 0.0,
                    edge_utilization: 0.0,
                    fill_bytes: 0,
                    timeline: Vec::new(),
                    runs: Vec::new(),
                });
            }
            let row = rows.last_mut().expect("pushed above");
            // Sums here; divided by the repeat count below.
            row.cdn_share += outcome.cdn_share();
            row.cdn_p95_mbps += outcome.cdn_p95_mbps();
            row.first_frame_p50_s += outcome.first_frame_s(0.5).unwrap_or(f64::NAN);
            row.first_frame_p95_s += outcome.first_frame_s(0.95).unwrap_or(f64::NAN);
            row.rebuffer_ratio += outcome.rebuffer_ratio();
            row.stalled_viewers += outcome.stalled_viewers();
            row.jump_to_cdn_rate += outcome.jump_to_cdn_rate();
            row.waste += outcome.waste();
            row.edge_utilization += outcome.edge_utilization;
            row.fill_bytes += outcome.fill_bytes;
            if row.timeline.len() < outcome.timeline.len() {
                row.timeline.resize(outcome.timeline.len(), TimelineRow::default());
            }
            for (t, sample) in row.timeline.iter_mut().zip(&outcome.timeline) {
                t.t_s = sample.t_s;
                t.cdn_share += sample.cdn_share();
                t.edge_utilization += sample.edge_utilization();
                t.stalled_viewers += sample.stalled_share();
            }
            row.runs.push(record);
        }
        for row in &mut rows {
            let n = row.runs.len().max(1) as f64;
            for v in [
                &mut row.cdn_share,
                &mut row.cdn_p95_mbps,
                &mut row.first_frame_p50_s,
                &mut row.first_frame_p95_s,
                &mut row.rebuffer_ratio,
                &mut row.stalled_viewers,
                &mut row.jump_to_cdn_rate,
                &mut row.waste,
                &mut row.edge_utilization,
            ] {
                *v /= n;
            }
            row.fill_bytes /= row.runs.len().max(1) as u64;
            for t in &mut row.timeline {
                t.cdn_share /= n;
                t.edge_utilization /= n;
                t.stalled_viewers /= n;
            }
        }
        Ok(rows)
    }
}
