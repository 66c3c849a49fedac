//! `pcdn bench`: speed measurements whose figures go into docs/benchmarks.md.

mod fleet;
mod procs;
mod serve_cost;
mod soak;
mod video;

use anyhow::bail;
use clap::{Args, Subcommand};
use cpu_time::ProcessTime;
use pcdn_core::harness::DirectPair;
use pcdn_core::{DownloadConfig, cc, scheduler};

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// What to measure.
    #[command(subcommand)]
    target: Target,
}

#[derive(Subcommand, Debug)]
enum Target {
    /// Client and server sessions exchanging packets in memory: delivered packets per CPU second.
    Core(CoreArgs),
    /// A real video delivered in the simulator: frames on time and PSNR per scheduler (needs
    /// ffmpeg; about a minute on 2 cores with the defaults, progress on stderr).
    Video(video::VideoArgs),
    /// The delivery stack under every flood of issue 40: legitimate fetches' times against a
    /// quiet run, each process's memory and descriptors, every file byte-identical.
    Soak(soak::SoakArgs),
    /// The fleet simulator on one core: wall and CPU time and peak memory for a fleet of
    /// viewers, devices and videos (`pcdn sim` on a `[fleet]` file runs the same code).
    Fleet(fleet::FleetArgs),
    /// One `pcdn serve` serving N concurrent `pcdn fetch` processes on loopback beside nginx
    /// serving the same file to N curl clients: goodput and server CPU seconds per GB (needs
    /// nginx and curl).
    ServeCost(serve_cost::ServeCostArgs),
}

#[derive(Args, Debug)]
struct CoreArgs {
    /// Number of servers (paths).
    #[arg(long, default_value_t = 4)]
    paths: usize,
    /// Content size in bytes: k/M/G (or kB/MB/GB) are powers of 1000, Ki/Mi/Gi (or
    /// KiB/MiB/GiB) powers of 1024.
    #[arg(long, default_value = "200M", value_parser = pcdn_sim::parse_size)]
    size: u64,
    /// Payload bytes per packet.
    #[arg(long, default_value_t = 1400)]
    packet_size: u32,
    /// Repetitions; the report gives each and the best.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Keep and verify every delivered byte (as `pcdn fetch` does) instead of counting them.
    #[arg(long)]
    verify: bool,
    /// Scheduler (`pcdn sim --list`); minRTT by default, the cheapest decision, so the figure
    /// is the rest of the core's cost.
    #[arg(long, default_value = "minrtt")]
    scheduler: String,
    /// Congestion control (`pcdn sim --list`).
    #[arg(long, default_value = "cubic")]
    cc: String,
    /// Print one JSON object per run instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.target {
        Target::Core(args) => core(&args),
        Target::Video(args) => video::run(args),
        Target::Soak(args) => soak::run(args),
        Target::Fleet(args) => fleet::run(args),
        Target::ServeCost(args) => serve_cost::run(args),
    }
}

fn core(args: &CoreArgs) -> anyhow::Result<()> {
    let length = args.size;
    if args.paths == 0 {
        bail!("--paths must be at least 1");
    }
    let Some(factory) = cc::by_name(&args.cc) else {
        bail!(
            "--cc: no congestion control named {:?} (`pcdn sim --list` lists them)",
            args.cc
        );
    };
    if scheduler::by_name(&args.scheduler, 1).is_none() {
        bail!(
            "--scheduler: no scheduler named {:?} (`pcdn sim --list` lists them)",
            args.scheduler
        );
    }
    let mut best = 0.0f64;
    for run in 1..=args.runs {
        let mut config = DownloadConfig::new(Default::default(), length, args.packet_size);
        config.keep_data = args.verify;
        let mut pair = DirectPair::new(
            config,
            scheduler::by_name(&args.scheduler, 1).expect("checked above"),
            factory.as_ref(),
            args.paths,
        );
        let start = ProcessTime::now();
        let read = pair.run();
        let cpu = start.elapsed().as_secs_f64();
        if args.verify && read != length {
            bail!("read {read} bytes of {length}");
        }
        let h = &pair;
        let packets = h.client.stats().packets_delivered;
        let rate = packets as f64 / cpu;
        best = best.max(rate);
        if args.json {
            println!(
                "{}",
                serde_json::json!({"target": "core", "run": run, "paths": args.paths, "bytes": length,
                    "scheduler": args.scheduler, "cc": args.cc,
                    "packet_size": args.packet_size, "verify": args.verify, "packets": packets,
                    "cpu_s": cpu, "packets_per_cpu_s": rate})
            );
        } else {
            println!(
                "run {run}: {packets} packets delivered in {cpu:.3} CPU s = {:.2} M packets per CPU second ({:.1} Gbit/s of payload)",
                rate / 1e6,
                rate * f64::from(args.packet_size) * 8.0 / 1e9
            );
        }
    }
    if !args.json {
        println!("best: {:.2} M packets per CPU second", best / 1e6);
    }
    Ok(())
}
