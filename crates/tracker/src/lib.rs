//! pcdn's control plane: an HTTP/JSON tracker where devices register, heartbeat and announce
//! the contents they hold, and clients look up which devices to download a content from
//! (docs/tracker.md). The registry is kept in SQLite (one instance) or Redis (several instances
//! acting as one).
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use pcdn_tracker::{TrackerConfig, bind};
//! let operator = pcdn_identity::OperatorKey::generate().map_err(anyhow::Error::msg)?;
//! let config = TrackerConfig::new("127.0.0.1:0".parse()?, "sqlite::memory:".parse()?, operator.public());
//! let tracker = bind(config).await?;
//! println!("tracker at http://{}", tracker.local_addr());
//! tracker.stop().await?;
//! # Ok(())
//! # }
//! ```

#![recursion_limit = "256"]

mod api;
mod auth;
mod error;
mod extract;
mod metrics;
mod model;
mod openapi;
mod placement;
mod popularity;
mod quarantine;
mod ratelimit;
mod rendezvous;
mod server;
mod store;
mod tls;

pub use auth::AuthConfig;
pub use pcdn_identity::ed25519_dalek::VerifyingKey;
pub use pcdn_placement::PlacementConfig;
pub use placement::PlacementSettings;
pub use quarantine::QuarantineConfig;
pub use ratelimit::{Rate, RateLimits};
pub use rendezvous::{RendezvousTimings, UdpConfig};
pub use server::{HttpLimits, raise_fd_limit};
pub use tls::TlsFiles;

use anyhow::{Context, bail};
use api::AppState;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use store::redis::RedisStore;
use store::sqlite::SqliteStore;
use store::{Store, unix_millis};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Where the registry is kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreUrl {
    /// `sqlite:PATH`: a database file, created if missing; survives restarts.
    Sqlite(PathBuf),
    /// `sqlite::memory:`: an in-memory database, gone when the tracker stops.
    SqliteMemory,
    /// `redis://HOST:PORT/DB`: a Redis server shared by any number of tracker instances.
    Redis(String),
}

impl FromStr for StoreUrl {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> anyhow::Result<StoreUrl> {
        if text == "sqlite::memory:" {
            return Ok(StoreUrl::SqliteMemory);
        }
        if let Some(path) = text.strip_prefix("sqlite:") {
            if path.is_empty() {
                bail!("store URL {text:?} names no file: expected sqlite:PATH or sqlite::memory:");
            }
            return Ok(StoreUrl::Sqlite(PathBuf::from(path)));
        }
        if text.starts_with("redis://") {
            redis::IntoConnectionInfo::into_connection_info(text)
                .with_context(|| format!("store URL {text:?} is not a valid redis://HOST:PORT/DB URL"))?;
            return Ok(StoreUrl::Redis(text.to_owned()));
        }
        bail!("store URL {text:?} is not one of sqlite:PATH, sqlite::memory: or redis://HOST:PORT/DB")
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            StoreUrl::SqliteMemory => f.write_str("sqlite::memory:"),
            StoreUrl::Redis(url) => f.write_str(url),
        }
    }
}

