//! `pcdn sim --ablate`: weave with each mechanism switched off in turn, against weave as it
//! ships, on a scenario file's cells or on `--random N` worlds, paired seed by seed.

use std::fmt::Write as _;

use anyhow::{Context, bail};
use pcdn_core::scheduler::WeaveConfig;
use pcdn_sim::scenario::ablation::{self, AblationCell, Effect};
use pcdn_sim::scenario::random::{self, Compare, RandomConfig};
use pcdn_sim::scenario::{AnyScenario, Scenario};

use super::SimArgs;

/// Runs per cell unless `--repeat` says otherwise: pairs enough for an interval.
const DEFAULT_REPEAT: u32 = 5;

pub(super) fn run(args: &SimArgs) -> anyhow::Result<()> {
    let switches: Vec<&str> = if args.switches.is_empty() {
        WeaveConfig::SWITCHES.to_vec()
    } else {
        args.switches.iter().map(String::as_str).collect()
    };
    let repeat = args.repeat.unwrap_or(DEFAULT_REPEAT);
    if repeat < 2 {
        bail!("--ablate needs --repeat 2 or more: its intervals pair runs seed by seed");
    }
    let mut worlds: Vec<(String, Scenario)> = Vec::new();
    if let Some(count) = args.random {
        let ccs = if args.ccs.is_empty() {
            vec!["default".to_owned()]
        } else {
            args.ccs.clone()
        };
        let config = if args.quick {
            RandomConfig::quick()
        } else {
            RandomConfig::default()
        };
        let compare = Compare {
            schedulers: vec!["weave".to_owned()],
            ccs,
            repeat,
        };
        let first = args.seed.unwrap_or(1);
        for i in 0..count {
            let w = random::draw(random::world_seed(first, i), &config, &compare)?;
            worlds.push((format!("world-{}", w.seed), w.scenario));
        }
    } else {
        let Some(path) = &args.file else {
            bail!("--ablate needs a scenario FILE or --random N");
        };
        let AnyScenario::Paths(mut scenario) = AnyScenario::load(path)? else {
            bail!("{}: --ablate runs paths scenarios, not fleets", path.display());
        };
        if let Some(seed) = args.seed {
            scenario.set_seed(seed);
        }
        scenario.set_repeat(repeat);
        if !args.ccs.is_empty() {
            scenario
                .keep_ccs(&args.ccs)
                .map_err(|m| anyhow::anyhow!("{}: --cc {m}", scenario.file))?;
        }
        if !args.points.is_empty() {
            scenario
                .keep_points(&args.points)
                .map_err(|m| anyhow::anyhow!("{}: --point {m}", scenario.file))?;
        }
        worlds.push((scenario.name.clone(), scenario));
    }
    let ablated: Vec<Scenario> = worlds
        .iter()
        .map(|(_, s)| ablation::variants(s, &switches).map_err(|m| anyhow::anyhow!("--switch: {m}")))
        .collect::<Result<_, _>>()?;
    let total: u64 = ablated.iter().map(|s| s.runs().len() as u64).sum();
    let progress = crate::progress::Progress::new("ablation", total, "runs", false);
    let mut cells = Vec::new();
    for ((name, original), scenario) in worlds.iter().zip(&ablated) {
        progress.set_message(name.clone());
        let rows = scenario.run_full(args.threads, &|| progress.inc())?;
        cells.extend(ablation::judge(name, original, &rows, &switches));
    }
    progress.finish();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&cells).context("the cells as JSON")?);
    } else {
        print!("{}", text(&switches, &cells));
    }
    Ok(())
}

/// Per switch: cells where switching it off is worse, level, better; then each cell that is
/// not level.
fn text(switches: &[&str], cells: &[AblationCell]) -> String {
    let mut out = String::from("switch off             worse  level  better\n");
    for &s in switches {
        let count = |e: Effect| cells.iter().filter(|c| c.switch == s && c.effect == e).count();
        let _ = writeln!(
            out,
            "{s:<20} {:>7} {:>6} {:>7}",
            count(Effect::Worse),
            count(Effect::Level),
            count(Effect::Better)
        );
    }
    for c in cells.iter().filter(|c| c.effect != Effect::Level) {
        let point = c.point.as_deref().map(|p| format!(" {p}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {} off, {}{point} {}: {} {:.4} → {:.4} ({:+.4} ± {:.4}, {:?})",
            c.switch, c.world, c.cc, c.metric, c.on, c.off, c.diff, c.half_width, c.effect
        );
    }
    out
}
