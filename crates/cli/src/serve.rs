//! `pcdn serve`: its command line; the serving device is `pcdn_net::serve`'s.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use pcdn_net::cache::CacheConfig;
use pcdn_net::serve::{ServerConfig, TrackerSettings, check_device_id, identity_of};

/// `pcdn serve`: serve a content store over UDP and announce it to a tracker.
#[derive(clap::Args, Debug, Clone)]
pub struct ServerArgs {
    /// Content store directory (created if missing; add files with `pcdn add`).
    #[arg(long, value_name = "DIR")]
    pub store: PathBuf,
    /// UDP address to serve on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7801")]
    pub listen: SocketAddr,
    /// Tracker base URL (e.g. http://127.0.0.1:7800); without it the device serves unannounced.
    #[arg(long, value_name = "URL", requires = "credential")]
    pub tracker: Option<String>,
    /// The device credential file from `pcdn operator enroll` (its id, role and key).
    #[arg(long, value_name = "FILE")]
    pub credential: Option<PathBuf>,
    /// CA certificate(s) (PEM) to verify an https:// tracker with, instead of the system's roots.
    #[arg(long, value_name = "FILE", requires = "tracker")]
    pub tracker_ca: Option<PathBuf>,
    /// This device is the CDN origin: it publishes the store's manifests to the tracker. With a
    /// credential the role comes from it (an origin credential implies --origin; an edge
    /// credential refuses it).
    #[arg(long)]
    pub origin: bool,
    /// Address clients should use, given to the tracker (default: the listen address): IP:PORT
    /// or HOST:PORT, a host name being resolved once at start.
    #[arg(long, value_name = "ADDR", value_parser = parse_advertise_arg)]
    pub advertise: Option<SocketAddr>,
    /// Upload cap, e.g. 4mbit (bit/s; units as in scenario files). Default: unlimited.
    #[arg(long, value_name = "RATE", value_parser = parse_rate_arg)]
    pub upload_limit: Option<u64>,
    /// Upload capacity told to the tracker when there is no --upload-limit.
    #[arg(long, value_name = "RATE", value_parser = parse_rate_arg, default_value = "100mbit")]
    pub capacity: u64,
    /// Device id (default: the credential's; without a tracker, derived from the advertised
    /// address, e.g. edge-127.0.0.1-7801). With a credential it must be the credential's id.
    #[arg(long, value_name = "NAME")]
    pub id: Option<String>,
    /// Most client sessions at once.
    #[arg(long, value_name = "N", default_value_t = pcdn_core::ServerConfig::default().max_sessions)]
    pub max_sessions: usize,
    /// Most client sessions of one source address (IPv6: one /64) at once; when the table is
    /// full, a new source takes a session from the one holding the most.
    #[arg(long, value_name = "N", default_value_t = pcdn_core::ServerConfig::default().max_sessions_per_source)]
    pub max_sessions_per_source: usize,
    /// Serve Prometheus metrics on http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Make the store a cache of this many bytes (e.g. 20GB; pinned `pcdn add` contents count
    /// too) that fills itself with the contents the tracker assigns. Edges only.
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg, requires = "tracker")]
    pub cache_size: Option<u64>,
    /// Cap on the cache's fill downloads, bit/s (e.g. 20mbit).
    #[arg(long, value_name = "RATE", value_parser = parse_rate_arg, requires = "cache_size",
          default_value_t = CacheConfig::DEFAULT_FILL_RATE_BPS)]
    pub fill_rate: u64,
}

/// A size argument in bytes (`20GB`, `500MiB`).
pub fn parse_size_arg(text: &str) -> Result<u64, String> {
    match pcdn_core::units::parse_size(text) {
        Ok(0) => Err("expected a positive size".to_owned()),
        Ok(size) => Ok(size),
        Err(e) => Err(e.to_string()),
    }
}

/// An `--advertise` address: an IP literal with its port, or a host name and port resolved now
/// (an IPv4 address first, since the tracker gives one address per device).
pub fn parse_advertise_arg(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    let expected = "expected IP:PORT or HOST:PORT, e.g. edge1.example.net:7801";
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("{text:?} has no port: {expected}"))?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(format!("{text:?}: {expected}"));
    }
    let addrs: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(text)
        .map_err(|e| format!("cannot resolve {host:?}: {e}"))?
        .collect();
    addrs
        .iter()
        .find(|addr| addr.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| format!("{host:?} resolves to no address"))
}

/// A rate argument in bit/s (`4mbit`, `500kbit`, `1gbit`).
pub fn parse_rate_arg(text: &str) -> Result<u64, String> {
    match pcdn_core::units::parse_rate(text) {
        Ok(0) => Err("expected a positive rate".to_owned()),
        Ok(rate) => Ok(rate),
        Err(e) => Err(e.to_string()),
    }
}

