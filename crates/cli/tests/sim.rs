//! `pcdn sim`: the scenario runner's command line.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn pcdn() -> Command {
    Command::cargo_bin("pcdn").expect("binary built")
}

/// A small two-server scenario with a sweep (a few hundred ms of simulation in a debug build).
const SWEEP: &str = r#"
name = "cli test"
seed = 3
repeat = 2
duration = "30s"
[content]
size = "300kB"
[client]
schedulers = ["minrtt", "round-robin"]
cc = ["cubic"]
[[server]]
name = "cdn"
origin = true
link = { rate = "10mbit", delay = "15ms" }
[[server]]
name = "edge1"
link = { rate = "4mbit", delay = "40ms", loss = 0.01, jitter = "2ms" }
[sweep]
key = "server.edge1.link.delay"
values = ["20ms", "60ms"]
"#;

/// `pcdn sim FILE EXTRA... --plot DIR`.
fn sim_plot<S: AsRef<std::ffi::OsStr>>(file: &Path, dir: &Path, extra: &[S]) -> std::process::Output {
    pcdn()
        .arg("sim")
        .arg(file)
        .args(extra)
        .arg("--plot")
        .arg(dir)
        .output()
        .unwrap()
}

/// Writes `text` to a fresh file in the test's temporary folder.
fn scenario_file(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("pcdn-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn stdout_of(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn list_prints_every_scheduler_and_control_with_its_summary() {
    let text = String::from_utf8(stdout_of(pcdn().args(["sim", "--list"]))).unwrap();
    for (name, about) in pcdn_core::scheduler::SCHEDULERS
        .iter()
        .chain(pcdn_core::cc::CONTROLLERS)
    {
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().next() == Some(name) && l.ends_with(about)),
            "{name} missing from:\n{text}"
        );
    }
    for (alias, own) in pcdn_core::scheduler::ALIASES.iter().chain(pcdn_core::cc::ALIASES) {
        assert!(
            text.contains(&format!("{alias} = {own}")),
            "alias {alias} missing from:\n{text}"
        );
    }
}

