//! `pcdn bench soak`: legitimate fetches and lookups against a tracker, an origin and edges (each
//! its own process, started by the bench) first in quiet and then while every flood of issue
//! 40 runs against the same processes; reports the fetches' completion times against the quiet
//! ones, each process's memory and descriptors over time (from /proc), and that every fetched
//! file is byte-identical.

mod flood;
mod holders;

use super::procs::{StopOnDrop, free_addr};
use anyhow::{Context, bail, ensure};
use clap::Args;
use pcdn_core::wire::ContentId;
use pcdn_identity::Role;
use pcdn_net::fetch::{FetchConfig, fetch};
use pcdn_net::serve::{ServerConfig, TrackerSettings, spawn_server};
use pcdn_net::store::Store;
use pcdn_net::tracker_client::TrackerClient;
use pcdn_tracker::{StoreUrl, TrackerConfig};
use serde::Serialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the processes' memory and descriptors are sampled and the progress line drawn.
const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// The soak tracker's device ttl (the default is 30 s).
const HOLDERS_TTL: Duration = Duration::from_secs(4 * 3600);

#[derive(Args, Debug)]
pub struct SoakArgs {
    /// How long the floods run, e.g. 20s, 10min.
    #[arg(long, default_value = "10min", value_parser = parse_duration_arg)]
    duration: Duration,
    /// Size of the content fetched again and again.
    #[arg(long, default_value = "4MB", value_parser = pcdn_sim::parse_size)]
    size: u64,
    /// Edge devices besides the origin.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=8))]
    edges: u32,
    /// Upload cap of each server.
    #[arg(long, default_value = "20mbit", value_parser = pcdn_sim::parse_rate)]
    upload_limit: u64,
    /// Enrolled devices registered (signed requests, from many loopback source addresses) as
    /// holders of one content, whose lookups then run beside the legitimate ones.
    #[arg(long, default_value_t = 100_000)]
    holders: u64,
    /// Fetches in the quiet run, before the floods.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    quiet_fetches: u32,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
    /// Child role (internal: the bench runs its tracker and servers as its own processes).
    #[arg(long, hide = true)]
    role: Option<String>,
    #[arg(long, hide = true)]
    listen: Option<SocketAddr>,
    #[arg(long, hide = true)]
    store: Option<PathBuf>,
    #[arg(long, hide = true)]
    tracker: Option<String>,
    #[arg(long, hide = true)]
    origin: bool,
    /// The tracker child's operator public key file.
    #[arg(long, hide = true)]
    operator_key: Option<PathBuf>,
    /// A server child's credential file.
    #[arg(long, hide = true)]
    credential: Option<PathBuf>,
}

fn parse_duration_arg(text: &str) -> Result<Duration, String> {
    match pcdn_core::units::parse_duration(text) {
        Ok(d) if d.is_zero() => Err("expected a positive duration".to_owned()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

pub fn run(args: SoakArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    match args.role.as_deref() {
        None => {
            let result = runtime.block_on(soak(&args))?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&result)?);
            } else {
                print!("{}", result.to_text());
            }
            ensure!(result.all_identical, "a fetched file differed from the sample");
            Ok(())
        }
        Some(role) => runtime.block_on(child(role, &args)),
    }
}

/// A child process: the tracker or one server, until SIGTERM.
async fn child(role: &str, args: &SoakArgs) -> anyhow::Result<()> {
    let listen = args.listen.context("--listen")?;
    let store = args.store.clone().context("--store")?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    match role {
        "tracker" => {
            let operator_key = args.operator_key.as_deref().context("--operator-key")?;
            let operator_key = pcdn_identity::files::read_operator_public(operator_key)?;
            let mut config = TrackerConfig::new(listen, StoreUrl::Sqlite(store), operator_key);
            // The flood's holders register once: a ttl longer than any soak keeps them live
            // without 10,000 heartbeats a second.
            config.ttl = HOLDERS_TTL;
            let tracker = pcdn_tracker::bind(config).await?;
            terminate.recv().await;
            tracker.stop().await
        }
        "server" => {
            let mut config = ServerConfig::new(&store, listen);
            config.origin = args.origin;
            config.upload_limit_bps = Some(args.upload_limit);
            config.tracker = Some(TrackerSettings {
                url: args.tracker.clone().context("--tracker")?,
                identity: pcdn_identity::files::read_credential(args.credential.as_deref().context("--credential")?)?,
            });
            let server = spawn_server(config).await?;
            terminate.recv().await;
            server.shutdown().await
        }
        other => bail!("--role {other}: expected tracker or server"),
    }
}

