//! `pcdn demo --fleet`: a whole PCDN on loopback — the tracker placing contents, an origin
//! holding them all, edges starting empty that fill their caches, and viewers (`pcdn fetch`
//! processes, several at once) choosing contents by a Zipf law (docs/fleet.md).

mod output;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use pcdn_core::wire::ContentId;
use pcdn_net::cache::CacheConfig;
use pcdn_net::store::{Store, content_id_hex};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

use super::{DemoArgs, Device, Stack, blake3_file, parse_size_arg, say, wait_for_registry, write_sample};
use crate::progress::Progress;
use output::{EdgeResult, FleetOutput, ViewerResult};

/// The fleet demo's sizes (all but the fixed settings of [`TUNING`]).
#[derive(clap::Args, Debug)]
pub struct FleetArgs {
    /// --fleet: viewers, each one `pcdn fetch` process of one content.
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(1..=10_000), requires = "fleet")]
    viewers: u64,
    /// --fleet: contents the origin holds; viewers choose among them by a Zipf law (exponent
    /// --zipf), the first the most popular.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=1_000), requires = "fleet")]
    contents: u64,
    /// --fleet: edges, starting empty, each a cache of --cache-size behind its emulated link.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=64), requires = "fleet")]
    edges: u64,
    /// --fleet: the tracker's placement policy: none, popularity or on-miss (docs/fleet.md).
    #[arg(long, default_value = "popularity", value_parser = clap::builder::PossibleValuesParser::new(pcdn_placement::POLICIES), requires = "fleet")]
    placement: String,
    /// --fleet: each edge's cache budget (`pcdn serve --cache-size`), e.g. "12MB".
    #[arg(long, default_value = "12MB", value_parser = parse_size_arg, requires = "fleet")]
    cache_size: u64,
    /// --fleet: mean size of a content; each is drawn between 2/3 and 4/3 of it.
    #[arg(long, default_value = "3MB", value_parser = parse_size_arg, requires = "fleet")]
    content_size: u64,
    /// --fleet: mean time between two viewers' arrivals (a Poisson process), e.g. "3s".
    #[arg(long, default_value = "3s", value_parser = parse_duration_arg, requires = "fleet")]
    interval: Duration,
    /// --fleet: most viewers downloading at once; an arrival waits for a free slot.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=256), requires = "fleet")]
    at_once: u64,
    /// --fleet: Zipf exponent of the viewers' choices (1: the k-th content is chosen 1/k as
    /// often as the first).
    #[arg(long, default_value_t = 1.0, value_parser = parse_exponent, requires = "fleet")]
    zipf: f64,
    /// --fleet: length of a time window of the CDN-share table, e.g. "20s".
    #[arg(long, default_value = "20s", value_parser = parse_duration_arg, requires = "fleet")]
    window: Duration,
    /// --fleet: write a PNG of the CDN share per window into DIR (created if missing).
    #[arg(long, value_name = "DIR", requires = "fleet")]
    plot: Option<PathBuf>,
}

fn parse_duration_arg(text: &str) -> Result<Duration, String> {
    let d = pcdn_sim::parse_duration(text).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err(format!("expected a positive duration, got {text:?}"));
    }
    Ok(d)
}

fn parse_exponent(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("expected a number ≥ 0, got {text:?}")),
    }
}

/// The demo's fixed settings, each with why.
struct Tuning {
    /// The origin's link: 16 Mbit/s, beside 8 edges of 8 to 12 Mbit/s, as the CDN capacity an
    /// operator pays for one region is small beside its edges' together; it carries the
    /// default demo's average demand, viewers and fills (about 13 Mbit/s), with little room
    /// (measured at 10 Mbit/s: viewers queued for up to a minute).
    origin_link: (u64, u64),
    /// Edges' links (bit/s, one-way delay ms), cycled over the edges: home uplinks of 8 to 12
    /// Mbit/s at 15 to 45 ms.
    edge_links: [(u64, u64); 4],
    /// Devices' heartbeat: 2 s, so an edge learns its assignment within 2 s of a round.
    heartbeat: Duration,
    /// Devices' time to live at the tracker: its default, 30 s. Nothing dies in the demo, and
    /// on a loaded machine heartbeats can lag; with 6 s, a release run once lost the origin
    /// from lookups for most of a minute and 17 viewers failed.
    ttl: Duration,
    /// Time between placement rounds: 4 s, two heartbeats, so rounds follow the demand of
    /// a demo of two minutes many times over.
    placement_interval: Duration,
    /// Popularity half-life: the tracker's default, 10 min, longer than the demo: counts are
    /// nearly cumulative, so a content watched twice outranks one watched once for the whole
    /// run, and a content an edge holds keeps its place against one seen as often but later
    /// (hysteresis, docs/fleet.md).
    half_life: Duration,
    /// Edges' fill rate (`--fill-rate`): 3 Mbit/s, a fifth of the origin's link, so that
    /// edges filling at once leave viewers part of it (at 4 Mbit/s the first viewer of the
    /// most popular content once took 28 s for 2.85 MB while 8 edges filled).
    fill_rate_bps: u64,
    /// A viewer's `pcdn fetch --timeout`: 300 s, far above a 4 MB content at the origin's
    /// rate shared by --at-once viewers; a viewer that hits it fails the demo.
    viewer_timeout: Duration,
    /// `pcdn fetch` runs a viewer may take: 2, a player's retry after a failure (the second
    /// resumes from the first's verified blocks); each failure is reported.
    viewer_attempts: usize,
}

