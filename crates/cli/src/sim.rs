//! `pcdn sim`: runs a scenario file in the simulator and prints one row per scheduler ×
//! congestion control × sweep point, as a table, as JSON, or as PNG charts of a sweep.

mod ab;
mod ablate;
mod fleet;
pub(crate) mod plot;
mod random;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use pcdn_sim::scenario::{AnyScenario, FullRow, PlayerRow, RunMetrics, Scenario, paired};

/// The scenario `pcdn sim` runs without a FILE.
const DEFAULT_SCENARIO: &str = include_str!("../../../scenarios/default.toml");
const DEFAULT_SCENARIO_FILE: &str = "scenarios/default.toml (built in)";

#[derive(Args, Debug)]
pub struct SimArgs {
    /// Scenario file (TOML; every key is in docs/scenarios.md). Omitted: the built-in
    /// two-path scenario (scenarios/default.toml).
    file: Option<PathBuf>,
    /// Print the rows as a JSON array (and nothing else on stdout).
    #[arg(long)]
    json: bool,
    /// With --json, each row also lists its runs (`runs`: seed and that run's metrics, the
    /// player's in full), for paired comparisons: every scheduler runs the same seeds.
    #[arg(long, requires = "json")]
    runs: bool,
    /// Write PNG charts of the sweep into DIR: aggregation, goodput, OFO mean, wait p99 and
    /// completion time against the swept value, one line per scheduler × congestion control.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// With --plot: draw the rows that `pcdn sim FILE --json` wrote into ROWS (same file, same
    /// --cc/--point choices) instead of running the scenario, so that charts and tables show
    /// the same numbers.
    #[arg(long, value_name = "ROWS", requires = "plot", conflicts_with_all = ["json", "against", "seed", "repeat"])]
    from_rows: Option<PathBuf>,
    /// List the schedulers and congestion controls, one per line with a summary, and exit.
    #[arg(long)]
    list: bool,
    /// Seed of the first repeat (overrides the file's `seed`); repeat r uses seed + r.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Runs per scheduler × congestion control × sweep point, averaged into one row
    /// (overrides the file's `repeat`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    repeat: Option<u32>,
    /// Only this congestion control of the file's (repeatable): one cell of a file, run
    /// again on other seeds, needs only its own.
    #[arg(long = "cc", value_name = "NAME")]
    ccs: Vec<String>,
    /// Only this sweep point, a value as written in the file's `sweep.values` (repeatable).
    #[arg(long = "point", value_name = "VALUE")]
    points: Vec<String>,
    /// Runs simulated at once (default: one per core). The output does not depend on it.
    #[arg(long, value_name = "N", default_value_t = 0)]
    threads: usize,
    /// After the table, each other scheduler's rows against SCHEDULER's in the same cell
    /// (congestion control × sweep point), seed by seed: the mean difference (row −
    /// SCHEDULER) and its 95 % confidence interval, `*` where the interval excludes zero.
    #[arg(long, value_name = "SCHEDULER", conflicts_with = "json")]
    against: Option<String>,
    /// The generalization suite: draw N random worlds (2-8 servers, 0.5-100 Mbit/s, 2-250 ms,
    /// random and bursty loss, jitter, reordering, traces, shared bottlenecks, upload caps,
    /// failures; whole downloads, segmented ones and videos; docs/scenarios.md, "Random
    /// worlds"), run every scheduler on each, and print the scorecard: per scheduler, the
    /// worlds where it is best, level with the best (95 % interval) or behind, and its worst
    /// worlds. World i has seed `--seed` + i (default 1); `--random 1 --seed X` rebuilds world
    /// X alone. `--cc` picks the controls (default: the default one), `--repeat` the runs per
    /// world (default 5).
    #[arg(long, value_name = "N", conflicts_with_all = ["file", "plot", "against", "points", "runs"])]
    random: Option<u64>,
    /// With --random: the same worlds in miniature (contents of at most 1.5 MB, videos of 3-6 s,
    /// 3 runs), for tests and a first look.
    #[arg(long, requires = "random")]
    quick: bool,
    /// With --random: write each world as a scenario file `world-SEED.toml` into DIR
    /// (`pcdn sim DIR/world-SEED.toml` gives its rows).
    #[arg(long, value_name = "DIR", requires = "random")]
    write_worlds: Option<PathBuf>,
    /// Only this scheduler (repeatable): of the file's, or with --random of `--list`'s
    /// (default: all).
    #[arg(long = "scheduler", value_name = "NAME")]
    schedulers: Vec<String>,
    /// Run on this transport instead of the file's `[client] transport` (repeatable, one row
    /// per transport): `pull` (pcdn's protocol), `subflow` (each path an in-order TCP stream)
    /// or `subflow-or` (with MPTCP's opportunistic retransmission); docs/scenarios.md.
    #[arg(long = "transport", value_name = "NAME", conflicts_with = "random")]
    transports: Vec<String>,
    /// weave's ablation (docs/weave.md): on FILE's cells, or on --random N worlds, weave with
    /// each mechanism switched off in turn against weave as it ships, on the same seeds; per
    /// switch, the cells where switching it off is worse, level or better beyond the 95 %
    /// interval. `--repeat` runs per cell (default 5), `--cc`, `--point`, `--seed` as usual.
    #[arg(long, conflicts_with_all = ["plot", "against", "runs", "write_worlds", "schedulers", "transports"])]
    ablate: bool,
    /// With --ablate: only this switch (repeatable); default: every one of `WeaveConfig`.
    #[arg(long = "switch", value_name = "NAME", requires = "ablate")]
    switches: Vec<String>,
}

