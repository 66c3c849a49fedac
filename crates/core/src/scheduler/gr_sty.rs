//! GR-STY, Kondo et al.'s "Greedy Sticky" scheduler (INTERNET 2021).
//!
//! Choose a path as minRTT (LRF) does, then "once a path is selected, GR-STY stays on a path
//! for as long as there is available window space": every pick goes to the current path while
//! it has room; only when its window is full is a new path chosen, again by lowest sRTT among
//! the paths that can send. Fewer path switches mean longer in-order runs from each server.
//! The sticky family (`tp-sty`, `tr-sty`) shares `stay` below and differs only in when it may
//! leave a full path.

use super::{PathView, Pick, SchedEvent, Scheduler, View};
use crate::path::PathId;
use crate::time::Instant;

/// What the sticky family makes of its current path.
pub(super) enum Stay<'v> {
    /// It can take this request.
    Send(PathId),
    /// It has window room but pacing holds it: the download wakes us when pacing allows, and
    /// staying means not sending elsewhere meanwhile.
    Paced,
    /// Its window is full: time to consider another path.
    Full(&'v PathView),
    /// No current path (first pick, or it failed or is reconnecting).
    Gone,
}

pub(super) fn stay<'v>(current: Option<PathId>, view: &'v View<'_>) -> Stay<'v> {
    match current.and_then(|id| view.path(id)) {
        Some(p) if p.can_send => Stay::Send(p.id),
        Some(p) if p.room() > 0 => Stay::Paced,
        // An empty window that is also full (cwnd 0) would never free up; choose afresh.
        Some(p) if p.in_flight > 0 => Stay::Full(p),
        _ => Stay::Gone,
    }
}

#[derive(Debug, Default)]
pub struct GrSty {
    current: Option<PathId>,
}

impl Scheduler for GrSty {
    fn name(&self) -> &'static str {
        "gr-sty"
    }
    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        let seq = view.pending.first()?;
        let path = match stay(self.current, view) {
            Stay::Send(id) => id,
            Stay::Paced => return None,
            Stay::Full(_) | Stay::Gone => view.fastest_sendable()?.id,
        };
        self.current = Some(path);
        Some(Pick { path, seq })
    }
    fn on_event(&mut self, _now: Instant, event: &SchedEvent) {
        if let SchedEvent::PathRemoved(id) = *event {
            if self.current == Some(id) {
                self.current = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::testing::{Fixture, path, paths_of};

    #[test]
    fn stays_on_its_path_while_it_has_room_then_chooses_again() {
        let mut f = Fixture::new(vec![path(0, 10, 3, 0), path(1, 50, 2, 0)], 0..100);
        let mut s = GrSty::default();
        // The fast path first, until full; then the slow one, until full.
        assert_eq!(paths_of(&f.run(&mut s)), vec![0, 0, 0, 1, 1]);
        // One answer on the fast path frees a slot: LRF chooses it again.
        f.arrive(0, 0);
        assert_eq!(paths_of(&f.run(&mut s)), vec![0]);
        // Now the slow path frees a slot while the fast one is full: GR-STY moves there...
        f.arrive(3, 1);
        assert_eq!(paths_of(&f.run(&mut s)), vec![1]);
        // ...and stays there although the faster path has room again.
        f.arrive(1, 0);
        f.arrive(4, 1);
        assert_eq!(
            paths_of(&f.run(&mut s))[0],
            1,
            "sticks to the slow path while it has room"
        );
    }

    #[test]
    fn minrtt_would_switch_back_at_once() {
        // The contrast that defines GR-STY: both paths have room, the current one is slower.
        let mut f = Fixture::new(vec![path(0, 10, 4, 4), path(1, 50, 4, 0)], 0..100);
        let mut s = GrSty::default();
        assert_eq!(s.next(&f.view()).map(|p| p.path.0), Some(1));
        f.apply(Pick {
            path: PathId(1),
            seq: 0,
        });
        f.arrive(0, 1);
        f.path_mut(0).in_flight = 0;
        f.path_mut(0).can_send = true;
        assert_eq!(s.next(&f.view()).map(|p| p.path.0), Some(1));
        assert_eq!(crate::scheduler::MinRtt.next(&f.view()).map(|p| p.path.0), Some(0));
    }

    #[test]
    fn a_paced_current_path_is_waited_for() {
        let mut f = Fixture::new(vec![path(0, 10, 4, 0), path(1, 50, 4, 0)], 0..100);
        let mut s = GrSty::default();
        assert_eq!(s.next(&f.view()).map(|p| p.path.0), Some(0));
        f.path_mut(0).can_send = false; // room, but pacing says later
        assert_eq!(s.next(&f.view()), None);
    }

    #[test]
    fn a_removed_path_is_forgotten() {
        let mut f = Fixture::new(vec![path(0, 10, 4, 0), path(1, 50, 4, 0)], 0..100);
        let mut s = GrSty::default();
        assert_eq!(s.next(&f.view()).map(|p| p.path.0), Some(0));
        s.on_event(Instant::ZERO, &SchedEvent::PathRemoved(PathId(0)));
        f.paths.remove(0);
        assert_eq!(s.next(&f.view()).map(|p| p.path.0), Some(1));
    }
}
