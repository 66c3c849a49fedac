//! `pcdn sim --random N`: the generalization suite. Draws N worlds, runs every scheduler on
//! each, and prints the scorecard: per scheduler, the worlds where it is best, level or behind
//! the best beyond a 95 % interval, and its worst worlds with the seed that rebuilds each.

use std::fmt::Write as _;

use anyhow::{Context, bail};
use pcdn_sim::scenario::random::{self, Compare, RandomConfig, RandomWorld};
use pcdn_sim::scenario::scorecard::{self, Goal, Tally, Verdict, WorldCell};
use serde::Serialize;

use super::{Column, SimArgs, column_of as column, render};

/// Runs per scheduler × control in each world unless `--repeat` says otherwise: enough pairs
/// for a 95 % interval (t = 2.776 at 4 degrees of freedom) at a cost a debug build can run.
const DEFAULT_REPEAT: u32 = 5;
/// ... and with `--quick`.
const QUICK_REPEAT: u32 = 3;
/// Worst worlds listed per scheduler × control.
const WORST: usize = 3;

/// The whole suite as `--json` prints it.
#[derive(Serialize)]
struct Report<'a> {
    /// The first world's seed; world i is `seed + i`.
    seed: u64,
    worlds: u64,
    quick: bool,
    repeat: u32,
    schedulers: &'a [String],
    ccs: &'a [String],
    /// The command that rebuilds world X alone, with `X` in place of its seed.
    rebuild: String,
    tally: &'a [Tally],
    cells: &'a [WorldCell],
}

pub(super) fn run(args: &SimArgs, count: u64) -> anyhow::Result<()> {
    if count == 0 {
        bail!("--random: expected at least 1 world, got 0");
    }
    let schedulers = if args.schedulers.is_empty() {
        every_scheduler()
    } else {
        args.schedulers.clone()
    };
    for name in &schedulers {
        if pcdn_core::scheduler::by_name(name, 0).is_none() {
            bail!("--scheduler {name}: unknown scheduler (see `pcdn sim --list`)");
        }
    }
    let ccs = if args.ccs.is_empty() {
        vec!["default".to_owned()]
    } else {
        args.ccs.clone()
    };
    for name in &ccs {
        if pcdn_core::cc::by_name(name).is_none() {
            bail!("--cc {name}: unknown congestion control (see `pcdn sim --list`)");
        }
    }
    let config = if args.quick {
        RandomConfig::quick()
    } else {
        RandomConfig::default()
    };
    let repeat = args
        .repeat
        .unwrap_or(if args.quick { QUICK_REPEAT } else { DEFAULT_REPEAT });
    if repeat < 2 {
        bail!("--random needs --repeat 2 or more: the scorecard's intervals pair runs seed by seed");
    }
    let compare = Compare {
        schedulers: schedulers.clone(),
        ccs: ccs.clone(),
        repeat,
    };
    let first = args.seed.unwrap_or(1);
    let worlds: Vec<RandomWorld> = (0..count)
        .map(|i| random::draw(random::world_seed(first, i), &config, &compare))
        .collect::<Result<_, _>>()?;
    if let Some(dir) = &args.write_worlds {
        std::fs::create_dir_all(dir).with_context(|| format!("--write-worlds: cannot create {}", dir.display()))?;
        for w in &worlds {
            let path = dir.join(format!("world-{}.toml", w.seed));
            std::fs::write(&path, &w.toml)
                .with_context(|| format!("--write-worlds: cannot write {}", path.display()))?;
        }
        eprintln!("wrote {} scenario files into {}", worlds.len(), dir.display());
    }

    let total: u64 = worlds.iter().map(|w| w.scenario.runs().len() as u64).sum();
    let progress = crate::progress::Progress::new("random worlds", total, "runs", false);
    let mut cells = Vec::new();
    for w in &worlds {
        progress.set_message(format!("world {} ({:?})", w.seed, w.kind));
        let rows = w.scenario.run_full(args.threads, &|| progress.inc())?;
        let point = &w.scenario.points[0];
        cells.extend(scorecard::judge_world(
            w.seed,
            w.kind,
            point.world.servers.len(),
            point.world.duration.as_secs_f64(),
            &rows,
        ));
    }
    progress.finish();
    let tally = scorecard::tally(&cells, WORST);
    let rebuild = rebuild_command(args, "X");
    if args.json {
        let report = Report {
            seed: first,
            worlds: count,
            quick: args.quick,
            repeat,
            schedulers: &schedulers,
            ccs: &ccs,
            rebuild,
            tally: &tally,
            cells: &cells,
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&report).context("the scorecard as JSON")?
        );
    } else {
        print!("{}", scorecard_text(args, first, count, repeat, &tally, &cells));
    }
    Ok(())
}

