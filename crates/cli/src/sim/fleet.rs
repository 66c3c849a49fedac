//! `pcdn sim` on a fleet scenario (`[fleet]`): one row per placement × scheduler × congestion
//! control, as a table or as JSON.

use anyhow::{Context, bail};
use pcdn_sim::scenario::{FleetRow, FleetScenario, ab_reports};

use super::{Column, SimArgs, column_of as column, render};

pub(super) fn run(args: &SimArgs, mut scenario: FleetScenario) -> anyhow::Result<()> {
    for (flag, given) in [
        ("--against", args.against.is_some()),
        ("--point", !args.points.is_empty()),
        ("--scheduler", !args.schedulers.is_empty()),
        ("--transport", !args.transports.is_empty()),
        ("--from-rows", args.from_rows.is_some()),
    ] {
        if given {
            bail!(
                "{}: {flag} is for path scenarios; a [fleet] scenario has no such rows",
                scenario.file
            );
        }
    }
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    if let Some(repeat) = args.repeat {
        scenario.repeat = repeat;
    }
    if !args.ccs.is_empty() {
        if let Some(missing) = args.ccs.iter().find(|cc| !scenario.ccs.contains(cc)) {
            bail!(
                "{}: --cc \"{missing}\" is not among the file's [client] cc ({})",
                scenario.file,
                scenario.ccs.join(", ")
            );
        }
        scenario.ccs.retain(|cc| args.ccs.contains(cc));
    }
    // Simulated seconds over every run, and the viewers gone so far beside them.
    let runs = scenario.runs().len() as u64;
    let total_s = runs * scenario.duration.as_secs().max(1);
    let progress = crate::progress::Progress::new(&scenario.name, total_s, "simulated s", false);
    let state = std::sync::Mutex::new((0.0f64, 0usize, 0u64));
    let rows = scenario.run_observed(args.threads, &|tick| {
        let mut state = state.lock().expect("no thread panics holding it");
        state.0 += tick.simulated_s;
        state.1 += tick.viewers;
        state.2 += u64::from(tick.run_done);
        progress.set(state.0 as u64);
        progress.set_message(format!(
            "{}: {} viewers done, {}/{runs} runs",
            scenario.name, state.1, state.2
        ));
    });
    progress.finish();
    let mut rows = rows?;
    let ab = if scenario.ab_test {
        ab_reports(&rows, &scenario.schedulers, scenario.arrival_window().as_secs_f64())
    } else {
        Vec::new()
    };
    if !args.runs {
        rows.iter_mut().for_each(|r| r.runs.clear());
    }
    if args.json {
        let json = if scenario.ab_test {
            serde_json::to_string_pretty(&serde_json::json!({ "rows": rows, "ab": ab }))
        } else {
            serde_json::to_string_pretty(&rows)
        };
        println!("{}", json.context("rows as JSON")?);
    } else {
        print!("{}", table(&scenario, &rows));
        for report in &ab {
            print!("\n{}", super::ab::table(report));
        }
    }
    if let Some(dir) = &args.plot {
        let mut files = super::plot::write_fleet_charts(&scenario.name, &rows, dir)?;
        files.extend(super::plot::write_ab_charts(&scenario.name, &ab, dir)?);
        for file in files {
            eprintln!("wrote {}", file.display());
        }
    }
    Ok(())
}

fn table(scenario: &FleetScenario, rows: &[FleetRow]) -> String {
    let f2 = |v: f64| if v.is_nan() { "-".to_owned() } else { format!("{v:.2}") };
    let f3 = |v: f64| format!("{v:.3}");
    let columns: Vec<Column<FleetRow>> = vec![
        column("placement", false, |r: &FleetRow| r.placement.clone()),
        column("scheduler", false, |r: &FleetRow| r.scheduler.clone()),
        column("cc", false, |r: &FleetRow| r.cc.clone()),
        column("viewers", true, |r: &FleetRow| r.viewers.to_string()),
        column("cdn share ↓", true, move |r: &FleetRow| f3(r.cdn_share)),
        column("cdn p95 Mbit/s ↓", true, move |r: &FleetRow| f2(r.cdn_p95_mbps)),
        column("first frame p50 s ↓", true, move |r: &FleetRow| {
            f2(r.first_frame_p50_s)
        }),
        column("first frame p95 s ↓", true, move |r: &FleetRow| {
            f2(r.first_frame_p95_s)
        }),
        column("rebuffer ratio ↓", true, move |r: &FleetRow| f3(r.rebuffer_ratio)),
        column("stalled viewers ↓", true, move |r: &FleetRow| f3(r.stalled_viewers)),
        column("waste ↓", true, move |r: &FleetRow| f3(r.waste)),
        column("edge use ↑", true, move |r: &FleetRow| f3(r.edge_utilization)),
    ];
    let repeat = scenario.repeat;
    let seeds = if repeat == 1 {
        format!("seed {}", scenario.seed)
    } else {
        format!(
            "seeds {}..{}",
            scenario.seed,
            scenario.seed.wrapping_add(u64::from(repeat) - 1)
        )
    };
    format!(
        "{} ({}): a fleet, mean of {repeat} run{} ({seeds})\n{}",
        scenario.name,
        scenario.file,
        if repeat == 1 { "" } else { "s" },
        render(&columns, rows.iter())
    )
}
