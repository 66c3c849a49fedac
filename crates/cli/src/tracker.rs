//! `pcdn tracker`: its command line and the blocking entry point; the tracker is `pcdn_tracker`'s.

use anyhow::{Context, bail};
use pcdn_tracker::{
    HttpLimits, PlacementSettings, Rate, RateLimits, StoreLimits, StoreUrl, TlsFiles, TrackerConfig, serve,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `pcdn tracker`.
#[derive(clap::Args, Clone, Debug)]
pub struct TrackerArgs {
    /// HTTP address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7800")]
    pub listen: SocketAddr,
    /// Where the registry is kept: sqlite:PATH, sqlite::memory: or redis://HOST:PORT/DB.
    #[arg(long, value_name = "URL", default_value = "sqlite:pcdn-tracker.db")]
    pub store: StoreUrl,
    /// The operator's public key file (`operator.pub` from `pcdn operator init`): the tracker
    /// accepts devices enrolled with this key, and revocations signed by it.
    #[arg(long, value_name = "FILE")]
    pub operator_key: PathBuf,
    /// Seconds after its last heartbeat at which a device expires.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub ttl: u64,
    /// Seconds between a device's heartbeats, as told to devices [default: ttl / 3, at least 1].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub heartbeat: Option<u64>,
    /// Most origins a lookup lists (never more than its `n`).
    #[arg(long, value_name = "N", default_value_t = StoreLimits::default().max_origins, value_parser = parse_positive)]
    pub max_origins: usize,
    /// Largest manifest kept, in bytes [default: 8 MiB, a 10 GiB video in 64 KiB blocks].
    #[arg(long, value_name = "BYTES", default_value_t = StoreLimits::default().max_manifest_bytes, value_parser = parse_positive)]
    pub max_manifest_bytes: usize,
    /// Most manifests one origin key keeps.
    #[arg(long, value_name = "N", default_value_t = StoreLimits::default().manifests_per_origin, value_parser = clap::value_parser!(u64).range(1..))]
    pub manifests_per_origin: u64,
    /// Most manifest bytes one origin key keeps [default: 1 GiB].
    #[arg(long, value_name = "BYTES", default_value_t = StoreLimits::default().manifest_bytes_per_origin, value_parser = clap::value_parser!(u64).range(1..))]
    pub manifest_bytes_per_origin: u64,
    /// Seconds a manifest no live device holds, whose origin is gone, is kept before deletion.
    #[arg(long, value_name = "SECS", default_value_t = StoreLimits::default().orphan_grace.as_secs())]
    pub orphan_grace: u64,
    /// Free upload (bit/s) below which a device is at its cap: lookups leave it out while
    /// another holder of the content has room [default: 250 kbit/s]; 0: never.
    #[arg(long, value_name = "BPS", default_value_t = pcdn_tracker::Spread::default().min_free_upload_bps,
          value_parser = clap::value_parser!(u64).range(..=pcdn_tracker::Spread::MAX_MIN_FREE))]
    pub min_free_upload: u64,
    /// Upload (bit/s) a lookup charges the servers it lists, between them, until their next
    /// heartbeat, when the tracker does not know the content's bitrate: it spreads viewers
    /// over the holders [default: 4 Mbit/s]; 0: only known bitrates are charged.
    #[arg(long, value_name = "BPS", default_value_t = pcdn_tracker::Spread::default().session_bps)]
    pub viewer_rate: u64,
    /// Distinct clients whose corrupt-data reports quarantine a device (smart ban).
    #[arg(long, value_name = "N", default_value_t = pcdn_tracker::QuarantineConfig::default().reporters, value_parser = clap::value_parser!(u64).range(1..))]
    pub quarantine_reporters: u64,
    /// Seconds a corrupt-data report counts; a quarantine without new reports ends after it.
    #[arg(long, value_name = "SECS", default_value_t = pcdn_tracker::QuarantineConfig::default().window.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub quarantine_window: u64,
    /// Serve HTTPS with this certificate chain (PEM, leaf first); needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Most connections open at once; a new one beyond it closes the oldest (lowered to fit
    /// the open-file limit).
    #[arg(long, value_name = "N", default_value_t = HttpLimits::default().max_connections as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,
    /// Seconds a connection has to send a complete request header after it opens or after its
    /// previous answer (slow and idle connections are closed).
    #[arg(long, value_name = "SECS", default_value_t = HttpLimits::default().header_timeout.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout: u64,
    /// Seconds to let connections finish on SIGINT/SIGTERM before closing them.
    #[arg(long, value_name = "SECS", default_value_t = HttpLimits::default().shutdown_deadline.as_secs())]
    pub shutdown_deadline: u64,
    /// Lookups (GET on /v1) per second allowed from one source address (IPv6: one /64); 0: no limit.
    #[arg(long, value_name = "N", default_value_t = RateLimits::default().lookups.per_second)]
    pub lookup_rate: u32,
    /// Lookups one source may send at once before --lookup-rate applies.
    #[arg(long, value_name = "N", default_value_t = RateLimits::default().lookups.burst)]
    pub lookup_burst: u32,
    /// Device requests (other methods on /v1) per second allowed from one source; 0: no limit.
    #[arg(long, value_name = "N", default_value_t = RateLimits::default().writes.per_second)]
    pub write_rate: u32,
    /// Device requests one source may send at once before --write-rate applies.
    #[arg(long, value_name = "N", default_value_t = RateLimits::default().writes.burst)]
    pub write_burst: u32,
    /// UDP address of the rendezvous (NAT traversal, address probes) [default: the --listen
    /// address].
    #[arg(long, value_name = "ADDR")]
    pub udp_listen: Option<SocketAddr>,
    /// Second UDP address, for telling NAT types apart [default: the --udp-listen port + 1].
    #[arg(long, value_name = "ADDR")]
    pub udp_alt_listen: Option<SocketAddr>,
    /// No UDP rendezvous: lookups give devices' registered addresses, unprobed.
    #[arg(long, conflicts_with_all = ["udp_listen", "udp_alt_listen"])]
    pub no_udp: bool,
    /// Seconds in which a content's lookup count halves (popularity, GET /v1/contents/popular).
    #[arg(long, value_name = "SECS", default_value_t = TrackerConfig::DEFAULT_POPULARITY_HALF_LIFE.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub popularity_half_life: u64,
    /// Which contents devices that are caches (`pcdn serve --cache-size`) should hold: none (the
    /// operator places them by hand), popularity (replicas follow demand) or on-miss (a
    /// looked-up content too few devices hold goes to the least loaded, least recently used
    /// evicted). Devices learn their assignment in heartbeat answers.
    #[arg(long, value_name = "POLICY", default_value = "none", value_parser = clap::builder::PossibleValuesParser::new(pcdn_placement::POLICIES))]
    pub placement: String,
    /// Seconds between two placement rounds.
    #[arg(long, value_name = "SECS", default_value_t = PlacementSettings::default().interval.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub placement_interval: u64,
    /// A placement round places this many of the most looked-up contents.
    #[arg(long, value_name = "N", default_value_t = PlacementSettings::default().contents, value_parser = parse_positive)]
    pub placement_contents: usize,
}