pub fn run(args: SimArgs) -> anyhow::Result<()> {
    if args.list {
        print_list();
        return Ok(());
    }
    if args.ablate {
        return ablate::run(&args);
    }
    if let Some(count) = args.random {
        return random::run(&args, count);
    }
    let mut scenario = match &args.file {
        Some(path) => match AnyScenario::load(path)? {
            AnyScenario::Paths(scenario) => scenario,
            AnyScenario::Fleet(fleet) => return fleet::run(&args, *fleet),
        },
        None => Scenario::parse(DEFAULT_SCENARIO, DEFAULT_SCENARIO_FILE, Path::new("."))?,
    };
    if let Some(seed) = args.seed {
        scenario.set_seed(seed);
    }
    if let Some(repeat) = args.repeat {
        scenario.set_repeat(repeat);
    }
    if !args.ccs.is_empty() {
        scenario
            .keep_ccs(&args.ccs)
            .map_err(|m| anyhow::anyhow!("{}: --cc {m}", scenario.file))?;
    }
    if !args.schedulers.is_empty() {
        scenario
            .keep_schedulers(&args.schedulers)
            .map_err(|m| anyhow::anyhow!("{}: --scheduler {m}", scenario.file))?;
    }
    if !args.transports.is_empty() {
        scenario
            .set_transports(&args.transports)
            .map_err(|m| anyhow::anyhow!("{}: --transport {m}", scenario.file))?;
    }
    if !args.points.is_empty() {
        scenario
            .keep_points(&args.points)
            .map_err(|m| anyhow::anyhow!("{}: --point {m}", scenario.file))?;
    }
    if let Some(name) = &args.against {
        let schedulers = scenario
            .points
            .first()
            .map(|p| p.schedulers.clone())
            .unwrap_or_default();
        if !schedulers.contains(name) {
            bail!(
                "{}: --against {name}: not among the file's [client] schedulers ({})",
                scenario.file,
                schedulers.join(", ")
            );
        }
    }
    if args.plot.is_some() && scenario.sweep_key.is_none() {
        bail!(
            "{}: --plot draws a sweep, and this scenario has no [sweep] (docs/scenarios.md)",
            scenario.file
        );
    }

    if let (Some(path), Some(dir)) = (&args.from_rows, &args.plot) {
        let rows = read_rows(path, &scenario)?;
        for file in plot::write_charts(&scenario, &rows, dir)? {
            eprintln!("wrote {}", file.display());
        }
        return Ok(());
    }

    let total = scenario.runs().len() as u64;
    let progress = crate::progress::Progress::new(&scenario.name, total, "runs", false);
    let rows = scenario.run_full(args.threads, &|| progress.inc());
    progress.finish();
    let mut rows = rows?;
    if !args.runs && args.against.is_none() {
        rows.iter_mut().for_each(|r| r.runs.clear());
    }

    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows).context("rows as JSON")?);
    } else {
        print!("{}", table(&scenario, &rows));
        if let Some(name) = &args.against {
            print!("\n{}", paired_table(&scenario, &rows, name));
        }
    }
    if let Some(dir) = &args.plot {
        for file in plot::write_charts(&scenario, &rows, dir)? {
            eprintln!("wrote {}", file.display());
        }
    }
    Ok(())
}

