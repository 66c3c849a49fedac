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
pub mod weft;

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
pub use weft::{Weft, WeftConfig};

/// Data answering one request arrived on the path.
#[derive(Clone, Copy, Debug)]
pub struct DataArrival {
    pub now: Instant,
    /// When the request this data answers was sent.
    pub sent: Instant,
    /// Payload bytes that arrived.
    pub bytes: u64,
    /// This round trip, `now - sent`, when it is a sample of the path: not when the data
    /// answers a request declared lost and is matched to its resend (Karn's rule, RFC 6298 §5).
    pub rtt: Option<Duration>,
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

/// The window settings every controller here shares, counted in packets of the path's `mss`;
/// each controller's config documents its defaults and what its floor bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowConfig {
    /// Window before anything is known of the path, packets (RFC 6928: 10).
    pub initial_packets: u64,
    /// Floor of the window, packets; at least one packet is kept whatever this says.
    pub min_packets: u64,
}

impl Default for WindowConfig {
    /// 10 packets to start (RFC 6928), a floor of 2 (RFC 5681 §3.1's loss-reduction floor).
    fn default() -> Self {
        WindowConfig {
            initial_packets: 10,
            min_packets: 2,
        }
    }
}

impl WindowConfig {
    /// The floor in bytes for packets of `mss` bytes.
    pub fn min_bytes(&self, mss: u64) -> u64 {
        self.min_packets.max(1).saturating_mul(mss.max(1))
    }

    /// The initial window in bytes for packets of `mss` bytes, never below the floor.
    pub fn initial_bytes(&self, mss: u64) -> u64 {
        self.initial_packets.saturating_mul(mss.max(1)).max(self.min_bytes(mss))
    }
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

/// One registered congestion control: its name, a one-line summary and its factory.
pub struct Registered {
    pub name: &'static str,
    pub about: &'static str,
    /// A new factory (for the coupled controls, a new coupling group).
    pub build: fn() -> Box<dyn ControllerFactory>,
}

/// The registry: every congestion control, in the order `pcdn sim --list` shows them.
/// Adding one is one entry here (plus its module); [`CONTROLLERS`], [`names`], [`by_name`]
/// and scenario files' `cc = "all"` read this table.
pub const REGISTRY: &[Registered] = &[
    Registered {
        name: "newreno",
        about: "NewReno (RFC 6582/5681): slow start, AIMD halving on loss",
        build: || Box::new(NewRenoConfig::default()),
    },
    Registered {
        name: "cubic",
        about: "CUBIC (RFC 9438): cubic window growth, beta 0.7",
        build: || Box::new(CubicConfig::default()),
    },
    Registered {
        name: "bbr",
        about: "BBR v1 (Cardwell et al. 2016): model-based, paced requests, cwnd = 2 BDP",
        build: || Box::new(BbrConfig::default()),
    },
    Registered {
        name: "copa",
        about: "Copa (Arun & Balakrishnan 2018): delay-based, target rate 1/(0.5 d_q), paced requests",
        build: || Box::new(CopaConfig::default()),
    },
    Registered {
        name: "vivace",
        about: "PCC Vivace (Dong et al. 2018): rate-based gradient ascent on a latency/loss utility",
        build: || Box::new(VivaceConfig::default()),
    },
    Registered {
        name: "compound",
        about: "Compound TCP (Tan et al. 2006): Reno cwnd plus a delay-based dwnd",
        build: || Box::new(CompoundConfig::default()),
    },
    Registered {
        name: "lia",
        about: "LIA (RFC 6356): coupled across one download's paths, Reno-fair in total",
        build: || Box::new(LiaConfig::default()),
    },
    Registered {
        name: "olia",
        about: "OLIA (Khalili et al. 2012): coupled, shifts window from the largest to the best paths",
        build: || Box::new(OliaConfig::default()),
    },
    Registered {
        name: "balia",
        about: "BALIA (Peng et al. 2016): coupled, balances friendliness and responsiveness",
        build: || Box::new(BaliaConfig::default()),
    },
    Registered {
        name: "weft",
        about: "pcdn's own: CUBIC that cuts only on loss with a standing queue (Veno), never below the pipe (Westwood+)",
        build: || Box::new(WeftConfig::default()),
    },
];

/// Registered congestion controls as (name, summary); other names are in [`ALIASES`].
pub const CONTROLLERS: &[(&str, &str)] = &{
    let mut out = [("", ""); REGISTRY.len()];
    let mut i = 0;
    while i < REGISTRY.len() {
        out[i] = (REGISTRY[i].name, REGISTRY[i].about);
        i += 1;
    }
    out
};

/// Other names of registered congestion controls: (alias, the control's own name).
pub const ALIASES: &[(&str, &str)] = &[
    ("default", "weft"),
    ("reno", "newreno"),
    ("pcc", "vivace"),
    ("ctcp", "compound"),
];

/// Every registered control's own name (aliases excluded), in registry order.
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|r| r.name)
}

