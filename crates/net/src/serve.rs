//! The serving device (`pcdn serve`): a `ServerSession` over the content store, driven by a
//! batched UDP loop, plus its tracker presence (register, heartbeat, announce, manifests) and
//! its Prometheus endpoint.
//!
//! The UDP loop is one task that owns the session: it hands every datagram of a receive batch
//! to the session, then drains `poll_transmit` into one send batch (at most
//! [`MAX_SEND_BATCH`] datagrams before it looks for new datagrams again), and sleeps until the
//! session's `poll_timeout` when there is nothing to do. Tracker outages never reach it: the
//! tracker task retries with backoff on its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use pcdn_core::manifest::DEFAULT_PACKET_SIZE;
use pcdn_core::wire;
use pcdn_core::{ServerSession, ServerStats};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cache::{Cache, CacheConfig};
use crate::clock::Clock;
use crate::metrics::{ReasonLabel, ServerMetrics, ServerSnapshot, reason_name};
use crate::socket::{RecvBatch, SendBatch, Socket};
use crate::store::{Store, StoreSource};
use crate::tracker_client::{Registration, TrackerClient};
use pcdn_identity::{DeviceIdentity, Role};
use presence::TrackerPresence;
pub use presence::TrackerRefused;

mod presence;

/// Datagrams one send batch holds at most before the loop reads its socket again.
pub const MAX_SEND_BATCH: usize = 256;
/// Where a device finds its tracker, and who it is there.
#[derive(Clone, Debug)]
pub struct TrackerSettings {
    pub url: String,
    /// The device's operator-signed credential and key: its id and role at the tracker.
    pub identity: DeviceIdentity,
}

/// A serving device's settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub store_dir: PathBuf,
    /// UDP address to bind (port 0: any free port).
    pub listen: SocketAddr,
    /// Address given to the tracker; `None`: the bound address.
    pub advertise: Option<SocketAddr>,
    /// `None`: serve without a tracker.
    pub tracker: Option<TrackerSettings>,
    /// PEM file of the CA that signed an https tracker's certificate; `None`: the system's roots.
    pub tracker_ca: Option<PathBuf>,
    /// This device is the CDN origin: its manifests are authoritative, and it serves everything.
    /// With a tracker, the credential's role decides, and `true` here with an edge credential
    /// is an error.
    pub origin: bool,
    /// Upload cap in bit/s (whole datagrams); `None`: unlimited.
    pub upload_limit_bps: Option<u64>,
    /// Upload capacity registered with the tracker when there is no upload limit, bit/s.
    pub default_capacity_bps: u64,
    /// Device id; `None`: the credential's id, or without a tracker one derived from the
    /// advertised address. With a credential it must be the credential's id.
    pub id: Option<String>,
    pub max_sessions: usize,
    /// Most sessions of one source (an IPv4 address or an IPv6 /64).
    pub max_sessions_per_source: usize,
    /// Address of the Prometheus endpoint (`GET /metrics`); `None`: none.
    pub metrics_listen: Option<SocketAddr>,
    /// Make the store a cache filled by the tracker's assignment (`--cache-size`); needs a
    /// tracker, and an edge.
    pub cache: Option<CacheConfig>,
}

impl ServerConfig {
    /// A server of the store at `store_dir` on `listen`, without tracker or limits.
    pub fn new(store_dir: impl Into<PathBuf>, listen: SocketAddr) -> ServerConfig {
        ServerConfig {
            store_dir: store_dir.into(),
            listen,
            advertise: None,
            tracker: None,
            tracker_ca: None,
            origin: false,
            upload_limit_bps: None,
            default_capacity_bps: 100_000_000,
            id: None,
            max_sessions: pcdn_core::ServerConfig::default().max_sessions,
            max_sessions_per_source: pcdn_core::ServerConfig::default().max_sessions_per_source,
            metrics_listen: None,
            cache: None,
        }
    }
}

/// The id a device gets when none is given: its role and advertised address, in the
/// characters the tracker allows (`edge-127.0.0.1-7801`).
pub fn default_device_id(origin: bool, addr: SocketAddr) -> String {
    let role = if origin { "origin" } else { "edge" };
    let ip = addr.ip().to_string().replace(':', ".");
    format!("{role}-{ip}-{}", addr.port())
}