/// The rows of an earlier `--json` run of `scenario`, checked to be its rows in its order.
fn read_rows(path: &Path, scenario: &Scenario) -> anyhow::Result<Vec<FullRow>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("--from-rows: cannot read {}", path.display()))?;
    let rows: Vec<FullRow> = serde_json::from_str(&text).with_context(|| {
        format!(
            "--from-rows: {} is not the JSON rows of `pcdn sim --json`",
            path.display()
        )
    })?;
    // One row per point × scheduler × cc × transport, in `Scenario::runs`' order.
    let mut expected: Vec<(&str, &str, &str, Option<&str>)> = scenario
        .runs()
        .iter()
        .map(|r| (r.scheduler, r.cc, r.transport, r.sweep))
        .collect();
    expected.dedup();
    let found: Vec<(&str, &str, &str, Option<&str>)> = rows
        .iter()
        .map(|r| {
            (
                r.row.scheduler.as_str(),
                r.row.cc.as_str(),
                r.row.transport.as_str(),
                r.row.sweep.as_deref(),
            )
        })
        .collect();
    if let Some(i) = (0..expected.len().max(found.len())).find(|&i| expected.get(i) != found.get(i)) {
        bail!(
            "--from-rows: {} is not {}'s rows: row {} is {:?}, the scenario's is {:?} (scheduler, cc, transport, sweep)",
            path.display(),
            scenario.file,
            i + 1,
            found.get(i),
            expected.get(i)
        );
    }
    Ok(rows)
}