/// Bounds on what the registry keeps and on what one lookup reads (docs/tracker.md, "Bounds").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreLimits {
    /// Most origins a lookup lists (and never more than its `n`). Default 4: a client fetches
    /// from a handful of origins at most; every path beyond that costs it a handshake.
    pub max_origins: usize,
    /// Ranking entries a lookup may read beyond the `n` it returns, to skip devices that expired
    /// since the last sweep. Default 64: a sweep runs every ttl/4, so only devices that expired
    /// within one sweep interval are skipped, and 64 is the largest `n`.
    pub lookup_slack: usize,
    /// Largest manifest the tracker keeps, in bytes. Default 8 MiB, the largest manifest of a
    /// 10 GiB video in the default 64 KiB blocks (crates/core/src/manifest.rs's format):
    /// 163,840 block hashes of 32 bytes (5,242,880 bytes), an HLS file table of 10,737
    /// two-second segments of 1 MiB (4 Mbit/s) with 255-byte names at 18 + 255 bytes each
    /// (2,931,201 bytes), the video header (21), the manifest header (32) and the signer and
    /// signature (96): 8,174,230 bytes ≤ 8,388,608.
    pub max_manifest_bytes: usize,
    /// Most manifests one origin (one signer key) may keep. Default 10,000: a catalogue of ten
    /// thousand videos.
    pub manifests_per_origin: u64,
    /// Most manifest bytes one origin (one signer key) may keep. Default 1 GiB: 10,000 manifests
    /// of 100 KB (a 2 GB video each), or 128 of the largest.
    pub manifest_bytes_per_origin: u64,
    /// How long a manifest that no live device holds, and whose origin (a live origin with the
    /// signer's key) is gone, is kept before the sweep deletes it. Default 24 h: an origin down
    /// for a night keeps its catalogue.
    pub orphan_grace: Duration,
    /// Most contents whose lookups are counted (popularity); the least popular beyond it are
    /// forgotten. Default 100,000: ten origins' catalogues (`manifests_per_origin`), ~5 MB of
    /// counts in Redis or SQLite.
    pub max_tracked_contents: usize,
    /// How lookups spread viewers over the holders of a content between heartbeats.
    pub spread: Spread,
}

/// How lookups spread viewers over devices (docs/tracker.md, "Lookup order"): devices at their
/// cap are left out while others have room, and each lookup charges the devices it lists a
/// share of one viewer's rate until their next heartbeat reports their real load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spread {
    /// A device with less free upload than this (bit/s) is at its cap: listed only when no
    /// holder of the content has room. Default 250,000: a client spreads a viewer over the 8
    /// servers a lookup lists by default, and 250 kbit/s is one eighth of the fleet bench's
    /// 2 Mbit/s videos (docs/benchmarks.md); a device with less cannot carry even that share.
    /// 0: never at cap.
    pub min_free_upload_bps: u64,
    /// The rate (bit/s) one viewer is expected to draw when the tracker does not know the
    /// content's bitrate (no manifest decoded on this instance). Default 4,000,000: the
    /// 4 Mbit/s video the manifest size bound is computed for (`max_manifest_bytes`). 0 (with
    /// no known bitrate): lookups charge nothing.
    pub session_bps: u64,
}

impl Spread {
    /// Largest `min_free_upload_bps` (2^50 bit/s): ranks at cap stay apart from ranks with room
    /// (`model::CAP_MARK`).
    pub const MAX_MIN_FREE: u64 = 1 << 50;
}

impl Default for Spread {
    fn default() -> Spread {
        Spread {
            min_free_upload_bps: 250_000,
            session_bps: 4_000_000,
        }
    }
}

impl Default for StoreLimits {
    fn default() -> StoreLimits {
        StoreLimits {
            max_origins: 4,
            lookup_slack: 64,
            max_manifest_bytes: 8 << 20,
            manifests_per_origin: 10_000,
            manifest_bytes_per_origin: 1 << 30,
            orphan_grace: Duration::from_secs(24 * 3600),
            max_tracked_contents: 100_000,
            spread: Spread::default(),
        }
    }
}

