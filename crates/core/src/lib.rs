//! pcdn's sans-I/O protocol core: paths, estimators, congestion control, schedulers, the
//! client `Download`, the `ServerSession` and the metrics. No sockets, clocks or threads:
//! time and randomness come in as arguments.

pub mod cc;
pub mod download;
pub mod estimate;
pub mod harness;
pub mod log_limit;
pub mod manifest;
pub mod path;
pub mod player;
pub mod scheduler;
pub mod server;
pub mod stats;
pub mod time;
pub mod units;

pub use download::{Download, DownloadConfig, Event, PathError, Transmit, Transport};
pub use ed25519_dalek;
pub use manifest::{Manifest, ManifestBuilder, ManifestError, SignedManifest};
pub use path::{LossThresholds, PathId, PathStats, ReorderConfig, ServerInfo};
pub use pcdn_wire as wire;
pub use server::{ContentInfo, ContentSource, ServerConfig, ServerSession, ServerStats, ServerTransmit};
pub use stats::Stats;
pub use time::{Duration, Instant};