#[test]
fn json_rows_have_the_documented_fields_in_order() {
    let file = scenario_file("fields.toml", SWEEP);
    let out = stdout_of(pcdn().arg("sim").arg(&file).arg("--json"));
    let rows: serde_json::Value = serde_json::from_slice(&out).expect("stdout is only JSON");
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2 * 2, "scheduler × sweep point");
    let fields: Vec<&str> = rows[0].as_object().unwrap().keys().map(String::as_str).collect();
    let mut expected = vec![
        "scheduler",
        "cc",
        "transport",
        "sweep",
        "repeats",
        "goodput_mbps",
        "capacity_mbps",
        "aggregation",
        "ofo_mean_bytes",
        "ofo_max_bytes",
        "wait_mean_ms",
        "wait_p99_ms",
        "completion_s",
        "bound_s",
        "efficiency",
        "waste",
        "request_waste",
        "cdn_share",
        "completed",
    ];
    expected.sort_unstable(); // serde_json's map is ordered by key
    assert_eq!(fields, expected);
    let order: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["scheduler"].as_str().unwrap(), r["sweep"].as_str().unwrap()))
        .collect();
    assert_eq!(
        order,
        [
            ("minrtt", "20ms"),
            ("round-robin", "20ms"),
            ("minrtt", "60ms"),
            ("round-robin", "60ms")
        ]
    );
    for r in rows {
        assert_eq!(r["cc"], "cubic");
        assert_eq!(r["repeats"], 2);
        assert_eq!(r["completed"], 2);
        assert!(r["completion_s"].as_f64().unwrap() > 0.0);
        // The bound is the world's own, below every completion.
        let (bound, efficiency) = (r["bound_s"].as_f64().unwrap(), r["efficiency"].as_f64().unwrap());
        assert!(bound > 0.0 && bound < r["completion_s"].as_f64().unwrap(), "{r}");
        assert!(efficiency > 0.0 && efficiency < 1.0, "{r}");
        assert!((r["capacity_mbps"].as_f64().unwrap() - 13.96).abs() < 1e-9, "{r}");
        assert!(r["goodput_mbps"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn the_same_seed_gives_identical_json_and_threads_change_nothing() {
    let file = scenario_file("same.toml", SWEEP);
    let a = stdout_of(pcdn().arg("sim").arg(&file).args(["--json", "--seed", "11"]));
    let b = stdout_of(
        pcdn()
            .arg("sim")
            .arg(&file)
            .args(["--json", "--seed", "11", "--threads", "1"]),
    );
    assert_eq!(a, b);
    let c = stdout_of(pcdn().arg("sim").arg(&file).args(["--json", "--seed", "12"]));
    assert_ne!(a, c, "another seed, another run");
}

#[test]
fn runs_lists_each_seed_whose_metrics_average_to_the_row() {
    let file = scenario_file("runs.toml", SWEEP);
    let out = stdout_of(pcdn().arg("sim").arg(&file).args(["--json", "--runs", "--seed", "5"]));
    let rows: serde_json::Value = serde_json::from_slice(&out).unwrap();
    for r in rows.as_array().unwrap() {
        let runs = r["runs"].as_array().expect("--runs lists the runs");
        let seeds: Vec<u64> = runs.iter().map(|run| run["seed"].as_u64().unwrap()).collect();
        assert_eq!(seeds, [5, 6], "repeat r runs seed + r");
        for field in ["aggregation", "completion_s", "waste", "ofo_mean_bytes"] {
            let mean = runs.iter().map(|run| run[field].as_f64().unwrap()).sum::<f64>() / 2.0;
            let row = r[field].as_f64().unwrap();
            assert!(
                (mean - row).abs() <= 1e-9 * row.abs().max(1.0),
                "{field}: {mean} against {row}"
            );
        }
        let without_seed = |run: &serde_json::Value| {
            let mut run = run.clone();
            run.as_object_mut().unwrap().remove("seed");
            run
        };
        assert_ne!(without_seed(&runs[0]), without_seed(&runs[1]), "two seeds, two runs");
    }
    let plain = stdout_of(pcdn().arg("sim").arg(&file).args(["--json", "--seed", "5"]));
    let plain: serde_json::Value = serde_json::from_slice(&plain).unwrap();
    assert!(plain[0].get("runs").is_none(), "without --runs, rows only");
}

#[test]
fn against_pairs_each_other_row_with_the_named_scheduler_seed_by_seed() {
    let file = scenario_file("against.toml", SWEEP);
    let out = stdout_of(pcdn().arg("sim").arg(&file).args(["--against", "minrtt"]));
    let text = String::from_utf8(out).unwrap();
    let (_, paired) = text
        .split_once("against minrtt, seed by seed over 2 seeds")
        .expect(&text);
    let lines: Vec<&str> = paired.lines().skip(1).collect();
    assert!(
        lines[0].contains("aggregation ↑") && lines[0].contains("completion s ↓"),
        "{paired}"
    );
    let rows: Vec<&str> = lines[2..].to_vec();
    assert_eq!(rows.len(), 2, "round-robin at each sweep point:\n{paired}");
    for (row, delay) in rows.iter().zip(["20ms", "60ms"]) {
        let words: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&words[..3], ["round-robin", "cubic", delay], "{row}");
        assert_eq!(
            row.matches('±').count() + row.matches("same").count(),
            5,
            "one interval (or `same`) per metric: {row}"
        );
        assert!(!row.contains("-0.0000 ± 0.0000"), "{row}");
    }
    let out = pcdn()
        .arg("sim")
        .arg(&file)
        .args(["--against", "blest"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--against blest") && err.contains("minrtt, round-robin"),
        "{err}"
    );
}

#[test]
fn seed_and_repeat_override_the_file() {
    let file = scenario_file("override.toml", SWEEP);
    let out = stdout_of(pcdn().arg("sim").arg(&file).args(["--json", "--repeat", "1"]));
    let rows: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert!(rows.as_array().unwrap().iter().all(|r| r["repeats"] == 1));
    let out = pcdn().arg("sim").arg(&file).args(["--repeat", "0"]).output().unwrap();
    assert!(!out.status.success());
}

#[test]
fn cc_and_point_run_one_cell_of_the_file() {
    let file = scenario_file("cell.toml", SWEEP);
    let out = stdout_of(
        pcdn()
            .arg("sim")
            .arg(&file)
            .args(["--json", "--point", "60ms", "--cc", "cubic"]),
    );
    let rows: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let cells: Vec<_> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["scheduler"].as_str().unwrap(), r["sweep"].as_str().unwrap()))
        .collect();
    assert_eq!(cells, [("minrtt", "60ms"), ("round-robin", "60ms")]);
    let out = pcdn().arg("sim").arg(&file).args(["--point", "40ms"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cell.toml") && err.contains("--point \"40ms\" is not among sweep.values (20ms, 60ms)"),
        "{err}"
    );
}

#[test]
fn the_table_has_one_aligned_row_per_scheduler_cc_and_sweep_point() {
    let file = scenario_file("table.toml", SWEEP);
    let out = pcdn().arg("sim").arg(&file).output().unwrap();
    assert!(out.status.success());
    assert!(out.stderr.is_empty(), "no progress bar off a terminal");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("cli test ("), "{text}");
    assert!(lines[0].contains("mean of 2 runs (seeds 3..4)"), "{text}");
    for header in [
        "scheduler",
        "cc",
        "server.edge1.link.delay",
        "goodput Mbit/s",
        "wait p99 ms",
        "completion s",
    ] {
        assert!(lines[1].contains(header), "{header} missing from {}", lines[1]);
    }
    assert_eq!(lines.len(), 3 + 4, "{text}");
    // Right-aligned numbers end where their header ends.
    let end = lines[1].find("goodput Mbit/s").unwrap() + "goodput Mbit/s".len();
    for row in &lines[3..] {
        assert!(
            row.as_bytes()[end - 1].is_ascii_digit() && row.as_bytes()[end] == b' ',
            "{row}"
        );
    }
}

