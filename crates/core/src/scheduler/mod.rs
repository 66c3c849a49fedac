//! The scheduler: which sequence number to request next, and from which path.
//!
//! One small trait covers both families the literature has: "packets pick paths" (minRTT,
//! LPC, LET, the sticky family, BLEST, ECF) and "paths pick packets" (Pscheduler, MPRD).
//! The scheduler sees a read-only [`View`] and answers with a [`Pick`]; the download
//! session checks and carries out the pick. Like Linux MPTCP's, schedulers live in a
//! registry by name, so the CLI, scenario files and the tracker can choose one.

use crate::path::PathId;
use crate::player::Player;
use crate::time::{Duration, Instant};

pub mod blest;
pub mod ecf;
pub mod gr_sty;
mod holes;
pub mod let_;
pub mod lpc;
pub mod minrtt;
pub mod mprd;
pub mod pscheduler;
pub mod redundant;
pub mod round_robin;
pub mod tp_sty;
pub mod tr_sty;
pub mod weave;
pub mod xlink;

#[cfg(test)]
pub(crate) mod testing;

pub use blest::Blest;
pub use ecf::Ecf;
pub use gr_sty::GrSty;
pub use holes::Holes;
pub use let_::Let;
pub use lpc::Lpc;
pub use minrtt::MinRtt;
pub use mprd::Mprd;
pub use pscheduler::Pscheduler;
pub use redundant::Redundant;
pub use round_robin::RoundRobin;
pub use tp_sty::TpSty;
pub use tr_sty::TrSty;
pub use weave::{Weave, WeaveConfig};
pub use xlink::Xlink;

/// What a scheduler sees of one path. Only established paths appear.
#[derive(Clone, Debug, PartialEq)]
pub struct PathView {
    pub id: PathId,
    /// The path leads to the CDN origin (which holds everything and is costly).
    pub origin: bool,
    pub srtt: Duration,
    pub rttvar: Duration,
    pub min_rtt: Duration,
    pub rto: Duration,
    /// TFRC loss-event rate, RFC 5348 §5 (0 before the first loss).
    pub loss_rate: f64,
    /// Delivery rate in bytes per second, Pscheduler Eq. 5, once measured.
    pub delivery_rate: Option<f64>,
    /// Expected time to complete one packet's transfer, Pscheduler Eq. 6.
    pub expected_time: Duration,
    /// Congestion window in packets (requests).
    pub cwnd: u64,
    /// Requests sent and not yet answered or declared lost.
    pub in_flight: u64,
    /// The path may take one more request now: window room, and pacing allows it.
    pub can_send: bool,
    /// Data packets this path has delivered so far.
    pub delivered: u64,
    /// When the path declares a request lost, and whether it has seen reordering.
    pub loss_thresholds: crate::path::LossThresholds,
}

impl PathView {
    /// Window room in packets.
    pub fn room(&self) -> u64 {
        self.cwnd.saturating_sub(self.in_flight)
    }
    /// Estimated throughput in bytes per second: the measured delivery rate, or
    /// cwnd · `packet_size` ÷ sRTT until one is measured.
    pub fn throughput(&self, packet_size: u64) -> f64 {
        self.delivery_rate
            .unwrap_or_else(|| (self.cwnd * packet_size) as f64 / self.srtt_secs())
    }
    /// Packets per second a full window carries: cwnd ÷ sRTT, what the control lets the path
    /// deliver now.
    pub fn window_rate(&self) -> f64 {
        self.cwnd as f64 / self.srtt_secs()
    }
    /// sRTT in seconds; a zero sRTT (no sample, zero initial RTT) must not make a path look
    /// infinitely fast.
    fn srtt_secs(&self) -> f64 {
        self.srtt.as_secs_f64().max(1e-6)
    }
}

/// The global pending queue, in order: sequence numbers to request that are not in flight
/// anywhere and not received. Holes below the first never-requested number come first (lost
/// requests, and numbers a scheduler skipped by picking further ahead), then never-requested
/// ones. Only sequence numbers inside the reorder-buffer limit are listed.
#[derive(Clone, Copy, Debug)]
pub struct Pending<'a> {
    pub(crate) holes: &'a Holes,
    /// First never-requested sequence number.
    pub(crate) next_new: u64,
    /// End (exclusive) of the new sequence numbers that may be requested now.
    pub(crate) new_end: u64,
}

