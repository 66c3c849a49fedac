//! MPRD, multipath parallel reverse segment download (Srinivasan and Aryafar, ICDCS 2025,
//! §IV): one server fetches forward, the others backward, so their streams meet.
//!
//! - A transmission window (TW) of N packets (here: what the reorder buffer allows when the
//!   window opens) is shared out by estimated throughput R (Eq. 1:
//!   `SegSent_j = N · R_j / Σ R`), and reverse server k starts at `TW_offset_k = Σ_{j≤k} SegSent_j`
//!   (Eq. 2), moving down toward the region below it.
//! - The forward server is the CDN origin when there is one, else the fastest; it always
//!   takes the lowest pending packet, so lost packets are re-fetched by it first.
//! - A reverse server whose region has nothing left to ask for has crossed over. It is
//!   reassigned to the region with the most remaining time (pending packets ÷ its owner's
//!   rate), splitting it by Eq. 2's rule so both finish together: in the forward server's
//!   region it takes the upper part, downward; in a reverse server's region, the lower part.
//!   This covers the paper's forward/reverse crossover (Fig. 5(b): the next region is shared)
//!   and reverse/reverse crossover (Fig. 5(c): an idle server moves between the forward
//!   pointer and reverse pointer 1).
//! - A new window opens once everything in the current one has been requested, and roles and
//!   offsets are reassessed from the servers' current throughput (§IV-B, "Transmission/Reception
//!   Window Update").
//!
//! Rates are the delivery rate of Pscheduler's Eq. 5 once measured, and W/RTT before, as the
//! paper starts.

use super::{Pick, Scheduler, View};
use crate::path::PathId;
use crate::time::Instant;
use std::collections::BTreeMap;

/// A reverse server's region: it asks for the highest pending packet in `[floor, top]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Region {
    floor: u64,
    top: u64,
}

#[derive(Debug, Default)]
pub struct Mprd {
    /// Current transmission window `[start, end)` in sequence numbers.
    window: Option<(u64, u64)>,
    forward: Option<PathId>,
    /// Ordered, so ties between regions break the same way in every run.
    reverse: BTreeMap<PathId, Region>,
}

impl Mprd {
    /// Opens the window that starts at `start` and reassigns roles (§IV-B).
    fn open_window(&mut self, view: &View<'_>, start: u64) {
        let end = view.reorder_limit.min(view.task_end).max(start);
        self.window = Some((start, end));
        self.reverse.clear();
        let mut paths: Vec<(PathId, f64, bool)> = view
            .paths
            .iter()
            .map(|p| (p.id, p.throughput(view.packet_size), p.origin))
            .collect();
        // Fastest first; the origin, if any, is the forward server whatever its rate.
        paths.sort_by(|a, b| b.2.cmp(&a.2).then(b.1.total_cmp(&a.1)).then(a.0.cmp(&b.0)));
        let Some(&(forward, ..)) = paths.first() else {
            self.forward = None;
            return;
        };
        self.forward = Some(forward);
        let total: f64 = paths.iter().map(|p| p.1).sum::<f64>().max(f64::MIN_POSITIVE);
        let n = (end - start) as f64;
        // Eq. 1 and 2: cumulative shares; reverse k covers (offset_{k-1}, offset_k].
        let mut offset = n * paths[0].1 / total;
        for &(id, rate, _) in &paths[1..] {
            let floor = start + offset.round() as u64;
            offset += n * rate / total;
            let top = (start + offset.round() as u64).min(end).saturating_sub(1);
            if top >= floor {
                self.reverse.insert(id, Region { floor, top });
            }
        }
    }

    /// The highest pending packet in `[lo, hi]`.
    fn highest_pending(view: &View<'_>, lo: u64, hi: u64) -> Option<u64> {
        let p = &view.pending;
        let fresh = (p.next_new < p.new_end && hi >= p.next_new && lo < p.new_end)
            .then(|| hi.min(p.new_end - 1))
            .filter(|&s| s >= lo.max(p.next_new));
        let hole = p.holes.range(lo..=hi).next_back().copied();
        fresh.max(hole)
    }

    /// Pending packets in `[lo, hi]`.
    fn pending_in(view: &View<'_>, lo: u64, hi: u64) -> u64 {
        let p = &view.pending;
        let fresh_lo = lo.max(p.next_new);
        let fresh_hi = hi.saturating_add(1).min(p.new_end);
        fresh_hi.saturating_sub(fresh_lo) + p.holes.range(lo..=hi).count() as u64
    }

