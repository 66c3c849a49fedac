//! `pcdn bench video` on real H.264 videos made by ffmpeg (scripts/test.sh installs it).

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

fn bench_video(dir: &Path, extra: &[&str]) -> Vec<Value> {
    let out = Command::cargo_bin("pcdn")
        .expect("binary built")
        .current_dir(dir)
        .args([
            "bench",
            "video",
            "--length",
            "4s",
            "--fps",
            "30",
            "--json",
            "--schedulers",
            "minrtt",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pcdn bench video failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

#[test]
fn a_video_delivered_in_time_shows_every_frame_and_matches_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let rows = bench_video(dir.path(), &["--bitrates", "1mbit", "--frames-out", "frames.csv"]);
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    // 4 s at 30 fps, in the 10 Mbit/s + 4 Mbit/s world: nothing is late.
    assert_eq!(row["frames"], 120);
    assert_eq!(row["frames_late"], 0);
    assert_eq!(row["psnr_db"], Value::Null, "identical to the original: infinite PSNR");
    let bitrate = row["bitrate_bps"].as_f64().unwrap();
    assert!((0.7e6..1.4e6).contains(&bitrate), "encoded near 1 Mbit/s: {bitrate}");
    let csv = std::fs::read_to_string(dir.path().join("frames.csv")).unwrap();
    assert_eq!(csv.lines().count(), 121, "a header and one line per frame");
}

#[test]
fn frames_that_miss_their_deadline_show_the_last_good_frame_and_lower_the_psnr() {
    let dir = tempfile::tempdir().unwrap();
    // One 1 Mbit/s path for a 2 Mbit/s video: playback overtakes the download.
    std::fs::write(
        dir.path().join("slow.toml"),
        r#"
duration = "60s"
[content]
size = "1MB"
[client]
schedulers = ["minrtt"]
cc = ["cubic"]
[[server]]
name = "only"
origin = true
link = { rate = "1mbit", delay = "10ms" }
"#,
    )
    .unwrap();
    let rows = bench_video(dir.path(), &["--bitrates", "2mbit", "--scenario", "slow.toml"]);
    let row = &rows[0];
    let late = row["frames_late"].as_u64().unwrap();
    assert!(late > 30, "at half the rate needed, many frames are late: {late}");
    let psnr = row["psnr_db"].as_f64().expect("late frames differ from the original");
    assert!(psnr > 5.0 && psnr < 60.0, "a finite PSNR: {psnr}");
}
