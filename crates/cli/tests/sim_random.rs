//! `pcdn sim --random`: the generalization suite's command line, on quick worlds.

use std::path::PathBuf;

use assert_cmd::Command;
use serde_json::Value;

fn pcdn() -> Command {
    Command::cargo_bin("pcdn").expect("binary built")
}

fn output(args: &[&str]) -> std::process::Output {
    pcdn().args(args).output().unwrap()
}

fn json(args: &[&str]) -> (Vec<u8>, Value) {
    let out = output(args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let value = serde_json::from_slice(&out.stdout).unwrap();
    (out.stdout, value)
}

fn every_scheduler() -> Vec<&'static str> {
    use pcdn_core::scheduler::{ALIASES, SCHEDULERS};
    SCHEDULERS
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !ALIASES.iter().any(|(a, _)| a == n))
        .collect()
}

#[test]
fn three_quick_worlds_score_every_scheduler_the_same_on_any_thread_count() {
    let args = ["sim", "--random", "3", "--quick", "--seed", "5", "--json"];
    let (bytes, report) = json(&[&args[..], &["--threads", "2"]].concat());
    let (again, _) = json(&[&args[..], &["--threads", "1"]].concat());
    assert!(bytes == again, "the same seed gave different JSON");

    let schedulers = every_scheduler();
    let cells = report["cells"].as_array().unwrap();
    let worlds: Vec<u64> = cells.iter().map(|c| c["world"].as_u64().unwrap()).collect();
    assert_eq!(worlds, [5, 6, 7]);
    for cell in cells {
        let standings = cell["standings"].as_array().unwrap();
        let names: Vec<&str> = standings.iter().map(|s| s["scheduler"].as_str().unwrap()).collect();
        assert_eq!(names, schedulers);
        let best: Vec<&Value> = standings.iter().filter(|s| s["verdict"] == "best").collect();
        assert!(!best.is_empty(), "{cell}");
        let higher = cell["goal"] == "higher";
        let best_mean = best[0]["mean"].as_f64().unwrap();
        for s in standings {
            let mean = s["mean"].as_f64().unwrap();
            assert!(if higher { mean <= best_mean } else { mean >= best_mean }, "{s}");
            // Behind means an interval that excludes zero; level, one that includes it.
            if let (Some(d), Some(h)) = (s["diff"].as_f64(), s["half_width"].as_f64()) {
                assert_eq!(s["verdict"] == "behind", d.abs() > h, "{s}");
            }
        }
    }
    let tally = report["tally"].as_array().unwrap();
    assert_eq!(tally.len(), schedulers.len());
    for t in tally {
        let n: u64 = ["best", "level", "behind"].iter().map(|k| t[k].as_u64().unwrap()).sum();
        assert_eq!(n, 3, "{t}");
        assert!(t["worst"].as_array().unwrap().len() <= 3);
    }
    assert_eq!(report["rebuild"], "pcdn sim --random 1 --seed X --quick");

    // World 6 alone, by its own seed, is the same world with the same verdicts.
    let (_, alone) = json(&["sim", "--random", "1", "--quick", "--seed", "6", "--json"]);
    assert_eq!(alone["cells"][0], cells[1]);
}

#[test]
fn written_worlds_are_scenario_files_that_give_the_same_runs() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("pcdn-random-{}", std::process::id()));
    let dir_arg = dir.to_str().unwrap();
    let (_, report) = json(&[
        "sim",
        "--random",
        "2",
        "--quick",
        "--seed",
        "40",
        "--scheduler",
        "minrtt",
        "--scheduler",
        "weave",
        "--repeat",
        "2",
        "--write-worlds",
        dir_arg,
        "--json",
    ]);
    for cell in report["cells"].as_array().unwrap() {
        let seed = cell["world"].as_u64().unwrap();
        let file = dir.join(format!("world-{seed}.toml"));
        let (_, rows) = json(&["sim", file.to_str().unwrap(), "--json", "--runs"]);
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), 2);
        for (row, standing) in rows.iter().zip(cell["standings"].as_array().unwrap()) {
            assert_eq!(row["scheduler"], standing["scheduler"]);
            assert_eq!(row["waste"], standing["waste"]);
            if cell["kind"] != "video" {
                assert_eq!(row["aggregation"], standing["mean"]);
            }
        }
    }
}

#[test]
fn the_text_scorecard_lists_every_scheduler_and_how_to_rebuild_a_world() {
    let out = output(&[
        "sim",
        "--random",
        "1",
        "--quick",
        "--seed",
        "3",
        "--scheduler",
        "minrtt",
        "--scheduler",
        "round-robin",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    for name in ["minrtt", "round-robin"] {
        assert!(text.lines().any(|l| l.starts_with(name)), "{name} missing:\n{text}");
    }
    assert!(
        text.contains("pcdn sim --random 1 --seed X --quick --scheduler minrtt --scheduler round-robin"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("3 ")),
        "world 3's line:\n{text}"
    );
}

#[test]
fn bad_suite_arguments_are_clear_errors() {
    for (args, expected) in [
        (&["--random", "0"][..], "at least 1 world"),
        (
            &["--random", "1", "--scheduler", "fastest"],
            "--scheduler fastest: unknown scheduler",
        ),
        (
            &["--random", "1", "--cc", "warp"],
            "--cc warp: unknown congestion control",
        ),
        (&["--random", "1", "--repeat", "1"], "--repeat 2 or more"),
        (&["--random", "1", "scenarios/default.toml"], "cannot be used with"),
        (&["--quick"], "--random"),
    ] {
        let out = output(&[&["sim"][..], args].concat());
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

#[test]
fn the_ablation_judges_each_switch_against_weave_as_it_ships() {
    let (_, cells) = json(&[
        "sim",
        "--ablate",
        "--random",
        "1",
        "--quick",
        "--seed",
        "9001",
        "--repeat",
        "2",
        "--switch",
        "pipe_cap",
        "--switch",
        "tail_copies",
        "--json",
    ]);
    let cells = cells.as_array().unwrap();
    let switches: Vec<&str> = cells.iter().map(|c| c["switch"].as_str().unwrap()).collect();
    assert_eq!(switches, ["pipe_cap", "tail_copies"]);
    for c in cells {
        assert_eq!(c["world"], "world-9001");
        assert!(
            ["worse", "level", "better"].contains(&c["effect"].as_str().unwrap()),
            "{c}"
        );
    }
    let out = output(&["sim", "--ablate", "--random", "1", "--quick", "--switch", "no_such"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown weave switch"));
}
