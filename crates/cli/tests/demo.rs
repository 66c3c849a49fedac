//! `pcdn demo` and `pcdn demo --fleet` as a user runs them, small: the whole stack on
//! loopback in one process, the fleet's viewers as `pcdn fetch` processes.

mod common;

use common::{ONE_STACK_AT_A_TIME, pcdn};

fn json_of(output: &std::process::Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "pcdn demo failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", String::from_utf8_lossy(&output.stdout)))
}

#[test]
fn the_scheduler_demo_fetches_the_sample_with_each_scheduler() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let output = pcdn()
        .args(["demo", "--size", "1MB", "--schedulers", "default,minrtt", "--json"])
        .output()
        .unwrap();
    let json = json_of(&output);
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        assert_eq!(row["bytes"].as_u64(), Some(1_000_000), "{row}");
        assert!(row["completion_s"].as_f64().unwrap() > 0.0, "{row}");
    }
}

/// 12 viewers over 6 contents and 3 edges: the edges start empty, fill themselves, and take
/// bytes off the CDN; every viewer's file is checked by the demo (size and BLAKE3).
#[test]
fn the_fleet_demo_fills_the_edges_and_the_cdn_share_falls() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("plot");
    let output = pcdn()
        .args(["demo", "--fleet", "--viewers", "12", "--contents", "6", "--edges", "3"])
        .args([
            "--content-size",
            "300kB",
            "--cache-size",
            "2MB",
            "--interval",
            "1.5s",
            "--window",
            "6s",
        ])
        .args(["--seed", "3", "--json", "--plot"])
        .arg(&plot)
        .output()
        .unwrap();
    let json = json_of(&output);
    let viewers = json["viewers"].as_array().unwrap();
    assert_eq!(viewers.len(), 12);
    let sizes: Vec<u64> = json["settings"]["content_sizes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap())
        .collect();
    for v in viewers {
        let content = v["content"].as_u64().unwrap() as usize;
        assert_eq!(v["bytes"].as_u64(), Some(sizes[content - 1]), "{v}");
        assert!(v["time_s"].as_f64().unwrap() > 0.0, "{v}");
    }
    let shares: Vec<f64> = json["windows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["cdn_share"].as_f64())
        .collect();
    let (first, last) = (shares[0], *shares.last().unwrap());
    assert_eq!(viewers[0]["edge_bytes"].as_u64(), Some(0), "the edges start empty");
    assert!(last < first, "the CDN share did not fall: {shares:?}");
    assert!(json["hit_ratio"].as_f64().unwrap() > 0.0);
    let edges = json["edges"].as_array().unwrap();
    assert_eq!(edges.len(), 3);
    let fill_bytes: u64 = edges.iter().map(|e| e["fill_bytes"].as_u64().unwrap()).sum();
    assert!(fill_bytes > 0, "no edge filled: {edges:?}");
    let viewer_bytes: u64 = edges.iter().map(|e| e["viewer_bytes"].as_u64().unwrap()).sum();
    assert!(viewer_bytes > 0, "no edge served a viewer: {edges:?}");
    let png = std::fs::read(plot.join("cdn-share.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
}

#[test]
fn fleet_options_need_fleet() {
    let output = pcdn().args(["demo", "--viewers", "3"]).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--fleet"), "{stderr}");
    let output = pcdn().args(["demo", "--fleet", "--size", "1MB"]).output().unwrap();
    assert!(!output.status.success());
}