impl ServerArgs {
    /// The server configuration these arguments describe (reads the credential file).
    pub fn config(&self) -> anyhow::Result<ServerConfig> {
        let tracker = match &self.tracker {
            Some(url) => {
                let file = self
                    .credential
                    .as_ref()
                    .context("--tracker needs --credential FILE (from `pcdn operator enroll`)")?;
                Some(TrackerSettings {
                    url: url.clone(),
                    identity: pcdn_identity::files::read_credential(file)?,
                })
            }
            None => None,
        };
        if let Some(id) = &self.id {
            check_device_id(id).context("--id")?;
        }
        anyhow::ensure!(self.max_sessions > 0, "--max-sessions: expected at least 1");
        anyhow::ensure!(
            self.max_sessions_per_source > 0,
            "--max-sessions-per-source: expected at least 1"
        );
        let mut config = ServerConfig {
            store_dir: self.store.clone(),
            listen: self.listen,
            advertise: self.advertise,
            tracker,
            tracker_ca: self.tracker_ca.clone(),
            origin: self.origin,
            upload_limit_bps: self.upload_limit,
            default_capacity_bps: self.capacity,
            id: self.id.clone(),
            max_sessions: self.max_sessions,
            max_sessions_per_source: self.max_sessions_per_source,
            metrics_listen: self.metrics_listen,
            cache: self.cache_size.map(|bytes| CacheConfig {
                fill_rate_bps: self.fill_rate,
                ..CacheConfig::new(bytes)
            }),
        };
        let (id, origin) = identity_of(&config)?;
        (config.id, config.origin) = (id, origin);
        Ok(config)
    }
}

/// Runs `pcdn serve` until SIGINT or SIGTERM, then deregisters and returns.
pub fn run_serve(args: ServerArgs) -> anyhow::Result<()> {
    pcdn_net::init_logging("info");
    let config = args.config()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(async move {
        let mut handle = pcdn_net::serve::spawn_server(config).await?;
        tokio::select! {
            signal = pcdn_net::serve::shutdown_signal() => {
                signal?;
                tracing::info!("stopping");
            }
            e = handle.failed() => return Err(e),
        }
        handle.shutdown().await
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertised_addresses_may_be_host_names() {
        assert_eq!(
            parse_advertise_arg("192.0.2.7:7801"),
            Ok("192.0.2.7:7801".parse().unwrap())
        );
        assert_eq!(
            parse_advertise_arg("[2001:db8::1]:7801"),
            Ok("[2001:db8::1]:7801".parse().unwrap())
        );
        let local = parse_advertise_arg("localhost:7801").unwrap();
        assert!(local.ip().is_loopback() && local.port() == 7801, "{local}");
        assert!(parse_advertise_arg("localhost").unwrap_err().contains("has no port"));
        assert!(
            parse_advertise_arg("localhost:http")
                .unwrap_err()
                .contains("expected IP:PORT or HOST:PORT")
        );
        assert!(
            parse_advertise_arg("no-such-host.invalid:7801")
                .unwrap_err()
                .contains("cannot resolve")
        );
    }

    #[test]
    fn rates_are_parsed_strictly() {
        assert_eq!(parse_rate_arg("4mbit"), Ok(4_000_000));
        assert_eq!(parse_rate_arg("1.5gbit"), Ok(1_500_000_000));
        assert!(parse_rate_arg("0").is_err());
        assert!(parse_rate_arg("4mbps").unwrap_err().contains("ambiguous"));
        assert!(parse_rate_arg("fast").is_err());
    }

    #[test]
    fn serve_arguments_need_a_credential_with_a_tracker() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: ServerArgs,
        }
        let cli = Cli::try_parse_from(["serve", "--store", "s"]).unwrap();
        assert_eq!(cli.args.listen, "127.0.0.1:7801".parse().unwrap());
        assert_eq!(cli.args.capacity, 100_000_000);
        let config = cli.args.config().unwrap();
        assert!(config.tracker.is_none() && config.upload_limit_bps.is_none());
        assert!(Cli::try_parse_from(["serve", "--store", "s", "--tracker", "http://127.0.0.1:1"]).is_err());
        let cli = Cli::try_parse_from(["serve", "--store", "s", "--upload-limit", "4mbit", "--origin"]).unwrap();
        assert_eq!(cli.args.upload_limit, Some(4_000_000));
        assert!(Cli::try_parse_from(["serve", "--store", "s", "--upload-limit", "4mbps"]).is_err());
    }
}
