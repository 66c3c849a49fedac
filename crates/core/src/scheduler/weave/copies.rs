//! Copies at the task's tail, and before it once the reorder buffer is full.
//!
//! **Tail, everything in flight**: a path asks again for a packet in flight elsewhere if its
//! request would land before the original's modelled answer (with that path's error
//! terms), or, once that answer is overdue (3 more deviations past it, RFC 6298's K = 4:
//! an answer barely late is late, not lost), before the resend would: the holder finds the
//! request lost 9/8 · sRTT after sending it (RFC 9002 §6.1.2, when a later request is there
//! to be answered; its RTO otherwise, and also once that moment has passed with no loss
//! found and no answer due on the path to pass it) and the soonest path asks again. A copy
//! landing later only takes the resend's place, as a packet in flight elsewhere is not
//! asked again when found lost (Pscheduler Fig. 5 at 256 kB: a 90 ms path's copy of a
//! packet lost on the 30 ms one held the cursor 60-120 ms in 5 of 10 runs). A request left
//! for the RTO is copied by the soonest path, a later one copying only while the soonest
//! has no answers due to give it room. The resend may be lost too: each loss of it on the
//! soonest path, losing p, costs that path's time threshold, a geometric number of times
//! (mean p / (1 − p)). Copying anything overdue on a lossy path instead
//! sent a fast lossy origin's overdue tail packets to a 200 ms edge, whose copies the
//! origin, finding them lost, did not ask again: each task's end waited for the edge
//! (random worlds 7065, 7113: aggregation 0.56 → 0.66 and 0.27 → 0.44 under `weft`, 5
//! seeds). On a path losing 1 % or more whose window
//! holds 3 requests or fewer, any request is copied, even one the holder answers first:
//! no 3 later answers can pass a lost one there (RFC 9002 §6.1.1's packet threshold), so
//! its loss shows only by the time threshold or the RTO, and the task's end, with the next
//! task's start, waits for it, while the copier has nothing else to ask. Kondo's C and E
//! (a coupled control holds the 6 %-loss Wi-Fi path at a window of about 2), 20 seeds:
//! stalled time 0.015–0.035 points lower and completion 0.08–0.16 s sooner in all six
//! coupled cells, waste 0.01–0.03 % → 0.03–0.06 %; in any window, the `weft` cells, whose
//! lossy path holds dozens of requests at each tail, finished 0.5 % later (the copies
//! delay the next task's first answers on the copier). Oldest first, each packet once
//! (again after a request of it is lost), copies capped at a small share of requests.
//! Between paths of equal RTT the original is usually the sooner, so the tail is cut
//! without Pscheduler's blanket redundancy or copies that only waste.
//! Before the task's tail, when everything the reorder buffer allows is in flight, the
//! same holds for overdue requests, and requests not overdue yet are copied only off a
//! path losing 1 % or more: a request lost there holds the buffer's cursor until the loss
//! is detected, the buffer fills, and the other paths stall, then refill all at once (MPRD
//! Fig. 7(e), 2 servers under CUBIC: the CDN path idled ~150 ms, then sent 1 100 requests
//! into its 1 000-packet queue). Copying every original there cost Pscheduler Fig. 5's
//! small buffers 4-7 % of their aggregation. A path's loss rate shows nothing before its
//! first answers, and its first window is the burst most likely to be lost whole; the
//! overdue rule covers it (MPRD Fig. 8(a), 64 KB: two of the 10 %-loss edge's first ten
//! requests lost held the CDN at the buffer's limit for 140 ms, until the edge's RTO).
//! The copy rules turn true with time, not only with answers: after a call that picks
//! nothing, the scheduler asks to be called again when the next request it could copy
//! turns overdue (`Scheduler::poll_timeout`), since a path whose last requests are the
//! late ones sees no other event until its RTO.

use super::{PerCall, Weave};
use crate::path::PathId;
use crate::scheduler::{PathView, View};
use crate::time::Instant;

