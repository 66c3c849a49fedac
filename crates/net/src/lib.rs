//! pcdn's tokio runtime: the content store, the batched UDP socket, the serving device, the
//! tracker client and the multi-server fetch.
//!
//! The protocol itself lives in `pcdn-core` (sans-I/O); this crate only moves datagrams and
//! time in and out of it (docs/net.md).

pub mod cache;
pub mod clock;
pub mod fetch;
pub mod metrics;
pub mod play;
pub mod rendezvous;
pub mod serve;
pub mod socket;
pub mod store;
pub mod tracker_client;
pub mod video;

pub use fetch::{FetchConfig, FetchError, FetchReport, fetch};
pub use serve::{ServerConfig, ServerHandle, TrackerSettings, spawn_server};
pub use store::{Store, StoreError, StoreSource};
pub use tracker_client::{Heartbeat, HeartbeatReply, TrackerClient, TrackerError};

/// Logs to stderr through `tracing`, filtered by `RUST_LOG` (default: `default_level`, e.g.
/// "info"); does nothing if the program installed a subscriber already.
pub fn init_logging(default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
