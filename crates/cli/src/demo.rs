//! `pcdn demo`: the whole delivery stack on loopback in one command — a tracker, a CDN origin
//! and four edges behind emulated links — fetching one sample with several schedulers.

use anyhow::{Context, bail, ensure};
use pcdn_emulate::{RelayConfig, RelayHandle, spawn_relay};
use pcdn_identity::{DeviceIdentity, Role};
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
#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Size of the generated sample, e.g. "50MB", "8M".
    #[arg(long, default_value = "50MB", value_parser = parse_size_arg)]
    size: u64,
    /// Schedulers to compare, in order (see `pcdn list`).
    #[arg(long, value_delimiter = ',', default_value = "default,minrtt")]
    schedulers: Vec<String>,
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
    /// Seed of the sample's bytes and of the links' randomness.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn parse_size_arg(text: &str) -> Result<u64, String> {
    pcdn_sim::parse_size(text).map_err(|e| e.to_string())
}

/// One emulated server of the demo.
struct Device {
    name: &'static str,
    origin: bool,
    rate_bps: u64,
    delay_ms: u64,
    loss: f64,
}

const DEVICES: [Device; 5] = [
    Device {
        name: "origin",
        origin: true,
        rate_bps: 10_000_000,
        delay_ms: 15,
        loss: 0.0,
    },
    Device {
        name: "edge-1",
        origin: false,
        rate_bps: 4_000_000,
        delay_ms: 20,
        loss: 0.0,
    },
    Device {
        name: "edge-2",
        origin: false,
        rate_bps: 4_000_000,
        delay_ms: 30,
        loss: 0.0,
    },
    Device {
        name: "edge-3",
        origin: false,
        rate_bps: 3_000_000,
        delay_ms: 45,
        loss: 0.0,
    },
    Device {
        name: "edge-4",
        origin: false,
        rate_bps: 4_000_000,
        delay_ms: 25,
        loss: 0.1,
    },
];

/// The loss-adjusted capacity of all the demo's paths (the brief's definition), bit/s.
fn capacity_bps() -> f64 {
    DEVICES.iter().map(|d| d.rate_bps as f64 * (1.0 - d.loss)).sum()
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
    for name in &args.schedulers {
        ensure!(
            pcdn_core::scheduler::by_name(name, 0).is_some(),
            "--schedulers: unknown scheduler \"{name}\" (see `pcdn list`)"
        );
    }
    ensure!(
        pcdn_core::cc::by_name(&args.cc).is_some(),
        "--cc: unknown congestion control \"{}\" (see `pcdn list`)",
        args.cc
    );
    ensure!(args.size > 0, "--size must be at least one byte");
    let temp;
    let dir = match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            dir.clone()
        }
        None => {
            temp = tempfile::Builder::new()
                .prefix("pcdn-demo-")
                .tempdir()
                .context("creating a temporary directory")?;
            temp.path().to_owned()
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let output = runtime.block_on(demo(&args, &dir))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&output)?);
    } else {
        print_table(&output);
    }
    Ok(())
}

/// Everything the demo started, stopped in reverse order at the end.
struct Stack {
    tracker: RunningTracker,
    relays: Vec<RelayHandle>,
    servers: Vec<ServerHandle>,
}

impl Stack {
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
    write_sample(&sample, args.size, args.seed)?;
    let expected = blake3_file(&sample)?;

    // The operator's key and one credential per device, as an operator would make them
    // (`pcdn operator init` and `pcdn operator enroll`).
    let operator_dir = dir.join("operator");
    let operator = pcdn_identity::files::init_operator(&operator_dir)?;
    let tracker = pcdn_tracker::bind(TrackerConfig::new(
        "127.0.0.1:0".parse()?,
        StoreUrl::Sqlite(dir.join("tracker.db")),
        operator.public(),
    ))
    .await
    .context("starting the tracker")?;
    let tracker_url = format!("http://{}", tracker.local_addr());
    say(json, format_args!("tracker     {tracker_url} (SQLite store)"));

