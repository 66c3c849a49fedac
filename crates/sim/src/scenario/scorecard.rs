//! The generalization suite's scorecard: in each world and control, every scheduler's runs of
//! the world's metric against the best scheduler's, seed by seed (best, level within the 95 %
//! interval, or behind beyond it), then counted per scheduler with its worst worlds.

use serde::Serialize;

use super::random::WorldKind;
use super::{FullRow, RunMetrics, paired};

/// Which way a metric is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Goal {
    Higher,
    Lower,
}

/// A scheduler's standing in one world and control.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The best mean (every scheduler with that very mean is best).
    Best,
    /// The seed-by-seed difference from the best has a 95 % interval that includes zero.
    Level,
    /// ... that excludes zero.
    Behind,
}

/// The metric a world is scored on: aggregation (goodput ÷ capacity, higher is better) for
/// downloads; for videos, what the viewer waits through, first frame plus stalled time in s
/// (lower is better; a playback not finished within the run scores the run's whole duration,
/// more than any finished one can wait).
pub fn metric(kind: WorldKind) -> (&'static str, Goal) {
    match kind {
        WorldKind::Download | WorldKind::Segmented => ("aggregation", Goal::Higher),
        WorldKind::Video => ("first frame + stalls s", Goal::Lower),
    }
}

/// One run's value of [`metric`]; `duration_s` is the run's virtual-time limit.
pub fn run_value(kind: WorldKind, run: &RunMetrics, duration_s: f64) -> f64 {
    match kind {
        WorldKind::Download | WorldKind::Segmented => run.aggregation,
        WorldKind::Video => match &run.player {
            Some(p) if p.finished => {
                p.first_frame_latency.map_or(duration_s, |d| d.as_secs_f64()) + p.stalled_time.as_secs_f64()
            }
            _ => duration_s,
        },
    }
}

/// A scheduler in one world and control.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Standing {
    pub scheduler: String,
    /// The metric's mean over the runs.
    pub mean: f64,
    pub verdict: Verdict,
    /// How far behind the best mean, as a fraction of it (0 for the best).
    pub gap: f64,
    /// The mean seed-by-seed difference from the best (this − best), and the half-width of its
    /// 95 % interval; null for the best, or with a single run.
    pub diff: Option<f64>,
    pub half_width: Option<f64>,
    /// Duplicate data, the row's `waste`.
    pub waste: f64,
}

/// Judges the schedulers of one world and control: `runs` holds each scheduler's per-run
/// values (the same seeds in the same order) and its waste.
pub fn judge(runs: &[(String, Vec<f64>, f64)], goal: Goal) -> Vec<Standing> {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let better = |a: f64, b: f64| match goal {
        Goal::Higher => a > b,
        Goal::Lower => a < b,
    };
    let Some(best) = runs
        .iter()
        .map(|(_, v, _)| v)
        .reduce(|a, b| if better(mean(b), mean(a)) { b } else { a })
    else {
        return Vec::new();
    };
    let best_mean = mean(best);
    runs.iter()
        .map(|(scheduler, values, waste)| {
            let own = mean(values);
            let p = paired(values, best);
            let verdict = if own == best_mean {
                Verdict::Best
            } else if values == best || p.is_some_and(|p| !p.is_clear_of(best_mean)) {
                Verdict::Level
            } else {
                Verdict::Behind
            };
            let gap = match goal {
                Goal::Higher => best_mean - own,
                Goal::Lower => own - best_mean,
            } / if best_mean == 0.0 { 1.0 } else { best_mean.abs() };
            let shown = (verdict != Verdict::Best).then_some(p).flatten();
            Standing {
                scheduler: scheduler.clone(),
                mean: own,
                verdict,
                gap,
                diff: shown.map(|p| p.mean),
                half_width: shown.map(|p| p.half_width),
                waste: *waste,
            }
        })
        .collect()
}

