//! `pcdn demo`: the whole delivery stack on loopback in one command — a tracker, a CDN origin
//! and four edges behind emulated links — fetching one sample with several schedulers; with
//! `--fleet`, a whole PCDN of caching edges and many viewers ([`fleet`]).

mod fleet;

use anyhow::{Context, bail, ensure};
use pcdn_core::wire::ContentId;
use pcdn_emulate::{RelayConfig, RelayHandle, spawn_relay};
use pcdn_identity::{OperatorKey, Role};
use pcdn_net::cache::CacheConfig;
use pcdn_net::fetch::{FetchConfig, FetchReport, fetch};
use pcdn_net::serve::{ServerConfig, ServerHandle, TrackerSettings, spawn_server};
use pcdn_net::store::Store;
use pcdn_net::tracker_client::TrackerClient;
use pcdn_sim::{LinkConfig, Loss};
use pcdn_tracker::{RunningTracker, StoreUrl, TrackerConfig};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Run the delivery stack on loopback: a tracker (SQLite in a temporary directory), a CDN
/// origin and four edge devices, each behind an emulated link (the simulator's link model in
/// real time), then fetch a generated sample with each scheduler and compare them.
///
/// The links: origin 10 Mbit/s; edges 4, 4 and 3 Mbit/s, and a fourth edge of 4 Mbit/s with
/// 10% loss; one-way delays 15 to 45 ms.
///
/// With --fleet: a whole PCDN instead (docs/fleet.md) — the tracker placing contents by
/// popularity, an origin holding every content, edges starting empty that fill their caches,
/// and viewers (`pcdn fetch` processes, several at once) choosing contents by a Zipf law; it
/// prints the CDN share per time window, the edges' hit ratio and fill bytes, and every
/// viewer's time.
#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Size of the generated sample, e.g. "50MB", "8M".
    #[arg(long, default_value = "50MB", value_parser = parse_size_arg, conflicts_with = "fleet")]
    size: u64,
    /// Schedulers to compare, in order (see `pcdn list`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "default,minrtt",
        conflicts_with = "fleet"
    )]
    schedulers: Vec<String>,
    /// Run the fleet demo: caching edges, placement and many viewers (the options below).
    #[arg(long)]
    fleet: bool,
    #[command(flatten)]
    fleet_args: fleet::FleetArgs,
    /// Congestion control of every path (see `pcdn list`).
    #[arg(long, default_value = pcdn_net::fetch::DEFAULT_CC)]
    cc: String,
    /// Keep the stores, the tracker database and the fetched files in DIR (created if
    /// missing) instead of a temporary directory removed at the end.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Print the comparison as one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Seed of the samples' bytes, of the links' randomness and (--fleet) of the viewers'
    /// choices and arrivals.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn parse_size_arg(text: &str) -> Result<u64, String> {
    pcdn_sim::parse_size(text).map_err(|e| e.to_string())
}

/// One emulated server of the demo.
struct Device {
    name: String,
    origin: bool,
    rate_bps: u64,
    delay_ms: u64,
    loss: f64,
}

impl Device {
    fn new(name: impl Into<String>, origin: bool, rate_bps: u64, delay_ms: u64, loss: f64) -> Device {
        Device {
            name: name.into(),
            origin,
            rate_bps,
            delay_ms,
            loss,
        }
    }
}

/// The scheduler demo's servers.
fn devices() -> [Device; 5] {
    [
        Device::new("origin", true, 10_000_000, 15, 0.0),
        Device::new("edge-1", false, 4_000_000, 20, 0.0),
        Device::new("edge-2", false, 4_000_000, 30, 0.0),
        Device::new("edge-3", false, 3_000_000, 45, 0.0),
        Device::new("edge-4", false, 4_000_000, 25, 0.1),
    ]
}

/// The loss-adjusted capacity of all the demo's paths (the brief's definition), bit/s.
fn capacity_bps() -> f64 {
    devices().iter().map(|d| d.rate_bps as f64 * (1.0 - d.loss)).sum()
}

/// One scheduler's result, as `--json` prints it.
#[derive(Serialize)]
struct DemoRow {
    /// Goodput ÷ loss-adjusted aggregate capacity.
    aggregation: f64,
    #[serde(flatten)]
    report: FetchReport,
}