    /// Gives the idle reverse server `idle` the lower or upper part of the busiest region.
    fn reassign(&mut self, view: &View<'_>, idle: PathId) -> Option<Region> {
        let (_, end) = self.window?;
        let rate = |id: PathId| view.path(id).map_or(0.0, |p| p.throughput(view.packet_size).max(1.0));
        self.reverse.remove(&idle);
        let lowest = view.pending.first()?;
        // The forward server's region: from the lowest pending packet to below the lowest
        // reverse region (or the window's end).
        let forward_top = self
            .reverse
            .values()
            .map(|r| r.floor)
            .min()
            .unwrap_or(end)
            .max(lowest + 1)
            .min(end.max(lowest + 1))
            - 1;
        let mut best: Option<(f64, Option<PathId>, Region)> = None;
        let forward_rate = self.forward.map_or(1.0, rate);
        let forward_work = Self::pending_in(view, lowest, forward_top) as f64 / forward_rate;
        if forward_work > 0.0 {
            best = Some((
                forward_work,
                None,
                Region {
                    floor: lowest,
                    top: forward_top,
                },
            ));
        }
        for (&owner, &region) in &self.reverse {
            if region.top < region.floor {
                continue;
            }
            let work = Self::pending_in(view, region.floor, region.top) as f64 / rate(owner);
            if work > 0.0 && best.is_none_or(|b| work > b.0) {
                best = Some((work, Some(owner), region));
            }
        }
        let (_, owner, region) = best?;
        let (mine, theirs) = (rate(idle), owner.map_or(forward_rate, rate));
        let len = region.top - region.floor + 1;
        let new = match owner {
            // Forward climbs from the bottom: take the upper part, sized to finish together.
            None => {
                let split = region.floor + (len as f64 * theirs / (mine + theirs)).round() as u64;
                Region {
                    floor: split.min(region.top),
                    top: region.top,
                }
            }
            // The owner comes down from the top: take the lower part.
            Some(owner) => {
                let split = region.floor + (len as f64 * mine / (mine + theirs)).round() as u64;
                let split = split.clamp(region.floor + 1, region.top + 1);
                if let Some(r) = self.reverse.get_mut(&owner) {
                    r.floor = split.min(r.top);
                }
                Region {
                    floor: region.floor,
                    top: split - 1,
                }
            }
        };
        self.reverse.insert(idle, new);
        Some(new)
    }

    fn pick_for(&mut self, view: &View<'_>, path: PathId) -> Option<u64> {
        if self.forward == Some(path) || !self.reverse.contains_key(&path) && self.forward.is_none() {
            return view.pending.first();
        }
        let region = match self.reverse.get(&path) {
            Some(&r) => r,
            // A path that joined mid-window starts as an idle reverse server.
            None => self.reassign(view, path)?,
        };
        if let Some(seq) = Self::highest_pending(view, region.floor, region.top) {
            self.reverse.insert(
                path,
                Region {
                    floor: region.floor,
                    top: seq,
                },
            );
            return Some(seq);
        }
        // Crossed over: nothing left in its region.
        let region = self.reassign(view, path)?;
        let seq = Self::highest_pending(view, region.floor, region.top)?;
        self.reverse.insert(
            path,
            Region {
                floor: region.floor,
                top: seq,
            },
        );
        Some(seq)
    }
}

impl Scheduler for Mprd {
    fn name(&self) -> &'static str {
        "mprd"
    }

    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        let first = view.pending.first()?;
        let exhausted = self.window.is_none_or(|(_, end)| first >= end);
        let forward_gone = self.forward.is_none_or(|f| view.path(f).is_none());
        if exhausted || forward_gone {
            // Everything below `first` is requested or received: the new window starts there.
            self.open_window(view, first);
        }
        // The forward server first, then the reverse servers in window order.
        let mut order: Vec<&super::PathView> = view.sendable().collect();
        order.sort_by_key(|p| {
            (
                Some(p.id) != self.forward,
                self.reverse.get(&p.id).map(|r| r.floor),
                p.id,
            )
        });
        for p in order {
            if let Some(seq) = self.pick_for(view, p.id) {
                return Some(Pick { path: p.id, seq });
            }
        }
        None
    }

    fn on_event(&mut self, _now: Instant, event: &super::SchedEvent) {
        match event {
            super::SchedEvent::TaskStarted { .. } => {
                self.window = None;
                self.reverse.clear();
            }
            super::SchedEvent::PathRemoved(id) => {
                self.reverse.remove(id);
                if self.forward == Some(*id) {
                    self.forward = None;
                }
            }
            _ => {}
        }
    }
}
