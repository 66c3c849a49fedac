//! Hand-built views for the schedulers' unit tests, and a tiny stand-in for the download.

use super::{Holes, InFlightLookup, PathView, Pending, Pick, SchedEvent, Scheduler, View};
use crate::path::PathId;
use crate::player::Player;
use crate::time::{Duration, Instant};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

/// An established path with `srtt_ms`, a window of `cwnd` requests and `in_flight` of them
/// used; no RTT variation, no loss, no delivery rate measured yet.
pub(crate) fn path(id: u32, srtt_ms: u64, cwnd: u64, in_flight: u64) -> PathView {
    let srtt = Duration::from_millis(srtt_ms);
    PathView {
        id: PathId(id),
        origin: false,
        srtt,
        rttvar: Duration::ZERO,
        min_rtt: srtt,
        rto: srtt * 3,
        loss_rate: 0.0,
        delivery_rate: None,
        expected_time: srtt,
        cwnd,
        in_flight,
        can_send: in_flight < cwnd,
        delivered: 0,
        loss_thresholds: crate::path::LossThresholds {
            packets: Some(3),
            time: srtt * 9 / 8,
            reorder_window: srtt / 8,
            reordering: false,
        },
    }
}

/// Which paths each sequence number is in flight on, and what has been received.
#[derive(Debug, Default)]
pub(crate) struct Flights {
    on: BTreeMap<u64, Vec<PathId>>,
    received: BTreeSet<u64>,
}

impl InFlightLookup for Flights {
    fn paths_of(&self, seq: u64, f: &mut dyn FnMut(PathId)) {
        for &p in self.on.get(&seq).into_iter().flatten() {
            f(p);
        }
    }
    fn scan(&self, f: &mut dyn FnMut(u64, usize) -> bool) {
        // Like the download's lookup: received numbers are no candidates for another copy.
        for (&seq, paths) in &self.on {
            if !paths.is_empty() && !self.received.contains(&seq) && !f(seq, paths.len()) {
                return;
            }
        }
    }
    fn awaited(&self, seq: u64) -> usize {
        if self.received.contains(&seq) {
            return 0;
        }
        self.on.get(&seq).map_or(0, Vec::len)
    }
}

/// A download's state reduced to what a view shows. Path counters (`in_flight`, `can_send`)
/// are the test's to set when it builds the fixture; [`Fixture::apply`] and
/// [`Fixture::arrive`] keep them in step afterwards.
pub(crate) struct Fixture {
    pub now: Instant,
    pub paths: Vec<PathView>,
    pub holes: Holes,
    pub next_new: u64,
    pub new_end: u64,
    pub cursor: u64,
    pub task_end: u64,
    pub flights: Flights,
    pub packet_size: u64,
    /// A player whose deadlines and buffer the view shows (none by default).
    pub player: Option<Player>,
}

impl Fixture {
    /// Nothing requested yet; `pending` is both the task and what the reorder buffer allows.
    pub fn new(paths: Vec<PathView>, pending: Range<u64>) -> Fixture {
        Fixture {
            now: Instant::ZERO,
            paths,
            holes: Holes::new(),
            next_new: pending.start,
            new_end: pending.end,
            cursor: pending.start,
            task_end: pending.end,
            flights: Flights::default(),
            packet_size: 1000,
            player: None,
        }
    }

    /// Registers `seq` as in flight on `paths` (requested before `next_new`). Does not touch
    /// the paths' counters.
    pub fn copies(mut self, seq: u64, paths: &[u32]) -> Fixture {
        self.flights
            .on
            .entry(seq)
            .or_default()
            .extend(paths.iter().map(|&p| PathId(p)));
        self
    }

