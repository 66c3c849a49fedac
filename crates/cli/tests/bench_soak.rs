//! `pcdn bench soak` for 20 s, so it cannot rot: it starts its tracker and servers as processes,
//! registers many holders of one content, runs every flood, samples each process from /proc
//! and checks every fetched file.

use assert_cmd::Command;
use serde_json::Value;

#[test]
fn a_short_soak_runs_every_flood_and_reports_each_process() {
    let out = Command::cargo_bin("pcdn")
        .expect("binary built")
        .args([
            "bench",
            "soak",
            "--duration",
            "20s",
            "--size",
            "1MB",
            "--quiet-fetches",
            "2",
            "--holders",
            "2000",
            "--json",
        ])
        .timeout(std::time::Duration::from_secs(600))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pcdn bench soak failed: {stderr}");
    // A progress line at least every 5 s of floods.
    assert!(stderr.matches("soak: ").count() >= 5, "{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["all_identical"], true, "{result}");
    assert_eq!(result["quiet"]["fetches"], 2);
    assert_eq!(result["quiet"]["failed"], 0, "{result}");
    for (name, sent) in result["floods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f[0].clone(), f[1].clone()))
    {
        assert!(sent.as_u64().unwrap() > 0, "flood {name} sent nothing");
    }
    assert_eq!(result["floods"].as_array().unwrap().len(), 9);
    assert_eq!(result["holders"], 2000, "every holder registered: {result}");
    let processes = result["processes"].as_array().unwrap();
    let names: Vec<&str> = processes.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["tracker", "origin", "edge-1", "edge-2"]);
    for p in processes {
        let samples = p["samples"].as_array().unwrap();
        assert!(samples.len() >= 4, "{p}");
        for s in samples {
            assert!(s[1].as_u64().unwrap() > 1_000_000 && s[2].as_u64().unwrap() >= 3, "{p}");
        }
    }
}
