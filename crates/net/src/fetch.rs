//! `pcdn fetch`: downloads one content from many servers at once into a file.
//!
//! The steps: the signed manifest (from the tracker or a file) is checked against the content
//! id asked for and its signer against the origins' keys; the servers come from the tracker
//! (or `--server`); one path per server feeds one `pcdn_core::Download`, which verifies every
//! block against the manifest. The runtime only moves datagrams and time: a receive batch goes
//! to `handle_datagram`, `handle_timeout` runs at `poll_timeout`, `poll_transmit` is drained
//! into one send batch, and in-order bytes are `read` into the partial file `OUT.pcdn-partial`
//! next to the output, which is synced and renamed into place when the download is done. A
//! partial file left by an interrupted or failed run is checked block by block against the
//! manifest, and only the blocks that fail are fetched ([`output`]).
//!
//! [`prepare`] and [`download`] are the two halves of [`fetch`] for other consumers of the
//! bytes (`pcdn play`'s gateway): the download hands its verified in-order bytes to any sink.

use std::collections::HashSet;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pcdn_core::wire::{self, ContentId};
use pcdn_core::{Download, DownloadConfig, Event, Manifest, PathError, PathId, ServerInfo};
use tokio::sync::mpsc;

use crate::clock::Clock;
use crate::socket::{RecvBatch, SendBatch, Socket};
use crate::tracker_client::{DeviceInfo, Lookup, MAX_LOOKUP_ORIGINS, TrackerClient};

mod check;
pub mod output;
mod rate;
mod report;

pub use check::parse_key;
use check::{Sources, check_manifest};
use output::Output;
use report::report;
pub use report::{FetchReport, PathReport};

/// Bytes taken from the download per `read` call.
const READ_CHUNK: usize = 1 << 20;
/// How often the progress line is redrawn.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// Longest wait for the tracker to take one corrupt-data report after the download: a report
/// is one small request, and the fetch is already done.
const REPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// Least time between two tracker lookups made because paths failed.
const REQUERY_EVERY: Duration = Duration::from_secs(5);
/// HELLOs before a silent server's path fails: sent 1, 2, 4 and 8 s apart (RFC 6298 §2.1's
/// initial RTO of 1 s, doubled per try), so a dead server is given up after 15 s, while four
/// tolerate three lost round trips in a row (0.13 % at 10 % loss each way).
pub const HELLO_ATTEMPTS: u32 = 4;
/// A path silent this long gets a line on stderr: a live server answers the first HELLO within
/// a round trip, and by then two HELLOs (1 + 2 s) went unanswered.
pub const SILENCE_NOTICE: Duration = Duration::from_secs(3);
/// Most paths one fetch opens, re-lookups included: twice what a first lookup can give (64
/// edges and `MAX_LOOKUP_ORIGINS` origins), so failed servers can be replaced, while a tracker
/// that keeps naming new dead servers (or churning devices) cannot make a fetch open paths
/// without end (issue #40: 2,000 origins once made a client open 2,004 paths).
pub const MAX_PATHS: usize = 2 * (64 + MAX_LOOKUP_ORIGINS);

/// What to fetch, from where, and how.
#[derive(Clone, Debug)]
pub struct FetchConfig {
    pub content: ContentId,
    pub output: PathBuf,
    /// Tracker base URL. Needed unless both `manifest` and the servers are given.
    pub tracker: Option<String>,
    /// PEM file of the CA that signed an https tracker's certificate; `None`: the system's roots.
    pub tracker_ca: Option<PathBuf>,
    /// The signed manifest's bytes; `None`: asked from the tracker.
    pub manifest: Option<Vec<u8>>,
    /// Edge servers to use instead of the tracker's (`--server`); `None`: the tracker's.
    pub edges: Option<Vec<SocketAddr>>,
    /// Origin servers besides the tracker's (`--origin-server`).
    pub origins: Vec<SocketAddr>,
    /// The one signer to trust; `None`: the public keys of the tracker's origins.
    pub origin_key: Option<[u8; 32]>,
    /// Scheduler name (`pcdn_core::scheduler::by_name`).
    pub scheduler: String,
    /// Congestion control name (`pcdn_core::cc::by_name`).
    pub cc: String,
    /// Most edge servers asked from the tracker (1..=64).
    pub max_servers: u32,
    /// Give up after this long; `None`: only when every path has failed.
    pub timeout: Option<Duration>,
    /// Draw a progress bar on stderr (only when it is a terminal).
    pub progress: bool,
    /// HELLO attempts before a silent server's path fails ([`HELLO_ATTEMPTS`]).
    pub handshake_attempts: u32,
    /// A path that has not answered its HELLO for this long is reported on stderr
    /// ([`SILENCE_NOTICE`]).
    pub silence_notice: Duration,
    /// Most paths the fetch opens in all, re-lookups included ([`MAX_PATHS`]).
    pub max_paths: usize,
    /// Retransmission timeouts in a row before a path fails (`DownloadConfig`'s).
    pub max_consecutive_timeouts: u32,
    /// When the manifest describes a video, attach the player model to the download
    /// (`DownloadConfig::video`), so the scheduler sees its play deadlines: someone watches.
    pub play_video: bool,
    /// Cap on the download rate, bits per second (an edge filling its cache); `None`: as fast
    /// as congestion control allows.
    pub rate_limit_bps: Option<u64>,
}