impl Weave {
    /// The earliest modelled answer (before the error terms) of the requests the scheduler
    /// made on `path` that are still in flight; drops the entries of answered and lost
    /// requests it finds at the front, so the ring of answers holds about what is in flight.
    pub(super) fn earliest_answer(&mut self, path: PathId) -> Option<Instant> {
        let state = self.clocks.get_mut(&path)?;
        while let Some(&(at, seq)) = state.answers.peek() {
            if state.predicted.get(seq).is_some_and(|p| p.at == at) {
                return Some(at);
            }
            state.answers.pop();
        }
        None
    }

    /// Before the task's tail, whether `copy_candidate` could find anything: a path losing
    /// `lossy_path` or more, a path whose arrival clock reads zero (a request without a
    /// model is taken to land then), or a request overdue on its path. Otherwise no request
    /// qualifies, and no path with room searches for one (`weave/candidate.rs`): at the
    /// reorder buffer's limit every call would, one search per path.
    pub(super) fn may_copy_before_tail(&mut self, view: &View<'_>, call: &PerCall) -> bool {
        if view.paths.iter().any(|q| q.loss_rate >= self.cfg.lossy_path) || call.at.iter().any(|&at| at <= 0.0) {
            return true;
        }
        let now = view.now.since_epoch().as_secs_f64();
        view.paths.iter().any(|q| {
            // The earliest answer: the others are later.
            self.earliest_answer(q.id)
                .is_some_and(|earliest| self.answer_in(now, q.id, earliest) <= self.overdue_after(q))
        })
    }