const TUNING: Tuning = Tuning {
    origin_link: (16_000_000, 20),
    edge_links: [(10_000_000, 25), (8_000_000, 35), (12_000_000, 15), (10_000_000, 45)],
    heartbeat: Duration::from_secs(2),
    ttl: pcdn_tracker::TrackerConfig::DEFAULT_TTL,
    placement_interval: Duration::from_secs(4),
    half_life: pcdn_tracker::TrackerConfig::DEFAULT_POPULARITY_HALF_LIFE,
    fill_rate_bps: 3_000_000,
    viewer_timeout: Duration::from_secs(300),
    viewer_attempts: 2,
};

/// One content of the origin.
struct Content {
    id: ContentId,
    size: u64,
    hash: blake3::Hash,
}

/// One viewer's draw: when it arrives and what it watches.
#[derive(Clone, Copy)]
struct Arrival {
    at: Duration,
    content: usize,
}

pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let fleet = &args.fleet_args;
    super::check_cc(&args.cc)?;
    ensure!(fleet.content_size >= 3, "--content-size must be at least 3 bytes");
    ensure!(fleet.cache_size > 0, "--cache-size must be at least one byte");
    let (dir, _temp) = super::work_dir(args.dir.as_deref(), "pcdn-demo-fleet-")?;
    let started = Instant::now();
    let mut output = super::runtime()?.block_on(demo(args, &dir))?;
    output.elapsed_s = started.elapsed().as_secs_f64();
    if let Some(plot) = &fleet.plot {
        let path = plot.join("cdn-share.png");
        output.write_chart(&path)?;
        say(args.json, format_args!("wrote {}", path.display()));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&output)?);
    } else {
        output.print_table();
    }
    Ok(())
}

/// The viewers' arrivals (Poisson, mean `interval`) and choices (Zipf), from the seed alone.
fn arrivals(fleet: &FleetArgs, seed: u64) -> Vec<Arrival> {
    let zipf = pcdn_sim::fleet::ZipfTable::new(fleet.contents as usize, fleet.zipf);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7669_6577_6572_7321); // "viewers!"
    let mut at = Duration::ZERO;
    (0..fleet.viewers)
        .map(|v| {
            if v > 0 {
                let u: f64 = rng.random();
                at += fleet.interval.mul_f64(-(1.0 - u).ln());
            }
            Arrival {
                at,
                content: zipf.sample(rng.random()),
            }
        })
        .collect()
}

/// Writes the contents (sizes drawn from the seed) and imports them into the origin's store.
fn make_contents(fleet: &FleetArgs, dir: &Path, seed: u64) -> anyhow::Result<Vec<Content>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x636f_6e74_656e_7473); // "contents"
    let store_dir = dir.join("origin");
    let store = Store::open(&store_dir).with_context(|| format!("opening the store {}", store_dir.display()))?;
    let sources = dir.join("contents");
    std::fs::create_dir_all(&sources).with_context(|| format!("creating {}", sources.display()))?;
    let (low, high) = (fleet.content_size * 2 / 3, fleet.content_size * 4 / 3);
    (0..fleet.contents)
        .map(|k| {
            let size = rng.random_range(low..=high);
            let path = sources.join(format!("content-{}.bin", k + 1));
            write_sample(&path, size, seed, &format!("pcdn fleet demo content {k}"))?;
            let id = store
                .add(&path)
                .with_context(|| format!("importing {} into {}", path.display(), store_dir.display()))?;
            let hash = blake3_file(&path)?;
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
            Ok(Content { id, size, hash })
        })
        .collect()
}

