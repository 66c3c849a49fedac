//! pcdn's network emulator: a real-time UDP relay that runs the simulator's link model
//! (`pcdn_sim::Link`: rate or Mahimahi trace, drop-tail queue, delay, jitter, loss, blackouts,
//! timed changes) in each direction, so heterogeneous lossy paths exist on loopback.
//!
//! A relay listens on one address and forwards every client's datagrams to one server through
//! an upstream socket of the client's own, so the server sees one address per client; the
//! server's answers go back to the client from the listen address. All clients of a relay share
//! its two links, as all viewers of one edge device share its upload. See `docs/emulator.md`.
//!
//! - [`spawn_relay`] starts one relay from a [`RelayConfig`] and returns a [`RelayHandle`].
//! - [`load_config`] reads a `links.toml` of several relays.
//! - [`resolve_address`] reads an `IP:PORT` or `HOST:PORT` address as links files do.

mod clock;
mod config;
mod describe;
mod relay;

pub use config::{ConfigError, load_config, parse_config, resolve_address};
pub use describe::{describe_link, describe_rate};
pub use relay::{
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CLIENTS, DirectionStats, RelayConfig, RelayError, RelayHandle, RelayStats,
    default_up_link, spawn_relay,
};
