//! weave's ablation: each mechanism switched off in turn against weave as it ships, on the
//! same worlds and seeds, paired seed by seed (docs/weave.md, "Ablation").

use pcdn_core::scheduler::WeaveConfig;
use serde::Serialize;

use super::random::WorldKind;
use super::scorecard::{Goal, metric, run_value};
use super::{FullRow, Scenario, SweepPoint, paired};

/// What switching one mechanism off did in one cell (world × sweep point × control), seen
/// from weave as it ships.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Off, the metric is worse beyond the 95 % interval: the mechanism earns its place here.
    Worse,
    /// The interval includes zero (or the runs are identical).
    Level,
    /// Off, the metric is better beyond the interval.
    Better,
}

/// One mechanism switched off in one cell.
#[derive(Clone, Debug, Serialize)]
pub struct AblationCell {
    /// The scenario's name (a random world's: `world-SEED`).
    pub world: String,
    /// The sweep point, as written in the file.
    pub point: Option<String>,
    pub cc: String,
    pub switch: String,
    pub metric: &'static str,
    pub goal: Goal,
    /// The metric's mean over the runs, with every mechanism on and with this one off.
    pub on: f64,
    pub off: f64,
    /// Mean seed-by-seed difference (off − on) and the half-width of its 95 % interval.
    pub diff: f64,
    pub half_width: f64,
    pub effect: Effect,
}

/// What a scenario downloads, for its metric: a video, ordered tasks, or the whole content.
pub fn kind_of(point: &SweepPoint) -> WorldKind {
    if point.video.is_some() {
        WorldKind::Video
    } else if point.world.task_size.is_some() {
        WorldKind::Segmented
    } else {
        WorldKind::Download
    }
}

/// Separates a variant's name from the sweep value in the points [`variants`] makes.
const SEP: char = '\u{1f}';

/// `scenario` with weave alone on its first transport, each point once as it is and once per
/// switch of `switches` turned off (the variant's name after the sweep value), so that one run
/// of the result runs them all on the same seeds.
pub fn variants(scenario: &Scenario, switches: &[&str]) -> Result<Scenario, String> {
    let mut out = scenario.clone();
    out.points.clear();
    for point in &scenario.points {
        for variant in std::iter::once("on").chain(switches.iter().copied()) {
            let mut p = point.clone();
            p.schedulers = vec!["weave".to_owned()];
            // One row per control: the file's first transport (rows do not name the variant's).
            p.transports.truncate(1);
            if variant != "on" {
                let mut cfg = p.world.weave.clone();
                *cfg.switch_mut(variant).ok_or_else(|| {
                    format!(
                        "unknown weave switch {variant:?}; known: {}",
                        WeaveConfig::SWITCHES.join(", ")
                    )
                })? = false;
                p.world.weave = cfg;
            }
            p.sweep = Some(format!("{}{SEP}{variant}", point.sweep.as_deref().unwrap_or("")));
            out.points.push(p);
        }
    }
    Ok(out)
}

/// Judges the rows of a [`variants`] scenario (run with its runs kept): per original point,
/// control and switch, the paired difference from the row with every mechanism on.
pub fn judge(world: &str, original: &Scenario, rows: &[FullRow], switches: &[&str]) -> Vec<AblationCell> {
    let mut cells = Vec::new();
    for point in &original.points {
        let kind = kind_of(point);
        let (name, goal) = metric(kind);
        let duration = point.world.duration.as_secs_f64();
        let values = |variant: &str, cc: &str| -> Option<Vec<f64>> {
            let sweep = format!("{}{SEP}{variant}", point.sweep.as_deref().unwrap_or(""));
            let row = rows
                .iter()
                .find(|r| r.row.sweep.as_deref() == Some(sweep.as_str()) && r.row.cc == cc)?;
            Some(row.runs.iter().map(|r| run_value(kind, &r.metrics, duration)).collect())
        };
        for cc in &point.ccs {
            let Some(on) = values("on", cc) else { continue };
            for &switch in switches {
                let Some(off) = values(switch, cc) else { continue };
                let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
                let p = paired(&off, &on);
                let (diff, half_width) = p.map_or((mean(&off) - mean(&on), f64::NAN), |p| (p.mean, p.half_width));
                let clear = off != on && p.is_some_and(|p| p.is_clear());
                let worse = match goal {
                    Goal::Higher => diff < 0.0,
                    Goal::Lower => diff > 0.0,
                };
                cells.push(AblationCell {
                    world: world.to_owned(),
                    point: point.sweep.clone(),
                    cc: cc.clone(),
                    switch: switch.to_owned(),
                    metric: name,
                    goal,
                    on: mean(&on),
                    off: mean(&off),
                    diff,
                    half_width,
                    effect: match (clear, worse) {
                        (false, _) => Effect::Level,
                        (true, true) => Effect::Worse,
                        (true, false) => Effect::Better,
                    },
                });
            }
        }
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const SMALL: &str = r#"
repeat = 2
duration = "30s"
[content]
size = "2MB"
[client]
schedulers = ["minrtt"]
cc = ["cubic"]
[[server]]
name = "cdn"
origin = true
link = { rate = "8mbit", delay = "10ms" }
[[server]]
name = "edge"
link = { rate = "4mbit", delay = "40ms", loss = 0.02 }
"#;

    #[test]
    fn each_switch_runs_on_the_same_seeds_and_is_judged_against_weave_as_it_ships() {
        let scenario = Scenario::parse(SMALL, "x.toml", Path::new(".")).unwrap();
        let switches = ["tail_copies", "pipe_cap"];
        let ablated = variants(&scenario, &switches).unwrap();
        assert_eq!(ablated.points.len(), 3);
        assert!(!ablated.points[1].world.weave.tail_copies && ablated.points[1].world.weave.pipe_cap);
        assert!(ablated.points.iter().all(|p| p.schedulers == ["weave"]));
        let rows = ablated.run_full(1, &|| {}).unwrap();
        let cells = judge("x", &scenario, &rows, &switches);
        assert_eq!(cells.len(), 2);
        for c in &cells {
            assert_eq!(c.metric, "aggregation");
            assert!(c.on > 0.0 && c.off > 0.0, "{c:?}");
            let clear = c.diff.abs() > c.half_width;
            assert_eq!(c.effect == Effect::Level, !clear, "{c:?}");
        }
        // The switches reach the scheduler the runs build.
        assert!(cells.iter().any(|c| c.on != c.off), "{cells:?}");
        assert!(variants(&scenario, &["no_such_switch"]).is_err());
    }
}