async fn demo(args: &DemoArgs, dir: &Path) -> anyhow::Result<FleetOutput> {
    let (fleet, json) = (&args.fleet_args, args.json);
    say(
        json,
        format_args!(
            "pcdn demo --fleet in {} — {} contents of about {} B, {} edges with {} B caches, {} viewers, placement {}",
            dir.display(),
            fleet.contents,
            fleet.content_size,
            fleet.edges,
            fleet.cache_size,
            fleet.viewers,
            fleet.placement
        ),
    );
    let contents = make_contents(fleet, dir, args.seed)?;
    let mut stack = Stack::start(dir, json, |config| {
        config.heartbeat = TUNING.heartbeat;
        config.ttl = TUNING.ttl;
        config.popularity_half_life = TUNING.half_life;
        config.placement.policy = fleet.placement.clone();
        config.placement.interval = TUNING.placement_interval;
    })
    .await?;
    let result = async {
        let (rate, delay) = TUNING.origin_link;
        stack
            .start_device(
                &Device::new("origin", true, rate, delay, 0.0),
                &dir.join("origin"),
                args.seed,
                None,
            )
            .await?;
        let mut edges = Vec::new();
        for n in 0..fleet.edges as usize {
            let (rate, delay) = TUNING.edge_links[n % TUNING.edge_links.len()];
            let device = Device::new(format!("edge-{}", n + 1), false, rate, delay, 0.0);
            let cache = CacheConfig {
                fill_rate_bps: TUNING.fill_rate_bps,
                ..CacheConfig::new(fleet.cache_size)
            };
            let server = stack
                .start_device(&device, &dir.join(&device.name), args.seed, Some(cache))
                .await?;
            let cache = server.cache().expect("started with a cache").clone();
            edges.push((device, cache));
        }
        let ids: Vec<ContentId> = contents.iter().map(|c| c.id).collect();
        wait_for_registry(&stack.tracker_url, &ids, 0).await?;
        let viewers = run_viewers(args, dir, &stack.tracker_url, &contents, &edges).await?;
        let edge_results = edges
            .iter()
            .map(|(device, cache)| {
                let entries = cache.entries();
                EdgeResult::new(
                    device,
                    cache.fill_stats(),
                    entries.len(),
                    entries.values().map(|e| e.length).sum(),
                )
            })
            .collect();
        anyhow::Ok((viewers, edge_results))
    }
    .await;
    stack.shutdown().await;
    let ((viewers, fill_samples), edges) = result?;
    Ok(FleetOutput::new(
        fleet,
        &args.cc,
        &contents_sizes(&contents),
        viewers,
        edges,
        &fill_samples,
    ))
}

fn contents_sizes(contents: &[Content]) -> Vec<u64> {
    contents.iter().map(|c| c.size).collect()
}

/// Fill bytes of all edges together at instants since the viewers' start: (s, bytes).
pub(super) type FillSamples = Vec<(f64, u64)>;