impl<'a> Pending<'a> {
    pub fn len(&self) -> u64 {
        self.holes.len() as u64 + self.new_end.saturating_sub(self.next_new)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The first pending sequence number.
    pub fn first(&self) -> Option<u64> {
        self.nth(0)
    }
    /// The pending sequence number at position `n` (0 = most urgent), Pscheduler's
    /// "Queue-Direct-Access".
    pub fn nth(&self, n: u64) -> Option<u64> {
        let lost = self.holes.len() as u64;
        if n < lost {
            return self.holes.nth(n as usize);
        }
        let seq = self.next_new + (n - lost);
        (seq < self.new_end).then_some(seq)
    }
    /// Position of `seq` in the queue (as `nth` counts), if it is pending.
    pub fn rank(&self, seq: u64) -> Option<u64> {
        if self.holes.contains(&seq) {
            return Some(self.holes.rank(seq) as u64);
        }
        (self.next_new..self.new_end)
            .contains(&seq)
            .then(|| self.holes.len() as u64 + (seq - self.next_new))
    }
    /// All pending sequence numbers in order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + 'a {
        self.holes.iter().copied().chain(self.next_new..self.new_end)
    }
    /// Pending sequence numbers below the first never-requested one: lost requests, and
    /// numbers a scheduler skipped when it picked further ahead.
    pub fn holes(&self) -> impl Iterator<Item = u64> + 'a {
        self.holes.iter().copied()
    }
}

/// Where one in-flight sequence number is requested.
pub trait InFlightLookup {
    /// Calls `f` with each path that has `seq` in flight.
    fn paths_of(&self, seq: u64, f: &mut dyn FnMut(PathId));
    /// Calls `f(seq, copies)` for each sequence number in flight and not yet received, lowest
    /// first, until `f` returns false.
    fn scan(&self, f: &mut dyn FnMut(u64, usize) -> bool);
    /// The `copies` that `scan` reports for `seq`; 0 where it reports nothing (not in
    /// flight, or received).
    fn awaited(&self, seq: u64) -> usize;
}

/// Everything a scheduler may look at, read-only.
pub struct View<'a> {
    pub now: Instant,
    pub paths: &'a [PathView],
    pub pending: Pending<'a>,
    /// First sequence number not yet delivered in order.
    pub cursor: u64,
    /// End (exclusive) of the sequence numbers of the task being downloaded.
    pub task_end: u64,
    pub(crate) in_flight: &'a dyn InFlightLookup,
    /// Payload bytes per packet.
    pub packet_size: u64,
    /// Requests may not go past this sequence number (the reorder-buffer limit).
    pub reorder_limit: u64,
    /// Seconds of video buffered ahead of the playhead, when a player is attached.
    pub player_buffer: Option<Duration>,
    /// The attached player, for per-packet play deadlines.
    pub(crate) player: Option<&'a Player>,
    /// `Some(i)`: this scheduler's last call was at the same instant, in the same poll, and
    /// its pick was carried out; of the paths' views only `paths[i]` (the path it picked)
    /// may differ from that call's. A scheduler that keeps values per path between calls
    /// need not compare the others' views. `None`: no such promise.
    pub(crate) only_changed: Option<usize>,
}