/// Everything a tracker needs to run.
#[derive(Clone)]
pub struct TrackerConfig {
    /// HTTP listen address (port 0 picks a free port; see `RunningTracker::local_addr`).
    pub listen: SocketAddr,
    pub store: StoreUrl,
    /// The operator public key: device credentials and operator requests must be signed by it.
    pub operator_key: VerifyingKey,
    pub auth: AuthConfig,
    /// A device not heard from (register or heartbeat) for this long expires. Whole seconds, ≥ 1 s.
    pub ttl: Duration,
    /// How often devices are told to heartbeat. Whole seconds, 1 s ..= ttl.
    pub heartbeat: Duration,
    /// Bounds on the registry and on lookups.
    pub limits: StoreLimits,
    /// Serve HTTPS with this certificate and key; `None`: plain HTTP.
    pub tls: Option<TlsFiles>,
    /// Connection cap and timeouts.
    pub http: HttpLimits,
    /// Per-source request rate limits.
    pub rate_limits: RateLimits,
    /// The UDP rendezvous (NAT traversal, address probes); `None`: off, and lookups return
    /// devices at their registered address unprobed.
    pub udp: Option<UdpConfig>,
    pub rendezvous_timings: RendezvousTimings,
    /// Lookup counts halve every this long (popularity). Default 10 min: a video's audience
    /// changes over tens of minutes, and lookups of the last few minutes then weigh most.
    pub popularity_half_life: Duration,
    /// Which placement policy runs, how often, on how many contents.
    pub placement: PlacementSettings,
    /// When clients' corrupt-data reports quarantine a device.
    pub quarantine: QuarantineConfig,
}

impl fmt::Debug for TrackerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrackerConfig")
            .field("listen", &self.listen)
            .field("store", &self.store)
            .field("operator_key", &hex::encode(self.operator_key.as_bytes()))
            .field("auth", &self.auth)
            .field("ttl", &self.ttl)
            .field("heartbeat", &self.heartbeat)
            .field("limits", &self.limits)
            .field("tls", &self.tls)
            .field("http", &self.http)
            .field("rate_limits", &self.rate_limits)
            .field("udp", &self.udp)
            .field("popularity_half_life", &self.popularity_half_life)
            .field("placement", &self.placement)
            .field("quarantine", &self.quarantine)
            .finish()
    }
}

impl TrackerConfig {
    /// Default ttl: 30 s.
    pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
    /// Default heartbeat interval: 10 s.
    pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);
    /// Default popularity half-life: 10 min.
    pub const DEFAULT_POPULARITY_HALF_LIFE: Duration = Duration::from_secs(600);

    /// A configuration with the default ttl and heartbeat interval, plain HTTP, the default
    /// connection limits and rate limits, and no UDP rendezvous.
    pub fn new(listen: SocketAddr, store: StoreUrl, operator_key: VerifyingKey) -> TrackerConfig {
        TrackerConfig {
            listen,
            store,
            operator_key,
            auth: AuthConfig::default(),
            ttl: Self::DEFAULT_TTL,
            heartbeat: Self::DEFAULT_HEARTBEAT,
            limits: StoreLimits::default(),
            tls: None,
            http: HttpLimits::default(),
            rate_limits: RateLimits::default(),
            udp: None,
            rendezvous_timings: RendezvousTimings::default(),
            popularity_half_life: Self::DEFAULT_POPULARITY_HALF_LIFE,
            placement: PlacementSettings::default(),
            quarantine: QuarantineConfig::default(),
        }
    }

    fn validate(&self) -> anyhow::Result<()> {
        if self.auth.clock_window < Duration::from_secs(1) {
            bail!("auth clock window {:?} must be at least 1 s", self.auth.clock_window);
        }
        if self.ttl < Duration::from_secs(1) || self.ttl.subsec_nanos() != 0 {
            bail!("ttl {:?} must be a whole number of seconds, at least 1 s", self.ttl);
        }
        if self.heartbeat < Duration::from_secs(1) || self.heartbeat.subsec_nanos() != 0 || self.heartbeat > self.ttl {
            bail!(
                "heartbeat {:?} must be a whole number of seconds, at least 1 s and at most the ttl ({:?})",
                self.heartbeat,
                self.ttl
            );
        }
        if self.limits.max_origins == 0 {
            bail!("max_origins is 0: a lookup must be able to list at least one origin");
        }
        if self.limits.spread.min_free_upload_bps > Spread::MAX_MIN_FREE {
            bail!(
                "min_free_upload_bps {} is above the largest, {} (2^50 bit/s)",
                self.limits.spread.min_free_upload_bps,
                Spread::MAX_MIN_FREE
            );
        }
        if self.popularity_half_life < Duration::from_secs(1) {
            bail!(
                "popularity half-life {:?} must be at least 1 s",
                self.popularity_half_life
            );
        }
        self.placement.validate()?;
        self.quarantine.validate()?;
        self.http.validate()?;
        self.rate_limits.validate()?;
        Ok(())
    }
}