/// One world and control, judged.
#[derive(Clone, Debug, Serialize)]
pub struct WorldCell {
    /// The world's own seed (`pcdn sim --random 1 --seed SEED` rebuilds it).
    pub world: u64,
    pub kind: WorldKind,
    pub servers: usize,
    pub capacity_mbps: f64,
    pub cc: String,
    pub metric: &'static str,
    pub goal: Goal,
    pub standings: Vec<Standing>,
}

/// Judges every control of one world from its rows (`pcdn sim --json --runs` rows).
pub fn judge_world(world: u64, kind: WorldKind, servers: usize, duration_s: f64, rows: &[FullRow]) -> Vec<WorldCell> {
    let (name, goal) = metric(kind);
    let mut ccs: Vec<&str> = Vec::new();
    for r in rows {
        if !ccs.contains(&r.row.cc.as_str()) {
            ccs.push(&r.row.cc);
        }
    }
    ccs.into_iter()
        .map(|cc| {
            let cell: Vec<&FullRow> = rows.iter().filter(|r| r.row.cc == cc).collect();
            let runs: Vec<(String, Vec<f64>, f64)> = cell
                .iter()
                .map(|r| {
                    let values = r
                        .runs
                        .iter()
                        .map(|run| run_value(kind, &run.metrics, duration_s))
                        .collect();
                    (r.row.scheduler.clone(), values, r.row.waste)
                })
                .collect();
            WorldCell {
                world,
                kind,
                servers,
                capacity_mbps: cell.first().map_or(0.0, |r| r.row.capacity_mbps),
                cc: cc.to_owned(),
                metric: name,
                goal,
                standings: judge(&runs, goal),
            }
        })
        .collect()
}

/// A world where a scheduler fell short of the best.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Shortfall {
    pub world: u64,
    pub kind: WorldKind,
    pub metric: &'static str,
    pub mean: f64,
    pub best: String,
    pub best_mean: f64,
    pub gap: f64,
    pub verdict: Verdict,
}

/// One scheduler under one control over every world.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Tally {
    pub scheduler: String,
    pub cc: String,
    pub best: usize,
    pub level: usize,
    pub behind: usize,
    /// Median over the worlds of the row's duplicate waste.
    pub median_waste: f64,
    /// The worlds with the largest gap to the best (at most `worst` of them, gap > 0).
    pub worst: Vec<Shortfall>,
}

