//! `pcdn bench serve-cost` on tiny sizes, so it cannot rot: both servers (a `pcdn serve` and
//! nginx) serve every round, and each row counts the bytes its clients received and the
//! server's CPU time.

use assert_cmd::Command;
use serde_json::Value;

#[test]
fn a_small_serve_cost_run_reports_pcdn_and_nginx_for_every_client_count() {
    let out = Command::cargo_bin("pcdn")
        .expect("binary built")
        .args([
            "bench",
            "serve-cost",
            "--clients",
            "1,3",
            "--size",
            "2MB",
            "--min-bytes",
            "8MB",
            "--json",
        ])
        .timeout(std::time::Duration::from_secs(600))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pcdn bench serve-cost failed: {stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = result["rows"].as_array().unwrap();
    let mut seen = Vec::new();
    for row in rows {
        let clients = row["clients"].as_u64().unwrap();
        let repeats = row["repeats"].as_u64().unwrap();
        // 8 MB a round at least: 4 downloads of 2 MB for one client, 2 each for three.
        assert_eq!(repeats, 8u64.div_ceil(2 * clients), "{row}");
        assert_eq!(row["bytes"].as_u64().unwrap(), 2_000_000 * clients * repeats, "{row}");
        assert!(row["wall_s"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["server_cpu_s"].as_f64().unwrap() >= 0.0, "{row}");
        seen.push((row["server"].as_str().unwrap().to_owned(), clients));
    }
    let expected: Vec<(String, u64)> = [1, 3]
        .iter()
        .flat_map(|&n| [("pcdn serve".to_owned(), n), ("nginx".to_owned(), n)])
        .collect();
    assert_eq!(seen, expected);
    assert_eq!(result["cpu_ratio"].as_array().unwrap().len(), 2);
}
