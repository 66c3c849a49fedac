//! An A/B test of schedulers on one fleet, reported as Pscheduler's online test is (Wei et
//! al., "QoE-Optimized MultiPath Scheduling for Video Services in Large-Scale Peer-to-Peer
//! CDNs", IEEE JSAC 2025, §V-C): each group against the first (the baseline) in out-of-order
//! bytes (Fig. 10), goodput and waiting time by percentile (Fig. 11), download speed by
//! percentile (Fig. 12), and the jump-to-CDN rate and waste over the day (Figs. 13 and 14).

use serde::Serialize;

use super::fleet_runner::{FleetRow, ViewerRecordRow};
use super::paired::{Paired, paired};

/// The percentiles the by-percentile figures are read at.
pub const AB_PERCENTILES: [f64; 5] = [0.05, 0.25, 0.5, 0.75, 0.95];

/// Slices of the arrival window the by-hour figures use: a day in six 4-hour slices, as Fig. 14.
pub const AB_SLICES: usize = 6;

/// One placement × congestion control of an A/B test: every group against the baseline.
#[derive(Clone, Debug, Serialize)]
pub struct AbReport {
    pub placement: String,
    pub cc: String,
    /// The first of `[client] schedulers`.
    pub baseline: String,
    pub percentiles: Vec<f64>,
    /// Start of each slice of the arrival window, hours.
    pub slice_start_h: Vec<f64>,
    pub groups: Vec<AbGroup>,
}

/// One group's viewers, pooled over the runs, and how they compare with the baseline's.
#[derive(Clone, Debug, Serialize)]
pub struct AbGroup {
    pub scheduler: String,
    /// Viewers in the group, over all runs.
    pub viewers: usize,
    /// Mean over viewers of their mean out-of-order bytes (Fig. 10).
    pub ofo_mean_bytes: f64,
    /// (group − baseline) ÷ baseline of the mean out-of-order bytes, mean over the seeds and
    /// the half-width of its 95 % interval (none with one seed).
    pub ofo_change: Change,
    pub goodput_change: Change,
    pub wait_change: Change,
    pub rebuffer_ratio: f64,
    /// At [`AbReport::percentiles`]: goodput (Mbit/s), waiting time (ms) and download speed
    /// (Mbit/s), and their relative change against the baseline's value at that percentile.
    pub goodput_mbps: Vec<f64>,
    pub goodput_vs_baseline: Vec<f64>,
    pub wait_ms: Vec<f64>,
    pub wait_vs_baseline: Vec<f64>,
    pub download_speed_mbps: Vec<f64>,
    pub download_speed_vs_baseline: Vec<f64>,
    /// By slice of the arrival window: mean jump-to-CDN rate and mean request waste.
    pub jump_to_cdn_rate: Vec<f64>,
    pub waste: Vec<f64>,
}

/// A relative change and its 95 % interval over the seeds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Change {
    pub mean: f64,
    pub half_width: Option<f64>,
}

/// The A/B reports of an A/B test's rows (one per placement × congestion control that has a
/// row per scheduler with per-viewer records); `window_s` is the arrival window, in seconds.
pub fn ab_reports(rows: &[FleetRow], schedulers: &[String], window_s: f64) -> Vec<AbReport> {
    let mut reports = Vec::new();
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for row in rows {
        let key = (row.placement.as_str(), row.cc.as_str());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let group_rows: Vec<&FleetRow> = schedulers
            .iter()
            .filter_map(|s| {
                rows.iter()
                    .find(|r| (r.placement.as_str(), r.cc.as_str()) == key && &r.scheduler == s)
            })
            .collect();
        if group_rows.len() < 2 || group_rows.iter().any(|r| r.runs.is_empty()) {
            continue;
        }
        let base = Pooled::of(group_rows[0], window_s);
        let groups = group_rows
            .iter()
            .map(|r| Pooled::of(r, window_s).against(&r.scheduler, &base))
            .collect();
        reports.push(AbReport {
            placement: row.placement.clone(),
            cc: row.cc.clone(),
            baseline: group_rows[0].scheduler.clone(),
            percentiles: AB_PERCENTILES.to_vec(),
            slice_start_h: (0..AB_SLICES)
                .map(|i| i as f64 * window_s / AB_SLICES as f64 / 3600.0)
                .collect(),
            groups,
        });
    }
    reports
}