#[derive(Serialize)]
struct DemoOutput {
    size: u64,
    capacity_mbps: f64,
    rows: Vec<DemoRow>,
}

pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    if args.fleet {
        return fleet::run(&args);
    }
    for name in &args.schedulers {
        ensure!(
            pcdn_core::scheduler::by_name(name, 0).is_some(),
            "--schedulers: unknown scheduler \"{name}\" (see `pcdn list`)"
        );
    }
    check_cc(&args.cc)?;
    ensure!(args.size > 0, "--size must be at least one byte");
    let (dir, _temp) = work_dir(args.dir.as_deref(), "pcdn-demo-")?;
    let output = runtime()?.block_on(demo(&args, &dir))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&output)?);
    } else {
        print_table(&output);
    }
    Ok(())
}

fn check_cc(cc: &str) -> anyhow::Result<()> {
    ensure!(
        pcdn_core::cc::by_name(cc).is_some(),
        "--cc: unknown congestion control \"{cc}\" (see `pcdn list`)"
    );
    Ok(())
}

/// The demo's directory: `dir` (created if missing), or a temporary one removed when the
/// returned guard drops.
fn work_dir(dir: Option<&Path>, prefix: &str) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            Ok((dir.to_owned(), None))
        }
        None => {
            let temp = tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .context("creating a temporary directory")?;
            Ok((temp.path().to_owned(), Some(temp)))
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")
}

/// Everything the demo started, stopped in reverse order at the end.
struct Stack {
    tracker: RunningTracker,
    tracker_url: String,
    operator: OperatorKey,
    operator_dir: PathBuf,
    relays: Vec<RelayHandle>,
    servers: Vec<ServerHandle>,
    json: bool,
}

impl Stack {
    /// Starts the tracker (SQLite in `dir`, configured by `configure`) with a new operator key
    /// in `dir/operator`, as an operator would make it (`pcdn operator init`).
    async fn start(dir: &Path, json: bool, configure: impl FnOnce(&mut TrackerConfig)) -> anyhow::Result<Stack> {
        let operator_dir = dir.join("operator");
        let operator = pcdn_identity::files::init_operator(&operator_dir)?;
        let mut config = TrackerConfig::new(
            "127.0.0.1:0".parse()?,
            StoreUrl::Sqlite(dir.join("tracker.db")),
            operator.public(),
        );
        configure(&mut config);
        let tracker = pcdn_tracker::bind(config).await.context("starting the tracker")?;
        let tracker_url = format!("http://{}", tracker.local_addr());
        say(json, format_args!("tracker     {tracker_url} (SQLite store)"));
        Ok(Stack {
            tracker,
            tracker_url,
            operator,
            operator_dir,
            relays: Vec::new(),
            servers: Vec::new(),
            json,
        })
    }

    /// Enrolls `device` (`pcdn operator enroll`) and starts its emulated link and its server
    /// on the store in `store_dir`; the server registers with the relay's address, so clients
    /// reach it only through the link. `cache`: the store is a cache the tracker fills.
    async fn start_device(
        &mut self,
        device: &Device,
        store_dir: &Path,
        seed: u64,
        cache: Option<CacheConfig>,
    ) -> anyhow::Result<&ServerHandle> {
        let role = if device.origin { Role::Origin } else { Role::Edge };
        let now = pcdn_identity::unix_millis();
        let identity = self
            .operator
            .enroll(&device.name, role, now, now / 1000 + 86_400)
            .map_err(anyhow::Error::msg)?;
        let credential = self.operator_dir.join(format!("{}.cred", device.name));
        pcdn_identity::files::write_credential(&credential, &identity)?;
        let identity = pcdn_identity::files::read_credential(&credential)?;
        // The relay must know the server's address and the server must know the relay's: take
        // a free port for the server first. Another socket may take it between the probe and
        // the server's bind (tests run beside each other); then the pair starts on a new port.
        let mut attempt = 1;
        let (relay, server) = loop {
            let server_addr = std::net::UdpSocket::bind("127.0.0.1:0")
                .and_then(|s| s.local_addr())
                .context("finding a free UDP port")?;
            let mut relay_config = RelayConfig::new("127.0.0.1:0".parse()?, server_addr, down_link(device));
            relay_config.seed = seed.wrapping_add(self.relays.len() as u64);
            let relay = spawn_relay(relay_config)
                .await
                .with_context(|| format!("starting the link of {}", device.name))?;
            let mut config = ServerConfig::new(store_dir, server_addr);
            config.advertise = Some(relay.local_addr());
            config.origin = device.origin;
            config.default_capacity_bps = device.rate_bps;
            config.cache = cache.clone();
            config.tracker = Some(TrackerSettings {
                url: self.tracker_url.clone(),
                identity: identity.clone(),
            });
            match spawn_server(config).await {
                Ok(server) => break (relay, server),
                Err(e) => {
                    relay.shutdown().await;
                    if attempt < PORT_ATTEMPTS && is_addr_in_use(&e) {
                        attempt += 1;
                        continue;
                    }
                    return Err(e.context(format!("starting {}", device.name)));
                }
            }
        };
        say(
            self.json,
            format_args!(
                "{:<11} udp {} behind {} ({})",
                device.name,
                server.local_addr(),
                relay.local_addr(),
                pcdn_emulate::describe_link(&down_link(device))
            ),
        );
        self.relays.push(relay);
        self.servers.push(server);
        Ok(self.servers.last().expect("just pushed"))
    }