/// Starts every viewer at its arrival (waiting for one of --at-once slots), waits for all;
/// their results in arrival order, and the edges' fill bytes sampled every second.
async fn run_viewers(
    args: &DemoArgs,
    dir: &Path,
    tracker_url: &str,
    contents: &[Content],
    edges: &[(Device, Arc<pcdn_net::cache::Cache>)],
) -> anyhow::Result<(Vec<ViewerResult>, FillSamples)> {
    let fleet = &args.fleet_args;
    let exe = std::env::current_exe().context("finding the pcdn binary to run the viewers' `pcdn fetch`")?;
    let viewers_dir = dir.join("viewers");
    std::fs::create_dir_all(&viewers_dir).with_context(|| format!("creating {}", viewers_dir.display()))?;
    let start = tokio::time::Instant::now();
    let caches: Vec<_> = edges.iter().map(|(_, cache)| cache.clone()).collect();
    let fill_total = move || caches.iter().map(|c| c.fill_stats().bytes).sum::<u64>();
    let samples = Arc::new(Mutex::new(vec![(0.0, fill_total())]));
    let sampler = {
        let samples = samples.clone();
        let fill_total = fill_total.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let sample = (start.elapsed().as_secs_f64(), fill_total());
                samples.lock().expect("samples lock").push(sample);
            }
        })
    };
    let progress = Arc::new(Progress::new("fleet demo", fleet.viewers, "viewers", false));
    let slots = Arc::new(tokio::sync::Semaphore::new(fleet.at_once as usize));
    let mut tasks = Vec::new();
    for (viewer, arrival) in arrivals(fleet, args.seed).into_iter().enumerate() {
        tokio::time::sleep_until(start + arrival.at).await;
        let slot = slots.clone().acquire_owned().await.expect("the semaphore stays open");
        let started = start.elapsed();
        let content = &contents[arrival.content];
        let command = ViewerCommand {
            exe: exe.clone(),
            id: content_id_hex(&content.id),
            tracker: tracker_url.to_owned(),
            output: viewers_dir.join(format!("viewer-{}.bin", viewer + 1)),
            cc: args.cc.clone(),
            keep: args.dir.is_some(),
        };
        let (size, hash, progress) = (content.size, content.hash, progress.clone());
        tasks.push(tokio::task::spawn_blocking(move || {
            let watched = command.run(size, hash);
            drop(slot);
            progress.inc();
            watched.map(|watched| ViewerResult::new(viewer, arrival.content, arrival.at, started, watched))
        }));
    }
    let mut viewers = Vec::new();
    let mut failures = Vec::new();
    for (viewer, task) in tasks.into_iter().enumerate() {
        match task.await.context("a viewer's task panicked")? {
            Ok(result) => viewers.push(result),
            Err(e) => failures.push(format!("viewer {}: {e:#}", viewer + 1)),
        }
    }
    sampler.abort();
    if let Ok(progress) = Arc::try_unwrap(progress) {
        progress.finish();
    }
    let mut samples = std::mem::take(&mut *samples.lock().expect("samples lock"));
    samples.push((start.elapsed().as_secs_f64(), fill_total()));
    if !failures.is_empty() {
        bail!(
            "{} of {} viewers failed:\n{}",
            failures.len(),
            fleet.viewers,
            failures.join("\n")
        );
    }
    Ok((viewers, samples))
}

/// One viewer's `pcdn fetch`.
struct ViewerCommand {
    exe: PathBuf,
    id: String,
    tracker: String,
    output: PathBuf,
    cc: String,
    /// Keep the file (with --dir); otherwise it is removed once checked.
    keep: bool,
}

/// The part of `pcdn fetch --json`'s report the demo reads.
#[derive(Deserialize)]
pub(super) struct FetchJson {
    pub bytes: u64,
    pub completion_s: Option<f64>,
    pub paths: Vec<PathJson>,
}

#[derive(Deserialize)]
pub(super) struct PathJson {
    pub name: String,
    pub origin: bool,
    pub bytes: u64,
}

/// A finished viewer: its report and its wall time, first process start to last exit.
pub(super) struct Watched {
    pub report: FetchJson,
    pub wall: Duration,
    /// Why the attempts before the one that succeeded failed.
    pub failures: Vec<String>,
}

impl ViewerCommand {
    /// Runs the fetch and checks the file: its size and its BLAKE3 against the content's
    /// (`pcdn fetch` verified every block against the manifest already).
    fn run(&self, size: u64, hash: blake3::Hash) -> anyhow::Result<Watched> {
        let begun = Instant::now();
        let mut failures = Vec::new();
        let out = loop {
            let out = std::process::Command::new(&self.exe)
                .arg("fetch")
                .arg(&self.id)
                .args(["--tracker", &self.tracker, "--cc", &self.cc, "--json"])
                .arg("--timeout")
                .arg(format!("{}s", TUNING.viewer_timeout.as_secs()))
                .arg("-o")
                .arg(&self.output)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .output()
                .with_context(|| format!("starting {} fetch", self.exe.display()))?;
            if out.status.success() {
                break out;
            }
            failures.push(format!(
                "`pcdn fetch {}` failed ({}): {}",
                self.id,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            // A player retries; the fetch resumes from the verified blocks it kept.
            if failures.len() == TUNING.viewer_attempts {
                bail!("{}", failures.join("\n"));
            }
        };
        let wall = begun.elapsed();
        let report: FetchJson = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("reading the report of `pcdn fetch {} --json`", self.id))?;
        let length = std::fs::metadata(&self.output)
            .with_context(|| format!("reading {}", self.output.display()))?
            .len();
        ensure!(
            length == size,
            "{} has {length} bytes, the content {size}",
            self.output.display()
        );
        ensure!(
            blake3_file(&self.output)? == hash,
            "{} differs from the content {}",
            self.output.display(),
            self.id
        );
        if !self.keep {
            std::fs::remove_file(&self.output).with_context(|| format!("removing {}", self.output.display()))?;
        }
        Ok(Watched { report, wall, failures })
    }
}