impl<'a> View<'a> {
    pub fn path(&self, id: PathId) -> Option<&PathView> {
        self.paths.iter().find(|p| p.id == id)
    }
    /// Paths that can take a request now.
    pub fn sendable(&self) -> impl Iterator<Item = &PathView> {
        self.paths.iter().filter(|p| p.can_send)
    }
    /// The path with the smallest sRTT, whether it can send or not (ties: the lower id).
    pub fn fastest(&self) -> Option<&PathView> {
        self.paths.iter().min_by_key(|p| (p.srtt, p.id))
    }
    /// minRTT's choice: the path that can send with the smallest sRTT (ties: the lower id).
    pub fn fastest_sendable(&self) -> Option<&PathView> {
        self.sendable().min_by_key(|p| (p.srtt, p.id))
    }
    /// Is `seq` in flight on `path`?
    pub fn in_flight_on(&self, seq: u64, path: PathId) -> bool {
        let mut found = false;
        self.in_flight.paths_of(seq, &mut |p| found |= p == path);
        found
    }
    /// Calls `f(seq, copies)` for each sequence number in flight and not yet received,
    /// lowest first, until `f` returns false: the candidates for redundant copies.
    pub fn scan_in_flight(&self, f: &mut dyn FnMut(u64, usize) -> bool) {
        self.in_flight.scan(f)
    }
    /// When packet `seq` will be played, with a player attached: the play deadline of its first
    /// byte (packets are delivered whole and in order). Before the first frame and while
    /// stalled, as if playback (re)started now. `None` without a player, for packets the
    /// playhead has passed and for packets past the video.
    pub fn deadline(&self, seq: u64) -> Option<Instant> {
        self.player?.play_deadline(seq.saturating_mul(self.packet_size))
    }
    /// The video's bitrate in bit/s, with a player attached.
    pub fn video_bitrate(&self) -> Option<u64> {
        self.player.map(|p| p.spec().bitrate_bps)
    }
    /// Whether the first frame has been shown; `None` without a player.
    pub fn first_frame_shown(&self) -> Option<bool> {
        self.player.map(Player::has_started)
    }
    /// While the player waits for its first frame, the sequence number (exclusive) the
    /// in-order packets must reach for it to show: `startup` seconds of video. `None` once
    /// shown, and without a player.
    pub fn first_frame_end(&self) -> Option<u64> {
        let bytes = self.player?.first_frame_bytes()?;
        Some(bytes.div_ceil(self.packet_size))
    }
    /// What `scan_in_flight` reports for `seq` alone: its number of requests in flight, or 0
    /// if it is not a candidate (not in flight, or received).
    pub fn awaited_copies(&self, seq: u64) -> usize {
        self.in_flight.awaited(seq)
    }
    /// Number of paths `seq` is in flight on.
    pub fn copies(&self, seq: u64) -> usize {
        let mut n = 0;
        self.in_flight.paths_of(seq, &mut |_| n += 1);
        n
    }
}

/// A scheduler's decision: request `seq` on `path`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Pick {
    pub path: PathId,
    pub seq: u64,
}

/// What happened, for schedulers that keep state of their own.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum SchedEvent {
    PathAdded(PathId),
    PathRemoved(PathId),
    Sent {
        path: PathId,
        seq: u64,
    },
    Arrived {
        path: PathId,
        seq: u64,
        /// The round trip, or zero when the data is no sample of it: it answered no request
        /// in flight, or answered one declared lost (Karn's rule, `DataArrival::rtt`).
        rtt: Duration,
        duplicate: bool,
    },
    Lost {
        path: PathId,
        seq: u64,
    },
    /// Task `index` (0-based) started.
    TaskStarted {
        index: usize,
        start_seq: u64,
        end_seq: u64,
    },
}