    pub fn view(&self) -> View<'_> {
        View {
            now: self.now,
            paths: &self.paths,
            pending: Pending {
                holes: &self.holes,
                next_new: self.next_new,
                new_end: self.new_end,
            },
            cursor: self.cursor,
            task_end: self.task_end,
            in_flight: &self.flights,
            packet_size: self.packet_size,
            reorder_limit: self.new_end,
            player_buffer: self.player.as_ref().map(|p| p.buffer_level(self.now)),
            player: self.player.as_ref(),
            only_changed: None,
        }
    }

    pub fn path_mut(&mut self, id: u32) -> &mut PathView {
        self.paths
            .iter_mut()
            .find(|p| p.id == PathId(id))
            .expect("no such path")
    }

    /// Carries out `pick` as `Download::apply` does; panics on a pick the download refuses.
    pub fn apply(&mut self, pick: Pick) {
        let Pick { path, seq } = pick;
        let view = self
            .paths
            .iter()
            .find(|p| p.id == path)
            .expect("pick on an unknown path");
        assert!(view.can_send, "{pick:?}: the path cannot send");
        assert!(
            seq >= self.cursor && seq < self.new_end.max(self.next_new),
            "{pick:?}: outside the window"
        );
        let copies = self.flights.on.entry(seq).or_default();
        assert!(!copies.contains(&path), "{pick:?}: already in flight on that path");
        let copies_before = copies.len();
        if seq >= self.next_new {
            self.holes.extend(self.next_new..seq);
            self.next_new = seq + 1;
        } else if !self.holes.remove(&seq) {
            assert!(
                copies_before > 0 && !self.flights.received.contains(&seq),
                "{pick:?}: neither pending nor in flight elsewhere"
            );
        }
        copies.push(path);
        let view = self.path_mut(path.0);
        view.in_flight += 1;
        view.can_send = view.in_flight < view.cwnd;
    }

    /// Asks `scheduler` until it holds back or no path can send, carrying out (and telling it
    /// about) every pick; returns the picks.
    pub fn run(&mut self, scheduler: &mut dyn Scheduler) -> Vec<Pick> {
        let mut picks = Vec::new();
        while self.paths.iter().any(|p| p.can_send) {
            let Some(pick) = scheduler.next(&self.view()) else {
                break;
            };
            self.apply(pick);
            scheduler.on_event(
                self.now,
                &SchedEvent::Sent {
                    path: pick.path,
                    seq: pick.seq,
                },
            );
            picks.push(pick);
        }
        picks
    }

    /// Whether `seq` has arrived.
    pub fn received(&self, seq: u64) -> bool {
        self.flights.received.contains(&seq)
    }

    /// The copy of `seq` on `path` arrived: the window slot frees, and the cursor moves over
    /// what is now in order.
    pub fn arrive(&mut self, seq: u64, path: u32) {
        self.end_flight(seq, path);
        self.path_mut(path).delivered += 1;
        self.flights.received.insert(seq);
        while self.flights.received.contains(&self.cursor) {
            self.cursor += 1;
        }
    }

    /// The copy of `seq` on `path` was found lost: the window slot frees, and a packet in
    /// flight nowhere else is pending again.
    pub fn lose(&mut self, seq: u64, path: u32) {
        if self.end_flight(seq, path) == 0 {
            self.holes.insert(seq);
        }
    }

    /// Takes `path`'s request for `seq` out of flight and frees its window slot; returns how
    /// many requests for `seq` are left in flight.
    fn end_flight(&mut self, seq: u64, path: u32) -> usize {
        let copies = self.flights.on.get_mut(&seq).expect("not in flight");
        let at = copies
            .iter()
            .position(|&p| p == PathId(path))
            .expect("not in flight on that path");
        copies.remove(at);
        let left = copies.len();
        let view = self.path_mut(path);
        view.in_flight -= 1;
        view.can_send = view.in_flight < view.cwnd;
        left
    }
}

/// The picks' paths, in order.
pub(crate) fn paths_of(picks: &[Pick]) -> Vec<u32> {
    picks.iter().map(|p| p.path.0).collect()
}

/// The picks' sequence numbers, in order.
pub(crate) fn seqs_of(picks: &[Pick]) -> Vec<u64> {
    picks.iter().map(|p| p.seq).collect()
}

/// The next number of a xorshift sequence (Marsaglia, "Xorshift RNGs", 2003: shifts 13, 7,
/// 17): a fixed pseudo-random mix for the tests that check a structure against its reference.
pub(crate) fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}
