//! Receiver-driven congestion control: the window is what a path may have in flight in requests.
//!
//! The client, not the server, runs congestion control: every request asks for one data
//! packet, so "bytes in flight" are the bytes of requests not yet answered. Controllers see
//! small events with units in their names (the shape of quinn's `Controller` and s2n-quic's
//! `CongestionController`) and never read a clock.
//!
//! Most controls here are uncoupled: each path's controller sees only its own path. The
//! coupled multipath controls ([`lia`], [`olia`], [`balia`]) link the windows of the paths of
//! one download: their factory owns a [`CoupledGroup`], every controller it builds registers
//! its path's window and RTT there, reads the other paths' to compute its increase, and
//! leaves the group when dropped. **One factory instance is one coupling group, for one
//! download**: create the factory per download ([`by_name`] returns a new factory on every
//! call, which gives exactly that). Reusing a factory for downloads one after another is
//! harmless, since the paths of a finished download have left the group when their
//! controllers were dropped; reusing it for downloads that run at the same time couples
//! them with each other. Cloning a coupled factory starts a new group.

use crate::time::{Duration, Instant};

pub mod balia;
pub mod bbr;
pub mod compound;
pub mod copa;
pub mod coupled;
pub mod cubic;
pub mod lia;
pub mod newreno;
pub mod olia;
#[cfg(test)]
mod test_model;
pub mod vivace;

pub use balia::{Balia, BaliaConfig};
pub use bbr::{Bbr, BbrConfig};
pub use compound::{Compound, CompoundConfig};
pub use copa::{Copa, CopaConfig};
pub use coupled::{Coupled, CoupledConfig, CoupledGroup};
pub use cubic::{Cubic, CubicConfig};
pub use lia::{Lia, LiaConfig};
pub use newreno::{NewReno, NewRenoConfig};
pub use olia::{Olia, OliaConfig};
pub use vivace::{Vivace, VivaceConfig};

/// Data answering one request arrived on the path.
#[derive(Clone, Copy, Debug)]
pub struct DataArrival {
    pub now: Instant,
    /// When the request this data answers was sent.
    pub sent: Instant,
    /// Payload bytes that arrived.
    pub bytes: u64,
    /// This round trip, `now - sent`.
    pub rtt: Duration,
    pub smoothed_rtt: Duration,
    pub min_rtt: Duration,
    /// Bytes still requested and unanswered on the path after this arrival.
    pub in_flight_bytes: u64,
    /// Bytes the path has delivered in all, this arrival included.
    pub delivered_bytes: u64,
    /// The path's `delivered_bytes` when this request was sent, and when that count was last
    /// raised (for BBR's delivery-rate sample, Cardwell et al. 2016).
    pub delivered_bytes_at_send: u64,
    pub delivered_time_at_send: Instant,
    /// The request was sent while the client had nothing more to ask for (the sample
    /// under-states the path's rate).
    pub app_limited: bool,
}

/// One request was declared lost.
#[derive(Clone, Copy, Debug)]
pub struct Loss {
    pub now: Instant,
    /// When the lost request was sent; losses of requests sent before the last reduction
    /// belong to the same congestion event.
    pub sent: Instant,
    pub lost_bytes: u64,
    pub in_flight_bytes: u64,
    /// Declared by retransmission timeout rather than by reordering (RFC 5681 §3.1: the
    /// window collapses to one packet).
    pub by_timeout: bool,
}

/// A congestion controller for one path.
pub trait Controller: Send + std::fmt::Debug {
    fn name(&self) -> &'static str;
    /// A request for `bytes` of data was sent.
    fn on_request_sent(&mut self, now: Instant, bytes: u64, in_flight_bytes: u64);
    fn on_data(&mut self, arrival: &DataArrival);
    fn on_loss(&mut self, loss: &Loss);
    /// Bytes of requests the path may have in flight.
    fn window(&self) -> u64;
    /// Requests should be spaced to this rate in bytes per second; `None`: no pacing.
    fn pacing_rate(&self) -> Option<u64> {
        None
    }
}

/// A controller's settings, which also build controllers (one per path).
pub trait ControllerFactory: Send + Sync + std::fmt::Debug {
    fn name(&self) -> &'static str;
    /// A controller for a new path whose packets carry `mss` payload bytes.
    fn build(&self, now: Instant, mss: u64) -> Box<dyn Controller>;
}

/// Names of the congestion controls [`by_name`] knows, one line each with a summary.
pub const CONTROLLERS: &[(&str, &str)] = &[
    ("newreno", "NewReno (RFC 6582/5681): slow start, AIMD halving on loss"),
    ("cubic", "CUBIC (RFC 9438): cubic window growth, beta 0.7"),
    (
        "bbr",
        "BBR v1 (Cardwell et al. 2016): model-based, paced requests, cwnd = 2 BDP",
    ),
    (
        "copa",
        "Copa (Arun & Balakrishnan 2018): delay-based, target rate 1/(0.5 d_q), paced requests",
    ),
    (
        "vivace",
        "PCC Vivace (Dong et al. 2018): rate-based gradient ascent on a latency/loss utility",
    ),
    (
        "compound",
        "Compound TCP (Tan et al. 2006): Reno cwnd plus a delay-based dwnd",
    ),
    (
        "lia",
        "LIA (RFC 6356): coupled across one download's paths, Reno-fair in total",
    ),
    (
        "olia",
        "OLIA (Khalili et al. 2012): coupled, shifts window from the largest to the best paths",
    ),
    (
        "balia",
        "BALIA (Peng et al. 2016): coupled, balances friendliness and responsiveness",
    ),
];

/// The factory of the congestion control called `name`: a new one on every call, so each
/// download that asks gets its own coupling group for `lia`, `olia` and `balia`.
pub fn by_name(name: &str) -> Option<Box<dyn ControllerFactory>> {
    Some(match name {
        "newreno" | "reno" => Box::new(NewRenoConfig::default()),
        "cubic" => Box::new(CubicConfig::default()),
        "bbr" => Box::new(BbrConfig::default()),
        "copa" => Box::new(CopaConfig::default()),
        "vivace" | "pcc" => Box::new(VivaceConfig::default()),
        "compound" | "ctcp" => Box::new(CompoundConfig::default()),
        "lia" => Box::new(LiaConfig::default()),
        "olia" => Box::new(OliaConfig::default()),
        "balia" => Box::new(BaliaConfig::default()),
        _ => return None,
    })
}
