//! A fleet A/B test (`ab_test = true`): the schedulers share each run, every viewer in one
//! group, and the report compares each group with the first.

use pcdn_sim::scenario::{AB_PERCENTILES, AB_SLICES, AnyScenario, FleetScenario, ab_reports};
use std::path::Path;

const FILE: &str = r#"
name = "ab"
duration = "3min"
repeat = 2
[client]
schedulers = ["minrtt", "weave"]
cc = ["cubic"]
[fleet]
ab_test = true
placement = ["top"]
viewers = 24
arrival_window = "90s"
videos = 6
video_duration = "12s"
bitrate = "1mbit"
jump_to_cdn = { buffer_below = "1s" }
devices = 5
device_upload = { uniform = ["2mbit", "6mbit"] }
device_loss = { uniform = [0.0, 0.05] }
device_videos = 6
"#;

fn parse(text: &str) -> Result<FleetScenario, String> {
    match AnyScenario::parse(text, "ab.toml", Path::new(".")).map_err(|e| e.to_string())? {
        AnyScenario::Fleet(f) => Ok(*f),
        AnyScenario::Paths(_) => panic!("not read as a fleet"),
    }
}

#[test]
fn the_groups_share_each_run_and_split_its_viewers() {
    let scenario = parse(FILE).unwrap();
    // One run per seed, whatever the number of schedulers.
    assert_eq!(scenario.runs().len(), 2);
    let rows = scenario.run(2, &|| {}).unwrap();
    assert_eq!(rows.len(), 2);
    for seed in 0..2 {
        let split: usize = rows.iter().map(|r| r.runs[seed].viewers.len()).sum();
        assert_eq!(split, 24, "every viewer of a run is in exactly one group");
        let mut indices: Vec<usize> = rows
            .iter()
            .flat_map(|r| r.runs[seed].viewers.iter().map(|v| v.index))
            .collect();
        indices.sort_unstable();
        assert_eq!(indices, (0..24).collect::<Vec<_>>());
    }
    // The fleet is one: both groups see the same fleet-wide figures.
    assert_eq!(rows[0].fill_bytes, rows[1].fill_bytes);
    assert_eq!(rows[0].edge_utilization, rows[1].edge_utilization);

    let reports = ab_reports(&rows, &scenario.schedulers, scenario.arrival_window().as_secs_f64());
    assert_eq!(reports.len(), 1);
    let report = &reports[0];
    assert_eq!(report.baseline, "minrtt");
    assert_eq!(report.groups.len(), 2);
    let (base, other) = (&report.groups[0], &report.groups[1]);
    assert_eq!(base.viewers + other.viewers, 48);
    // The baseline against itself changes nothing; the other group has an interval (2 seeds).
    assert!(base.goodput_vs_baseline.iter().all(|&c| c == 0.0));
    assert_eq!(base.ofo_change.mean, 0.0);
    assert!(other.ofo_change.half_width.is_some());
    assert_eq!(other.goodput_mbps.len(), AB_PERCENTILES.len());
    assert!(
        other.goodput_mbps.windows(2).all(|w| w[0] <= w[1]),
        "percentiles ascend"
    );
    assert_eq!(other.waste.len(), AB_SLICES);
    assert!(other.goodput_mbps.iter().all(|&g| g > 0.0));
}

#[test]
fn an_ab_test_runs_the_same_twice() {
    let mut scenario = parse(FILE).unwrap();
    scenario.repeat = 1;
    let a = serde_json::to_string(&scenario.run(1, &|| {}).unwrap()).unwrap();
    let b = serde_json::to_string(&scenario.run(2, &|| {}).unwrap()).unwrap();
    assert_eq!(a, b);
}

#[test]
fn an_ab_test_needs_two_schedulers() {
    let one = FILE.replace(r#"schedulers = ["minrtt", "weave"]"#, r#"schedulers = ["weave"]"#);
    let e = parse(&one).unwrap_err();
    assert!(e.contains("fleet.ab_test") && e.contains("at least two"), "{e}");
}
