//! `weave`, pcdn's own scheduler: paths pick packets by predicted arrival, and a task's
//! tail goes where it completes soonest.
//!
//! - **Order** (from Pscheduler's Eq. 7): a path with room takes the pending packet whose
//!   turn comes when its own request would land — the packets the faster paths deliver
//!   meanwhile are skipped for them: `offset_i = Σ_{E_j < E_i} (E_i − E_j) · R_j / size`,
//!   with E the loss-aware expected transmission time (Eq. 6) and R the delivery rate (Eq. 5).
//!   The fastest path (offset 0) takes the head of the queue, lost packets first.
//! - **End of the queue, with packets left to ask for**: when a path's offset runs past the
//!   queue (the task's tail, or the reorder buffer's limit), the faster paths will drain it by
//!   themselves in `pending / Σ R_faster`. The path takes the last pending packet only if its
//!   request lands before the faster paths would get to it (the reasoning of ECF, Lim et al.
//!   2017, and BLEST, Ferlin et al. 2016); otherwise it waits, rather than become the packet
//!   everything else waits for.
//! - **Tail, everything in flight**: a path that would deliver sooner than the path a packet
//!   is on asks for that packet again, oldest first, each packet once; copies are capped at
//!   a small share of requests, so the tail is cut without Pscheduler's blanket redundancy.

use super::pscheduler::offset;
use super::{Pick, SchedEvent, Scheduler, View};
use crate::path::PathId;
use crate::time::Instant;
use std::collections::HashSet;

/// Most copies as a share of requests, plus an allowance for short downloads. 4 % keeps the
/// duplicates under a 5 % waste budget once a download passes 3 200 requests (the allowance's
/// 32 packets are then under 1 %); at 5 % the allowance pushed Pscheduler Fig. 15–18 runs to
/// 5.1–5.4 %, and the extra copies bought no OFO or goodput there (docs/reproduction.md).
const COPY_SHARE: f64 = 0.04;
const COPY_ALLOWANCE: u64 = 32;

#[derive(Debug, Default)]
pub struct Weave {
    copied: HashSet<u64>,
    requests: u64,
    copies: u64,
}

impl Weave {
    /// Seconds until the paths faster than `i` have drained `pending` packets.
    fn drain_time(view: &View<'_>, i: PathId, pending: u64) -> Option<f64> {
        let me = view.path(i)?;
        let rate: f64 = view
            .paths
            .iter()
            .filter(|p| p.id != i && p.expected_time < me.expected_time)
            .map(|p| p.throughput(view.packet_size) / view.packet_size as f64)
            .sum();
        (rate > 0.0).then(|| pending as f64 / rate)
    }

    /// The oldest packet in flight only on paths slower than `i`, not copied before.
    fn copy_candidate(&self, view: &View<'_>, i: PathId) -> Option<u64> {
        let me = view.path(i)?;
        let mut found = None;
        view.scan_in_flight(&mut |seq, copies| {
            if copies == 1 && !self.copied.contains(&seq) && !view.in_flight_on(seq, i) {
                let mut slower = false;
                view.in_flight.paths_of(seq, &mut |p| {
                    slower |= view.path(p).is_some_and(|v| v.expected_time > me.expected_time)
                });
                if slower {
                    found = Some(seq);
                    return false;
                }
            }
            true
        });
        found
    }

    fn pick(&mut self, path: PathId, seq: u64) -> Option<Pick> {
        self.requests += 1;
        Some(Pick { path, seq })
    }
}

impl Scheduler for Weave {
    fn name(&self) -> &'static str {
        "weave"
    }

    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        let pending = view.pending.len();
        // Fastest first: it takes the head of the queue, the others their offsets.
        let mut paths: Vec<_> = view.sendable().collect();
        paths.sort_by_key(|p| (p.expected_time, p.id));
        for p in paths {
            let k = offset(view, p.id);
            if k < pending {
                let seq = view.pending.nth(k)?;
                return self.pick(p.id, seq);
            }
            let at_task_tail = view.reorder_limit >= view.task_end;
            if pending > 0 {
                // The queue ends (the task's tail, or the reorder buffer's limit) before this
                // path's turn: the last packet, if it lands before the faster paths get to it.
                let mine = p.expected_time.as_secs_f64();
                let theirs = Self::drain_time(view, p.id, pending).map_or(f64::INFINITY, |d| {
                    d + view
                        .paths
                        .iter()
                        .map(|q| q.expected_time)
                        .min()
                        .unwrap_or_default()
                        .as_secs_f64()
                });
                if mine < theirs {
                    let seq = view.pending.nth(pending - 1)?;
                    return self.pick(p.id, seq);
                }
                continue;
            }
            let budget = COPY_ALLOWANCE + (self.requests as f64 * COPY_SHARE) as u64;
            if at_task_tail && self.copies < budget {
                if let Some(seq) = self.copy_candidate(view, p.id) {
                    self.copied.insert(seq);
                    self.copies += 1;
                    return self.pick(p.id, seq);
                }
            }
        }
        None
    }

    fn on_event(&mut self, _now: Instant, event: &SchedEvent) {
        if let SchedEvent::Arrived { seq, .. } = *event {
            self.copied.remove(&seq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Fixture, path};
    use super::*;

    #[test]
    fn the_fast_path_takes_the_head_and_the_slow_path_its_offset() {
        // 10 ms and 50 ms paths; the fast one delivers 10 packets per... cwnd 10 / 10 ms.
        let mut f = Fixture::new(vec![path(0, 10, 10, 0), path(1, 50, 10, 0)], 0..1000);
        let mut w = Weave::default();
        let first = w.next(&f.view()).unwrap();
        assert_eq!(
            first,
            Pick {
                path: PathId(0),
                seq: 0
            }
        );
        f.path_mut(0).can_send = false;
        let second = w.next(&f.view()).unwrap();
        // Offset = (50 − 10) ms · 1000 packets/s = 40 packets.
        assert_eq!(
            second,
            Pick {
                path: PathId(1),
                seq: 40
            }
        );
    }

    #[test]
    fn a_slow_path_waits_at_the_tail_when_the_fast_one_finishes_sooner() {
        // 3 packets left; the fast path drains them in 3 ms, the slow path needs 50 ms.
        let mut f = Fixture::new(vec![path(0, 10, 10, 10), path(1, 50, 10, 0)], 0..3);
        f.path_mut(0).can_send = false;
        let mut w = Weave::default();
        assert_eq!(w.next(&f.view()), None);
    }

    #[test]
    fn copies_a_tail_packet_from_a_slower_path_once() {
        let mut f = Fixture::new(vec![path(0, 10, 10, 0), path(1, 50, 10, 0)], 0..2);
        f.apply(Pick {
            path: PathId(1),
            seq: 0,
        });
        f.apply(Pick {
            path: PathId(1),
            seq: 1,
        });
        let mut w = Weave::default();
        assert_eq!(
            w.next(&f.view()),
            Some(Pick {
                path: PathId(0),
                seq: 0
            })
        );
        f.apply(Pick {
            path: PathId(0),
            seq: 0,
        });
        assert_eq!(
            w.next(&f.view()),
            Some(Pick {
                path: PathId(0),
                seq: 1
            })
        );
        f.apply(Pick {
            path: PathId(0),
            seq: 1,
        });
        assert_eq!(w.next(&f.view()), None, "each packet once");
    }
}
