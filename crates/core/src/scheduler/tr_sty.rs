//! TR-STY, Kondo et al.'s "Throughput RTT Sticky" scheduler (INTERNET 2021).
//!
//! TP-STY's rule (stay on the current path while it has window room; when it is full, take
//! LRF's candidate only if its throughput is larger), and in addition TR-STY switches to the
//! candidate when its RTT is smaller than the current path's. It therefore leaves a full path
//! more readily than TP-STY and can aggregate paths, while still sending runs of requests to
//! one server at a time.

use super::tp_sty::{forget, sticky_next};
use super::{Pick, SchedEvent, Scheduler, View};
use crate::path::PathId;
use crate::time::Instant;

#[derive(Debug, Default)]
pub struct TrSty {
    current: Option<PathId>,
}

impl Scheduler for TrSty {
    fn name(&self) -> &'static str {
        "tr-sty"
    }
    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        sticky_next(&mut self.current, view, true)
    }
    fn on_event(&mut self, _now: Instant, event: &SchedEvent) {
        forget(&mut self.current, event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::TpSty;
    use crate::scheduler::testing::{Fixture, path, paths_of};

    #[test]
    fn switches_to_a_path_with_a_smaller_rtt_where_tp_sty_waits() {
        let fixture = || {
            // Path 0 is busy at first, so both schedulers settle on path 1 and fill it.
            let mut f = Fixture::new(vec![path(0, 10, 1, 1), path(1, 50, 10, 0)], 0..100);
            f.paths[0].can_send = false;
            f
        };
        let free_path_0 = |f: &mut Fixture| {
            let p0 = f.path_mut(0);
            p0.in_flight = 0;
            p0.can_send = true;
        };
        let mut tr = TrSty::default();
        let mut f = fixture();
        assert_eq!(paths_of(&f.run(&mut tr)), vec![1; 10]);
        free_path_0(&mut f);
        // 10 ms < 50 ms: TR-STY switches although path 0 carries less (100 < 200 kB/s).
        assert_eq!(paths_of(&f.run(&mut tr)), vec![0]);

        let mut tp = TpSty::default();
        let mut f = fixture();
        assert_eq!(paths_of(&f.run(&mut tp)), vec![1; 10]);
        free_path_0(&mut f);
        assert!(f.run(&mut tp).is_empty());
    }

    #[test]
    fn switches_for_throughput_too() {
        let mut f = Fixture::new(vec![path(0, 10, 3, 0), path(1, 50, 30, 0)], 0..100);
        let picks = paths_of(&f.run(&mut TrSty::default()));
        assert_eq!(picks[..4], [0, 0, 0, 1]);
    }

    #[test]
    fn neither_faster_nor_larger_means_waiting() {
        let mut f = Fixture::new(vec![path(0, 10, 3, 0), path(1, 50, 4, 0)], 0..100);
        assert_eq!(paths_of(&f.run(&mut TrSty::default())), vec![0, 0, 0]);
    }
}