fn parse_positive(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(value) if value > 0 => Ok(value),
        _ => Err(format!("expected a positive integer, got {text:?}")),
    }
}

impl TrackerArgs {
    /// The tracker configuration these arguments describe (reads the operator key file).
    pub fn config(&self) -> anyhow::Result<TrackerConfig> {
        let ttl = Duration::from_secs(self.ttl);
        let heartbeat = Duration::from_secs(self.heartbeat.unwrap_or((self.ttl / 3).max(1)));
        if heartbeat > ttl {
            bail!(
                "--heartbeat {}s is longer than --ttl {}s: devices would expire between heartbeats",
                heartbeat.as_secs(),
                self.ttl
            );
        }
        let udp = if self.no_udp {
            None
        } else {
            let listen = self.udp_listen.unwrap_or(self.listen);
            let alt_listen = match self.udp_alt_listen {
                Some(addr) => addr,
                None if listen.port() == 0 => listen,
                None => {
                    let port = listen.port().checked_add(1).with_context(|| {
                        format!("--udp-listen {listen}: no port follows it; give --udp-alt-listen ADDR")
                    })?;
                    SocketAddr::new(listen.ip(), port)
                }
            };
            Some(pcdn_tracker::UdpConfig { listen, alt_listen })
        };
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            (None, None) => None,
            _ => bail!("--tls-cert and --tls-key go together"),
        };
        let rate = |name: &str, per_second: u32, burst: u32| -> anyhow::Result<Rate> {
            if per_second > 0 && burst == 0 {
                bail!(
                    "--{name}-burst 0 with --{name}-rate {per_second}: the burst must be at least 1 (or the rate 0 for no limit)"
                );
            }
            Ok(Rate { per_second, burst })
        };
        Ok(TrackerConfig {
            listen: self.listen,
            store: self.store.clone(),
            operator_key: pcdn_identity::files::read_operator_public(&self.operator_key)?,
            auth: pcdn_tracker::AuthConfig::default(),
            ttl,
            heartbeat,
            limits: StoreLimits {
                max_origins: self.max_origins,
                max_manifest_bytes: self.max_manifest_bytes,
                manifests_per_origin: self.manifests_per_origin,
                manifest_bytes_per_origin: self.manifest_bytes_per_origin,
                orphan_grace: Duration::from_secs(self.orphan_grace),
                spread: pcdn_tracker::Spread {
                    min_free_upload_bps: self.min_free_upload,
                    session_bps: self.viewer_rate,
                },
                ..StoreLimits::default()
            },
            tls,
            http: HttpLimits {
                max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
                header_timeout: Duration::from_secs(self.header_timeout),
                shutdown_deadline: Duration::from_secs(self.shutdown_deadline),
            },
            rate_limits: RateLimits {
                lookups: rate("lookup", self.lookup_rate, self.lookup_burst)?,
                writes: rate("write", self.write_rate, self.write_burst)?,
                ..RateLimits::default()
            },
            udp,
            rendezvous_timings: pcdn_tracker::RendezvousTimings::default(),
            popularity_half_life: Duration::from_secs(self.popularity_half_life),
            placement: PlacementSettings {
                policy: self.placement.clone(),
                interval: Duration::from_secs(self.placement_interval),
                contents: self.placement_contents,
                ..PlacementSettings::default()
            },
            quarantine: pcdn_tracker::QuarantineConfig {
                reporters: self.quarantine_reporters,
                window: Duration::from_secs(self.quarantine_window),
                ..pcdn_tracker::QuarantineConfig::default()
            },
        })
    }
}