/// A group's viewers over every run, and per seed.
struct Pooled {
    viewers: Vec<ViewerRecordRow>,
    /// Per run (seed order): mean out-of-order bytes, mean goodput, mean waiting time.
    per_seed: Vec<[f64; 3]>,
    slices: [Vec<(f64, f64)>; AB_SLICES],
}

impl Pooled {
    fn of(row: &FleetRow, window_s: f64) -> Pooled {
        let viewers: Vec<ViewerRecordRow> = row.runs.iter().flat_map(|r| r.viewers.iter().cloned()).collect();
        let per_seed = row
            .runs
            .iter()
            .map(|r| {
                let mean = |f: fn(&ViewerRecordRow) -> f64| mean(r.viewers.iter().map(f));
                [
                    mean(|v| v.ofo_mean_bytes),
                    mean(|v| v.goodput_bps),
                    mean(|v| v.wait_mean_ms),
                ]
            })
            .collect();
        let mut slices: [Vec<(f64, f64)>; AB_SLICES] = Default::default();
        for v in &viewers {
            let slice = ((v.arrived_s / window_s.max(1e-9) * AB_SLICES as f64) as usize).min(AB_SLICES - 1);
            slices[slice].push((v.jump_to_cdn_rate, v.request_waste));
        }
        Pooled {
            viewers,
            per_seed,
            slices,
        }
    }

    fn at_percentiles(&self, f: fn(&ViewerRecordRow) -> f64) -> Vec<f64> {
        let mut values: Vec<f64> = self.viewers.iter().map(f).collect();
        values.sort_by(f64::total_cmp);
        AB_PERCENTILES
            .iter()
            .map(|&q| {
                if values.is_empty() {
                    return f64::NAN;
                }
                let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
                values[rank - 1]
            })
            .collect()
    }

    fn against(&self, scheduler: &str, base: &Pooled) -> AbGroup {
        let relative = |a: &[f64], b: &[f64]| -> Vec<f64> { a.iter().zip(b).map(|(x, y)| x / y - 1.0).collect() };
        let change = |i: usize| {
            let per_seed: Vec<f64> = self
                .per_seed
                .iter()
                .zip(&base.per_seed)
                .map(|(g, b)| g[i] / b[i] - 1.0)
                .collect();
            let zeros = vec![0.0; per_seed.len()];
            match paired(&per_seed, &zeros) {
                Some(Paired { mean, half_width, .. }) => Change {
                    mean,
                    half_width: Some(half_width),
                },
                None => Change {
                    mean: per_seed.first().copied().unwrap_or(f64::NAN),
                    half_width: None,
                },
            }
        };
        let mbps = |v: Vec<f64>| v.into_iter().map(|x| x / 1e6).collect::<Vec<f64>>();
        let goodput = mbps(self.at_percentiles(|v| v.goodput_bps));
        let base_goodput = mbps(base.at_percentiles(|v| v.goodput_bps));
        let wait = self.at_percentiles(|v| v.wait_mean_ms);
        let base_wait = base.at_percentiles(|v| v.wait_mean_ms);
        let speed = mbps(self.at_percentiles(|v| v.download_speed_bps));
        let base_speed = mbps(base.at_percentiles(|v| v.download_speed_bps));
        AbGroup {
            scheduler: scheduler.to_owned(),
            viewers: self.viewers.len(),
            ofo_mean_bytes: mean(self.viewers.iter().map(|v| v.ofo_mean_bytes)),
            ofo_change: change(0),
            goodput_change: change(1),
            wait_change: change(2),
            rebuffer_ratio: mean(self.viewers.iter().map(|v| v.rebuffer_ratio)),
            goodput_vs_baseline: relative(&goodput, &base_goodput),
            goodput_mbps: goodput,
            wait_vs_baseline: relative(&wait, &base_wait),
            wait_ms: wait,
            download_speed_vs_baseline: relative(&speed, &base_speed),
            download_speed_mbps: speed,
            jump_to_cdn_rate: self.slices.iter().map(|s| mean(s.iter().map(|p| p.0))).collect(),
            waste: self.slices.iter().map(|s| mean(s.iter().map(|p| p.1))).collect(),
        }
    }
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { f64::NAN } else { sum / n as f64 }
}