impl FetchConfig {
    /// Defaults: tracker lookups, scheduler "default", congestion control "cubic" (the
    /// simulator's default), 8 servers, no timeout, no progress bar.
    pub fn new(content: ContentId, output: impl Into<PathBuf>) -> FetchConfig {
        let defaults = DownloadConfig::new(content, 0, 1);
        FetchConfig {
            content,
            output: output.into(),
            tracker: None,
            tracker_ca: None,
            manifest: None,
            edges: None,
            origins: Vec::new(),
            origin_key: None,
            scheduler: "default".to_owned(),
            cc: DEFAULT_CC.to_owned(),
            max_servers: 8,
            timeout: None,
            progress: false,
            handshake_attempts: HELLO_ATTEMPTS,
            silence_notice: SILENCE_NOTICE,
            max_paths: MAX_PATHS,
            max_consecutive_timeouts: defaults.max_consecutive_timeouts,
            play_video: false,
            rate_limit_bps: None,
        }
    }
}

/// The congestion control of a fetch unless told otherwise: the simulator's default.
pub const DEFAULT_CC: &str = "default";

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Tracker(#[from] crate::tracker_client::TrackerError),
    #[error("every server failed:\n{}", .0.iter().map(|(name, why)| format!("  {name}: {why}")).collect::<Vec<_>>().join("\n"))]
    AllPathsFailed(Vec<(String, String)>),
    #[error("timed out after {after:?} with {delivered} of {length} bytes")]
    Timeout {
        after: Duration,
        delivered: u64,
        length: u64,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn setup(message: impl Into<String>) -> FetchError {
    FetchError::Setup(message.into())
}

/// A server the download will open a path to.
#[derive(Clone, Debug)]
struct Target {
    name: String,
    addr: SocketAddr,
    origin: bool,
}

impl Target {
    fn from_device(device: &DeviceInfo) -> Result<Target, FetchError> {
        Ok(Target {
            name: device.id.clone(),
            addr: device.socket_addr().map_err(setup)?,
            origin: device.origin,
        })
    }

    fn from_addr(addr: SocketAddr, origin: bool) -> Target {
        Target {
            name: addr.to_string(),
            addr,
            origin,
        }
    }
}

/// A path of the download, with the server behind it.
#[derive(Debug)]
struct PathEntry {
    id: PathId,
    target: Target,
    failure: Option<PathError>,
    /// The server answered its HELLO.
    established: bool,
    /// When the path was opened (its first HELLO), and whether its silence was reported.
    opened: std::time::Instant,
    noticed: bool,
    /// Bytes received when the progress line was last drawn.
    bytes_at_draw: u64,
}

impl PathEntry {
    /// Still waiting for the server's first answer.
    fn silent(&self) -> bool {
        !self.established && self.failure.is_none()
    }

    /// Why the path failed, in words, with what to check when the server never answered.
    fn why(&self, config: &FetchConfig) -> String {
        match &self.failure {
            Some(PathError::Timeout) | None if !self.established => format!(
                "no answer to {} HELLOs in {} s: check that `pcdn serve` runs at {} and that UDP to it \
                 gets through (a firewall, a NAT, a wrong --advertise)",
                config.handshake_attempts,
                hello_give_up(config.handshake_attempts).as_secs(),
                self.target.addr
            ),
            Some(e) => describe(e),
            None => "no answer".to_owned(),
        }
    }
}

/// How long a path's HELLOs go unanswered before it fails: 1 s, doubled per attempt.
fn hello_give_up(attempts: u32) -> Duration {
    Duration::from_secs((1u64 << attempts.min(16)) - 1)
}

/// Downloads `config.content` into `config.output`. On success the output holds exactly the
/// content's bytes, each block verified; on failure nothing is left behind.
pub async fn fetch(config: FetchConfig) -> Result<FetchReport, FetchError> {
    let mut prepared = prepare(&config).await?;
    let mut output = Output::open(&config.output, prepared.manifest())?;
    let resumed = output.resumed();
    let report = if output.missing().is_empty() {
        report::nothing_to_fetch(&config, prepared.started.elapsed())
    } else {
        if resumed > 0 {
            tracing::info!(
                resumed,
                partial = %output.partial_path().display(),
                "resuming from the verified blocks of the partial file"
            );
        }
        prepared.ranges = output.missing().to_vec();
        download(&config, prepared, |bytes| output.write(bytes)).await?
    };
    output.finish()?;
    Ok(FetchReport {
        resumed_bytes: resumed,
        ..report
    })
}

/// A download ready to start: its checked manifest, its servers and its scheduler.
#[derive(Debug)]
pub struct Prepared {
    manifest: Manifest,
    targets: Vec<Target>,
    tracker: Option<TrackerClient>,
    scheduler: Box<dyn pcdn_core::scheduler::Scheduler>,
    factory: Box<dyn pcdn_core::cc::ControllerFactory>,
    seed: u64,
    started: std::time::Instant,
    /// Block-aligned byte ranges to fetch, ascending; empty: the whole content.
    ranges: Vec<Range<u64>>,
    /// The socket the client bound to the tracker's rendezvous and punched from, if any.
    socket: Option<Socket>,
}

impl Prepared {
    /// The manifest, its id and signer checked.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The servers the download will open paths to: (name, address, origin).
    pub fn servers(&self) -> impl Iterator<Item = (&str, SocketAddr, bool)> {
        self.targets.iter().map(|t| (t.name.as_str(), t.addr, t.origin))
    }
}

/// The first half of [`fetch`]: checks the configuration, looks the content up (manifest and
/// servers) and checks the manifest's id and signer.
pub async fn prepare(config: &FetchConfig) -> Result<Prepared, FetchError> {
    let started = std::time::Instant::now();
    let id = config.content;
    let tracker = match &config.tracker {
        Some(url) => {
            let client = TrackerClient::new(url, None)?;
            Some(match &config.tracker_ca {
                Some(ca) => client.with_tracker_ca(ca)?,
                None => client,
            })
        }
        None => None,
    };
    if tracker.is_none() && config.manifest.is_none() {
        return Err(setup("without --tracker the manifest must be given (--manifest FILE)"));
    }
    if tracker.is_none() && config.edges.is_none() && config.origins.is_empty() {
        return Err(setup(
            "without --tracker the servers must be given (--server / --origin-server)",
        ));
    }
    let factory = pcdn_core::cc::by_name(&config.cc).ok_or_else(|| {
        let names: Vec<_> = pcdn_core::cc::CONTROLLERS.iter().map(|(n, _)| *n).collect();
        setup(format!("--cc \"{}\": expected one of {}", config.cc, names.join(", ")))
    })?;
    let seed = random_seed();
    let scheduler = pcdn_core::scheduler::by_name(&config.scheduler, seed).ok_or_else(|| {
        let names: Vec<_> = pcdn_core::scheduler::SCHEDULERS.iter().map(|(n, _)| *n).collect();
        setup(format!(
            "--scheduler \"{}\": expected one of {}",
            config.scheduler,
            names.join(", ")
        ))
    })?;

    // The manifest and the servers; with a tracker, the socket's mapping first (NAT traversal).
    let rendezvous_timings = crate::rendezvous::Timings::default();
    let (socket, binding) = match &tracker {
        Some(t) => {
            let bind = crate::rendezvous::client_socket_addr(t.url());
            let socket = Socket::bind(bind).map_err(|source| FetchError::Io {
                path: PathBuf::from(format!("udp {bind}")),
                source,
            })?;
            let binding = crate::rendezvous::client_bind(&socket, t, &rendezvous_timings).await;
            (Some(socket), binding)
        }
        None => (None, None),
    };
    let lookup = match &tracker {
        Some(t) => {
            let lookup = t
                .servers_punching(&id, config.max_servers, binding.map(|b| b.token))
                .await?;
            for device in &lookup.unreachable {
                tracing::warn!(server = %device.id, "unreachable: {}; fetching from the others", device.reason);
            }
            Some(lookup)
        }
        None => None,
    };
    let sources = Sources {
        lookup: lookup.as_ref(),
        tracker_url: tracker.as_ref().map(TrackerClient::url),
        given_servers: config.edges.is_some() || !config.origins.is_empty(),
    };
    let manifest_bytes = match (&config.manifest, &tracker) {
        (Some(bytes), _) => bytes.clone(),
        (None, Some(t)) => t
            .get_manifest(&id)
            .await?
            .ok_or_else(|| check::no_manifest(&id, &sources))?,
        (None, None) => unreachable!("checked above"),
    };
    let manifest = check_manifest(&id, &manifest_bytes, config.origin_key, &sources)?;
    let mut targets = Vec::new();
    match (&config.edges, &lookup) {
        (Some(edges), _) => targets.extend(edges.iter().map(|&a| Target::from_addr(a, false))),
        (None, Some(l)) => {
            for device in &l.servers {
                targets.push(Target::from_device(device)?);
            }
        }
        (None, None) => {}
    }
    if let Some(l) = &lookup {
        for device in &l.origins {
            targets.push(Target::from_device(device)?);
        }
    }
    targets.extend(config.origins.iter().map(|&a| Target::from_addr(a, true)));
    let mut seen = HashSet::new();
    targets.retain(|t| seen.insert(t.addr));
    if targets.is_empty() {
        return Err(check::no_server(&id, &sources));
    }
    if let (Some(socket), Some(_), Some(l)) = (&socket, binding, &lookup) {
        let punch: HashSet<SocketAddr> = l
            .servers
            .iter()
            .chain(&l.origins)
            .filter(|d| d.punch)
            .filter_map(|d| d.socket_addr().ok())
            .collect();
        let servers: Vec<(String, SocketAddr)> = targets.iter().map(|t| (t.name.clone(), t.addr)).collect();
        crate::rendezvous::punch(socket, &servers, &punch, &rendezvous_timings).await;
    }

    Ok(Prepared {
        manifest,
        targets,
        tracker,
        scheduler,
        factory,
        seed,
        started,
        ranges: Vec::new(),
        socket,
    })
}

/// The second half of [`fetch`]: runs the download until it is done, every path failed, or
/// the timeout, handing every verified in-order byte to `sink`, in order, exactly once. An
/// error from `sink` stops the download.
pub async fn download(
    config: &FetchConfig,
    prepared: Prepared,
    sink: impl FnMut(&[u8]) -> Result<(), FetchError>,
) -> Result<FetchReport, FetchError> {
    let started = prepared.started;
    let tracker = prepared.tracker.clone();
    let report = drive(config, prepared, sink).await?;
    if let Some(tracker) = tracker {
        report_banned(&tracker, config.content, &report).await;
    }
    Ok(FetchReport {
        elapsed_s: started.elapsed().as_secs_f64(),
        ..report
    })
}

/// Reports to the tracker every device the download banned for corrupt data (smart ban), so
/// that it can quarantine devices several clients banned. Best effort: a failed report is
/// logged and never fails the fetch. Servers given by address (`--server`) have no device id
/// and are not reported.
async fn report_banned(tracker: &TrackerClient, content: ContentId, report: &FetchReport) {
    for path in report.paths.iter().filter(|p| p.banned && p.name != p.addr) {
        // Bounded: a tracker that does not answer must not hold the finished fetch up.
        let sent = tokio::time::timeout(REPORT_TIMEOUT, tracker.report_corrupt(&path.name, &content)).await;
        match sent {
            Ok(Ok(())) => tracing::info!(device = %path.name, "reported the device to the tracker for corrupt data"),
            Ok(Err(error)) => tracing::warn!(device = %path.name, %error, "reporting a corrupt device failed"),
            Err(_) => tracing::warn!(device = %path.name, "reporting a corrupt device timed out"),
        }
    }
}

fn random_seed() -> u64 {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    u64::from_le_bytes(bytes)
}

/// A tracker lookup made because paths failed, running beside the download.
type Requery = mpsc::Receiver<Result<Lookup, crate::tracker_client::TrackerError>>;

/// Runs the download over one socket until it is done, every path failed, or the timeout.
async fn drive(
    config: &FetchConfig,
    prepared: Prepared,
    mut sink: impl FnMut(&[u8]) -> Result<(), FetchError>,
) -> Result<FetchReport, FetchError> {
    let Prepared {
        manifest,
        targets,
        tracker,
        scheduler,
        factory,
        seed,
        started: _,
        ranges,
        socket: prepared_socket,
    } = prepared;
    let capped = config
        .rate_limit_bps
        .map(|bps| rate::CappedFactory::new(&*factory, bps));
    let factory: &dyn pcdn_core::cc::ControllerFactory = match &capped {
        Some(capped) => capped,
        None => &*factory,
    };
    let length = manifest.length;
    let packet_size = manifest.packet_size;
    let bind: SocketAddr = if targets.iter().all(|t| t.addr.is_ipv4()) {
        "0.0.0.0:0".parse().expect("an address")
    } else {
        "[::]:0".parse().expect("an address")
    };
    // The socket that punched keeps the NAT mappings the servers expect.
    let socket = match prepared_socket {
        Some(s)
            if s.local_addr()
                .is_ok_and(|a| targets.iter().all(|t| t.addr.is_ipv4() == a.is_ipv4())) =>
        {
            s
        }
        _ => Socket::bind(bind).map_err(|source| FetchError::Io {
            path: PathBuf::from(format!("udp {bind}")),
            source,
        })?,
    };
    let clock = Clock::new();
    let mut download_config = DownloadConfig::new(config.content, length, packet_size);
    download_config.seed = seed;
    download_config.handshake_attempts = config.handshake_attempts;
    download_config.max_consecutive_timeouts = config.max_consecutive_timeouts;
    if config.play_video
        && let Some(video) = &manifest.video
    {
        let player = pcdn_core::player::PlayerConfig {
            spec: video.spec(),
            jump_to_cdn: None,
        };
        match player.spec.validate() {
            Ok(()) if player.spec.total_bytes() <= length => download_config.video = Some(player),
            // A publisher's rounding must not stop the download: only the deadlines are lost.
            _ => tracing::warn!(
                bitrate_bps = video.bitrate_bps,
                duration_ms = video.duration_ms,
                "the manifest's video metadata does not fit the content; downloading without play deadlines"
            ),
        }
    }
    download_config.tasks = ranges;
    download_config.verify = Some(Arc::new(manifest));
    let mut download =
        Download::new(download_config, scheduler).map_err(|e| setup(format!("the manifest's sizes: {e}")))?;
    let mut paths: Vec<PathEntry> = Vec::new();
    let now = clock.now();
    for target in targets.into_iter().take(config.max_paths) {
        add_path(&mut download, &mut paths, factory, now, target, u64::from(packet_size));
    }

    let progress = progress_bar(config.progress, length);
    let mut last_draw = std::time::Instant::now();
    let deadline = config.timeout.map(|t| std::time::Instant::now() + t);
    let mut recv = RecvBatch::new(&socket);
    let mut send = SendBatch::new();
    let mut buf = Vec::with_capacity(wire::MAX_DATAGRAM);
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut requery: Option<Requery> = None;
    let mut last_requery: Option<std::time::Instant> = None;
    // A path failed since the last lookup: one is made as soon as `REQUERY_EVERY` allows, so
    // a failure soon after a lookup is not forgotten.
    let mut requery_wanted = false;
    let mut stray = 0u64;
    let mut delivered = 0u64;

    loop {
        let now = clock.now();
        // Outputs: every datagram the download wants sent, as one batch.
        let segments = socket.max_gso_segments();
        while let Some(t) = download.poll_transmit(now, &mut buf) {
            if let Some(entry) = paths.iter().find(|p| p.id == t.path) {
                send.push(entry.target.addr, &buf[..t.len], segments);
            }
        }
        if !send.is_empty() {
            socket.send(&mut send).await;
        }
        while let Some(event) = download.poll_event() {
            match event {
                Event::PathEstablished(id) => {
                    if let Some(p) = paths.iter_mut().find(|p| p.id == id) {
                        tracing::debug!(server = %p.target.name, "path established");
                        p.established = true;
                    }
                }
                Event::PathFailed { path, reason } => {
                    if let Some(p) = paths.iter_mut().find(|p| p.id == path) {
                        p.failure = Some(reason);
                        tracing::info!(server = %p.target.name, reason = %p.why(config), "path failed");
                    }
                    requery_wanted = true;
                }
                Event::BlockRejected { block, paths: sources } => {
                    let names: Vec<&str> = sources
                        .iter()
                        .filter_map(|id| paths.iter().find(|p| p.id == *id))
                        .map(|p| p.target.name.as_str())
                        .collect();
                    tracing::info!(block, from = ?names, "block failed verification; fetching it again");
                }
                Event::TaskComplete { .. } | Event::Done => {}
            }
        }
        loop {
            let n = download.read(&mut chunk);
            if n == 0 {
                break;
            }
            sink(&chunk[..n])?;
            delivered += n as u64;
        }
        for p in paths.iter_mut().filter(|p| p.silent() && !p.noticed) {
            let silent_for = p.opened.elapsed();
            if silent_for >= config.silence_notice {
                p.noticed = true;
                progress.suspend(|| {
                    tracing::warn!(
                        "{} ({}) has not answered for {} s; it is given up {} s after its first HELLO \
                         unless it answers: check that `pcdn serve` runs there and that UDP to it gets through",
                        p.target.name,
                        p.target.addr,
                        silent_for.as_secs(),
                        hello_give_up(config.handshake_attempts).as_secs()
                    );
                });
            }
        }
        if last_draw.elapsed() >= PROGRESS_EVERY {
            draw(&progress, &download, &mut paths, last_draw.elapsed());
            last_draw = std::time::Instant::now();
        }
        if download.is_done() {
            break;
        }
        let live = paths.iter().filter(|p| p.failure.is_none()).count();
        requery_wanted &= tracker.is_some() && paths.len() < config.max_paths;
        let requery_due = last_requery.map(|at| at + REQUERY_EVERY);
        if let Some(t) = &tracker
            && requery_wanted
            && requery.is_none()
            && requery_due.is_none_or(|due| std::time::Instant::now() >= due)
        {
            requery_wanted = false;
            last_requery = Some(std::time::Instant::now());
            requery = Some(spawn_lookup(t.clone(), config.content, config.max_servers));
        }
        if live == 0 && requery.is_none() {
            progress.finish_and_clear();
            let failures = paths
                .iter()
                .map(|p| (format!("{} ({})", p.target.name, p.target.addr), p.why(config)))
                .collect();
            return Err(FetchError::AllPathsFailed(failures));
        }
        if let Some(at) = deadline {
            if std::time::Instant::now() >= at {
                progress.finish_and_clear();
                return Err(FetchError::Timeout {
                    after: config.timeout.unwrap_or_default(),
                    delivered,
                    length,
                });
            }
        }

        // Inputs: a receive batch, a timer, or a tracker answer.
        let timer = download.poll_timeout();
        let notice = paths
            .iter()
            .filter(|p| p.silent() && !p.noticed)
            .map(|p| p.opened + config.silence_notice)
            .min();
        let wake = [
            timer.map(|t| clock.to_std(t)),
            deadline,
            Some(last_draw + PROGRESS_EVERY),
            notice,
            requery_due.filter(|_| requery_wanted && requery.is_none()),
        ]
        .into_iter()
        .flatten()
        .min();
        tokio::select! {
            received = socket.recv(&mut recv) => {
                received.map_err(|source| FetchError::Io { path: PathBuf::from(format!("udp {bind}")), source })?;
                let now = clock.now();
                for (from, datagram) in recv.datagrams() {
                    match paths.iter().find(|p| p.target.addr == from) {
                        Some(p) => download.handle_datagram(now, p.id, datagram),
                        None => stray += 1,
                    }
                }
            }
            () = sleep_until(wake) => {}
            answer = recv_requery(&mut requery) => {
                requery = None;
                match answer {
                    Ok(lookup) => {
                        let now = clock.now();
                        for device in lookup.servers.iter().chain(&lookup.origins) {
                            let Ok(target) = Target::from_device(device) else { continue };
                            if paths.len() >= config.max_paths {
                                tracing::warn!(max_paths = config.max_paths, "the fetch opened its most paths; no more servers from the tracker");
                                break;
                            }
                            if paths.iter().all(|p| p.target.addr != target.addr) {
                                tracing::info!(server = %target.name, "adding a server from the tracker");
                                add_path(&mut download, &mut paths, factory, now, target, u64::from(packet_size));
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "tracker lookup after a path failure"),
                }
            }
        }
        let now = clock.now();
        if timer.is_some_and(|t| t <= now) {
            download.handle_timeout(now);
        }
    }
    progress.finish_and_clear();
    if stray > 0 {
        tracing::debug!(stray, "datagrams from unknown addresses ignored");
    }
    Ok(report(config, &download, &paths, delivered))
}

fn add_path(
    download: &mut Download,
    paths: &mut Vec<PathEntry>,
    factory: &dyn pcdn_core::cc::ControllerFactory,
    now: pcdn_core::Instant,
    target: Target,
    mss: u64,
) {
    let info = ServerInfo {
        name: target.name.clone(),
        origin: target.origin,
    };
    let id = download.add_path(now, info, factory.build(now, mss));
    paths.push(PathEntry {
        id,
        target,
        failure: None,
        established: false,
        opened: std::time::Instant::now(),
        noticed: false,
        bytes_at_draw: 0,
    });
}

fn spawn_lookup(tracker: TrackerClient, content: ContentId, n: u32) -> Requery {
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        let _ = tx.send(tracker.servers(&content, n).await).await;
    });
    rx
}

async fn recv_requery(requery: &mut Option<Requery>) -> Result<Lookup, crate::tracker_client::TrackerError> {
    match requery {
        Some(rx) => match rx.recv().await {
            Some(answer) => answer,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

/// Why a path failed, in words.
fn describe(error: &PathError) -> String {
    match error {
        PathError::Timeout => "timeout".to_owned(),
        PathError::Rejected(reason) => format!(
            "rejected: {}",
            crate::metrics::reason_name(*reason as u8).replace('_', " ")
        ),
        PathError::Mismatch => "mismatch: the server's length or packet size differs from the manifest".to_owned(),
        PathError::Corrupt => "corrupt: sent data that failed verification (banned)".to_owned(),
    }
}

fn progress_bar(wanted: bool, length: u64) -> ProgressBar {
    if !wanted || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(length), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("[{bar:25}] {bytes}/{total_bytes} {bytes_per_sec} {wide_msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar
}

/// Redraws the progress line: bytes delivered, and each live path's rate since the last draw.
fn draw(bar: &ProgressBar, download: &Download, paths: &mut [PathEntry], since: Duration) {
    if bar.is_hidden() {
        return;
    }
    let stats = download.stats();
    bar.set_position(stats.bytes_delivered);
    let seconds = since.as_secs_f64().max(1e-3);
    let mut parts = Vec::new();
    for p in paths.iter_mut() {
        let bytes = stats.paths.get(p.id.0 as usize).map_or(0, |s| s.bytes);
        let rate = (bytes - p.bytes_at_draw) as f64 * 8.0 / seconds / 1e6;
        p.bytes_at_draw = bytes;
        match p.failure {
            None => parts.push(format!("{} {rate:.1}", p.target.name)),
            Some(_) => parts.push(format!("{} failed", p.target.name)),
        }
    }
    bar.set_message(format!("Mbit/s: {}", parts.join(", ")));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unknown_scheduler_and_cc_names_list_the_known_ones() {
        let mut config = FetchConfig::new(ContentId([0; 32]), "out");
        config.manifest = Some(Vec::new());
        config.origins = vec!["127.0.0.1:9".parse().unwrap()];
        config.cc = "warp".to_owned();
        let e = fetch(config.clone()).await.unwrap_err().to_string();
        assert!(e.contains("--cc \"warp\"") && e.contains("cubic"), "{e}");
        config.cc = DEFAULT_CC.to_owned();
        config.scheduler = "magic".to_owned();
        let e = fetch(config).await.unwrap_err().to_string();
        assert!(e.contains("--scheduler \"magic\"") && e.contains("weave"), "{e}");
    }
}
