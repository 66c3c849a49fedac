//! pcdn's deterministic discrete-event network simulator: the link model (rate or Mahimahi
//! trace, drop-tail queue, propagation delay, jitter, loss, blackouts), routes over shared
//! links, and the unit parsers used by scenario files.
//!
//! Everything runs in virtual time (`pcdn_core::time::Instant`, nanoseconds) and draws its
//! randomness from seeded generators, so the same seed gives the same run, bit for bit.

mod bound;
pub mod fleet;
pub mod link;
pub mod network;
pub mod scenario;
pub mod units;
pub mod world;

pub use link::{
    Blackout, Change, GilbertElliott, Jitter, JitterDist, Link, LinkChange, LinkConfig, LinkError, LinkStats, Loss,
    OPPORTUNITY_BYTES, Packet, QueueLimit, Rate, Trace,
};
pub use network::{LinkId, Network, RouteId, Routed, link_seed};
pub use units::{UnitError, parse_duration, parse_rate, parse_size};