    async fn shutdown(self) {
        for server in self.servers {
            let _ = server.shutdown().await;
        }
        for relay in self.relays {
            relay.shutdown().await;
        }
        let _ = self.tracker.stop().await;
    }
}

/// Tries at a device's free port before its start fails: a port taken between the probe and
/// the bind is rare, twice in a row rarer still.
const PORT_ATTEMPTS: u32 = 5;

/// The error comes of binding an address another socket holds.
fn is_addr_in_use(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::AddrInUse)
}

fn say(json: bool, line: std::fmt::Arguments<'_>) {
    // With --json, stdout is the JSON alone; the story goes to stderr.
    if json {
        eprintln!("{line}");
    } else {
        println!("{line}");
        let _ = std::io::stdout().flush();
    }
}

async fn demo(args: &DemoArgs, dir: &Path) -> anyhow::Result<DemoOutput> {
    let json = args.json;
    let sample = dir.join("sample.bin");
    say(
        json,
        format_args!("pcdn demo in {} — generating a {} B sample", dir.display(), args.size),
    );
    write_sample(&sample, args.size, args.seed, "pcdn demo sample")?;
    let expected = blake3_file(&sample)?;

    let mut stack = Stack::start(dir, json, |_| {}).await?;
    let result = async {
        let mut content = None;
        for device in &devices() {
            let store_dir = dir.join(&device.name);
            let store =
                Store::open(&store_dir).with_context(|| format!("opening the store {}", store_dir.display()))?;
            let id = store
                .add(&sample)
                .with_context(|| format!("importing the sample into {}", store_dir.display()))?;
            ensure!(content.is_none_or(|c| c == id), "the same sample got two content ids");
            content = Some(id);
            stack.start_device(device, &store_dir, args.seed, None).await?;
        }
        let content = content.expect("devices() is not empty");
        let id_hex = pcdn_net::store::content_id_hex(&content);
        say(json, format_args!("content     {id_hex}"));
        let edges = devices().iter().filter(|d| !d.origin).count();
        wait_for_registry(&stack.tracker_url, &[content], edges).await?;

        let mut rows = Vec::new();
        for scheduler in &args.schedulers {
            let own = |name: &str, canonical: fn(&str) -> Option<&'static str>| match canonical(name) {
                Some(own) if own != name => format!("{own} (asked as {name})"),
                _ => name.to_owned(),
            };
            say(
                json,
                format_args!(
                    "fetching with {} and {} ...",
                    own(scheduler, pcdn_core::scheduler::canonical),
                    own(&args.cc, pcdn_core::cc::canonical)
                ),
            );
            let output = dir.join(format!("fetched-{scheduler}.bin"));
            let mut config = FetchConfig::new(content, &output);
            config.tracker = Some(stack.tracker_url.clone());
            config.scheduler = scheduler.clone();
            config.cc = args.cc.clone();
            config.progress = !json;
            config.timeout = Some(Duration::from_secs(600));
            let report = fetch(config).await.with_context(|| format!("fetch with {scheduler}"))?;
            ensure!(
                blake3_file(&output)? == expected,
                "{} differs from the sample",
                output.display()
            );
            let aggregation = report.goodput_mbps * 1e6 / capacity_bps();
            rows.push(DemoRow { aggregation, report });
        }
        Ok(rows)
    }
    .await;
    stack.shutdown().await;
    Ok(DemoOutput {
        size: args.size,
        capacity_mbps: capacity_bps() / 1e6,
        rows: result?,
    })
}

