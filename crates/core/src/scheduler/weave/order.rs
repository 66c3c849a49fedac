//! The order: Pscheduler's Eq. 7 on the arrival clocks, and the end of the queue.
//!
//! **Order** (Pscheduler's Eq. 7 on those clocks): a path with room takes the pending
//! packet whose turn comes when its own request would land — the packets the paths
//! answering sooner deliver meanwhile are skipped for them:
//! `offset_i = Σ_{A_j < A_i} (A_i − A_j) · R̂_j / size`. The soonest path (offset 0) takes
//! the head of the queue, lost packets first. A sooner path whose control has cut its full
//! window to a quarter or less of its pipe and of its own recent peak (BBR's ProbeRTT
//! holds 4 packets for 200 ms) counts `cwnd_j / min_rtt_j` instead of `R̂_j`, and a lossy
//! one at most `cwnd_j / srtt_j`: its peak lasts 10 round trips, and the later paths would
//! wait for packets it cannot carry.
//!
//! **End of the queue, with packets left to ask for**: when a path's offset runs past the
//! queue (the task's tail, or the reorder buffer's limit), the sooner paths will drain it
//! by themselves in `pending / Σ min(R̂, cwnd / sRTT)` over the sooner paths. The path takes
//! the last pending packet only if
//! its request lands before they would get to it (the reasoning of ECF, Lim et al. 2017,
//! and BLEST, Ferlin et al. 2016); otherwise it waits, rather than become the packet
//! everything else waits for.

use super::{PathClock, PerCall, Weave};
use crate::scheduler::PathView;

impl Weave {
    /// Packets per second path `p`, delivering `rate`, delivers while a later path's answer
    /// is on its way: its rate, or one window per sRTT if less where the window, not the
    /// rate, is what holds the path back. A window held at 4 packets for 200 ms by BBR's
    /// ProbeRTT, or at 1 after an RTO (a full window cut to a `window_cut_factor`th or less of
    /// its pipe and of its own peak over the last round trips), counts one window per minimum
    /// RTT: it keeps the rate measured before it for 10 round trips, and the later paths
    /// would wait for packets it cannot carry (Pscheduler Fig. 5, 64 kB under BBR). On a path
    /// losing `lossy_path` or more, a loss-based control cuts the window again and again, and
    /// the peak between cuts overstates what it carries (random world 7290 under CUBIC, a
    /// 4 %-loss origin: the first frame 0.87 → 0.72 s, 5 seeds; Kondo's C, OFO a third to
    /// two thirds lower under every control, seeds 301-305). Elsewhere a window below the
    /// peak rate is a control probing (Copa's, `weft`'s), and counting it moved the later
    /// paths' turns with each probe (Pscheduler Fig. 17 under Copa: OFO 2.3 times higher).
    pub(super) fn sooner_rate(&self, state: Option<&PathClock>, rate: f64, p: &PathView) -> f64 {
        let min_rtt = p.min_rtt.as_secs_f64();
        let window = p.cwnd as f64;
        let window_peak = state.and_then(|c| c.window_peak.get()).unwrap_or(0);
        let factor = self.cfg.window_cut_factor;
        let cut = self.cfg.window_cut
            && p.room() == 0
            && factor as f64 * window < rate * min_rtt
            && p.cwnd * factor <= window_peak;
        if cut && min_rtt > 0.0 {
            window / min_rtt
        } else if self.cfg.window_cut && p.loss_rate >= self.cfg.lossy_path {
            rate.min(p.window_rate())
        } else {
            rate
        }
    }

    /// When path `j`'s rate starts to count for the paths answering later: its answer, or,
    /// while it is left idle, the answer of the path carrying its share (the shared queue
    /// gives that path the rate the idle one leaves).
    pub(super) fn counts_from(call: &PerCall, j: usize) -> f64 {
        match call.stand_in.get(j) {
            Some(&Some(k)) => call.at[j].max(call.at[k]),
            _ => call.at[j],
        }
    }

