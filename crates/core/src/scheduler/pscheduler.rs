//! Pscheduler (Douyin's PCDN scheduler, IEEE JSAC 2025, §IV): paths pick packets.
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
//! at most once. With a player attached, *urgency* redundancy comes first: the oldest packet
//! in flight on one path only is urgent when its play deadline is near (Eq. 8,
//! `playtime_remain − sendtime < threshold + RTT_max`, with `playtime_remain` the time to the
//! packet's deadline and `sendtime` the asking path's Eq. 6 time), and a path asks for it again
//! if the redundancy cap allows (Eq. 9: only when the bitrate `F` is below the summed delivery
//! rates `V_avg`, and with copies in flight at most `(V_avg − F) / V_avg` of the requests in
//! flight).

use super::{PathView, Pick, Scheduler, View};
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

    /// The urgent packet `path` should ask for again, if any (Eq. 8), within the cap (Eq. 9).
    fn urgent_copy(&self, view: &View<'_>, path: &PathView) -> Option<u64> {
        // Eq. 9, first part: the download must outrun playback, or redundancy only slows it.
        let bitrate = view.video_bitrate()? as f64 / 8.0;
        let v_avg: f64 = view.paths.iter().filter_map(|p| p.delivery_rate).sum();
        if bitrate >= v_avg {
            return None;
        }
        // The oldest candidate has the earliest deadline: if it is not urgent, none is.
        let seq = self.tail_copy(view, path.id)?;
        let remain = view.deadline(seq)?.saturating_duration_since(view.now);
        let rtt_max = view.paths.iter().map(|p| p.srtt).max().unwrap_or_default();
        // Eq. 8: playtime_remain − sendtime < threshold + RTT_max.
        if remain.saturating_sub(path.expected_time) >= URGENT_BUFFER + rtt_max {
            return None;
        }
        let flight: u64 = view.paths.iter().map(|p| p.in_flight).sum();
        let mut redundant = 0u64;
        view.scan_in_flight(&mut |_, copies| {
            redundant += copies.saturating_sub(1) as u64;
            true
        });
        // With this copy counted, redundant / flight stays within the cap.
        let within = (redundant + 1) as f64 <= (flight + 1) as f64 * (v_avg - bitrate) / v_avg;
        within.then_some(seq)
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
        if self.redundancy
            && let Some(seq) = self.urgent_copy(view, path)
        {
            self.copied.insert(seq);
            return Some(Pick { path: path.id, seq });
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

#[cfg(test)]
mod tests {
    use super::super::testing::{Fixture, path};
    use super::*;
    use crate::player::{Player, VideoSpec};
    use crate::time::Instant;

    /// Packets 10_000..10_004 in flight on the slow path 1 (10_004..10_010 pending, mid-task),
    /// the fast path 0 with room, and a
    /// player at 8 Mbit/s (a 1000-byte packet is 1 ms of video) playing since 0 with 10.004 s
    /// buffered, so packet 10_000 plays at 10 s. Both paths deliver 1 MB/s.
    fn fixture(now_ms: u64, bitrate_bps: u64) -> Fixture {
        let mut f = Fixture::new(vec![path(0, 20, 8, 0), path(1, 80, 8, 0)], 10_000..10_010);
        // Mid-task: no task-tail redundancy.
        f.task_end = 20_000;
        for p in &mut f.paths {
            p.delivery_rate = Some(1e6);
        }
        for seq in 10_000..10_004 {
            f.apply(Pick { path: PathId(1), seq });
        }
        let spec = VideoSpec::new(bitrate_bps, Duration::from_secs(60));
        let mut player = Player::new(spec, Instant::ZERO).unwrap();
        player.on_delivered(Instant::ZERO, spec_bytes(bitrate_bps, 10_004));
        f.now = Instant::ZERO + Duration::from_millis(now_ms);
        player.advance(f.now);
        f.player = Some(player);
        f
    }

    /// Bytes of video at `bitrate_bps` held by `ms` milliseconds.
    fn spec_bytes(bitrate_bps: u64, ms: u64) -> u64 {
        bitrate_bps * ms / 8000
    }

    #[test]
    fn a_packet_far_from_its_deadline_is_not_copied() {
        let f = fixture(0, 8_000_000);
        let view = f.view();
        assert_eq!(view.deadline(10_000), Some(Instant::ZERO + Duration::from_secs(10)));
        let pick = Pscheduler::new().next(&view).unwrap();
        assert_eq!(pick.seq, 10_004, "no urgency: the head of the queue, no copy");
    }

    #[test]
    fn an_urgent_packet_is_asked_again_on_the_fast_path() {
        // At 9 s, packet 10_000 plays in 1 s: 1 s − 20 ms < 2 s + 80 ms (Eq. 8).
        let f = fixture(9_000, 8_000_000);
        let pick = Pscheduler::new().next(&f.view()).unwrap();
        assert_eq!(
            pick,
            Pick {
                path: PathId(0),
                seq: 10_000
            }
        );
    }

    #[test]
    fn eq9_forbids_copies_when_the_paths_cannot_outrun_the_bitrate() {
        // 20 Mbit/s of video against 2 MB/s (16 Mbit/s) of delivery rate.
        let f = fixture(9_000, 20_000_000);
        let pick = Pscheduler::new().next(&f.view()).unwrap();
        assert_eq!(pick.seq, 10_004, "no urgent copy when F ≥ V_avg");
    }

    #[test]
    fn eq9_caps_the_share_of_copies_in_flight() {
        // V_avg = 2 MB/s, F = 1.9 MB/s: copies may be 5% of the requests in flight. With 4 in
        // flight, one copy would be 1/5: refused.
        let f = fixture(9_000, 15_200_000);
        let pick = Pscheduler::new().next(&f.view()).unwrap();
        assert_eq!(pick.seq, 10_004);
        // F = 1 MB/s: up to half may be copies.
        let f = fixture(9_000, 8_000_000);
        assert_eq!(Pscheduler::new().next(&f.view()).unwrap().seq, 10_000);
    }
}
