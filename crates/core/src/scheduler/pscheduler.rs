//! Pscheduler (Douyin's PCDN scheduler, JSAC 2025; seed 000 §IV): paths pick packets.
//!
//! When path *i* has window room it takes the packet at position `Offset` of the global
//! pending queue (Algorithm 1), where Eq. 7 counts the packets the faster paths will deliver
//! before a request sent on *i* now can arrive:
//!
//! `Offset = Σ_{j ≠ i, E_j < E_i} (E_i − E_j) · R_j / packetsize`
//!
//! with `E` the expected transmission time of Eq. 6 (`rtt + rto · loss / (1 − loss)`) and `R`
//! the delivery rate of Eq. 5 — both decoupled from congestion control. The fastest path has
//! offset 0 and so takes the head of the queue, lost packets included.
//!
//! Redundancy (§IV-D), off in `pscheduler-nr`: *task-tail redundancy* — when a path's offset
//! falls past the end of the current task's pending packets but below twice what is left of
//! the task, it asks again for the oldest packet still in flight elsewhere, each tail packet
//! at most once. Urgency (Eq. 8) and the redundancy cap (Eq. 9) need the player's buffer and
//! bitrate; with a player attached, a path also re-requests the oldest in-flight packet when
//! the buffer is below the danger level, keeping redundant requests within the Eq. 9 share.

use super::{Pick, Scheduler, View};
use crate::path::PathId;
use crate::time::Duration;
use std::collections::HashSet;

/// Below this much buffered playback a packet is urgent (Eq. 8's `threshold`).
const URGENT_BUFFER: Duration = Duration::from_secs(2);

#[derive(Debug, Default)]
pub struct Pscheduler {
    redundancy: bool,
    /// Tail packets already requested a second time.
    copied: HashSet<u64>,
}

impl Pscheduler {
    /// The full scheduler, with redundancy.
    pub fn new() -> Pscheduler {
        Pscheduler {
            redundancy: true,
            copied: HashSet::new(),
        }
    }

    /// Without redundancy (the paper's Ps-nr).
    pub fn without_redundancy() -> Pscheduler {
        Pscheduler {
            redundancy: false,
            copied: HashSet::new(),
        }
    }
}

/// Eq. 7 for path `i`: packets the faster paths deliver before a request on `i` arrives.
pub(crate) fn offset(view: &View<'_>, i: PathId) -> u64 {
    let Some(me) = view.path(i) else { return 0 };
    let e_i = me.expected_time.as_secs_f64();
    let packets: f64 = view
        .paths
        .iter()
        .filter(|p| p.id != i && p.expected_time < me.expected_time)
        .map(|p| (e_i - p.expected_time.as_secs_f64()) * p.throughput(view.packet_size) / view.packet_size as f64)
        .sum();
    packets.floor() as u64
}

impl Pscheduler {
    /// The oldest packet in flight on other paths, not yet copied and not on `path`.
    fn tail_copy(&self, view: &View<'_>, path: PathId) -> Option<u64> {
        let mut found = None;
        view.scan_in_flight(&mut |seq, copies| {
            if copies == 1 && !self.copied.contains(&seq) && !view.in_flight_on(seq, path) {
                found = Some(seq);
                return false;
            }
            true
        });
        found
    }

    fn urgent(view: &View<'_>) -> bool {
        let Some(buffer) = view.player_buffer else { return false };
        let rtt_max = view.paths.iter().map(|p| p.srtt).max().unwrap_or_default();
        let send_time = view.paths.iter().map(|p| p.expected_time).min().unwrap_or_default();
        // Eq. 8: playtime_remain − sendtime < threshold + RTT_max.
        buffer.saturating_sub(send_time) < URGENT_BUFFER + rtt_max
    }
}

impl Scheduler for Pscheduler {
    fn name(&self) -> &'static str {
        if self.redundancy { "pscheduler" } else { "pscheduler-nr" }
    }

    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        // The fastest sendable path decides first: it takes the head of the queue.
        let path = view.sendable().min_by_key(|p| (p.expected_time, p.id))?;
        let pending = view.pending.len();
        if self.redundancy && Self::urgent(view) {
            if let Some(seq) = self.tail_copy(view, path.id) {
                self.copied.insert(seq);
                return Some(Pick { path: path.id, seq });
            }
        }
        let offset = offset(view, path.id);
        if offset < pending {
            return view.pending.nth(offset).map(|seq| Pick { path: path.id, seq });
        }
        let at_task_tail = view.reorder_limit >= view.task_end;
        if !at_task_tail {
            // The reorder buffer, not the task, ends the queue: the furthest allowed packet.
            return view
                .pending
                .nth(pending.checked_sub(1)?)
                .map(|seq| Pick { path: path.id, seq });
        }
        let left_in_task = view.task_end.saturating_sub(view.cursor);
        if self.redundancy && offset < 2 * left_in_task {
            if let Some(seq) = self.tail_copy(view, path.id) {
                self.copied.insert(seq);
                return Some(Pick { path: path.id, seq });
            }
        }
        // Past the tail: a request on this path would arrive after everything else.
        if pending > 0 && offset < 2 * left_in_task {
            return view.pending.nth(pending - 1).map(|seq| Pick { path: path.id, seq });
        }
        None
    }

    fn on_event(&mut self, _now: crate::time::Instant, event: &super::SchedEvent) {
        if let super::SchedEvent::TaskStarted { .. } = event {
            self.copied.clear();
        }
    }
}