    /// The paths whose rate counts before path `i`'s answer, in index order (not those it
    /// carries itself).
    pub(super) fn sooner_than(call: &PerCall, i: usize) -> impl Iterator<Item = usize> + '_ {
        let at = &call.at;
        (0..at.len()).filter(move |&j| {
            j != i && Self::counts_from(call, j) < at[i] && call.stand_in.get(j).is_none_or(|&k| k != Some(i))
        })
    }

    /// The soonest answer that counts.
    pub(super) fn soonest(call: &PerCall) -> f64 {
        (0..call.at.len())
            .map(|j| Self::counts_from(call, j))
            .fold(f64::INFINITY, f64::min)
    }

    /// Eq. 7 on arrival clocks: packets the paths answering sooner deliver first.
    pub(super) fn offset(call: &PerCall, i: usize) -> u64 {
        let at = &call.at;
        let packets: f64 = Self::sooner_than(call, i)
            .map(|j| (at[i] - Self::counts_from(call, j)) * call.sooner[j])
            .sum();
        // The clocks pass through nanoseconds: a whole number of packets must not floor to one less.
        (packets + 1e-6).floor() as u64
    }

    /// Seconds until the paths answering sooner than `i` have drained `pending` packets, each
    /// at its rate or, if less, at a window per sRTT: what its control lets it carry now
    /// (ECF's estimate of the faster path, Lim et al. 2017). The peak rate is kept for 10
    /// round trips after losses cut the window, and a later path would wait at the tail for
    /// packets the sooner ones cannot carry (CUBIC on lossy paths, random worlds 7004, 7018).
    pub(super) fn drain_time(call: &PerCall, i: usize, pending: u64) -> Option<f64> {
        let rate: f64 = Self::sooner_than(call, i)
            .map(|j| call.sooner[j].min(call.views[j].window_rate()))
            .sum();
        (rate > 0.0).then(|| pending as f64 / rate)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
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
        f.apply(first);
        f.path_mut(0).can_send = false;
        let second = w.next(&f.view()).unwrap();
        // The fast path's next request would land at 11 ms, one packet time after packet 0:
        // offset = (50 − 11) ms · 1000 packets/s = 39 packets past packet 0.
        assert_eq!(
            second,
            Pick {
                path: PathId(1),
                seq: 40
            }
        );
    }

    #[test]
    fn a_burst_on_the_slow_path_interleaves_with_the_fast_one() {
        // The fast path's window is full; the slow one opens 5 requests at once. Their answers
        // come 1 ms apart (1000 packets/s), so each skips one more packet for the fast path
        // than the one before: 40, 42, 44... With one sRTT for all five they would take
        // 40, 41, 42, 43, 44, and the fast path's packets would arrive behind them.
        let mut f = Fixture::new(
            vec![measured(path(0, 10, 10, 10)), measured(path(1, 50, 5, 0))],
            0..1000,
        );
        let mut w = Weave::default();
        let picks = f.run(&mut w);
        assert_eq!(paths_of(&picks), vec![1; 5]);
        assert_eq!(seqs_of(&picks), vec![40, 42, 44, 46, 48]);
    }

    #[test]
    fn a_slow_path_takes_its_turn_near_the_buffers_limit_however_its_answers_vary() {
        // The reorder buffer ends the queue at 50 (the task runs to 1000). The fast path's
        // window is full; the slow one's turn is packet 40, which the fast path (1000
        // packets/s) passes 10 ms before it reaches the limit. Its answers varying by 1 or 5
        // ms, or none yet measured, it takes it: holding a path off the buffer's end left far
        // lossy paths idle for seconds in the random worlds (docs/weave.md, "What went").
        for (deviation, delivered) in [(0.001, 1000), (0.005, 1000), (0.0, 0)] {
            let mut slow = measured(path(1, 50, 5, 0));
            slow.delivered = delivered;
            let mut f = Fixture::new(vec![measured(path(0, 10, 10, 10)), slow], 0..50);
            f.task_end = 1000;
            let mut w = Weave::default();
            w.clock_mut(PathId(1)).deviation = deviation;
            let pick = w.next(&f.view());
            assert_eq!(
                pick.map(|p| p.seq),
                Some(40),
                "deviation {deviation}, delivered {delivered}"
            );
        }
    }

    #[test]
    fn an_answer_that_is_no_rtt_sample_moves_no_deviation() {
        // A 20 ms path asks for 0-3; the request for 0 is declared lost and asked again at
        // 4 ms, behind the other three, and the first request's answer comes at 22 ms:
        // matched to the resend, it is no RTT sample (Karn's rule), nor a sample of the
        // model's error (it would read as the resend answered long before its turn). The
        // same answer as the resend's own sample moves the deviation.
        for (rtt_ms, moved) in [(0, false), (18, true)] {
            let mut f = Fixture::new(vec![path(0, 20, 4, 0)], 0..100);
            let mut w = Weave::default();
            assert_eq!(seqs_of(&f.run(&mut w)), vec![0, 1, 2, 3]);
            w.on_event(
                f.now,
                &SchedEvent::Lost {
                    path: PathId(0),
                    seq: 0,
                },
            );
            f.now = Instant::from_nanos(4_000_000);
            f.lose(0, 0);
            assert_eq!(
                w.next(&f.view()),
                Some(Pick {
                    path: PathId(0),
                    seq: 0
                })
            );
            f.now = Instant::from_nanos(22_000_000);
            w.on_event(f.now, &answer(0, 0, rtt_ms));
            let deviation = w.clocks[&PathId(0)].deviation;
            assert_eq!(deviation > 1e-3, moved, "rtt {rtt_ms} ms: deviation {deviation}");
        }
    }

    #[test]
    fn a_window_cut_far_below_its_pipe_counts_one_window_per_rtt() {
        // The 20 ms path delivers 1000 packets/s, a pipe of 20; the 60 ms path's request lands
        // 40 ms later, when the 20 ms path has delivered 40 more: it takes packet 40. With the
        // 20 ms path's full window cut from 40 to 4 (BBR's ProbeRTT), that path delivers 4
        // per 20 ms, 8 in the 40 ms, and the 60 ms path takes packet 8. A window of 4 all
        // along is the path's rate already, and the measured rate stands.
        let slow_pick = |windows: &[u64]| {
            let mut f = Fixture::new(
                vec![measured(path(0, 20, 40, 40)), measured(path(1, 60, 5, 0))],
                0..1000,
            );
            let mut w = Weave::default();
            f.path_mut(1).can_send = false;
            for &cwnd in windows {
                f.path_mut(0).cwnd = cwnd;
                assert_eq!(w.next(&f.view()), None);
            }
            f.path_mut(1).can_send = true;
            w.next(&f.view()).map(|p| (p.path, p.seq))
        };
        assert_eq!(slow_pick(&[40]), Some((PathId(1), 40)));
        assert_eq!(slow_pick(&[40, 4]), Some((PathId(1), 8)));
        assert_eq!(slow_pick(&[4]), Some((PathId(1), 40)));
    }

    #[test]
    fn a_lossy_sooner_path_counts_at_most_a_window_per_srtt() {
        // The 20 ms path measured 1000 packets/s at its peak, but its window is 4 (200
        // packets/s): losing 5 %, the window is what holds it back, and the 60 ms path's
        // turn is packet 8, not 40. Losing nothing, a window below the peak rate is a control
        // probing, and the peak stands.
        for (loss, expected) in [(0.05, 8), (0.0, 40)] {
            let mut f = Fixture::new(vec![measured(path(0, 20, 4, 4)), measured(path(1, 60, 5, 0))], 0..1000);
            f.path_mut(0).loss_rate = loss;
            let mut w = Weave::default();
            assert_eq!(
                w.next(&f.view()).map(|p| (p.path, p.seq)),
                Some((PathId(1), expected)),
                "loss {loss}"
            );
        }
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
    fn the_sooner_paths_drain_the_tail_at_what_their_windows_carry_now() {
        // 20 packets left. The 10 ms path measured 1000 packets/s, but its window is 2 (200
        // packets/s): it needs about 100 ms for them, and the 50 ms path takes the last one.
        // With a window of 10 it drains them in 20 ms, and the 50 ms path waits.
        for (cwnd, expected) in [(2, Some((PathId(1), 19))), (10, None)] {
            let mut f = Fixture::new(vec![measured(path(0, 10, cwnd, cwnd)), path(1, 50, 10, 0)], 0..20);
            f.path_mut(0).can_send = false;
            let mut w = Weave::default();
            assert_eq!(w.next(&f.view()).map(|p| (p.path, p.seq)), expected, "window {cwnd}");
        }
    }

    #[test]
    fn a_pending_packets_rank_counts_the_holes_first() {
        let holes = [3, 7].into_iter().collect();
        let pending = Pending {
            holes: &holes,
            next_new: 10,
            new_end: 20,
        };
        assert_eq!(pending.rank(7), Some(1));
        assert_eq!(pending.rank(12), Some(4));
        assert_eq!(pending.nth(4), Some(12));
        assert_eq!(pending.rank(5), None);
        assert_eq!(pending.rank(20), None);
    }
}
