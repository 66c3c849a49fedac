//! `pcdn fetch`: its command line and how it runs, and the source arguments `pcdn play` shares.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use pcdn_core::wire::ContentId;

use pcdn_net::fetch::{DEFAULT_CC, FetchConfig, fetch, parse_key};
use pcdn_net::store::parse_content_id;

/// `pcdn fetch`: download a content from many servers at once.
#[derive(clap::Args, Debug, Clone)]
pub struct FetchArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Output file (replaced only once the download is complete and verified). Until then
    /// the bytes go to OUT.pcdn-partial; an interrupted or failed fetch leaves it there if it
    /// holds a verified block, and the same command resumes from it.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: PathBuf,
    /// Print the report as one JSON object (and no progress bar).
    #[arg(long)]
    pub json: bool,
    /// Give up after this long, e.g. 30s or 5min. Default: only when every server failed.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg)]
    pub timeout: Option<Duration>,
    /// Declare a server failed after this many retransmission timeouts in a row (each one
    /// doubles the wait, RFC 6298 §5.5: 6 is about 13 s of silence from a 200 ms RTO).
    #[arg(long, value_name = "N", default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub max_timeouts: u32,
}

/// What to download and from where, and how to schedule it: the arguments `pcdn fetch` and
/// `pcdn play` share.
#[derive(clap::Args, Debug, Clone)]
pub struct SourceArgs {
    /// Content id (64 hex characters, as `pcdn add` prints it).
    #[arg(value_name = "ID", value_parser = parse_content_id)]
    pub id: ContentId,
    /// Tracker base URL, e.g. http://127.0.0.1:7800 or https://tracker.example:7800.
    #[arg(long, value_name = "URL")]
    pub tracker: Option<String>,
    /// CA certificate(s) (PEM) to verify an https:// tracker with, instead of the system's roots.
    #[arg(long, value_name = "FILE", requires = "tracker")]
    pub tracker_ca: Option<PathBuf>,
    /// Scheduler (`pcdn sim --list` lists them).
    #[arg(long, value_name = "NAME", default_value = "default")]
    pub scheduler: String,
    /// Congestion control (`pcdn sim --list` lists them).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_CC)]
    pub cc: String,
    /// Most edge servers to ask the tracker for (1..=64).
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_servers: u32,
    /// Edge server to use instead of the tracker's list (repeatable).
    #[arg(long = "server", value_name = "ADDR")]
    pub servers: Vec<SocketAddr>,
    /// Origin server to use besides the tracker's (repeatable).
    #[arg(long = "origin-server", value_name = "ADDR")]
    pub origin_servers: Vec<SocketAddr>,
    /// Signed manifest file (e.g. a store's contents/<id>/manifest) instead of the tracker's.
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    /// The only manifest signer to trust (64 hex characters); default: the tracker's origins.
    #[arg(long, value_name = "HEX", value_parser = parse_key)]
    pub origin_key: Option<[u8; 32]>,
}

impl SourceArgs {
    /// A fetch of this content to `output`, from these sources (reads the manifest file).
    pub fn config(&self, output: impl Into<PathBuf>) -> anyhow::Result<FetchConfig> {
        let manifest = match &self.manifest {
            Some(path) => Some(std::fs::read(path).with_context(|| format!("--manifest {}", path.display()))?),
            None => None,
        };
        Ok(FetchConfig {
            tracker: self.tracker.clone(),
            tracker_ca: self.tracker_ca.clone(),
            manifest,
            edges: (!self.servers.is_empty()).then(|| self.servers.clone()),
            origins: self.origin_servers.clone(),
            origin_key: self.origin_key,
            scheduler: self.scheduler.clone(),
            cc: self.cc.clone(),
            max_servers: self.max_servers,
            ..FetchConfig::new(self.id, output)
        })
    }
}

fn parse_duration_arg(text: &str) -> Result<Duration, String> {
    match pcdn_core::units::parse_duration(text) {
        Ok(d) if d.is_zero() => Err("expected a positive duration".to_owned()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

impl FetchArgs {
    /// The fetch these arguments describe (reads the manifest file).
    pub fn config(&self) -> anyhow::Result<FetchConfig> {
        Ok(FetchConfig {
            timeout: self.timeout,
            max_consecutive_timeouts: self.max_timeouts,
            progress: !self.json,
            ..self.source.config(&self.output)?
        })
    }
}

/// Runs `pcdn fetch`: the report goes to stdout, as text or (`--json`) one JSON object.
pub fn run_fetch(args: FetchArgs) -> anyhow::Result<()> {
    // The report says what happened to each path; the log is for warnings (RUST_LOG for more).
    pcdn_net::init_logging("warn");
    let config = args.config()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let partial = pcdn_net::fetch::output::partial_path(&config.output)?;
    let outcome = runtime.block_on(async {
        tokio::select! {
            result = fetch(config) => Ok(result),
            signal = interrupted() => Err(signal),
        }
    });
    // The fetch is dropped: its partial file is closed (kept if it holds a verified block).
    drop(runtime);
    let kept = || {
        if partial.exists() {
            format!(
                "; the verified blocks are kept in {}: the same command resumes",
                partial.display()
            )
        } else {
            String::new()
        }
    };
    let report = match outcome {
        Ok(Ok(report)) => report,
        Ok(Err(e)) => anyhow::bail!("{e}{}", kept()),
        Err(Ok(signal)) => {
            eprintln!("interrupted by {}{}", signal.name, kept());
            // The shell's convention for a death by signal (128 + its number).
            std::process::exit(128 + signal.number);
        }
        Err(Err(e)) => return Err(e),
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).context("the report as JSON")?
        );
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
}

/// A signal that asks the fetch to stop.
struct Signal {
    name: &'static str,
    number: i32,
}

/// Waits for SIGINT (Ctrl-C) or SIGTERM.
async fn interrupted() -> anyhow::Result<Signal> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    Ok(tokio::select! {
        _ = interrupt.recv() => Signal { name: "SIGINT", number: libc::SIGINT },
        _ = terminate.recv() => Signal { name: "SIGTERM", number: libc::SIGTERM },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetch_arguments_default_to_the_simulators_choices() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: FetchArgs,
        }
        let id = "ab".repeat(32);
        let cli = Cli::try_parse_from(["fetch", &id, "-o", "out", "--tracker", "http://127.0.0.1:1"]).unwrap();
        let config = cli.args.config().unwrap();
        assert_eq!((config.scheduler.as_str(), config.cc.as_str()), ("default", "default"));
        assert_eq!(config.max_servers, 8);
        assert!(config.edges.is_none() && config.timeout.is_none() && config.progress);
        let cli = Cli::try_parse_from([
            "fetch",
            &id,
            "-o",
            "out",
            "--server",
            "127.0.0.1:5",
            "--server",
            "127.0.0.1:6",
            "--json",
            "--timeout",
            "30s",
        ])
        .unwrap();
        let config = cli.args.config().unwrap();
        assert_eq!(config.edges.as_ref().map(Vec::len), Some(2));
        assert_eq!(config.timeout, Some(Duration::from_secs(30)));
        assert!(!config.progress);
        assert!(Cli::try_parse_from(["fetch", "abc", "-o", "out"]).is_err());
        assert!(Cli::try_parse_from(["fetch", &id, "-o", "out", "--max-servers", "0"]).is_err());
        assert!(Cli::try_parse_from(["fetch", &id, "-o", "out", "--origin-key", "xyz"]).is_err());
    }
}