    /// Seconds from its modelled answer (0 or less, as `modelled_answer` counts) from which a
    /// request on path `q` counts as overdue for a copy.
    pub(super) fn overdue_after(&self, q: &PathView) -> f64 {
        if q.loss_rate >= self.cfg.lossy_path {
            0.0
        } else {
            -self.cfg.overdue_deviations * self.clocks.get(&q.id).map_or(0.0, |c| c.deviation)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    #[test]
    fn a_tail_packet_is_copied_only_where_it_lands_sooner_or_once_its_answer_is_overdue() {
        // Two equal 10 ms paths, the last packet asked on path 1 at 0 ms: its answer is due
        // at 10 ms. At 5 ms a copy on path 0 would land at 15 ms, after it: no copy. At 20 ms
        // the answer is overdue: path 0 asks again.
        let mut f = Fixture::new(vec![measured(path(0, 10, 10, 0)), measured(path(1, 10, 10, 0))], 0..1);
        f.path_mut(0).can_send = false;
        let mut w = Weave::default();
        assert_eq!(
            f.run(&mut w),
            vec![Pick {
                path: PathId(1),
                seq: 0
            }]
        );
        f.path_mut(0).can_send = true;
        f.now = Instant::from_nanos(5_000_000);
        assert_eq!(w.next(&f.view()), None, "the original lands first");
        f.now = Instant::from_nanos(20_000_000);
        assert_eq!(
            w.next(&f.view()),
            Some(Pick {
                path: PathId(0),
                seq: 0
            }),
            "the original is overdue"
        );
    }

    /// The reorder buffer allows one packet of a 100-packet task; it went to the 40 ms path 1
    /// (loss rate `loss`) at 0 ms, its answer due at 40 ms: does the 10 ms path 0 copy it at
    /// `now_ms`?
    fn copies_a_packet_before_the_task_tail(loss: f64, now_ms: u64) -> Option<Pick> {
        let mut f = Fixture::new(vec![measured(path(1, 40, 10, 0))], 0..1);
        f.task_end = 100;
        let mut w = Weave::default();
        assert_eq!(seqs_of(&f.run(&mut w)), vec![0]);
        // Path 0 comes up once the packet is in flight.
        f.paths.insert(0, measured(path(0, 10, 10, 0)));
        f.path_mut(1).loss_rate = loss;
        f.now = Instant::from_nanos(now_ms * 1_000_000);
        w.next(&f.view())
    }

    /// The task's last `packets` went to the 10 ms path 0 at 0 ms (its RTO `rto_ms`, its loss
    /// rate `loss`, its answers' deviation from the model `deviation` seconds): does the 60 ms
    /// path 1 copy the first one at `now_ms`?
    fn slow_path_copies_a_tail_packet(
        packets: u64,
        rto_ms: u64,
        loss: f64,
        deviation: f64,
        now_ms: u64,
    ) -> Option<Pick> {
        let mut f = Fixture::new(
            vec![measured(path(0, 10, 10, 0)), measured(path(1, 60, 10, 0))],
            0..packets,
        );
        f.path_mut(0).rto = Duration::from_millis(rto_ms);
        f.path_mut(1).can_send = false;
        let mut w = Weave::default();
        assert_eq!(paths_of(&f.run(&mut w)), vec![0; packets as usize]);
        w.clocks.get_mut(&PathId(0)).unwrap().deviation = deviation;
        f.path_mut(0).can_send = false;
        f.path_mut(0).loss_rate = loss;
        f.path_mut(1).can_send = true;
        f.now = Instant::from_nanos(now_ms * 1_000_000);
        w.next(&f.view())
    }

    /// As above, at 15 ms, when the first answer is overdue on a path whose answers do not vary.
    fn slow_path_copies_an_overdue_tail_packet(packets: u64, rto_ms: u64, loss: f64) -> Option<Pick> {
        slow_path_copies_a_tail_packet(packets, rto_ms, loss, 0.0, 15)
    }

    #[test]
    fn an_overdue_tail_packet_is_copied_on_a_slower_path_only_if_its_resend_would_land_later() {
        // With two requests behind it, path 0 finds the first lost at 11.25 ms (9/8 · sRTT)
        // and its resend lands 10 ms later: a copy landing in 60 ms would only replace it.
        assert_eq!(slow_path_copies_an_overdue_tail_packet(3, 30, 0.0), None);
        // Alone in flight, it is found lost by the RTO: at 30 ms the resend would land at
        // 40 ms, still sooner; at 200 ms, 210 ms, and the copy is sooner.
        assert_eq!(slow_path_copies_an_overdue_tail_packet(1, 30, 0.0), None);
        let copy = Some(Pick {
            path: PathId(1),
            seq: 0,
        });
        assert_eq!(slow_path_copies_an_overdue_tail_packet(1, 200, 0.0), copy);
        // On a path losing 5 % the resend may be lost too, once in 19 resends on average,
        // 11.25 ms more each time: it still lands before the copy.
        assert_eq!(slow_path_copies_an_overdue_tail_packet(3, 30, 0.05), None);
        // Losing everything, the resend never lands: copy.
        assert_eq!(slow_path_copies_an_overdue_tail_packet(3, 30, 1.0), copy);
    }

    #[test]
    fn a_request_its_path_has_not_found_lost_by_its_time_threshold_is_copied_first() {
        // The task's last 3 packets went to the 40 ms path 1 (RTO 120 ms) at 0 ms. At 60 ms
        // all are overdue, and past the 45 ms at which path 1's time threshold (9/8 · sRTT)
        // would have found the first two lost had a later answer come: none came, so only
        // the RTO finds them, and the 10 ms path 0 copies the oldest now. (Counting on a
        // resend at once, it copied the last one first.)
        let mut f = Fixture::new(vec![measured(path(1, 40, 10, 0))], 0..3);
        let mut w = Weave::default();
        assert_eq!(paths_of(&f.run(&mut w)), vec![1; 3]);
        f.paths.insert(0, measured(path(0, 10, 10, 0)));
        f.path_mut(1).can_send = false;
        f.now = Instant::from_nanos(60_000_000);
        assert_eq!(
            w.next(&f.view()),
            Some(Pick {
                path: PathId(0),
                seq: 0
            })
        );
    }

    /// The task's last 2 packets went to the 20 ms path 1 (window `cwnd`, loss rate `loss`)
    /// at 0 ms; at 5 ms the 30 ms path 0, whose copy would land after the originals, has
    /// room: does it copy one?
    fn copies_a_tail_packet_its_holder_answers_first(cwnd: u64, loss: f64) -> Option<Pick> {
        let mut f = Fixture::new(vec![measured(path(0, 30, 10, 0)), measured(path(1, 20, cwnd, 0))], 0..2);
        f.path_mut(0).can_send = false;
        let mut w = Weave::default();
        assert_eq!(paths_of(&f.run(&mut w)), vec![1, 1]);
        f.path_mut(1).loss_rate = loss;
        f.path_mut(0).can_send = true;
        f.now = Instant::from_nanos(5_000_000);
        w.next(&f.view())
    }

    #[test]
    fn at_the_tail_a_lossy_window_of_three_or_less_is_copied_even_where_it_answers_first() {
        // Losing 6 % with a window of 2: a loss there shows only by the time threshold or
        // the RTO, and the copier has nothing else to ask.
        assert_eq!(
            copies_a_tail_packet_its_holder_answers_first(2, 0.06),
            Some(Pick {
                path: PathId(0),
                seq: 0
            })
        );
        // A window of 4: three later answers can pass a lost request.
        assert_eq!(copies_a_tail_packet_its_holder_answers_first(4, 0.06), None);
        // A lossless path: its answers come first.
        assert_eq!(copies_a_tail_packet_its_holder_answers_first(2, 0.0), None);
    }

    #[test]
    fn a_tail_packet_barely_overdue_on_a_path_whose_answers_vary_is_not_copied() {
        // Path 0's answers deviate by 2 ms from the model: the last packet's answer, modelled
        // at 12 ms with that deviation, counts as overdue for a copy 3 deviations later, at
        // 18 ms. (Its RTO is 200 ms, so once overdue the 60 ms path's copy lands sooner.)
        let copy_at = |now_ms: u64| slow_path_copies_a_tail_packet(1, 200, 0.0, 0.002, now_ms);
        assert_eq!(copy_at(15), None, "late by less than the answers vary");
        assert_eq!(
            copy_at(20),
            Some(Pick {
                path: PathId(1),
                seq: 0
            })
        );
    }

    #[test]
    fn a_full_buffer_copies_what_a_lossy_path_holds_and_what_is_overdue() {
        // The lost request of a lossy path holds the buffer's cursor: copy it, due or not. On
        // a path that loses nothing a request not due yet is late, not lost: no copy. Overdue
        // (3 deviations past its answer), it is copied if the copy lands before the resend.
        let copy = Some(Pick {
            path: PathId(0),
            seq: 0,
        });
        assert_eq!(copies_a_packet_before_the_task_tail(0.05, 5), copy);
        assert_eq!(copies_a_packet_before_the_task_tail(0.0, 5), None);
        // Alone in flight on path 1 (RTO 120 ms), it is found lost at 120 ms and its resend
        // lands at 130 ms; path 0's copy at 50 ms lands at 60 ms.
        assert_eq!(copies_a_packet_before_the_task_tail(0.0, 50), copy);
    }

    /// Two 10 ms paths and a reorder buffer that allows one packet, sent on path 1 at 0 ms
    /// (its answer modelled at 10 ms); path 0 has room.
    fn one_packet_allowed_in_flight_on_path_1() -> (Fixture, Weave) {
        let mut f = Fixture::new(vec![measured(path(0, 10, 10, 0)), measured(path(1, 10, 10, 0))], 0..1);
        f.task_end = 100;
        f.path_mut(0).can_send = false;
        let mut w = Weave::default();
        assert_eq!(seqs_of(&f.run(&mut w)), vec![0]);
        f.path_mut(0).can_send = true;
        (f, w)
    }

    #[test]
    fn a_full_buffer_skips_the_search_for_copies_until_a_request_can_be_copied() {
        // One packet allowed, in flight on path 1 since 0 ms, due at 10 ms: before then no
        // request qualifies on a path that loses nothing, so no path searches for one.
        let (mut f, mut w) = one_packet_allowed_in_flight_on_path_1();
        let may_copy = |w: &mut Weave, f: &Fixture| {
            let view = f.view();
            let mut call = PerCall::default();
            w.per_call(&view, &mut call);
            w.may_copy_before_tail(&view, &call)
        };
        f.now = Instant::from_nanos(5_000_000);
        assert!(!may_copy(&mut w, &f));
        // Overdue: the search runs, and finds it.
        f.now = Instant::from_nanos(11_000_000);
        assert!(may_copy(&mut w, &f));
        // On a lossy path a request may be copied before it is due.
        f.now = Instant::from_nanos(5_000_000);
        f.path_mut(1).loss_rate = 0.05;
        assert!(may_copy(&mut w, &f));
        // Answered, the request leaves the model: nothing to copy again.
        f.path_mut(1).loss_rate = 0.0;
        w.on_event(f.now, &answer(1, 0, 5));
        assert_eq!(w.earliest_answer(PathId(1)), None);
    }

    #[test]
    fn a_call_that_picks_nothing_asks_to_be_called_when_a_request_turns_overdue() {
        // The buffer allows one packet; it went to path 1 at 0 ms, due at 10 ms. At 5 ms
        // nothing is copied and the scheduler asks for a call just past 10 ms (no answer would
        // come before path 1's RTO at 30 ms); then it copies.
        let (mut f, mut w) = one_packet_allowed_in_flight_on_path_1();
        f.now = Instant::from_nanos(5_000_000);
        assert_eq!(w.next(&f.view()), None);
        let wake = w.poll_timeout().expect("a wake-up");
        assert!(
            wake > Instant::from_nanos(10_000_000) && wake < Instant::from_nanos(10_100_000),
            "{wake:?}"
        );
        f.now = wake;
        assert_eq!(
            w.next(&f.view()),
            Some(Pick {
                path: PathId(0),
                seq: 0
            })
        );
        // Copied: nothing more turns overdue, no wake-up.
        assert_eq!(w.next(&f.view()), None);
        assert_eq!(w.poll_timeout(), None);
    }

    /// Packets 0 and 1, the task's tail, in flight on the 50 ms path 1; the 10 ms path 0 copies
    /// both, oldest first.
    fn a_tail_copied_from_a_slower_path() -> (Fixture, Weave) {
        let mut f = Fixture::new(vec![path(0, 10, 10, 0), path(1, 50, 10, 0)], 0..2);
        for seq in 0..2 {
            f.apply(Pick { path: PathId(1), seq });
        }
        let mut w = Weave::default();
        for seq in 0..2 {
            let pick = w.next(&f.view()).unwrap();
            assert_eq!(pick, Pick { path: PathId(0), seq });
            f.apply(pick);
        }
        (f, w)
    }

    #[test]
    fn copies_a_tail_packet_from_a_slower_path_once() {
        let (f, mut w) = a_tail_copied_from_a_slower_path();
        assert_eq!(w.next(&f.view()), None, "each packet once");
    }

    #[test]
    fn a_copy_found_lost_leaves_its_packet_to_be_copied_again() {
        // Path 0's copy of 0 is found lost: packet 0 has one request out again, on the
        // slower path, so path 0 asks for it once more rather than leave the task's end to
        // path 1's answer.
        let (mut f, mut w) = a_tail_copied_from_a_slower_path();
        f.lose(0, 0);
        w.on_event(
            f.now,
            &SchedEvent::Lost {
                path: PathId(0),
                seq: 0,
            },
        );
        assert_eq!(
            w.next(&f.view()),
            Some(Pick {
                path: PathId(0),
                seq: 0
            })
        );
    }

    #[test]
    fn without_tail_copies_a_free_path_waits_for_the_originals() {
        let mut f = Fixture::new(vec![path(0, 10, 10, 0), path(1, 50, 10, 0)], 0..2);
        f.apply(Pick {
            path: PathId(1),
            seq: 0,
        });
        let mut w = Weave::with_config(WeaveConfig {
            tail_copies: false,
            ..WeaveConfig::default()
        });
        // Packet 1 pending, packet 0 on the slow path: the fast path takes 1, then copies nothing.
        let pick = w.next(&f.view()).unwrap();
        assert_eq!(
            pick,
            Pick {
                path: PathId(0),
                seq: 1
            }
        );
        f.apply(pick);
        assert_eq!(w.next(&f.view()), None);
        assert_eq!(w.poll_timeout(), None, "no copy to wake up for");
    }
}