/// The registered control's own name for `name` (itself or an alias); `None` if unknown.
pub fn canonical(name: &str) -> Option<&'static str> {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map(|(_, own)| *own)
        .or_else(|| names().find(|own| *own == name))
}

/// The factory of the congestion control called `name`: a new one on every call, so each
/// download that asks gets its own coupling group for `lia`, `olia` and `balia`.
pub fn by_name(name: &str) -> Option<Box<dyn ControllerFactory>> {
    let own = canonical(name)?;
    REGISTRY.iter().find(|r| r.name == own).map(|r| (r.build)())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_other_name_is_a_registered_control() {
        for (alias, own) in ALIASES {
            assert!(CONTROLLERS.iter().any(|(name, _)| name == own), "{alias} -> {own}");
            assert_eq!(canonical(alias), Some(*own));
            assert!(by_name(alias).is_some(), "{alias}");
        }
        assert_eq!(canonical("weft"), Some("weft"));
        assert_eq!(canonical("nope"), None);
    }

    #[test]
    fn every_registry_entry_builds_the_control_it_names() {
        for (i, r) in REGISTRY.iter().enumerate() {
            assert_eq!((r.build)().name(), r.name, "entry {i}");
            assert_eq!((r.build)().build(Instant::ZERO, 1200).name(), r.name, "entry {i}");
            assert_eq!(CONTROLLERS[i], (r.name, r.about));
            assert!(
                REGISTRY[..i].iter().all(|o| o.name != r.name),
                "{} is registered twice",
                r.name
            );
            assert!(
                ALIASES.iter().all(|(alias, _)| *alias != r.name),
                "{} is also an alias",
                r.name
            );
        }
    }

    #[test]
    fn window_bytes_scale_by_the_packet_size_and_keep_the_floor() {
        let window = WindowConfig::default();
        assert_eq!((window.initial_bytes(1200), window.min_bytes(1200)), (12_000, 2400));
        // The initial window never starts below the floor, and the floor is one packet at least.
        let odd = WindowConfig {
            initial_packets: 1,
            min_packets: 3,
        };
        assert_eq!(odd.initial_bytes(1000), 3000);
        let none = WindowConfig {
            initial_packets: 0,
            min_packets: 0,
        };
        assert_eq!((none.initial_bytes(1000), none.min_bytes(1000)), (1000, 1000));
        // A zero packet size counts as one byte; absurd settings saturate instead of wrapping.
        assert_eq!(window.min_bytes(0), 2);
        let huge = WindowConfig {
            initial_packets: u64::MAX,
            min_packets: 2,
        };
        assert_eq!(huge.initial_bytes(1400), u64::MAX);
    }

    #[test]
    fn every_controller_starts_at_ten_packets_with_its_own_floor() {
        let reno_floor = WindowConfig::default();
        assert_eq!(reno_floor.min_packets, 2);
        let four = WindowConfig {
            min_packets: 4,
            ..reno_floor
        };
        assert_eq!(NewRenoConfig::default().window, reno_floor);
        assert_eq!(CubicConfig::default().window, reno_floor);
        assert_eq!(CompoundConfig::default().window, reno_floor);
        assert_eq!(CopaConfig::default().window, reno_floor);
        assert_eq!(LiaConfig::default().window, reno_floor);
        assert_eq!(BbrConfig::default().window, four);
        assert_eq!(VivaceConfig::default().window, four);
        for (name, _) in CONTROLLERS {
            let cc = by_name(name).unwrap().build(Instant::ZERO, 1200);
            assert_eq!(cc.window(), 12_000, "{name}");
        }
    }
}