/// Checks a device id against the tracker's rule: 1..=64 of `[A-Za-z0-9._-]`.
pub fn check_device_id(id: &str) -> anyhow::Result<()> {
    let ok = (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    anyhow::ensure!(
        ok,
        "device id \"{id}\": expected 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' or '-'"
    );
    Ok(())
}

/// A running server. Dropping it leaves the server running until the runtime stops; call
/// [`ServerHandle::shutdown`] to stop it cleanly.
pub struct ServerHandle {
    local_addr: SocketAddr,
    advertise: SocketAddr,
    id: String,
    public_key: [u8; 32],
    metrics: Arc<ServerMetrics>,
    stop: watch::Sender<bool>,
    udp: Option<JoinHandle<std::io::Result<()>>>,
    others: Vec<JoinHandle<()>>,
    metrics_addr: Option<SocketAddr>,
    cache: Option<Arc<Cache>>,
    /// Fires when the tracker refuses the device for good (`TrackerRefused`).
    refused: Option<tokio::sync::oneshot::Receiver<TrackerRefused>>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("id", &self.id)
            .field("local_addr", &self.local_addr)
            .finish()
    }
}

impl ServerHandle {
    /// The bound UDP address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The address given to the tracker.
    pub fn advertise(&self) -> SocketAddr {
        self.advertise
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The store's public key (the signer of its manifests).
    pub fn public_key(&self) -> [u8; 32] {
        self.public_key
    }

    /// The bound address of the metrics endpoint, if any.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    pub fn stats(&self) -> ServerSnapshot {
        self.metrics.snapshot()
    }

    /// The device's cache, with `--cache-size`.
    pub fn cache(&self) -> Option<&Arc<Cache>> {
        self.cache.as_ref()
    }

    /// Waits until the server cannot go on: the UDP loop ended by itself (only a socket error
    /// makes it), or the tracker refused the device for good (the error is a
    /// [`TrackerRefused`], which `pcdn serve` turns into exit status 2).
    pub async fn failed(&mut self) -> anyhow::Error {
        let refused = async {
            match self.refused.as_mut() {
                // Dropped unsent: the presence ended with the server, not refused.
                Some(receiver) => match receiver.await {
                    Ok(refused) => anyhow::Error::new(refused),
                    Err(_) => std::future::pending().await,
                },
                None => std::future::pending().await,
            }
        };
        let udp = async {
            match self.udp.as_mut() {
                Some(task) => match task.await {
                    Ok(Ok(())) => anyhow::anyhow!("the UDP loop stopped"),
                    Ok(Err(e)) => anyhow::Error::new(e).context(format!("UDP socket {}", self.local_addr)),
                    Err(e) => anyhow::anyhow!("the UDP loop panicked: {e}"),
                },
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            e = refused => e,
            e = udp => e,
        }
    }

    /// Stops serving (the socket closes), deregisters from the tracker (waiting at most two
    /// seconds for it) and waits for every task of the server.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        let _ = self.stop.send(true);
        let udp = match self.udp.take() {
            Some(task) => task.await.map_err(|e| anyhow::anyhow!("the UDP loop panicked: {e}"))?,
            None => Ok(()),
        };
        for task in self.others.drain(..) {
            let _ = task.await;
        }
        udp.with_context(|| format!("UDP socket {}", self.local_addr))
    }
}