/// A tracker serving in the background. Dropping it asks it to stop; `stop` also waits.
pub struct RunningTracker {
    local_addr: SocketAddr,
    udp_addrs: Option<(SocketAddr, SocketAddr)>,
    store_kind: &'static str,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<anyhow::Result<()>>>,
}

impl RunningTracker {
    /// The address the tracker listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The bound UDP rendezvous addresses (first and second port), if the rendezvous is on.
    pub fn udp_addrs(&self) -> Option<(SocketAddr, SocketAddr)> {
        self.udp_addrs
    }

    /// "sqlite" or "redis".
    pub fn store_kind(&self) -> &'static str {
        self.store_kind
    }

    /// Stops accepting requests, lets the ones in flight finish (connections still open after
    /// `HttpLimits::shutdown_deadline` are closed), closes the store and returns once all of
    /// that is done (so a restart on the same SQLite file sees every write).
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let _ = self.stop.send(true);
        self.join().await
    }

    async fn join(&mut self) -> anyhow::Result<()> {
        match self.task.take() {
            Some(task) => task.await.context("tracker task panicked")?,
            None => Ok(()),
        }
    }
}

impl Drop for RunningTracker {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Binds the listen address, opens the store and starts serving in the background.
pub async fn bind(config: TrackerConfig) -> anyhow::Result<RunningTracker> {
    config.validate()?;
    let tls = server::tls_acceptor(config.tls.as_ref())?;
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("tracker cannot listen on {}", config.listen))?;
    let local_addr = listener.local_addr()?;
    let rendezvous = match config.udp {
        Some(udp) => Some(rendezvous::Rendezvous::bind(udp, config.rendezvous_timings.clone()).await?),
        None => None,
    };
    let udp_addrs = rendezvous.as_ref().map(|r| r.local_addrs());
    let (stop, stopped) = watch::channel(false);
    let config_tls = tls.is_some();
    let (store_kind, task) = match &config.store {
        StoreUrl::Sqlite(path) => {
            let path = path.clone();
            let (ttl, limits) = (config.ttl, config.limits.clone());
            let store = tokio::task::spawn_blocking(move || {
                SqliteStore::open(Some(&path), ttl, limits)
                    .with_context(|| format!("cannot open the SQLite store {}", path.display()))
            })
            .await??;
            (
                "sqlite",
                tokio::spawn(run_server(listener, tls, store, config, rendezvous.clone(), stopped)),
            )
        }
        StoreUrl::SqliteMemory => {
            let store = SqliteStore::open(None, config.ttl, config.limits.clone())?;
            (
                "sqlite",
                tokio::spawn(run_server(listener, tls, store, config, rendezvous.clone(), stopped)),
            )
        }
        StoreUrl::Redis(url) => {
            let store = RedisStore::connect(url, config.ttl, config.limits.clone())
                .await
                .with_context(|| format!("cannot reach the Redis store {url}"))?;
            (
                "redis",
                tokio::spawn(run_server(listener, tls, store, config, rendezvous.clone(), stopped)),
            )
        }
    };
    let scheme = if config_tls { "https" } else { "http" };
    tracing::info!(url = %format!("{scheme}://{local_addr}"), udp = ?udp_addrs, store = %store_kind, "pcdn tracker listening");
    Ok(RunningTracker {
        local_addr,
        udp_addrs,
        store_kind,
        stop,
        task: Some(task),
    })
}

