//! LET, Kondo et al.'s "Largest Estimated Throughput" (INTERNET 2021).
//!
//! Packets pick paths: the first pending sequence number goes to the path that can send with
//! the largest cwnd ÷ sRTT, "the estimated throughput of each sub-flow". Unlike `tp-sty` this
//! uses the window estimate only, as the paper does, never the measured delivery rate.
//! Ties go to the lower sRTT, then the lower path id. (`let` is a keyword, hence `let_`.)

use super::{PathView, Pick, Scheduler, View};
use std::cmp::Ordering;

#[derive(Debug, Default)]
pub struct Let;

/// Compares cwnd_a/srtt_a with cwnd_b/srtt_b by cross-multiplying, so that the comparison is
/// exact and a zero sRTT cannot produce a NaN.
fn by_estimated_throughput(a: &PathView, b: &PathView) -> Ordering {
    let lhs = u128::from(a.cwnd) * b.srtt.as_nanos();
    let rhs = u128::from(b.cwnd) * a.srtt.as_nanos();
    lhs.cmp(&rhs)
        .then_with(|| b.srtt.cmp(&a.srtt))
        .then_with(|| b.id.cmp(&a.id))
}

impl Scheduler for Let {
    fn name(&self) -> &'static str {
        "let"
    }
    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        let seq = view.pending.first()?;
        let path = view.sendable().max_by(|a, b| by_estimated_throughput(a, b))?;
        Some(Pick { path: path.id, seq })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::PathId;
    use crate::scheduler::testing::{Fixture, path, paths_of};

    #[test]
    fn picks_the_largest_cwnd_per_srtt() {
        // 10/10 ms = 1, 30/20 ms = 1.5, 100/80 ms = 1.25 packets per ms.
        let f = Fixture::new(
            vec![path(0, 10, 10, 0), path(1, 20, 30, 0), path(2, 80, 100, 0)],
            0..100,
        );
        assert_eq!(
            Let.next(&f.view()),
            Some(Pick {
                path: PathId(1),
                seq: 0
            })
        );
    }

    #[test]
    fn room_does_not_matter_only_whether_the_path_can_send() {
        // Path 1 is the best estimate although it has one free slot left; then it is full.
        let mut f = Fixture::new(vec![path(0, 10, 10, 0), path(1, 10, 20, 19)], 0..100);
        let picks = f.run(&mut Let);
        assert_eq!(paths_of(&picks)[..3], [1, 0, 0]);
    }

    #[test]
    fn equal_estimates_go_to_the_lower_rtt() {
        let f = Fixture::new(vec![path(0, 20, 20, 0), path(1, 10, 10, 0)], 0..100);
        assert_eq!(Let.next(&f.view()).map(|p| p.path), Some(PathId(1)));
    }
}