/// Starts a server: opens the store, binds the socket, and spawns the UDP loop, the tracker
/// task (with a tracker) and the metrics endpoint (with `metrics_listen`). Must be called
/// inside a tokio runtime.
pub async fn spawn_server(config: ServerConfig) -> anyhow::Result<ServerHandle> {
    let store =
        Store::open(&config.store_dir).with_context(|| format!("opening the store {}", config.store_dir.display()))?;
    let socket = Socket::bind(config.listen).with_context(|| format!("binding UDP {}", config.listen))?;
    let local_addr = socket.local_addr()?;
    let advertise = config.advertise.unwrap_or(local_addr);
    let (id, origin) = identity_of(&config)?;
    let id = id.unwrap_or_else(|| default_device_id(origin, advertise));
    check_device_id(&id)?;
    let tracker = match &config.tracker {
        Some(t) => {
            let client = TrackerClient::new(&t.url, Some(t.identity.clone()))?;
            Some(match &config.tracker_ca {
                Some(ca) => client.with_tracker_ca(ca)?,
                None => client,
            })
        }
        None => None,
    };

    let mut token_key = [0u8; 32];
    getrandom::fill(&mut token_key).map_err(|e| anyhow::anyhow!("no OS randomness for the token key: {e}"))?;
    let session_config = pcdn_core::ServerConfig {
        packet_size: DEFAULT_PACKET_SIZE as u16,
        token_key,
        max_sessions: config.max_sessions,
        max_sessions_per_source: config.max_sessions_per_source,
        upload_rate: config.upload_limit_bps.map(|bps| (bps / 8).max(1)),
        ..pcdn_core::ServerConfig::default()
    };
    let source = store.source(DEFAULT_PACKET_SIZE);
    let cache = match &config.cache {
        Some(cache_config) => {
            anyhow::ensure!(
                config.tracker.is_some(),
                "--cache-size needs --tracker: the tracker assigns what the cache holds"
            );
            anyhow::ensure!(
                !origin,
                "--cache-size is for edges: an origin serves its own store, filled with `pcdn add`"
            );
            anyhow::ensure!(cache_config.cache_bytes > 0, "--cache-size: expected a positive size");
            anyhow::ensure!(cache_config.fill_rate_bps > 0, "--fill-rate: expected a positive rate");
            Some(Cache::open(source.clone(), cache_config.clone())?)
        }
        None => None,
    };
    let session = ServerSession::new(session_config, source);
    let metrics = Arc::new(ServerMetrics::default());
    let (stop, stopped) = watch::channel(false);

    let mut others = Vec::new();
    let mut metrics_addr = None;
    if let Some(addr) = config.metrics_listen {
        let listener = crate::metrics::bind_metrics(addr).await?;
        metrics_addr = Some(listener.local_addr()?);
        let registry = metrics.registry(&id);
        let mut stopped = stopped.clone();
        others.push(tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            if let Err(e) = crate::metrics::serve_metrics(listener, registry, shutdown).await {
                tracing::error!(error = %e, "metrics endpoint failed");
            }
        }));
    }
    others.push(tokio::spawn(upload_meter(metrics.clone(), stopped.clone())));
    let (rendezvous, rendezvous_task) = crate::rendezvous::pipe();
    let (grants, granted) = watch::channel(None);
    let reregister = Arc::new(std::sync::atomic::AtomicBool::new(false));
    if tracker.is_some() {
        others.push(tokio::spawn(crate::rendezvous::run_device(
            rendezvous_task,
            local_addr,
            granted,
            reregister.clone(),
            stopped.clone(),
            crate::rendezvous::Timings::default(),
        )));
    }
    if let (Some(cache), Some(settings)) = (&cache, &config.tracker) {
        let fill_source = crate::cache::fill::FillSource {
            tracker: settings.url.clone(),
            tracker_ca: config.tracker_ca.clone(),
        };
        others.push(tokio::spawn(crate::cache::fill::run(
            cache.clone(),
            fill_source,
            stopped.clone(),
        )));
    }
    let mut refused = None;
    if let Some(client) = tracker {
        let registration = Registration {
            id: id.clone(),
            addr: advertise.to_string(),
            origin,
            upload_capacity_bps: config.upload_limit_bps.unwrap_or(config.default_capacity_bps),
            public_key: Some(hex::encode(store.public_key())),
        };
        let (refuse, refusal) = tokio::sync::oneshot::channel();
        refused = Some(refusal);
        let presence = TrackerPresence {
            client,
            registration,
            store: store.clone(),
            metrics: metrics.clone(),
            grants,
            reregister,
            cache: cache.clone(),
        };
        let stopped = stopped.clone();
        others.push(tokio::spawn(async move {
            if let Err(refusal) = presence.run(stopped).await {
                let _ = refuse.send(refusal);
            }
        }));
    }
    tracing::info!(
        %id,
        %local_addr,
        %advertise,
        origin,
        contents = store.list().map(|l| l.len()).unwrap_or(0),
        gso = socket.max_gso_segments(),
        gro = socket.gro_segments(),
        "serving {}",
        store.dir().display()
    );
    let udp = tokio::spawn(udp_loop(socket, session, metrics.clone(), rendezvous, stopped));
    Ok(ServerHandle {
        local_addr,
        advertise,
        id,
        public_key: store.public_key(),
        metrics,
        stop,
        udp: Some(udp),
        others,
        metrics_addr,
        cache,
        refused,
    })
}

/// The device's id (if decided yet) and whether it is an origin: from its credential when it
/// has a tracker (a contradicting `id` or `origin` is an error naming the credential's), else
/// from the configuration.
pub fn identity_of(config: &ServerConfig) -> anyhow::Result<(Option<String>, bool)> {
    let Some(tracker) = &config.tracker else {
        return Ok((config.id.clone(), config.origin));
    };
    let credential = &tracker.identity.credential;
    if let Some(id) = &config.id {
        anyhow::ensure!(
            *id == credential.id,
            "device id {id:?} is not the credential's id {:?}: a device acts only as the id it was enrolled with (leave --id out)",
            credential.id
        );
    }
    let origin = credential.role == Role::Origin;
    anyhow::ensure!(
        origin || !config.origin,
        "--origin, but the credential of {:?} has role edge: enroll an origin with `pcdn operator enroll --role origin`, or leave --origin out",
        credential.id
    );
    Ok((Some(credential.id.clone()), origin))
}