/// Every scheduler and congestion control, one line each with its summary.
pub fn print_list() {
    let aliases = |list: &[(&str, &str)]| {
        list.iter()
            .map(|(alias, own)| format!("{alias} = {own}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("schedulers:");
    for (name, about) in pcdn_core::scheduler::SCHEDULERS {
        println!("  {name:<14} {about}");
    }
    println!("  (other names: {})", aliases(pcdn_core::scheduler::ALIASES));
    println!("congestion controls:");
    for (name, about) in pcdn_core::cc::CONTROLLERS {
        println!("  {name:<14} {about}");
    }
    println!("  (other names: {})", aliases(pcdn_core::cc::ALIASES));
    println!("transports:");
    for (name, about) in pcdn_core::Transport::NAMES {
        println!("  {name:<14} {about}");
    }
}

/// A column: header (with its unit), right-aligned or not, and the cell of a row.
struct Column<R = FullRow> {
    header: String,
    right: bool,
    cell: Box<dyn Fn(&R) -> String>,
}

fn column(header: &str, right: bool, cell: impl Fn(&FullRow) -> String + 'static) -> Column {
    column_of(header, right, cell)
}

fn column_of<R>(header: &str, right: bool, cell: impl Fn(&R) -> String + 'static) -> Column<R> {
    Column {
        header: header.to_owned(),
        right,
        cell: Box::new(cell),
    }
}

/// The rows as an aligned table under a one-line title; with a `[video]`, the player's QoE
/// follows the transport's metrics.
fn table(scenario: &Scenario, rows: &[FullRow]) -> String {
    let mut columns = cell_columns(scenario);
    columns.extend([
        column("goodput Mbit/s", true, |r| format!("{:.2}", r.row.goodput_mbps)),
        column("capacity Mbit/s", true, |r| format!("{:.2}", r.row.capacity_mbps)),
        column("aggregation", true, |r| format!("{:.3}", r.row.aggregation)),
        column("ofo mean kB", true, |r| format!("{:.1}", r.row.ofo_mean_bytes / 1e3)),
        column("ofo max kB", true, |r| format!("{:.1}", r.row.ofo_max_bytes / 1e3)),
        column("wait mean ms", true, |r| format!("{:.2}", r.row.wait_mean_ms)),
        column("wait p99 ms", true, |r| format!("{:.2}", r.row.wait_p99_ms)),
        column("completion s", true, |r| {
            r.row.completion_s.map_or_else(|| "-".to_owned(), |c| format!("{c:.2}"))
        }),
        column("bound s", true, |r| {
            r.row.bound_s.map_or_else(|| "-".to_owned(), |c| format!("{c:.2}"))
        }),
        column("efficiency", true, |r| {
            r.row.efficiency.map_or_else(|| "-".to_owned(), |e| format!("{e:.3}"))
        }),
        column("waste", true, |r| format!("{:.3}", r.row.waste)),
        column("req waste", true, |r| format!("{:.3}", r.row.request_waste)),
        column("cdn share", true, |r| format!("{:.3}", r.row.cdn_share)),
        column("completed", true, |r| format!("{}/{}", r.row.completed, r.row.repeats)),
    ]);
    if rows.iter().any(|r| r.player.is_some()) {
        let player =
            |f: fn(&PlayerRow) -> String| move |r: &FullRow| r.player.as_ref().map_or_else(|| "-".to_owned(), f);
        columns.extend([
            column(
                "first frame s",
                true,
                player(|p| p.first_frame_s.map_or_else(|| "-".to_owned(), |s| format!("{s:.2}"))),
            ),
            column("rebuffers", true, player(|p| format!("{:.1}", p.rebuffer_count))),
            column("rebuffer ratio", true, player(|p| format!("{:.3}", p.rebuffer_ratio))),
            column("stall %", true, player(|p| format!("{:.1}", p.stall_percentage))),
            column(
                "gop pause %",
                true,
                player(|p| format!("{:.1}", p.gop_pause_percentage)),
            ),
            column(
                "frames discarded",
                true,
                player(|p| format!("{:.1}", p.frames_discarded)),
            ),
            column("jump rate", true, player(|p| format!("{:.3}", p.jump_to_cdn_rate))),
        ]);
    }
    let mut out = String::new();
    let repeats: Vec<u32> = scenario.points.iter().map(|p| p.repeat).collect();
    let seed = scenario.points.first().map_or(0, |p| p.seed);
    let repeat = repeats.first().copied().unwrap_or(1);
    let _ = write!(out, "{} ({})", scenario.name, scenario.file);
    if repeats.iter().all(|&r| r == repeat) {
        let seeds = if repeat == 1 {
            format!("seed {seed}")
        } else {
            format!("seeds {seed}..{}", seed.wrapping_add(u64::from(repeat) - 1))
        };
        let _ = write!(
            out,
            ": mean of {repeat} run{} ({seeds})",
            if repeat == 1 { "" } else { "s" }
        );
    }
    out.push('\n');
    out + &render(&columns, rows.iter())
}

/// The cell columns: scheduler, control, and the swept value if there is one.
fn cell_columns(scenario: &Scenario) -> Vec<Column> {
    let mut columns = vec![
        column("scheduler", false, |r| r.row.scheduler.clone()),
        column("cc", false, |r| r.row.cc.clone()),
    ];
    let pull_only = scenario.points.iter().all(|p| p.transports == ["pull"]);
    if !pull_only {
        columns.push(column("transport", false, |r| r.row.transport.clone()));
    }
    if let Some(key) = &scenario.sweep_key {
        columns.push(column(key, false, |r| r.row.sweep.clone().unwrap_or_default()));
    }
    columns
}

/// `--against`: every row of another scheduler beside `against`'s row of the same cell, each
/// metric as the mean seed-by-seed difference ± the half-width of its 95 % interval.
fn paired_table(scenario: &Scenario, rows: &[FullRow], against: &str) -> String {
    let cell = |r: &FullRow| (r.row.cc.clone(), r.row.transport.clone(), r.row.sweep.clone());
    let references: std::rc::Rc<Vec<FullRow>> =
        std::rc::Rc::new(rows.iter().filter(|r| r.row.scheduler == against).cloned().collect());
    let mut columns = cell_columns(scenario);
    let mut metric = |header: &str, better: Better, decimals: usize, value: fn(&RunMetrics) -> Option<f64>| {
        let references = references.clone();
        let header = format!("{header} {}", better.arrow());
        columns.push(column(&header, true, move |r| {
            let Some(reference) = references.iter().find(|q| cell(q) == cell(r)) else {
                return "-".to_owned();
            };
            let values = |row: &FullRow| {
                row.runs
                    .iter()
                    .map(|run| value(&run.metrics))
                    .collect::<Option<Vec<f64>>>()
            };
            match values(r).zip(values(reference)).and_then(|(a, b)| paired(&a, &b)) {
                Some(p) => difference(&p, decimals),
                None => "-".to_owned(),
            }
        }));
    };
    metric("aggregation", Better::Higher, 4, |m| Some(m.aggregation));
    metric("completion s", Better::Lower, 3, |m| m.completion_s);
    metric("ofo mean kB", Better::Lower, 1, |m| Some(m.ofo_mean_bytes / 1e3));
    metric("wait p99 ms", Better::Lower, 2, |m| Some(m.wait_p99_ms));
    metric("waste", Better::Lower, 4, |m| Some(m.waste));
    if rows.iter().any(|r| r.player.is_some()) {
        metric("first frame s", Better::Lower, 4, |m| {
            m.player.as_ref()?.first_frame_latency.map(|d| d.as_secs_f64())
        });
        metric("rebuffers", Better::Lower, 2, |m| {
            m.player.as_ref().map(|p| p.rebuffer_count as f64)
        });
        metric("stall %", Better::Lower, 3, |m| {
            m.player.as_ref().map(|p| p.stall_percentage)
        });
        metric("frames discarded", Better::Lower, 1, |m| {
            m.player.as_ref().map(|p| p.frames_discarded as f64)
        });
    }
    let others: Vec<&FullRow> = rows.iter().filter(|r| r.row.scheduler != against).collect();
    let seeds = rows.first().map_or(0, |r| r.runs.len());
    format!(
        "against {against}, seed by seed over {seeds} seeds: mean difference (row − {against}) ± \
         95 % interval; * where the interval excludes zero; ↑ higher is better, ↓ lower is better; \
         `same`: equal on every seed\n{}",
        render(&columns, others.into_iter())
    )
}

/// Which way a metric is better, shown in the `--against` header.
#[derive(Clone, Copy)]
enum Better {
    Higher,
    Lower,
}

impl Better {
    fn arrow(self) -> &'static str {
        match self {
            Better::Higher => "↑",
            Better::Lower => "↓",
        }
    }
}

/// A paired difference as `+0.012 ± 0.004*`: `same` when it is zero on every seed, and in
/// scientific notation when `decimals` would round a real difference to zero.
fn difference(p: &pcdn_sim::scenario::Paired, decimals: usize) -> String {
    if p.mean == 0.0 && p.half_width == 0.0 {
        return "same ".to_owned();
    }
    let star = if p.is_clear() { "*" } else { " " };
    let shown = 0.5 * 10f64.powi(-(decimals as i32));
    if p.mean.abs() < shown && p.half_width < shown {
        format!("{:+.1e} ± {:.1e}{star}", p.mean, p.half_width)
    } else {
        format!("{:+.decimals$} ± {:.decimals$}{star}", p.mean, p.half_width)
    }
}

/// Header, rule and one line per row, each column as wide as its widest text.
fn render<'a, R: 'a>(columns: &[Column<R>], rows: impl Iterator<Item = &'a R>) -> String {
    let cells: Vec<Vec<String>> = rows.map(|r| columns.iter().map(|c| (c.cell)(r)).collect()).collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cells
                .iter()
                .map(|row| row[i].chars().count())
                .chain([c.header.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |out: &mut String, texts: &mut dyn Iterator<Item = &str>| {
        let mut parts = Vec::with_capacity(columns.len());
        for ((text, c), &w) in texts.zip(columns).zip(&widths) {
            parts.push(if c.right {
                format!("{text:>w$}")
            } else {
                format!("{text:<w$}")
            });
        }
        out.push_str(parts.join("  ").trim_end());
        out.push('\n');
    };

    let mut out = String::new();
    line(&mut out, &mut columns.iter().map(|c| c.header.as_str()));
    let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
    line(&mut out, &mut rule.iter().map(String::as_str));
    for row in &cells {
        line(&mut out, &mut row.iter().map(String::as_str));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcdn_sim::scenario::paired;

    #[test]
    fn differences_never_print_as_a_signed_zero() {
        let same = paired(&[1.0, 2.0], &[1.0, 2.0]).unwrap();
        assert_eq!(difference(&same, 4), "same ");
        let tiny = paired(&[1.0, 2.0, 3.0], &[1.0 + 2e-6, 2.0 + 3e-6, 3.0 + 2.5e-6]).unwrap();
        let text = difference(&tiny, 4);
        assert!(text.starts_with("-2.5e-6 ± ") && text.ends_with('*'), "{text}");
        let clear = paired(&[1.0, 2.0, 3.0], &[0.0, 1.0, 2.5]).unwrap();
        assert_eq!(difference(&clear, 3), "+0.833 ± 0.717*");
    }
}
