//! The `pcdn` command: one binary for the laboratory and the delivery stack.

mod bench;
mod sim;

use clap::{Parser, Subcommand};

/// pcdn: multi-source video delivery. A client fetches one content from many edge servers
/// and a CDN origin at once, and its scheduler keeps the pieces arriving in order while the
/// servers' bandwidth adds up.
#[derive(Parser, Debug)]
#[command(name = "pcdn", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Measure the speed of pcdn's parts (no network: the core in memory).
    Bench(bench::BenchArgs),
    /// List the schedulers and congestion controls pcdn knows.
    List,
    /// Run a scenario file in the deterministic network simulator and compare schedulers.
    Sim(sim::SimArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench(args) => bench::run(args),
        Command::List => {
            sim::print_list();
            Ok(())
        }
        Command::Sim(args) => sim::run(args),
    }
}
