//! `pcdn bench fleet`: the fleet simulator's speed and memory on one core, for a fleet of a
//! given size (viewers over a window, devices, videos).

use anyhow::{Context, bail};
use clap::Args;
use cpu_time::ProcessTime;
use pcdn_sim::scenario::AnyScenario;

#[derive(Args, Debug)]
pub struct FleetArgs {
    /// Viewers arriving over the window.
    #[arg(long, default_value_t = 2000)]
    viewers: usize,
    /// The window they arrive over (the run lasts it plus two minutes).
    #[arg(long, default_value = "1h", value_parser = pcdn_sim::parse_duration)]
    window: std::time::Duration,
    /// Edge devices (2 to 20 Mbit/s of upload each).
    #[arg(long, default_value_t = 300)]
    devices: usize,
    /// Videos (60 s at 2 Mbit/s each, Zipf-popular with exponent 0.8).
    #[arg(long, default_value_t = 1000)]
    videos: usize,
    /// Placement policy (`none`, `top`, `popularity`, `on-miss`).
    #[arg(long, default_value = "popularity")]
    placement: String,
    /// Scheduler of every viewer (`pcdn sim --list`).
    #[arg(long, default_value = "weave")]
    scheduler: String,
    /// Congestion control (`pcdn sim --list`).
    #[arg(long, default_value = "cubic")]
    cc: String,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// The fleet as a scenario file, so that the benchmark runs exactly what `pcdn sim` would.
fn scenario_text(args: &FleetArgs) -> String {
    let window_s = args.window.as_secs_f64();
    format!(
        r#"name = "bench fleet"
duration = "{duration}s"
seed = {seed}
[client]
schedulers = ["{scheduler}"]
cc = ["{cc}"]
[fleet]
placement = ["{placement}"]
viewers = {viewers}
arrival_window = "{window_s}s"
videos = {videos}
bitrate = "2mbit"
video_duration = "60s"
popularity = {{ zipf = 0.8 }}
watch = {{ uniform = [0.3, 1.0] }}
devices = {devices}
device_upload = {{ uniform = ["2mbit", "20mbit"] }}
device_delay = {{ uniform = ["5ms", "40ms"] }}
device_videos = 10
device_cache = "300MB"
"#,
        duration = window_s + 120.0,
        seed = args.seed,
        scheduler = args.scheduler,
        cc = args.cc,
        placement = args.placement,
        viewers = args.viewers,
        videos = args.videos,
        devices = args.devices,
    )
}

pub fn run(args: FleetArgs) -> anyhow::Result<()> {
    let text = scenario_text(&args);
    let AnyScenario::Fleet(scenario) = AnyScenario::parse(&text, "pcdn bench fleet", std::path::Path::new("."))? else {
        bail!("the benchmark's fleet did not read as a fleet");
    };
    let spec = scenario.spec(&args.placement, args.seed);
    eprintln!(
        "bench fleet: {} viewers over {:?}, {} devices, {} videos, placement {}, {} / {} (one thread)",
        args.viewers, args.window, args.devices, args.videos, args.placement, args.scheduler, args.cc
    );
    // Simulated seconds, reported at the end of each minute window of the run.
    let simulated_s = (args.window.as_secs_f64() + 120.0).ceil() as u64;
    let progress = crate::progress::Progress::new("bench fleet", simulated_s, "simulated s", false);
    let wall = std::time::Instant::now();
    let cpu = ProcessTime::now();
    let outcome = pcdn_sim::fleet::run_observed(
        &spec,
        &[args.scheduler.as_str()],
        &args.cc,
        args.seed,
        &mut |now_s, _| progress.set(now_s as u64),
    );
    let cpu_s = cpu.elapsed().as_secs_f64();
    let wall_s = wall.elapsed().as_secs_f64();
    progress.finish();
    let outcome = outcome?;
    let peak_rss_mib = peak_rss_kib().context("reading the peak memory from /proc/self/status")? as f64 / 1024.0;
    let finished = outcome.viewers.iter().filter(|v| v.finished).count();
    let received: u64 = outcome.viewers.iter().map(|v| v.origin_bytes + v.edge_bytes).sum();
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "viewers": outcome.viewers.len(),
                "finished": finished,
                "devices": args.devices,
                "videos": args.videos,
                "simulated_s": outcome.end_s,
                "wall_s": wall_s,
                "cpu_s": cpu_s,
                "peak_rss_mib": peak_rss_mib,
                "received_bytes": received,
                "fill_bytes": outcome.fill_bytes,
                "cdn_share": outcome.cdn_share(),
            })
        );
    } else {
        println!(
            "{} viewers ({finished} watched what they came for), {:.0} s simulated in {wall_s:.1} s wall, \
             {cpu_s:.1} s CPU; peak memory {peak_rss_mib:.0} MiB; {:.2} GB delivered, {:.2} GB filled, cdn share {:.3}",
            outcome.viewers.len(),
            outcome.end_s,
            received as f64 / 1e9,
            outcome.fill_bytes as f64 / 1e9,
            outcome.cdn_share(),
        );
    }
    Ok(())
}

/// The process's peak resident memory (VmHWM), in KiB.
fn peak_rss_kib() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .context("no VmHWM line")?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .context("VmHWM without a value")?
        .parse()?)
}