/// Every scheduler of `pcdn sim --list` but the other names of another (`lrf` is `minrtt`).
fn every_scheduler() -> Vec<String> {
    use pcdn_core::scheduler::{ALIASES, SCHEDULERS};
    SCHEDULERS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !ALIASES.iter().any(|(alias, _)| alias == name))
        .map(str::to_owned)
        .collect()
}

/// `pcdn sim --random 1 --seed SEED` with the flags that shape the world and its runs.
fn rebuild_command(args: &SimArgs, seed: &str) -> String {
    let mut cmd = format!("pcdn sim --random 1 --seed {seed}");
    if args.quick {
        cmd.push_str(" --quick");
    }
    if let Some(r) = args.repeat {
        let _ = write!(cmd, " --repeat {r}");
    }
    for s in &args.schedulers {
        let _ = write!(cmd, " --scheduler {s}");
    }
    for cc in &args.ccs {
        let _ = write!(cmd, " --cc {cc}");
    }
    cmd
}

/// The tally, then one line per world and control with its best scheduler.
fn scorecard_text(args: &SimArgs, first: u64, count: u64, repeat: u32, tally: &[Tally], cells: &[WorldCell]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "random worlds {first}..={} ({count} worlds{}), {repeat} runs per scheduler × control in each",
        first.wrapping_add(count - 1),
        if args.quick { ", quick" } else { "" },
    );
    let _ = writeln!(
        out,
        "metric: aggregation (goodput ÷ capacity, ↑) in downloads and segmented downloads; first frame + \
         stalls (s, ↓) in videos.\nbest: the best mean; level: the seed-by-seed difference from the best has a \
         95 % interval that includes 0; behind: beyond it. worst: the largest gaps to the best mean (% of it), \
         by world seed.\n"
    );
    let columns: Vec<Column<Tally>> = vec![
        column("scheduler", false, |t: &Tally| t.scheduler.clone()),
        column("cc", false, |t: &Tally| t.cc.clone()),
        column("best", true, |t: &Tally| t.best.to_string()),
        column("level", true, |t: &Tally| t.level.to_string()),
        column("behind", true, |t: &Tally| t.behind.to_string()),
        column("median waste", true, |t: &Tally| format!("{:.4}", t.median_waste)),
        column("worst worlds (gap, world seed)", false, |t: &Tally| {
            t.worst
                .iter()
                .map(|s| {
                    let mark = if s.verdict == Verdict::Behind { "*" } else { "" };
                    format!("{:.1}%{mark} {}", s.gap * 100.0, s.world)
                })
                .collect::<Vec<_>>()
                .join(", ")
        }),
    ];
    out.push_str(&render(&columns, tally.iter()));
    let _ = writeln!(
        out,
        "(* behind beyond the interval.) Rebuild world X alone: {}\n",
        rebuild_command(args, "X")
    );
    let columns: Vec<Column<WorldCell>> = vec![
        column("world", true, |c: &WorldCell| c.world.to_string()),
        column("kind", false, |c: &WorldCell| format!("{:?}", c.kind).to_lowercase()),
        column("servers", true, |c: &WorldCell| c.servers.to_string()),
        column("capacity Mbit/s", true, |c: &WorldCell| {
            format!("{:.2}", c.capacity_mbps)
        }),
        column("cc", false, |c: &WorldCell| c.cc.clone()),
        column("best", false, |c: &WorldCell| {
            let best: Vec<&str> = c
                .standings
                .iter()
                .filter(|s| s.verdict == Verdict::Best)
                .map(|s| s.scheduler.as_str())
                .collect();
            best.join(" ")
        }),
        column("best value", true, |c: &WorldCell| {
            let arrow = if c.goal == Goal::Higher { "↑" } else { "s ↓" };
            let best = c.standings.iter().find(|s| s.verdict == Verdict::Best);
            best.map_or_else(String::new, |b| format!("{:.3} {arrow}", b.mean))
        }),
        column("level", true, |c: &WorldCell| verdicts(c, Verdict::Level)),
        column("behind", true, |c: &WorldCell| verdicts(c, Verdict::Behind)),
    ];
    out.push_str(&render(&columns, cells.iter()));
    out
}

fn verdicts(c: &WorldCell, verdict: Verdict) -> String {
    c.standings.iter().filter(|s| s.verdict == verdict).count().to_string()
}