/// Counts each scheduler × control's verdicts over `cells`, in the order schedulers and
/// controls first appear, each with its `worst` largest gaps (ties: the lower world seed).
pub fn tally(cells: &[WorldCell], worst: usize) -> Vec<Tally> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for c in cells {
        for s in &c.standings {
            let key = (s.scheduler.clone(), c.cc.clone());
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys.into_iter()
        .map(|(scheduler, cc)| {
            let mut t = Tally {
                scheduler: scheduler.clone(),
                cc: cc.clone(),
                best: 0,
                level: 0,
                behind: 0,
                median_waste: 0.0,
                worst: Vec::new(),
            };
            let mut wastes = Vec::new();
            for c in cells.iter().filter(|c| c.cc == cc) {
                let Some(s) = c.standings.iter().find(|s| s.scheduler == scheduler) else {
                    continue;
                };
                match s.verdict {
                    Verdict::Best => t.best += 1,
                    Verdict::Level => t.level += 1,
                    Verdict::Behind => t.behind += 1,
                }
                wastes.push(s.waste);
                let best = c
                    .standings
                    .iter()
                    .find(|b| b.verdict == Verdict::Best)
                    .expect("every judged cell has a best");
                if s.gap > 0.0 {
                    t.worst.push(Shortfall {
                        world: c.world,
                        kind: c.kind,
                        metric: c.metric,
                        mean: s.mean,
                        best: best.scheduler.clone(),
                        best_mean: best.mean,
                        gap: s.gap,
                        verdict: s.verdict,
                    });
                }
            }
            t.worst
                .sort_by(|a, b| b.gap.total_cmp(&a.gap).then(a.world.cmp(&b.world)));
            t.worst.truncate(worst);
            wastes.sort_by(f64::total_cmp);
            t.median_waste = median(&wastes);
            t
        })
        .collect()
}

fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(list: &[(&str, &[f64])]) -> Vec<(String, Vec<f64>, f64)> {
        list.iter().map(|(n, v)| (n.to_string(), v.to_vec(), 0.0)).collect()
    }

    #[test]
    fn best_level_and_behind_follow_the_paired_interval() {
        // a is best; b trails by 0.1 on every seed (clear); c is noisy around a (level).
        let r = runs(&[
            ("a", &[0.9, 0.8, 0.85]),
            ("b", &[0.8, 0.7, 0.75]),
            ("c", &[0.95, 0.6, 0.9]),
        ]);
        let s = judge(&r, Goal::Higher);
        let verdicts: Vec<Verdict> = s.iter().map(|s| s.verdict).collect();
        assert_eq!(verdicts, [Verdict::Best, Verdict::Behind, Verdict::Level]);
        assert!((s[1].gap - 0.1 / 0.85).abs() < 1e-12, "{:?}", s[1]);
        assert!((s[1].diff.unwrap() + 0.1).abs() < 1e-12);
        assert_eq!(s[0].diff, None);
    }

    #[test]
    fn a_speck_behind_on_every_seed_is_level() {
        // b takes a's decisions up to rounding: 8 ns later on every seed, a zero-wide interval.
        let r = runs(&[("a", &[0.849235201; 3]), ("b", &[0.849235209; 3]), ("c", &[0.86; 3])]);
        let verdicts: Vec<Verdict> = judge(&r, Goal::Lower).iter().map(|s| s.verdict).collect();
        assert_eq!(verdicts, [Verdict::Best, Verdict::Level, Verdict::Behind]);
    }

    #[test]
    fn lower_is_better_for_waits_and_equal_means_share_best() {
        let r = runs(&[("a", &[2.0, 3.0]), ("b", &[2.0, 3.0]), ("c", &[4.0, 5.0])]);
        let s = judge(&r, Goal::Lower);
        assert_eq!(s[0].verdict, Verdict::Best);
        assert_eq!(s[1].verdict, Verdict::Best);
        assert_eq!(s[2].verdict, Verdict::Behind);
        assert!((s[2].gap - 2.0 / 2.5).abs() < 1e-12);
    }

    #[test]
    fn a_tally_counts_verdicts_and_keeps_the_largest_gaps() {
        let cell = |world: u64, a: &[f64], b: &[f64]| WorldCell {
            world,
            kind: WorldKind::Download,
            servers: 2,
            capacity_mbps: 10.0,
            cc: "weft".into(),
            metric: "aggregation",
            goal: Goal::Higher,
            standings: judge(&runs(&[("a", a), ("b", b)]), Goal::Higher),
        };
        let cells = [
            cell(1, &[0.9, 0.9, 0.9], &[0.5, 0.6, 0.55]),
            cell(2, &[0.9, 0.8, 0.85], &[0.95, 0.85, 0.9]),
            cell(3, &[0.5, 0.6, 0.55], &[0.45, 0.7, 0.6]),
        ];
        let t = tally(&cells, 1);
        // a: best in 1, behind by 0.05 on every seed in 2, level (noisy) in 3 with the larger gap.
        assert_eq!((t[0].best, t[0].level, t[0].behind), (1, 1, 1));
        assert_eq!(t[0].worst.len(), 1);
        assert_eq!(t[0].worst[0].world, 3);
        assert_eq!(t[0].worst[0].verdict, Verdict::Level);
        assert_eq!((t[1].best, t[1].level, t[1].behind), (2, 0, 1));
        assert_eq!(t[1].worst[0].world, 1);
        assert_eq!(t[1].worst[0].best, "a");
    }
}
