//! The `pcdn` command: one binary for the laboratory and the delivery stack.

mod add;
mod bench;
mod config_file;
mod demo;
mod emulate;
mod fetch;
mod operator;
mod play;
mod progress;
mod serve;
mod sim;
mod tracker;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

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
    /// Import a file (or with --video an MP4 or HLS folder) into a content store; prints its
    /// content id as the last line.
    Add(add::AddArgs),
    /// Measure the speed of pcdn's parts (no network: the core in memory).
    Bench(bench::BenchArgs),
    /// Run the whole stack on loopback (tracker, origin, four edges behind emulated links)
    /// and compare schedulers fetching one sample; with --fleet, a whole PCDN (caching edges,
    /// placement, 40 viewers) and its CDN share over time. Nothing to set up.
    Demo(demo::DemoArgs),
    /// Run a real-time UDP relay that applies the simulator's link model in each direction.
    Emulate(emulate::EmulateArgs),
    /// Download a content from many servers at once, verify it and write it atomically.
    Fetch(fetch::FetchArgs),
    /// List the schedulers and congestion controls pcdn knows.
    List,
    /// The operator's tools: create the operator key, enroll devices, revoke them.
    Operator(operator::OperatorArgs),
    /// Download a content and serve it while it arrives over a local HTTP gateway for video
    /// players (ffplay, mpv, VLC, a browser); prints the URLs.
    Play(play::PlayArgs),
    /// Serve a content store over UDP as an edge device (or, with --origin, the CDN origin).
    Serve(serve::ServerArgs),
    /// Run a scenario file in the deterministic network simulator and compare schedulers. The
    /// default scenario takes seconds; a paper's file one to ten minutes on 2 cores (release
    /// build), with a progress line on stderr every 5 s when it is not a terminal.
    Sim(sim::SimArgs),
    /// Run the control plane: device registry, content lookups and signed manifests over HTTP.
    Tracker(tracker::TrackerArgs),
}

fn main() -> anyhow::Result<()> {
    let command = config_file::with_config_option(Cli::command());
    let argv = match config_file::expand(&command, std::env::args_os().collect()) {
        Ok(argv) => argv,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let matches = command.get_matches_from(argv);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match cli.command {
        Command::Add(args) => add::run_add(args),
        Command::Bench(args) => bench::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Emulate(args) => emulate::run(args),
        Command::Fetch(args) => fetch::run_fetch(args),
        Command::List => {
            sim::print_list();
            Ok(())
        }
        Command::Operator(args) => operator::run(args),
        Command::Play(args) => play::run_play(args),
        Command::Serve(args) => match serve::run_serve(args) {
            // A configuration error (credential, address): exit status 2, which
            // deploy/pcdn-serve.service does not restart on.
            Err(e) if e.is::<pcdn_net::serve::TrackerRefused>() => {
                eprintln!("Error: {e}");
                std::process::exit(2);
            }
            other => other,
        },
        Command::Sim(args) => sim::run(args),
        Command::Tracker(args) => tracker::run(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example config files of `deploy/` are valid for the commands their units run.
    #[test]
    fn the_deploy_configs_parse() {
        let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
        for (command, file) in [("tracker", "tracker.toml"), ("serve", "edge.toml")] {
            let config = deploy.join(file);
            let argv = ["pcdn", command, "--config", config.to_str().unwrap()].map(std::ffi::OsString::from);
            let cli = config_file::with_config_option(Cli::command());
            let argv = config_file::expand(&cli, argv.to_vec()).unwrap_or_else(|e| panic!("{e}"));
            let matches = cli.try_get_matches_from(argv).unwrap_or_else(|e| panic!("{file}: {e}"));
            Cli::from_arg_matches(&matches).unwrap_or_else(|e| panic!("{file}: {e}"));
        }
    }
}
