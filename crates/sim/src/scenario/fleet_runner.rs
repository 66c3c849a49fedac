//! Runs a fleet scenario's runs on several threads and averages them into one row per
//! placement × scheduler × congestion control.

use std::collections::BTreeMap;
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
    /// Viewers per run (of the row's group, in an A/B test).
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
    pub jump_to_cdn_rate: f64,
    pub origin_bytes: u64,
    pub edge_bytes: u64,
    pub ofo_mean_bytes: f64,
    pub wait_mean_ms: f64,
    pub goodput_bps: f64,
    pub download_speed_bps: f64,
    pub request_waste: f64,
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
            jump_to_cdn_rate: v.jump_to_cdn_rate,
            origin_bytes: v.origin_bytes,
            edge_bytes: v.edge_bytes,
            ofo_mean_bytes: v.ofo_mean_bytes,
            wait_mean_ms: v.wait_mean_ms,
            goodput_bps: v.goodput_bps,
            download_speed_bps: v.download_speed_bps,
            request_waste: v.request_waste,
            finished: v.finished,
        }
    }
}

impl FleetScenario {
    /// Runs every run of [`FleetScenario::runs`] on `threads` threads (0: one per core),
    /// calling `on_run_done` after each; one row per placement × scheduler × congestion
    /// control, in that order (in an A/B test, a scheduler's row covers its group of viewers
    /// in the shared runs). The output depends only on the scenario, never on the threads.
    pub fn run(&self, threads: usize, on_run_done: &(dyn Fn() + Sync)) -> Result<Vec<FleetRow>, ScenarioError> {
        self.run_observed(threads, &|tick| {
            if tick.run_done {
                on_run_done();
            }
        })
    }

    /// [`FleetScenario::run`], telling `observe` how far the runs have gone at the end of every
    /// timeline window of each run and when each run ends (for a progress bar).
    pub fn run_observed(
        &self,
        threads: usize,
        observe: &(dyn Fn(FleetTick) + Sync),
    ) -> Result<Vec<FleetRow>, ScenarioError> {
        let runs = self.runs();
        let duration_s = self.duration.as_secs_f64();
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
                        let mut last = (0.0, 0);
                        let outcome =
                            fleet::run_observed(&spec, &run.schedulers, run.cc, run.seed, &mut |now_s, gone| {
                                observe(FleetTick {
                                    simulated_s: now_s - last.0,
                                    viewers: gone - last.1,
                                    run_done: false,
                                });
                                last = (now_s, gone);
                            });
                        // The rest of the run's time and viewers, whether it ran to its end
                        // or every viewer left early.
                        let gone = outcome.as_ref().map_or(last.1, |o| o.viewers.len());
                        observe(FleetTick {
                            simulated_s: (duration_s - last.0).max(0.0),
                            viewers: gone.saturating_sub(last.1),
                            run_done: true,
                        });
                        let outcome = outcome.map_err(|e| e.to_string());
                        results.lock().expect("no thread panics holding it")[i] = Some(outcome);
                    }
                });
            }
        });
        let results = results.into_inner().expect("no thread panics holding it");
        let key = |placement: &str, scheduler: &str, cc: &str| {
            let at = |list: &[String], name: &str| list.iter().position(|n| n == name).expect("a listed name");
            (
                at(&self.placements, placement),
                at(&self.schedulers, scheduler),
                at(&self.ccs, cc),
            )
        };
        let mut rows: BTreeMap<(usize, usize, usize), FleetRow> = BTreeMap::new();
        for (run, outcome) in runs.iter().zip(results) {
            let outcome = outcome.expect("every run ran").map_err(|message| ScenarioError {
                file: self.file.clone(),
                line: None,
                key: None,
                message,
            })?;
            for (group, scheduler) in run.schedulers.iter().enumerate() {
                let part = outcome.group(group);
                let row = rows
                    .entry(key(run.placement, scheduler, run.cc))
                    .or_insert_with(|| FleetRow::new(run.placement, scheduler, run.cc));
                row.add(run.seed, &part);
            }
        }
        let mut rows: Vec<FleetRow> = rows.into_values().collect();
        rows.iter_mut().for_each(FleetRow::finish);
        Ok(rows)
    }
}

/// How far one fleet run has gone since its last tick.
#[derive(Clone, Copy, Debug)]
pub struct FleetTick {
    /// Simulated seconds since the run's last tick.
    pub simulated_s: f64,
    /// Viewers that left since the run's last tick.
    pub viewers: usize,
    /// The run is over.
    pub run_done: bool,
}

impl FleetRow {
    fn new(placement: &str, scheduler: &str, cc: &str) -> FleetRow {
        FleetRow {
            placement: placement.to_owned(),
            scheduler: scheduler.to_owned(),
            cc: cc.to_owned(),
            viewers: 0,
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
        }
    }

    /// Adds one run's outcome (sums, divided by the run count in [`FleetRow::finish`]).
    fn add(&mut self, seed: u64, outcome: &FleetOutcome) {
        self.viewers += outcome.viewers.len();
        self.cdn_share += outcome.cdn_share();
        self.cdn_p95_mbps += outcome.cdn_p95_mbps();
        self.first_frame_p50_s += outcome.first_frame_s(0.5).unwrap_or(f64::NAN);
        self.first_frame_p95_s += outcome.first_frame_s(0.95).unwrap_or(f64::NAN);
        self.rebuffer_ratio += outcome.rebuffer_ratio();
        self.stalled_viewers += outcome.stalled_viewers();
        self.jump_to_cdn_rate += outcome.jump_to_cdn_rate();
        self.waste += outcome.waste();
        self.edge_utilization += outcome.edge_utilization;
        self.fill_bytes += outcome.fill_bytes;
        if self.timeline.len() < outcome.timeline.len() {
            self.timeline.resize(outcome.timeline.len(), TimelineRow::default());
        }
        for (t, sample) in self.timeline.iter_mut().zip(&outcome.timeline) {
            t.t_s = sample.t_s;
            t.cdn_share += sample.cdn_share();
            t.edge_utilization += sample.edge_utilization();
            t.stalled_viewers += sample.stalled_share();
        }
        self.runs.push(FleetRunRecord {
            seed,
            cdn_share: outcome.cdn_share(),
            viewers: outcome.viewers.iter().map(ViewerRecordRow::from).collect(),
        });
    }

    fn finish(&mut self) {
        let runs = self.runs.len().max(1);
        let n = runs as f64;
        for v in [
            &mut self.cdn_share,
            &mut self.cdn_p95_mbps,
            &mut self.first_frame_p50_s,
            &mut self.first_frame_p95_s,
            &mut self.rebuffer_ratio,
            &mut self.stalled_viewers,
            &mut self.jump_to_cdn_rate,
            &mut self.waste,
            &mut self.edge_utilization,
        ] {
            *v /= n;
        }
        self.viewers /= runs;
        self.fill_bytes /= runs as u64;
        for t in &mut self.timeline {
            t.cdn_share /= n;
            t.edge_utilization /= n;
            t.stalled_viewers /= n;
        }
    }
}