/// Runs the tracker until SIGINT or SIGTERM: builds a tokio runtime, logs with `tracing`
/// (filtered by `RUST_LOG`, default `info`, unless the caller installed a subscriber already).
pub fn run(args: TrackerArgs) -> anyhow::Result<()> {
    let config = args.config()?;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    pcdn_tracker::raise_fd_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    runtime.block_on(serve(config, shutdown_signal()))
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => tracing::info!("SIGINT: stopping"),
        () = terminate => tracing::info!("SIGTERM: stopping"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        args: TrackerArgs,
    }

    #[test]
    fn spread_options() {
        let dir = tempfile::tempdir().unwrap();
        pcdn_identity::files::init_operator(dir.path()).unwrap();
        let public = dir.path().join("operator.pub");
        let parse = |extra: &[&str]| {
            let mut argv = vec!["tracker", "--operator-key", public.to_str().unwrap()];
            argv.extend_from_slice(extra);
            Command::try_parse_from(argv)
        };
        let command = parse(&["--min-free-upload", "0", "--viewer-rate", "2000000"]).unwrap();
        let spread = command.args.config().unwrap().limits.spread;
        assert_eq!((spread.min_free_upload_bps, spread.session_bps), (0, 2_000_000));
        let error = parse(&["--min-free-upload", "2251799813685249"])
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("--min-free-upload"), "{error}");
    }

    #[test]
    fn defaults_and_operator_key_errors() {
        let dir = tempfile::tempdir().unwrap();
        let operator = pcdn_identity::files::init_operator(dir.path()).unwrap();
        let public = dir.path().join("operator.pub");
        let command = Command::try_parse_from(["tracker", "--operator-key", public.to_str().unwrap()]).unwrap();
        let config = command.args.config().unwrap();
        assert_eq!(config.listen, "127.0.0.1:7800".parse().unwrap());
        assert_eq!(config.store, StoreUrl::Sqlite("pcdn-tracker.db".into()));
        assert_eq!(config.operator_key, operator.public());
        assert_eq!(
            (config.ttl, config.heartbeat),
            (Duration::from_secs(30), Duration::from_secs(10))
        );
        assert_eq!(config.limits, StoreLimits::default());

        let missing = dir.path().join("missing.pub");
        let command = Command::try_parse_from(["tracker", "--operator-key", missing.to_str().unwrap()]).unwrap();
        let error = format!("{:#}", command.args.config().unwrap_err());
        assert!(error.contains(missing.to_str().unwrap()), "{error}");
        std::fs::write(&public, "not hex\n").unwrap();
        let command = Command::try_parse_from(["tracker", "--operator-key", public.to_str().unwrap()]).unwrap();
        let error = format!("{:#}", command.args.config().unwrap_err());
        assert!(
            error.contains("64 hex characters") && error.contains(public.to_str().unwrap()),
            "{error}"
        );
        assert!(
            Command::try_parse_from(["tracker"]).is_err(),
            "--operator-key is required"
        );
    }

    #[test]
    fn placement_flags() {
        let parse = |extra: &[&str]| {
            let argv = ["tracker", "--operator-key", "operator.pub"].iter().chain(extra);
            Command::try_parse_from(argv).map(|command| command.args)
        };
        let args = parse(&[]).unwrap();
        assert_eq!(
            (
                args.placement.as_str(),
                args.placement_interval,
                args.popularity_half_life
            ),
            ("none", 10, 600)
        );
        let args = parse(&[
            "--placement",
            "on-miss",
            "--placement-interval",
            "3",
            "--popularity-half-life",
            "60",
        ])
        .unwrap();
        assert_eq!(
            (
                args.placement.as_str(),
                args.placement_interval,
                args.popularity_half_life
            ),
            ("on-miss", 3, 60)
        );
        let error = parse(&["--placement", "random"]).unwrap_err().to_string();
        assert!(error.contains("popularity") && error.contains("on-miss"), "{error}");
        assert!(parse(&["--placement-interval", "0"]).is_err());
        assert!(parse(&["--popularity-half-life", "0"]).is_err());
    }

    #[test]
    fn store_urls() {
        assert_eq!("sqlite::memory:".parse::<StoreUrl>().unwrap(), StoreUrl::SqliteMemory);
        assert_eq!(
            "sqlite:/tmp/x.db".parse::<StoreUrl>().unwrap(),
            StoreUrl::Sqlite("/tmp/x.db".into())
        );
        assert_eq!(
            "redis://127.0.0.1:6379/2".parse::<StoreUrl>().unwrap(),
            StoreUrl::Redis("redis://127.0.0.1:6379/2".into())
        );
        for bad in ["", "sqlite:", "postgres://x", "redis://host:notaport/0", "/tmp/x.db"] {
            let error = bad.parse::<StoreUrl>().unwrap_err().to_string();
            assert!(error.contains(&format!("{bad:?}")), "{bad}: {error}");
        }
        for url in ["sqlite::memory:", "sqlite:/tmp/x.db", "redis://127.0.0.1:6379/2"] {
            assert_eq!(url.parse::<StoreUrl>().unwrap().to_string(), url);
        }
    }
}
