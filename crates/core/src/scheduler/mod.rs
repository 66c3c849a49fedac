//! The scheduler: which sequence number to request next, and from which path.
//!
//! One small trait covers both families the literature has: "packets pick paths" (minRTT,
//! LPC, LET, the sticky family, BLEST, ECF) and "paths pick packets" (Pscheduler, MPRD).
//! The scheduler sees a read-only [`View`] and answers with a [`Pick`]; the download
//! session checks and carries out the pick. Like Linux MPTCP's, schedulers live in a
//! registry by name, so the CLI, scenario files and the tracker can choose one.

use crate::path::PathId;
use crate::time::{Duration, Instant};
use std::collections::BTreeSet;

pub mod minrtt;
pub mod round_robin;

pub use minrtt::MinRtt;
pub use round_robin::RoundRobin;

/// What a scheduler sees of one path. Only established paths appear.
#[derive(Clone, Debug)]
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
}

impl PathView {
    /// Window room in packets.
    pub fn room(&self) -> u64 {
        self.cwnd.saturating_sub(self.in_flight)
    }
}

/// The global pending queue, in order: sequence numbers to request that are not in flight
/// anywhere and not received. Holes below the first never-requested number come first (lost
/// requests, and numbers a scheduler skipped by picking further ahead), then never-requested
/// ones. Only sequence numbers inside the reorder-buffer limit are listed.
#[derive(Clone, Copy, Debug)]
pub struct Pending<'a> {
    pub(crate) holes: &'a BTreeSet<u64>,
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
            return self.holes.iter().nth(n as usize).copied();
        }
        let seq = self.next_new + (n - lost);
        (seq < self.new_end).then_some(seq)
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
}

impl<'a> View<'a> {
    pub fn path(&self, id: PathId) -> Option<&PathView> {
        self.paths.iter().find(|p| p.id == id)
    }
    /// Paths that can take a request now.
    pub fn sendable(&self) -> impl Iterator<Item = &PathView> {
        self.paths.iter().filter(|p| p.can_send)
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

/// Registered schedulers, one line each with a summary.
pub const SCHEDULERS: &[(&str, &str)] = &[
    ("default", "pcdn's default scheduler (currently minrtt)"),
    (
        "minrtt",
        "lowest smoothed RTT among paths with window room (Linux MPTCP default)",
    ),
    ("lrf", "Kondo et al.'s lowest-RTT-first, the same rule as minrtt"),
    ("round-robin", "cycle through the paths that have window room"),
];

/// The scheduler registered as `name`, seeded for any random choice it makes.
pub fn by_name(name: &str, seed: u64) -> Option<Box<dyn Scheduler>> {
    let _ = seed;
    Some(match name {
        "default" | "minrtt" | "lrf" => Box::new(MinRtt),
        "round-robin" | "rr" => Box::new(RoundRobin::default()),
        _ => return None,
    })
}