#[test]
fn a_bad_file_names_the_file_and_the_key() {
    let file = scenario_file("bad.toml", &SWEEP.replace("rate = \"4mbit\"", "rate = \"fast\""));
    let out = pcdn().arg("sim").arg(&file).output().unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    let expected = format!(
        "{}:17: server.edge1.link.rate: expected a rate such as \"10mbit\"",
        file.display()
    );
    assert!(err.contains(&expected), "{err}");

    let file = scenario_file("unknown.toml", &SWEEP.replace("\"round-robin\"", "\"fastest\""));
    let err = String::from_utf8(pcdn().arg("sim").arg(&file).output().unwrap().stderr).unwrap();
    assert!(
        err.contains("client.schedulers.1: unknown scheduler \"fastest\"; known: "),
        "{err}"
    );

    let err = String::from_utf8(pcdn().args(["sim", "no/such.toml"]).output().unwrap().stderr).unwrap();
    assert!(err.contains("no/such.toml: cannot read"), "{err}");
}

#[test]
fn plot_writes_one_png_per_metric() {
    let file = scenario_file("plot.toml", SWEEP);
    let dir = file.parent().unwrap().join("plots");
    let out = sim_plot(&file, &dir, &["--repeat", "1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for name in ["aggregation", "goodput", "ofo_mean", "wait_p99", "completion"] {
        let png = std::fs::read(dir.join(format!("{name}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}.png is not a PNG");
        assert!(
            png.len() > 10_000,
            "{name}.png is {} bytes: no text or lines drawn?",
            png.len()
        );
    }

    let plain = scenario_file("plain.toml", SWEEP.split("[sweep]").next().unwrap());
    let out = sim_plot(&plain, &dir, &[] as &[&str]);
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr).unwrap().contains("no [sweep]"));
}

#[test]
fn plot_draws_the_selection_first_and_every_row_in_a_second_chart() {
    let text = format!("{SWEEP}[plot]\nschedulers = [\"minrtt\"]\nx_label = \"edge RTT (ms)\"\nx_scale = 2\n");
    let file = scenario_file("selected.toml", &text);
    let dir = file.parent().unwrap().join("selected-plots");
    let out = sim_plot(&file, &dir, &["--repeat", "1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for name in ["aggregation", "goodput", "ofo_mean", "wait_p99", "completion"] {
        let main = std::fs::read(dir.join(format!("{name}.png"))).unwrap();
        let all = std::fs::read(dir.join(format!("{name}-all.png"))).unwrap();
        assert!(main.starts_with(b"\x89PNG") && all.starts_with(b"\x89PNG"), "{name}");
        assert_ne!(main, all, "{name}: the selection draws fewer lines than every row");
    }

    // The same charts drawn again from the rows a --json run printed, without running.
    let rows = file.parent().unwrap().join("selected-rows.json");
    let json = pcdn()
        .arg("sim")
        .arg(&file)
        .args(["--repeat", "1", "--json"])
        .output()
        .unwrap();
    assert!(json.status.success());
    std::fs::write(&rows, &json.stdout).unwrap();
    let again = file.parent().unwrap().join("replotted");
    let out = sim_plot(&file, &again, &[std::ffi::OsStr::new("--from-rows"), rows.as_os_str()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for name in ["goodput.png", "completion-all.png"] {
        let drawn = std::fs::read(dir.join(name)).unwrap();
        assert_eq!(drawn, std::fs::read(again.join(name)).unwrap(), "{name} differs");
    }
    // Rows of another scenario are refused, naming the first row that differs.
    let other = scenario_file(
        "other.toml",
        &text.replace("[\"minrtt\", \"round-robin\"]", "[\"round-robin\", \"minrtt\"]"),
    );
    let out = sim_plot(&other, &again, &[std::ffi::OsStr::new("--from-rows"), rows.as_os_str()]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("row 1 is") && err.contains("minrtt"), "{err}");
}

#[test]
fn without_a_file_the_built_in_scenario_runs() {
    let out = stdout_of(pcdn().args(["sim", "--repeat", "1", "--json"]));
    let rows: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let rows = rows.as_array().unwrap();
    assert!(rows.len() >= 2, "a few schedulers");
    for r in rows {
        assert_eq!(r["completed"], 1, "{r}");
        assert!(r["sweep"].is_null());
    }
}

/// A tiny fleet: every combination gives a row with the fleet fields, the same seed gives the
/// same JSON, and placement `none` leaves the CDN serving everything.
#[test]
fn a_fleet_scenario_gives_a_row_per_placement_scheduler_and_control() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fleet.toml");
    std::fs::write(
        &file,
        r#"
duration = "1min"
[client]
schedulers = ["minrtt", "weave"]
cc = ["cubic"]
[fleet]
placement = ["none", "top"]
viewers = 6
arrival_window = "20s"
videos = 4
bitrate = "1mbit"
video_duration = "10s"
devices = 3
device_upload = { uniform = ["4mbit", "8mbit"] }
device_videos = 2
"#,
    )
    .unwrap();
    let run = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pcdn"))
            .args(["sim", "--json", "--threads", "2"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let first = run();
    assert_eq!(first, run(), "the same seed gave another run");
    let rows: serde_json::Value = serde_json::from_slice(&first).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for row in rows {
        for field in [
            "placement",
            "scheduler",
            "cc",
            "viewers",
            "cdn_share",
            "cdn_p95_mbps",
            "first_frame_p50_s",
            "first_frame_p95_s",
            "rebuffer_ratio",
            "stalled_viewers",
            "jump_to_cdn_rate",
            "waste",
            "edge_utilization",
            "fill_bytes",
        ] {
            assert!(row.get(field).is_some(), "{field} missing in {row}");
        }
        assert_eq!(row["viewers"], 6);
        let share = row["cdn_share"].as_f64().unwrap();
        if row["placement"] == "none" {
            assert_eq!(share, 1.0);
        } else {
            assert!(share < 1.0, "{row}");
        }
        assert!(!row["timeline"].as_array().unwrap().is_empty(), "{row}");
    }
    // The charts over time, one file per metric.
    let charts = dir.path().join("charts");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pcdn"))
        .args(["sim", "--threads", "2", "--plot"])
        .arg(&charts)
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for png in ["cdn-share.png", "edge-utilization.png", "stalled-viewers.png"] {
        let bytes = std::fs::read(charts.join(png)).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "{png}");
    }
}

#[test]
fn path_scenario_flags_are_refused_on_a_fleet() {
    let fleet = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/fleet-small.toml");
    for flags in [
        &["--transport", "subflow"][..],
        &["--scheduler", "weave"],
        &["--point", "x"],
    ] {
        let out = pcdn().arg("sim").arg(&fleet).args(flags).output().unwrap();
        assert!(!out.status.success(), "{flags:?} ran");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(flags[0]) && err.contains("is for path scenarios"), "{err}");
    }
}
