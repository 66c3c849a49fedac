//! LPC, Kondo et al.'s "Largest Packet Credits" (INTERNET 2021).
//!
//! Packets pick paths: the first pending sequence number goes to the path that can send with
//! the most window room, cwnd − requests in flight ("the number of packets allowed by current
//! cwnd size subtracted from the number of packets that have not been acknowledged yet").
//! Ties go to the lower sRTT, then the lower path id, so runs repeat.

use super::{Pick, Scheduler, View};
use std::cmp::Reverse;

#[derive(Debug, Default)]
pub struct Lpc;

impl Scheduler for Lpc {
    fn name(&self) -> &'static str {
        "lpc"
    }
    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        let seq = view.pending.first()?;
        let path = view
            .sendable()
            .max_by_key(|p| (p.room(), Reverse(p.srtt), Reverse(p.id)))?;
        Some(Pick { path: path.id, seq })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::PathId;
    use crate::scheduler::testing::{Fixture, path, paths_of, seqs_of};

    #[test]
    fn picks_the_path_with_the_most_room() {
        // Path 0 is fastest but nearly full; path 2 has 6 free slots, path 1 only 4.
        let f = Fixture::new(vec![path(0, 10, 10, 9), path(1, 20, 8, 4), path(2, 80, 40, 34)], 0..100);
        assert_eq!(
            Lpc.next(&f.view()),
            Some(Pick {
                path: PathId(2),
                seq: 0
            })
        );
    }

    #[test]
    fn spreads_as_rooms_even_out_and_breaks_ties_by_rtt() {
        let mut f = Fixture::new(vec![path(0, 50, 4, 0), path(1, 10, 2, 0)], 0..100);
        let picks = f.run(&mut Lpc);
        // Rooms 4/2: path 0 twice until both have 2, then the faster path wins each tie.
        assert_eq!(paths_of(&picks), vec![0, 0, 1, 0, 1, 0]);
        assert_eq!(seqs_of(&picks), (0..6).collect::<Vec<_>>());
    }

    #[test]
    fn holds_nothing_back_but_needs_work() {
        let f = Fixture::new(vec![path(0, 10, 4, 0)], 5..5);
        assert_eq!(Lpc.next(&f.view()), None, "nothing pending");
        let f = Fixture::new(vec![path(0, 10, 4, 4)], 0..5);
        assert_eq!(Lpc.next(&f.view()), None, "no room anywhere");
    }
}
