//! ECF, Earliest Completion First (Lim, Nahum, Towsley, Gibbens: "ECF: An MPTCP Path
//! Scheduler to Manage Heterogeneous Paths", CoNEXT 2017, Algorithm 1), checked against
//! Linux MPTCP's `net/mptcp/mptcp_ecf.c` (multipath-tcp/mptcp, v0.95).
//!
//! The fastest path f (lowest sRTT) is used whenever it can send. Otherwise let s be the
//! fastest path that can, k the pending packets, δ = max(rttvar_f, rttvar_s), β = 0.25:
//! waiting for f finishes the k packets after n · sRTT_f with n = 1 + k / cwnd_f. If that
//! beats s, n · sRTT_f < (1 + waiting · β) · (sRTT_s + δ), and s would itself need
//! k / cwnd_s · sRTT_s ≥ 2 · sRTT_f + δ, hold back and set `waiting`; otherwise use s (and
//! clear `waiting` when f was not faster). `waiting` is hysteresis: once we wait, s must be
//! clearly better before we use it again.
//!
//! As Linux does, k counts as at least one window in both terms (`x_f`, `x_s` there): one
//! packet still takes a whole RTT, and with the paper's bare k / cwnd a short tail would look
//! quicker on the slow path, which is the case ECF exists to avoid. Here k is what the
//! reorder buffer lets us request (`pending.len()`), so a small buffer makes ECF wait more.

use super::{Pick, Scheduler, View};

/// β, the hysteresis margin (Linux `mptcp_ecf_r_beta` = 4, β = 1/4).
const BETA: f64 = 0.25;

#[derive(Debug, Default)]
pub struct Ecf {
    waiting: bool,
}

impl Scheduler for Ecf {
    fn name(&self) -> &'static str {
        "ecf"
    }
    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        let seq = view.pending.first()?;
        let fast = view.fastest()?;
        let slow = view.fastest_sendable()?;
        if slow.id != fast.id {
            let k = view.pending.len() as f64;
            let cwnd_f = fast.cwnd.max(1) as f64;
            let cwnd_s = slow.cwnd.max(1) as f64;
            let srtt_f = fast.srtt.as_secs_f64();
            let srtt_s = slow.srtt.as_secs_f64();
            let delta = fast.rttvar.max(slow.rttvar).as_secs_f64();
            let n = 1.0 + k.max(cwnd_f) / cwnd_f;
            let margin = if self.waiting { 1.0 + BETA } else { 1.0 };
            if n * srtt_f < margin * (srtt_s + delta) {
                if k.max(cwnd_s) / cwnd_s * srtt_s >= 2.0 * srtt_f + delta {
                    self.waiting = true;
                    return None;
                }
            } else {
                self.waiting = false;
            }
        }
        Some(Pick { path: slow.id, seq })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::PathId;
    use crate::scheduler::testing::{Fixture, path};
    use crate::time::Duration;

    /// A full 10 ms path with a window of 10 and a free 50 ms one, `k` packets pending.
    fn fast_full_slow_free(k: u64) -> Fixture {
        Fixture::new(vec![path(0, 10, 10, 10), path(1, 50, 10, 0)], 0..k)
    }

    const SLOW: Option<PathId> = Some(PathId(1));

    #[test]
    fn the_fast_path_is_used_whenever_it_has_room() {
        let f = Fixture::new(vec![path(0, 10, 10, 9), path(1, 50, 10, 0)], 0..3);
        assert_eq!(
            Ecf::default().next(&f.view()),
            Some(Pick {
                path: PathId(0),
                seq: 0
            })
        );
    }

    #[test]
    fn waits_for_the_fast_path_when_little_is_left() {
        // n = 2: 20 ms < 50 ms, and the slow path needs 50 ms ≥ 2 · 10 ms.
        let mut s = Ecf::default();
        assert_eq!(s.next(&fast_full_slow_free(5).view()), None);
        assert!(s.waiting);
    }

    #[test]
    fn uses_the_slow_path_when_much_is_left() {
        // n = 1 + 100/10 = 11: 110 ms ≥ 50 ms.
        let mut s = Ecf::default();
        assert_eq!(s.next(&fast_full_slow_free(100).view()).map(|p| p.path), SLOW);
        assert!(!s.waiting);
    }

    #[test]
    fn hysteresis_keeps_waiting_until_the_slow_path_is_clearly_better() {
        // k = 50: n · sRTT_f = 60 ms, between 50 ms and 1.25 · 50 ms.
        let middle = fast_full_slow_free(50);
        assert_eq!(
            Ecf::default().next(&middle.view()).map(|p| p.path),
            SLOW,
            "not waiting yet"
        );

        let mut s = Ecf::default();
        assert_eq!(s.next(&fast_full_slow_free(5).view()), None);
        assert_eq!(s.next(&middle.view()), None, "waiting: 60 ms < 62.5 ms");
        // k = 100 clears the margin, clears `waiting`, and then k = 50 uses the slow path again.
        assert_eq!(s.next(&fast_full_slow_free(100).view()).map(|p| p.path), SLOW);
        assert_eq!(s.next(&middle.view()).map(|p| p.path), SLOW);
    }

    #[test]
    fn rtt_variation_favours_waiting() {
        // k = 50 uses the slow path without variation (60 ms ≥ 50 ms), but δ = 20 ms makes
        // the slow path's 50 + 20 ms look worse than waiting.
        let mut f = fast_full_slow_free(50);
        f.path_mut(1).rttvar = Duration::from_millis(20);
        assert_eq!(Ecf::default().next(&f.view()), None);
    }

    #[test]
    fn a_slightly_slower_path_is_used_even_for_a_short_tail() {
        // sRTT_s = 25 ms, δ = 10 ms: waiting wins on paper (20 < 35 ms), but the slow path
        // completes within 25 ms < 2 · 10 + 10 ms, so ECF uses it.
        let mut f = Fixture::new(vec![path(0, 10, 10, 10), path(1, 25, 10, 0)], 0..5);
        f.path_mut(0).rttvar = Duration::from_millis(10);
        assert_eq!(Ecf::default().next(&f.view()).map(|p| p.path), SLOW);
    }
}