    let mut stack = Stack {
        tracker,
        relays: Vec::new(),
        servers: Vec::new(),
    };
    let result = async {
        let mut content = None;
        for (index, device) in DEVICES.iter().enumerate() {
            let store_dir = dir.join(device.name);
            let store =
                Store::open(&store_dir).with_context(|| format!("opening the store {}", store_dir.display()))?;
            let id = store
                .add(&sample)
                .with_context(|| format!("importing the sample into {}", store_dir.display()))?;
            ensure!(content.is_none_or(|c| c == id), "the same sample got two content ids");
            content = Some(id);
            let role = if device.origin { Role::Origin } else { Role::Edge };
            let not_after = pcdn_identity::unix_millis() / 1000 + 86_400;
            let identity = operator
                .enroll(device.name, role, pcdn_identity::unix_millis(), not_after)
                .map_err(anyhow::Error::msg)?;
            let credential = operator_dir.join(format!("{}.cred", device.name));
            pcdn_identity::files::write_credential(&credential, &identity)?;
            let identity = pcdn_identity::files::read_credential(&credential)?;
            let (relay, server) = start_device(device, index, &store_dir, &tracker_url, identity, args.seed).await?;
            say(
                json,
                format_args!(
                    "{:<11} udp {} behind {} ({})",
                    device.name,
                    server.local_addr(),
                    relay.local_addr(),
                    pcdn_emulate::describe_link(&down_link(device))
                ),
            );
            stack.relays.push(relay);
            stack.servers.push(server);
        }
        let content = content.expect("DEVICES is not empty");
        let id_hex = pcdn_net::store::content_id_hex(&content);
        say(json, format_args!("content     {id_hex}"));
        wait_for_registry(&tracker_url, &content).await?;

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
            config.tracker = Some(tracker_url.clone());
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

/// Starts one device's emulated link and server; the server registers with the relay's
/// address, so clients reach it only through the link.
async fn start_device(
    device: &Device,
    index: usize,
    store_dir: &Path,
    tracker_url: &str,
    identity: DeviceIdentity,
    seed: u64,
) -> anyhow::Result<(RelayHandle, ServerHandle)> {
    // The relay must know the server's address and the server must know the relay's: take a
    // free port for the server first.
    let server_addr = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .context("finding a free UDP port")?;
    let mut relay_config = RelayConfig::new("127.0.0.1:0".parse()?, server_addr, down_link(device));
    relay_config.seed = seed.wrapping_add(index as u64);
    let relay = spawn_relay(relay_config)
        .await
        .with_context(|| format!("starting the link of {}", device.name))?;
    let mut config = ServerConfig::new(store_dir, server_addr);
    config.advertise = Some(relay.local_addr());
    config.origin = device.origin;
    config.default_capacity_bps = device.rate_bps;
    config.tracker = Some(TrackerSettings {
        url: tracker_url.to_owned(),
        identity,
    });
    let server = spawn_server(config)
        .await
        .with_context(|| format!("starting {}", device.name))?;
    Ok((relay, server))
}

/// Waits until the tracker lists every edge and the origin's manifest for the content.
async fn wait_for_registry(tracker_url: &str, content: &pcdn_core::wire::ContentId) -> anyhow::Result<()> {
    let client = TrackerClient::new(tracker_url, None)?;
    let edges = DEVICES.iter().filter(|d| !d.origin).count();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lookup = client.servers(content, 64).await;
        let manifest = client.get_manifest(content).await;
        if let (Ok(lookup), Ok(Some(_))) = (&lookup, &manifest) {
            if lookup.servers.len() == edges && !lookup.origins.is_empty() {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!(
                "the devices did not all register with the tracker within 20 s (lookup: {:?}, manifest: {:?})",
                lookup.map(|l| (l.servers.len(), l.origins.len())),
                manifest.map(|m| m.is_some())
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A reproducible sample: BLAKE3's output stream keyed by the seed.
fn write_sample(path: &Path, size: u64, seed: u64) -> anyhow::Result<()> {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let mut stream = blake3::Hasher::new_keyed(&key)
        .update(b"pcdn demo sample")
        .finalize_xof();
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