fn down_link(device: &Device) -> LinkConfig {
    let mut link = LinkConfig::fixed(device.rate_bps, pcdn_core::time::Duration::from_millis(device.delay_ms));
    if device.loss > 0.0 {
        link.loss = Loss::Bernoulli(device.loss);
    }
    link
}

/// Waits until the tracker has every content's manifest and lists an origin and at least
/// `edges` edges for each.
async fn wait_for_registry(tracker_url: &str, contents: &[ContentId], edges: usize) -> anyhow::Result<()> {
    let client = TrackerClient::new(tracker_url, None)?;
    let deadline = Instant::now() + Duration::from_secs(20);
    for content in contents {
        loop {
            let lookup = client.servers(content, 64).await;
            let manifest = client.get_manifest(content).await;
            if let (Ok(lookup), Ok(Some(_))) = (&lookup, &manifest)
                && lookup.servers.len() >= edges
                && !lookup.origins.is_empty()
            {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "the devices did not all register with the tracker within 20 s (lookup of {}: {:?}, manifest: {:?})",
                    pcdn_net::store::content_id_hex(content),
                    lookup.map(|l| (l.servers.len(), l.origins.len())),
                    manifest.map(|m| m.is_some())
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// A reproducible sample: BLAKE3's output stream keyed by the seed, one stream per `label`.
fn write_sample(path: &Path, size: u64, seed: u64, label: &str) -> anyhow::Result<()> {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let mut stream = blake3::Hasher::new_keyed(&key).update(label.as_bytes()).finalize_xof();
    let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut writer = std::io::BufWriter::new(file);
    let mut chunk = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        stream.fill(&mut chunk[..n]);
        writer
            .write_all(&chunk[..n])
            .with_context(|| format!("writing {}", path.display()))?;
        left -= n as u64;
    }
    writer.flush().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn blake3_file(path: &Path) -> anyhow::Result<blake3::Hash> {
    let mut hasher = blake3::Hasher::new();
    hasher
        .update_reader(std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?)
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(hasher.finalize())
}

fn print_table(output: &DemoOutput) {
    println!();
    println!(
        "{} MB over 5 emulated paths, loss-adjusted capacity {:.1} Mbit/s",
        output.size as f64 / 1e6,
        output.capacity_mbps
    );
    println!(
        "{:<14} {:>9} {:>9} {:>7} {:>10} {:>10} {:>8} {:>7} {:>7} {:>8}",
        "scheduler", "time s", "Mbit/s", "aggr", "OFO kB", "wait p99", "waste", "CDN", "bad blk", "banned"
    );
    for row in &output.rows {
        let r = &row.report;
        println!(
            "{:<14} {:>9.2} {:>9.2} {:>7.3} {:>10.1} {:>8.1}ms {:>7.1}% {:>6.1}% {:>7} {:>8}",
            r.scheduler,
            r.completion_s.unwrap_or(f64::NAN),
            r.goodput_mbps,
            row.aggregation,
            r.ofo_mean_bytes / 1e3,
            r.wait_p99_ms,
            r.waste * 100.0,
            r.cdn_share * 100.0,
            r.blocks_rejected,
            r.banned_paths.len()
        );
    }
    println!();
    println!("Columns: completion time; goodput; goodput ÷ capacity; mean out-of-order bytes; p99 waiting time;");
    println!("duplicate data ÷ needed; bytes from the origin ÷ all bytes; blocks failing verification; banned paths.");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_held_by_another_socket_is_told_from_other_errors() {
        let held = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap();
        let taken = std::net::UdpSocket::bind(addr).with_context(|| format!("binding UDP {addr}"));
        assert!(is_addr_in_use(&taken.unwrap_err().context("starting edge-3")));
        assert!(!is_addr_in_use(&anyhow::anyhow!("opening the store")));
    }
}