/// A request scheduler.
pub trait Scheduler: Send + std::fmt::Debug {
    fn name(&self) -> &'static str;
    /// Called while some path can send. Pick a path that can send and a sequence number that
    /// is pending, or in flight on other paths for a redundant copy; or `None` to hold back.
    fn next(&mut self, view: &View<'_>) -> Option<Pick>;
    fn on_event(&mut self, _now: Instant, _event: &SchedEvent) {}
    /// When the scheduler wants to be asked again although nothing else happened.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
}

/// One registered scheduler: its name, a one-line summary and how to build it.
pub struct Registered {
    pub name: &'static str,
    pub about: &'static str,
    /// A new scheduler, seeded for any random choice it makes.
    pub build: fn(seed: u64) -> Box<dyn Scheduler>,
}

/// The registry: every scheduler, in the order `pcdn sim --list` shows them. Adding a
/// scheduler is one entry here (plus its module); [`SCHEDULERS`], [`names`], [`by_name`]
/// and scenario files' `schedulers = "all"` read this table.
pub const REGISTRY: &[Registered] = &[
    Registered {
        name: "minrtt",
        about: "lowest smoothed RTT among paths with window room (Linux MPTCP default; Kondo et al.'s LRF)",
        build: |_| Box::new(MinRtt),
    },
    Registered {
        name: "round-robin",
        about: "cycle through the paths that have window room",
        build: |_| Box::new(RoundRobin::default()),
    },
    Registered {
        name: "lpc",
        about: "Kondo et al.'s largest packet credits: the path with the most window room",
        build: |_| Box::new(Lpc),
    },
    Registered {
        name: "let",
        about: "Kondo et al.'s largest estimated throughput: the path with the largest cwnd / sRTT",
        build: |_| Box::new(Let),
    },
    Registered {
        name: "gr-sty",
        about: "Kondo et al.'s greedy sticky: choose like minrtt, then stay on that path while it has room",
        build: |_| Box::new(GrSty::default()),
    },
    Registered {
        name: "tp-sty",
        about: "Kondo et al.'s throughput sticky: leave a full path only for one with a larger throughput",
        build: |_| Box::new(TpSty::default()),
    },
    Registered {
        name: "tr-sty",
        about: "Kondo et al.'s throughput-RTT sticky: as tp-sty, or for a path with a smaller RTT",
        build: |_| Box::new(TrSty::default()),
    },
    Registered {
        name: "blest",
        about: "BLEST (Ferlin et al. 2016): minrtt, unless a slow path would stall the fast one on the reorder buffer",
        build: |_| Box::new(Blest::default()),
    },
    Registered {
        name: "ecf",
        about: "ECF (Lim et al. 2017): minrtt, but wait for the fast path when it would finish sooner",
        build: |_| Box::new(Ecf::default()),
    },
    Registered {
        name: "redundant",
        about: "ReMP-style: request every packet on every path with room; the first copy counts",
        build: |_| Box::new(Redundant),
    },
    Registered {
        name: "pscheduler",
        about: "Pscheduler (JSAC 2025): paths pick packets at the Eq. 7 offset, with task-tail redundancy",
        build: |_| Box::new(Pscheduler::new()),
    },
    Registered {
        name: "pscheduler-nr",
        about: "Pscheduler without redundancy (the paper's Ps-nr)",
        build: |_| Box::new(Pscheduler::without_redundancy()),
    },
    Registered {
        name: "mprd",
        about: "MPRD (ICDCS 2025): a forward server and reverse servers at Eq. 2 offsets, reassigned at crossover",
        build: |_| Box::new(Mprd::default()),
    },
    Registered {
        name: "xlink",
        about: "XLINK (SIGCOMM 2021): minrtt plus re-injection of in-flight packets under a double play-time threshold",
        build: |_| Box::new(Xlink::default()),
    },
    Registered {
        name: "weave",
        about: "pcdn's own: paths pick packets by predicted arrival (Eq. 7 offsets); tails go where they finish soonest",
        build: |_| Box::new(Weave::default()),
    },
];

/// Registered schedulers as (name, summary), one line each; other names are in [`ALIASES`].
pub const SCHEDULERS: &[(&str, &str)] = &{
    let mut out = [("", ""); REGISTRY.len()];
    let mut i = 0;
    while i < REGISTRY.len() {
        out[i] = (REGISTRY[i].name, REGISTRY[i].about);
        i += 1;
    }
    out
};

/// Other names of registered schedulers: (alias, the scheduler's own name).
pub const ALIASES: &[(&str, &str)] = &[("default", "weave"), ("lrf", "minrtt"), ("rr", "round-robin")];

/// Every registered scheduler's own name (aliases excluded), in registry order.
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|r| r.name)
}

/// The registered scheduler's own name for `name` (itself or an alias); `None` if unknown.
pub fn canonical(name: &str) -> Option<&'static str> {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map(|(_, own)| *own)
        .or_else(|| names().find(|own| *own == name))
}

/// The scheduler registered as `name` (or an alias of it), seeded for any random choice it makes.
pub fn by_name(name: &str, seed: u64) -> Option<Box<dyn Scheduler>> {
    let own = canonical(name)?;
    REGISTRY.iter().find(|r| r.name == own).map(|r| (r.build)(seed))
}

/// [`by_name`], with weave built from `weave` (its switches and constants); the other
/// schedulers have no settings.
pub fn by_name_with(name: &str, seed: u64, weave: &WeaveConfig) -> Option<Box<dyn Scheduler>> {
    match canonical(name)? {
        "weave" => Some(Box::new(Weave::with_config(weave.clone()))),
        own => by_name(own, seed),
    }
}

#[cfg(test)]
mod registry_tests {
    use super::*;

    #[test]
    fn every_other_name_is_a_registered_scheduler() {
        for (alias, own) in ALIASES {
            assert!(SCHEDULERS.iter().any(|(name, _)| name == own), "{alias} -> {own}");
            assert_eq!(canonical(alias), Some(*own));
            assert_eq!(by_name(alias, 0).unwrap().name(), by_name(own, 0).unwrap().name());
        }
        assert_eq!(canonical("xlink"), Some("xlink"));
        assert_eq!(canonical("nope"), None);
    }

    #[test]
    fn every_registry_entry_builds_the_scheduler_it_names() {
        for (i, r) in REGISTRY.iter().enumerate() {
            assert_eq!((r.build)(0).name(), r.name, "entry {i}");
            assert_eq!(SCHEDULERS[i], (r.name, r.about));
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
        assert_eq!(names().count(), REGISTRY.len());
    }
}