/// The server's datagram loop; see the module documentation.
async fn udp_loop(
    socket: Socket,
    mut session: ServerSession<StoreSource>,
    metrics: Arc<ServerMetrics>,
    mut rendezvous: crate::rendezvous::LoopSide,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let clock = Clock::new();
    let mut recv = RecvBatch::new(&socket);
    let mut send = SendBatch::new();
    let mut buf = Vec::with_capacity(wire::MAX_DATAGRAM);
    let mut published = ServerStats::default();
    loop {
        if *stop.borrow() {
            return Ok(());
        }
        let now = clock.now();
        session.handle_timeout(now);
        let segments = socket.max_gso_segments();
        let mut full = false;
        while let Some(t) = session.poll_transmit(now, &mut buf) {
            let datagram = &buf[..t.len];
            if datagram.get(1) == Some(&wire::kind::REJECT) {
                let reason = reason_name(datagram.get(10).copied().unwrap_or(0));
                metrics.rejects.get_or_create(&ReasonLabel { reason }).inc();
            }
            send.push(t.to, datagram, segments);
            if send.len() >= MAX_SEND_BATCH {
                full = true;
                break;
            }
        }
        if !send.is_empty() {
            let queued = send.len();
            let dropped = socket.send(&mut send).await;
            metrics.datagrams_out.inc_by((queued - dropped) as u64);
            metrics.send_errors.inc_by(dropped as u64);
        }
        publish(&session, &mut published, &metrics);

        if full {
            // More to send: take what arrived meanwhile without waiting, and go on.
            if socket.try_recv(&mut recv)? {
                handle_batch(&mut session, &clock, &recv, &rendezvous);
            }
            continue;
        }
        let deadline = session.poll_timeout().map(|t| clock.to_std(t));
        tokio::select! {
            received = socket.recv(&mut recv) => {
                received?;
                handle_batch(&mut session, &clock, &recv, &rendezvous);
            }
            Some((to, datagram)) = rendezvous.from_task.recv() => {
                let mut one = SendBatch::new();
                one.push(to, &datagram, 1);
                socket.send(&mut one).await;
            }
            () = sleep_until(deadline) => {}
            _ = stop.changed() => {}
        }
    }
}

fn handle_batch(
    session: &mut ServerSession<StoreSource>,
    clock: &Clock,
    batch: &RecvBatch,
    rendezvous: &crate::rendezvous::LoopSide,
) {
    let now = clock.now();
    // Each datagram is handed over at its own length, GRO bundles cut apart: the session's
    // 3× anti-amplification budget counts exactly what each sender sent.
    for (from, datagram) in batch.datagrams() {
        if wire::rendezvous::is_rendezvous(datagram) {
            // NAT traversal (docs/protocol.md §11); dropped when the task lags or is absent.
            let _ = rendezvous.to_task.try_send((from, datagram.to_vec()));
        } else {
            session.handle_datagram(now, from, datagram);
        }
    }
}

async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

/// Adds what the session counted since the last call to the shared metrics.
fn publish(session: &ServerSession<StoreSource>, last: &mut ServerStats, metrics: &ServerMetrics) {
    let now = session.stats();
    metrics.datagrams_in.inc_by(now.datagrams_in - last.datagrams_in);
    metrics.bytes_in.inc_by(now.bytes_in - last.bytes_in);
    metrics.bytes_out.inc_by(now.bytes_out - last.bytes_out);
    metrics
        .data_packets_out
        .inc_by(now.data_packets_out - last.data_packets_out);
    metrics.dropped.inc_by(now.dropped - last.dropped);
    metrics
        .sessions_opened
        .inc_by(now.sessions_opened - last.sessions_opened);
    metrics.sessions.set(session.session_count() as i64);
    *last = now.clone();
}

/// Measures the upload rate once a second into `metrics.upload_bps`.
async fn upload_meter(metrics: Arc<ServerMetrics>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = (std::time::Instant::now(), metrics.bytes_out.get());
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let now = (std::time::Instant::now(), metrics.bytes_out.get());
        let seconds = now.0.duration_since(last.0).as_secs_f64();
        if seconds > 0.0 {
            metrics.upload_bps.set(((now.1 - last.1) as f64 * 8.0 / seconds) as i64);
        }
        last = now;
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.context("listening for SIGINT")?,
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await.context("listening for Ctrl-C")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_ids_derive_from_the_address_and_are_checked() {
        let v4 = default_device_id(false, "127.0.0.1:7801".parse().unwrap());
        assert_eq!(v4, "edge-127.0.0.1-7801");
        let v6 = default_device_id(true, "[::1]:7801".parse().unwrap());
        assert_eq!(v6, "origin-..1-7801");
        check_device_id(&v4).unwrap();
        check_device_id(&v6).unwrap();
        assert!(check_device_id("").is_err());
        assert!(check_device_id(&"x".repeat(65)).is_err());
        let e = check_device_id("edge 1").unwrap_err().to_string();
        assert!(e.contains("\"edge 1\""), "{e}");
    }
}