/// One process of the stack, SIGTERMed (then killed) when dropped.
struct Proc {
    name: String,
    child: StopOnDrop,
    samples: Vec<(f64, u64, u64)>,
}

impl Proc {
    /// (resident bytes, open descriptors) from /proc.
    fn sample(&self) -> Option<(u64, u64)> {
        let pid = self.child.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let kb: u64 = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
        Some((kb * 1024, fds))
    }
}

fn spawn(name: &str, dir: &Path, extra: &[String]) -> anyhow::Result<Proc> {
    let exe = std::env::current_exe().context("the pcdn binary's path")?;
    let log = std::fs::File::create(dir.join(format!("{name}.log")))?;
    let child = Command::new(exe)
        .args(["bench", "soak"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    Ok(Proc {
        name: name.to_owned(),
        child: StopOnDrop::new(child),
        samples: Vec::new(),
    })
}

/// One process's memory and descriptors over the run.
#[derive(Serialize)]
pub struct ProcessSeries {
    name: String,
    /// (seconds since the floods started, resident bytes, open descriptors).
    samples: Vec<(f64, u64, u64)>,
}

/// Completion times of one phase's fetches, s.
#[derive(Serialize, Default)]
pub struct Phase {
    fetches: usize,
    failed: usize,
    completion_s: Vec<f64>,
    median_s: f64,
    max_s: f64,
    lookups: usize,
    lookup_failures: usize,
    lookup_median_ms: f64,
    lookup_max_ms: f64,
    /// How long the fetch still running when the phase ended had run, s (not in the counts).
    unfinished_s: Option<f64>,
}

impl Phase {
    fn absorb(&mut self, other: Phase) {
        self.fetches += other.fetches;
        self.failed += other.failed;
        self.completion_s.extend(other.completion_s);
        self.lookup_failures += other.lookup_failures;
    }

    fn finish(&mut self, lookups: &mut [f64]) {
        let mut times = self.completion_s.clone();
        times.sort_by(f64::total_cmp);
        self.median_s = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
        self.max_s = times.last().copied().unwrap_or(f64::NAN);
        lookups.sort_by(f64::total_cmp);
        self.lookups = lookups.len() + self.lookup_failures;
        self.lookup_median_ms = lookups.get(lookups.len() / 2).copied().unwrap_or(f64::NAN);
        self.lookup_max_ms = lookups.last().copied().unwrap_or(f64::NAN);
    }
}

#[derive(Serialize)]
pub struct SoakResult {
    duration_s: f64,
    size: u64,
    quiet: Phase,
    flooded: Phase,
    all_identical: bool,
    /// Devices registered (before the floods) as holders of a content nobody fetches.
    holders: u64,
    /// How long their registration took, s.
    holders_registration_s: f64,
    floods: Vec<(&'static str, u64)>,
    processes: Vec<ProcessSeries>,
}

async fn soak(args: &SoakArgs) -> anyhow::Result<SoakResult> {
    let temp = tempfile::Builder::new().prefix("pcdn-soak-").tempdir()?;
    let dir = temp.path();
    let sample = dir.join("sample.bin");
    let mut data = vec![0u8; args.size as usize];
    blake3::Hasher::new()
        .update(b"pcdn soak")
        .finalize_xof()
        .fill(&mut data);
    std::fs::write(&sample, &data).with_context(|| format!("writing {}", sample.display()))?;
    let expected = blake3::hash(&data);
    drop(data);
    // The operator's key and one credential per server, as an operator makes them.
    let operator_dir = dir.join("operator");
    let operator = pcdn_identity::files::init_operator(&operator_dir)?;

    let tracker_addr = free_addr()?;
    let tracker_url = format!("http://{tracker_addr}");
    let mut procs = vec![spawn(
        "tracker",
        dir,
        &[
            "--operator-key".into(),
            operator_dir
                .join(pcdn_identity::files::OPERATOR_PUB_FILE)
                .display()
                .to_string(),
            "--role".into(),
            "tracker".into(),
            "--listen".into(),
            tracker_addr.to_string(),
            "--store".into(),
            dir.join("tracker.db").display().to_string(),
        ],
    )?];
    let mut content = None;
    let mut servers = Vec::new();
    for i in 0..=args.edges {
        let name = if i == 0 {
            "origin".to_owned()
        } else {
            format!("edge-{i}")
        };
        let store_dir = dir.join(&name);
        let id = Store::open(&store_dir)?.add(&sample)?;
        content = Some(id);
        let addr = free_addr()?;
        servers.push(addr);
        let mut extra = vec![
            "--role".into(),
            "server".into(),
            "--listen".into(),
            addr.to_string(),
            "--store".into(),
            store_dir.display().to_string(),
            "--tracker".into(),
            tracker_url.clone(),
            "--upload-limit".into(),
            args.upload_limit.to_string(),
        ];
        let role = if i == 0 { Role::Origin } else { Role::Edge };
        let now_ms = pcdn_identity::unix_millis();
        let identity = operator
            .enroll(&name, role, now_ms, now_ms / 1000 + 86_400)
            .map_err(anyhow::Error::msg)?;
        let credential = operator_dir.join(format!("{name}.cred"));
        pcdn_identity::files::write_credential(&credential, &identity)?;
        extra.extend(["--credential".into(), credential.display().to_string()]);
        procs.push(spawn(&name, dir, &extra)?);
    }
    let content = content.expect("at least the origin");
    wait_for_registry(&tracker_url, &content, args.edges as usize).await?;
    eprintln!(
        "soak: tracker {tracker_addr}, {} servers, {} B content; quiet run ...",
        servers.len(),
        args.size
    );

    let mut quiet = Phase::default();
    let mut quiet_lookups = Vec::new();
    let mut identical = true;
    for n in 0..args.quiet_fetches {
        identical &= one_fetch(&tracker_url, content, dir, &format!("quiet-{n}"), expected, &mut quiet).await;
        lookups(&tracker_url, content, 20, &mut quiet_lookups, &mut quiet).await;
    }
    quiet.finish(&mut quiet_lookups);

    eprintln!("soak: registering {} holders of another content ...", args.holders);
    let registering = Instant::now();
    let holders = holders::register_all(args.holders, Arc::new(operator), tracker_addr).await;
    let registration_s = registering.elapsed().as_secs_f64();
    eprintln!("soak: {holders} holders registered in {registration_s:.0} s");
    eprintln!("soak: floods on for {:?}", args.duration);
    let floods = flood::start(&flood::FloodConfig::default(), &servers, tracker_addr, content);
    let started = Instant::now();
    // The legitimate work runs beside the sampler, so the progress line keeps its pace even
    // while a fetch is held up; at the end the fetch in flight is dropped, not counted.
    let shared = Arc::new(Mutex::new((Phase::default(), Vec::new(), true)));
    let in_flight = Arc::new(Mutex::new(Instant::now()));
    let worker = tokio::spawn({
        let shared = shared.clone();
        let tracker_url = tracker_url.clone();
        let dir = dir.to_path_buf();
        let in_flight = in_flight.clone();
        async move {
            for n in 0.. {
                *in_flight.lock().expect("not poisoned") = Instant::now();
                let mut phase = Phase::default();
                let ok = one_fetch(
                    &tracker_url,
                    content,
                    &dir,
                    &format!("flooded-{n}"),
                    expected,
                    &mut phase,
                )
                .await;
                {
                    let mut s = shared.lock().expect("not poisoned");
                    s.0.absorb(std::mem::take(&mut phase));
                    s.2 &= ok;
                }
                let mut times = Vec::new();
                lookups(&tracker_url, content, 20, &mut times, &mut phase).await;
                let mut s = shared.lock().expect("not poisoned");
                s.0.absorb(phase);
                s.1.extend(times);
            }
        }
    });
    let deadline = started + args.duration;
    loop {
        let t = started.elapsed().as_secs_f64();
        let mut parts = Vec::new();
        for p in &mut procs {
            if let Some((rss, fds)) = p.sample() {
                p.samples.push((t, rss, fds));
                parts.push(format!("{} {:.0} MB/{} fds", p.name, rss as f64 / 1e6, fds));
            }
        }
        {
            let s = shared.lock().expect("not poisoned");
            eprintln!(
                "soak: {t:.0}/{:.0} s, fetches {} ok {} failed (last {:.2} s), {}",
                args.duration.as_secs_f64(),
                s.0.completion_s.len(),
                s.0.failed,
                s.0.completion_s.last().copied().unwrap_or(f64::NAN),
                parts.join(", ")
            );
        }
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(SAMPLE_EVERY.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
    worker.abort();
    let _ = worker.await;
    let floods_sent = floods.counts.snapshot();
    floods.stop().await;
    let (mut flooded, mut flooded_lookups, flooded_identical) =
        std::mem::take(&mut *shared.lock().expect("not poisoned"));
    identical &= flooded_identical;
    flooded.finish(&mut flooded_lookups);
    flooded.unfinished_s = Some(in_flight.lock().expect("not poisoned").elapsed().as_secs_f64());
    let t = started.elapsed().as_secs_f64();
    for p in &mut procs {
        if let Some((rss, fds)) = p.sample() {
            p.samples.push((t, rss, fds));
        }
    }
    let processes = procs
        .iter()
        .map(|p| ProcessSeries {
            name: p.name.clone(),
            samples: p.samples.clone(),
        })
        .collect();
    drop(procs);
    Ok(SoakResult {
        duration_s: t,
        size: args.size,
        quiet,
        flooded,
        all_identical: identical,
        holders,
        holders_registration_s: registration_s,
        floods: floods_sent,
        processes,
    })
}

/// One legitimate fetch through the tracker; false if its file differs from the sample.
async fn one_fetch(
    tracker: &str,
    content: ContentId,
    dir: &Path,
    name: &str,
    expected: blake3::Hash,
    phase: &mut Phase,
) -> bool {
    let output = dir.join(format!("{name}.bin"));
    let mut config = FetchConfig::new(content, &output);
    config.tracker = Some(tracker.to_owned());
    config.timeout = Some(Duration::from_secs(120));
    phase.fetches += 1;
    let identical = match fetch(config).await {
        Ok(report) => {
            phase.completion_s.push(report.elapsed_s);
            std::fs::read(&output).is_ok_and(|bytes| blake3::hash(&bytes) == expected)
        }
        Err(e) => {
            eprintln!("soak: fetch {name} failed: {e}");
            phase.failed += 1;
            true
        }
    };
    let _ = std::fs::remove_file(&output);
    identical
}

/// `n` lookups of the content, their times in ms.
async fn lookups(tracker: &str, content: ContentId, n: usize, times: &mut Vec<f64>, phase: &mut Phase) {
    let Ok(client) = TrackerClient::new(tracker, None) else {
        return;
    };
    for _ in 0..n {
        let at = Instant::now();
        match tokio::time::timeout(Duration::from_secs(10), client.servers(&content, 8)).await {
            Ok(Ok(_)) => times.push(at.elapsed().as_secs_f64() * 1e3),
            _ => phase.lookup_failures += 1,
        }
    }
}

/// Waits until the tracker lists every edge and an origin with its manifest.
async fn wait_for_registry(tracker: &str, content: &ContentId, edges: usize) -> anyhow::Result<()> {
    let client = TrackerClient::new(tracker, None)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let (Ok(lookup), Ok(Some(_))) = (client.servers(content, 64).await, client.get_manifest(content).await) {
            if lookup.servers.len() == edges && !lookup.origins.is_empty() {
                return Ok(());
            }
        }
        ensure!(
            Instant::now() < deadline,
            "the servers did not register with the tracker within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl SoakResult {
    fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "soak: {:.0} s of floods, {} B content; every file byte-identical: {}",
            self.duration_s,
            self.size,
            if self.all_identical { "yes" } else { "NO" }
        );
        let _ = writeln!(
            out,
            "{:<8} {:>8} {:>7} {:>10} {:>8} {:>8} {:>10} {:>10} {:>13}",
            "phase", "fetches", "failed", "median s", "max s", "lookups", "median ms", "max ms", "unfinished s"
        );
        for (name, p) in [("quiet", &self.quiet), ("flooded", &self.flooded)] {
            let _ = writeln!(
                out,
                "{name:<8} {:>8} {:>7} {:>10.2} {:>8.2} {:>8} {:>10.2} {:>10.2} {:>13}",
                p.fetches,
                p.failed,
                p.median_s,
                p.max_s,
                p.lookups,
                p.lookup_median_ms,
                p.lookup_max_ms,
                p.unfinished_s.map_or_else(|| "-".to_owned(), |s| format!("{s:.1}"))
            );
        }
        let _ = writeln!(
            out,
            "holders of another content registered before the floods: {} in {:.0} s",
            self.holders, self.holders_registration_s
        );
        let _ = writeln!(out, "floods sent:");
        for (name, n) in &self.floods {
            let _ = writeln!(out, "  {name:<26} {n}");
        }
        let _ = writeln!(out, "process    RSS MB first/max/last    fds first/max/last");
        for p in &self.processes {
            let first = p.samples.first().copied().unwrap_or_default();
            let last = p.samples.last().copied().unwrap_or_default();
            let max_rss = p.samples.iter().map(|s| s.1).max().unwrap_or(0);
            let max_fds = p.samples.iter().map(|s| s.2).max().unwrap_or(0);
            let mb = |b: u64| b as f64 / 1e6;
            let _ = writeln!(
                out,
                "{:<10} {:>6.1} {:>6.1} {:>6.1}         {:>5} {:>5} {:>5}",
                p.name,
                mb(first.1),
                mb(max_rss),
                mb(last.1),
                first.2,
                max_fds,
                last.2
            );
        }
        out
    }
}