/// Serves until `shutdown` completes, then stops gracefully.
pub async fn serve(config: TrackerConfig, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let mut tracker = bind(config).await?;
    let task = tracker.task.as_mut().expect("a bound tracker has a task");
    tokio::select! {
        () = shutdown => tracker.stop().await,
        result = task => {
            tracker.task = None;
            result.context("tracker task panicked")?
        }
    }
}

/// How often expired devices are deleted: a quarter of the ttl, between 100 ms and 5 s. Expiry
/// itself is exact (every read checks timestamps); sweeping only frees space and counts. The
/// first sweep runs at start, deleting what expired while the tracker was down.
fn sweep_interval(ttl: Duration) -> Duration {
    (ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(5))
}

async fn run_server<S: Store>(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    store: S,
    config: TrackerConfig,
    rendezvous: Option<Arc<rendezvous::Rendezvous>>,
    stopped: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let udp = rendezvous.clone().map(|r| tokio::spawn(r.run()));
    let state = Arc::new(AppState {
        rendezvous,
        store,
        operator_key: config.operator_key,
        auth: config.auth,
        ttl_secs: config.ttl.as_secs(),
        heartbeat_secs: config.heartbeat.as_secs(),
        metrics: metrics::Metrics::new(),
        limits: config.limits.clone(),
        tally: popularity::Tally::new(config.limits.max_tracked_contents),
        half_life_ms: store::ttl_millis(config.popularity_half_life),
        catalog: placement::Catalog::default(),
        placement: config.placement.clone(),
        quarantine: config.quarantine.clone(),
        quarantined: quarantine::Quarantined::default(),
    });
    let sweeper = tokio::spawn(sweep_forever(Arc::clone(&state), sweep_interval(config.ttl)));
    let counter = tokio::spawn(placement::count_forever(Arc::clone(&state)));
    let placer = tokio::spawn(placement::place_forever(Arc::clone(&state)));
    let limiter = Arc::new(ratelimit::RateLimiter::new(
        config.rate_limits,
        state.metrics.refusals(),
    ));
    let router = api::router(Arc::clone(&state)).layer(axum::middleware::from_fn_with_state(limiter, ratelimit::limit));
    let max_connections = server::effective_max_connections(&config.http);
    if max_connections < config.http.max_connections {
        tracing::warn!(
            max_connections,
            configured = config.http.max_connections,
            "the open-file limit lowers the connection cap"
        );
    }
    let front = server::Front {
        router,
        tls,
        limits: config.http.clone(),
        max_connections,
        metrics: state.metrics.connections(),
    };
    server::serve(listener, front, stopped).await;
    for task in [sweeper, counter, placer] {
        task.abort();
        let _ = task.await;
    }
    // The lookups counted since the last flush.
    if let Err(error) = placement::flush(&state, unix_millis()).await {
        tracing::warn!(%error, "counting the last lookups failed");
    }
    if let Some(udp) = udp {
        udp.abort();
        let _ = udp.await;
    }
    drop(state);
    tracing::info!("pcdn tracker stopped");
    Ok(())
}

async fn sweep_forever<S: Store>(state: Arc<AppState<S>>, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let now = unix_millis();
        match state.store.sweep(now).await {
            Ok(expired) => {
                if expired > 0 {
                    tracing::debug!(expired, "devices expired");
                    state.metrics.count_expirations(expired);
                }
            }
            Err(error) => tracing::warn!(%error, "sweeping expired devices failed"),
        }
        // After the devices: a manifest whose last holder just expired counts as unheld.
        match state.store.sweep_manifests(now).await {
            Ok(0) => {}
            Ok(deleted) => tracing::info!(deleted, "orphaned manifests deleted"),
            Err(error) => tracing::warn!(%error, "sweeping orphaned manifests failed"),
        }
        quarantine::refresh(&state, now).await;
        if let Ok(live) = state.store.live_devices(now).await {
            state.metrics.set_live_devices(live);
        }
    }
}
