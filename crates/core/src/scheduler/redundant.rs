//! Redundant scheduling in the style of ReMP TCP (Frömmgen et al., "ReMP TCP: Low latency
//! multipath TCP", ICC 2016) and Linux MPTCP's `mptcp_redundant.c`: every packet is
//! requested on every path, and the first copy to arrive counts.
//!
//! A path that can send takes the lowest sequence number it does not have: one in flight
//! elsewhere and not yet received (a copy), or the first pending number if that is lower (a
//! hole lost on every path) or nothing is left to copy (a new number, then asked of the
//! fastest path that can send). Every path thus walks the same sequence in order, and the
//! first copy to arrive fills the slot. Waste is about n − 1 over n paths of equal speed, the
//! price of the lowest latency and of riding out any single path's loss or stall.

use super::{Pick, Scheduler, View};

#[derive(Debug, Default)]
pub struct Redundant;

impl Scheduler for Redundant {
    fn name(&self) -> &'static str {
        "redundant"
    }
    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        let paths = view.paths.len();
        let first_pending = view.pending.first();
        for p in view.sendable() {
            let mut copy = None;
            view.scan_in_flight(&mut |seq, copies| {
                if first_pending.is_some_and(|h| h < seq) {
                    // A hole (lost everywhere) below is more urgent than any copy.
                    return false;
                }
                // A number on every path cannot be missing from this one: skip the lookup.
                if copies < paths && !view.in_flight_on(seq, p.id) {
                    copy = Some(seq);
                    return false;
                }
                true
            });
            if let Some(seq) = copy {
                return Some(Pick { path: p.id, seq });
            }
        }
        let path = view.fastest_sendable()?;
        Some(Pick {
            path: path.id,
            seq: first_pending?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::PathId;
    use crate::scheduler::testing::{Fixture, path, paths_of, seqs_of};

    #[test]
    fn every_packet_goes_to_every_path() {
        let mut f = Fixture::new(vec![path(0, 10, 3, 0), path(1, 30, 3, 0), path(2, 60, 2, 0)], 0..100);
        let picks = f.run(&mut Redundant);
        // New numbers go to the fastest path; the others copy them in order.
        assert_eq!(seqs_of(&picks), vec![0, 0, 0, 1, 1, 1, 2, 2]);
        assert_eq!(paths_of(&picks), vec![0, 1, 2, 0, 1, 2, 0, 1]);
        // Path 2 is full; when it frees up it copies 2 before anything new.
        f.arrive(0, 2);
        assert_eq!(
            f.run(&mut Redundant),
            vec![Pick {
                path: PathId(2),
                seq: 2
            }]
        );
    }

    #[test]
    fn duplicates_in_flight_numbers_onto_other_paths_lowest_first() {
        // 4, 5 and 6 were requested before; 7.. are new.
        let mut f = Fixture::new(vec![path(0, 10, 4, 3), path(1, 30, 4, 1)], 7..20)
            .copies(4, &[0])
            .copies(5, &[0, 1])
            .copies(6, &[0]);
        f.cursor = 4;
        assert_eq!(
            Redundant.next(&f.view()),
            Some(Pick {
                path: PathId(1),
                seq: 4
            })
        );
        f.apply(Pick {
            path: PathId(1),
            seq: 4,
        });
        assert_eq!(
            Redundant.next(&f.view()),
            Some(Pick {
                path: PathId(1),
                seq: 6
            })
        );
    }

    #[test]
    fn a_hole_lost_everywhere_comes_before_higher_copies() {
        let mut f = Fixture::new(vec![path(0, 10, 4, 2), path(1, 30, 4, 0)], 6..20)
            .copies(3, &[0])
            .copies(5, &[0]);
        f.cursor = 3;
        f.holes.insert(4);
        // Path 1 copies 3; the hole 4 goes to the fastest path before anyone copies 5; then
        // path 1 copies the hole and 5.
        let picks = f.run(&mut Redundant);
        assert_eq!(seqs_of(&picks)[..4], [3, 4, 4, 5]);
        assert_eq!(paths_of(&picks)[..4], [1, 0, 1, 1]);
    }

    #[test]
    fn received_numbers_are_not_copied() {
        let mut f = Fixture::new(vec![path(0, 10, 4, 0), path(1, 30, 4, 0)], 0..2);
        f.path_mut(1).can_send = false;
        f.run(&mut Redundant);
        f.arrive(0, 0);
        f.path_mut(1).can_send = true;
        // 0 arrived already: path 1 copies only 1, then nothing is left.
        assert_eq!(seqs_of(&f.run(&mut Redundant)), vec![1]);
    }
}
