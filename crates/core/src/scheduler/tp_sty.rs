//! TP-STY, Kondo et al.'s "Throughput Sticky" scheduler (INTERNET 2021).
//!
//! The first path is minRTT's (LRF's) choice, and like GR-STY the scheduler stays on its
//! current path while that path has window room. When the window is full the candidate is
//! again LRF's choice among the paths that can send, but "a new path is selected only if the
//! throughput of the new path is larger than the throughput of the currently selected path";
//! otherwise nothing is sent until the current path has room again. Throughput is the
//! measured delivery rate (Pscheduler Eq. 5), or cwnd · packet size ÷ sRTT until one is
//! measured ([`PathView::throughput`](super::PathView::throughput)).
//!
//! Switching is considered only when the current path is full: were it considered at every
//! pick, TR-STY would flip between a low-RTT and a high-throughput path on every request and
//! stick to nothing.

use super::gr_sty::{Stay, stay};
use super::{Pick, SchedEvent, Scheduler, View};
use crate::path::PathId;
use crate::time::Instant;

#[derive(Debug, Default)]
pub struct TpSty {
    current: Option<PathId>,
}

/// The sticky rule shared with TR-STY; `rtt_too` also lets a path with a smaller sRTT win.
pub(super) fn sticky_next(current: &mut Option<PathId>, view: &View<'_>, rtt_too: bool) -> Option<Pick> {
    let seq = view.pending.first()?;
    let path = match stay(*current, view) {
        Stay::Send(id) => id,
        Stay::Paced => return None,
        Stay::Gone => view.fastest_sendable()?.id,
        Stay::Full(cur) => {
            let candidate = view.fastest_sendable()?;
            let ps = view.packet_size;
            let better = candidate.throughput(ps) > cur.throughput(ps) || (rtt_too && candidate.srtt < cur.srtt);
            if !better {
                return None;
            }
            candidate.id
        }
    };
    *current = Some(path);
    Some(Pick { path, seq })
}

pub(super) fn forget(current: &mut Option<PathId>, event: &SchedEvent) {
    if let SchedEvent::PathRemoved(id) = *event {
        if *current == Some(id) {
            *current = None;
        }
    }
}

impl Scheduler for TpSty {
    fn name(&self) -> &'static str {
        "tp-sty"
    }
    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        sticky_next(&mut self.current, view, false)
    }
    fn on_event(&mut self, _now: Instant, event: &SchedEvent) {
        forget(&mut self.current, event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::testing::{Fixture, path, paths_of};

    #[test]
    fn starts_like_lrf_and_stays_while_there_is_room() {
        let mut f = Fixture::new(vec![path(0, 10, 3, 0), path(1, 50, 30, 0)], 0..100);
        let mut s = TpSty::default();
        // Path 0 is LRF's choice; path 1's estimate (30/50 ms) beats path 0's (3/10 ms), so
        // once path 0 is full TP-STY moves to path 1 and then fills it.
        let picks = paths_of(&f.run(&mut s));
        assert_eq!(picks[..4], [0, 0, 0, 1]);
        assert_eq!(picks.len(), 33);
    }

    #[test]
    fn does_not_switch_to_a_path_with_less_throughput() {
        let mut f = Fixture::new(vec![path(0, 10, 3, 0), path(1, 50, 4, 0)], 0..100);
        let mut s = TpSty::default();
        // 4/50 ms < 3/10 ms: once path 0 is full TP-STY waits for it, path 1 stays idle.
        assert_eq!(paths_of(&f.run(&mut s)), vec![0, 0, 0]);
        f.arrive(0, 0);
        assert_eq!(paths_of(&f.run(&mut s)), vec![0]);
    }

    #[test]
    fn a_measured_delivery_rate_beats_the_window_estimate() {
        let mut f = Fixture::new(vec![path(0, 10, 3, 0), path(1, 50, 4, 0)], 0..100);
        let mut s = TpSty::default();
        assert_eq!(paths_of(&f.run(&mut s)), vec![0, 0, 0]);
        // Path 0 measured only 100 kB/s; path 1's estimate is 4·1000 B / 50 ms = 80 kB/s...
        f.path_mut(0).delivery_rate = Some(100_000.0);
        assert_eq!(s.next(&f.view()), None);
        // ...until path 1 measures 120 kB/s: now it wins.
        f.path_mut(1).delivery_rate = Some(120_000.0);
        assert_eq!(s.next(&f.view()).map(|p| p.path.0), Some(1));
    }

    #[test]
    fn a_smaller_rtt_alone_is_no_reason_to_switch() {
        // Path 0 is busy at first, so TP-STY settles on path 1 and fills it.
        let mut f = Fixture::new(vec![path(0, 10, 1, 1), path(1, 50, 10, 0)], 0..100);
        let mut s = TpSty::default();
        assert_eq!(paths_of(&f.run(&mut s)), vec![1; 10]);
        // Path 0 frees up: faster (10 ms < 50 ms) but 100 kB/s < 200 kB/s, so TP-STY waits.
        let p0 = f.path_mut(0);
        p0.in_flight = 0;
        p0.can_send = true;
        assert_eq!(s.next(&f.view()), None);
    }
}
