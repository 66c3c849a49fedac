//! Finding the request the copy rules (`copies`) pick: a walk over everything in flight, or,
//! where only overdue requests can qualify, each path's ring of modelled answers.

use super::resend::{HolderResend, Resend};
use super::{Weave, sole_holder};
use crate::path::{PACKET_THRESHOLD, PathId};
use crate::scheduler::View;
use crate::time::{Duration, Instant};

/// The copy rules of one decision, for one path with room.
struct CopyRules<'a, 'v> {
    weave: &'a Weave,
    view: &'a View<'v>,
    /// Seconds until each path's answer to a request sent now (`PerCall::at`).
    at: &'a [f64],
    /// Seconds until the soonest path's answer.
    soonest: f64,
    /// The path that would send the copy.
    i: usize,
    before_tail: bool,
    /// `view.now`, seconds since the epoch.
    now: f64,
    /// Paths losing `lossy_path` or more.
    lossy: Vec<PathId>,
    /// The path a resend would go to: the soonest.
    soonest_path: Option<usize>,
    /// That path has answers modelled to come (`Weave::answering`): while it does, it copies
    /// what only an RTO would find lost, sooner than a later path's copy would land.
    resender_answers: bool,
}

impl<'a, 'v> CopyRules<'a, 'v> {
    fn new(weave: &'a Weave, view: &'a View<'v>, at: &'a [f64], soonest: f64, i: usize, before_tail: bool) -> Self {
        let now = view.now.since_epoch().as_secs_f64();
        let soonest_path = (0..at.len()).min_by(|&a, &b| at[a].total_cmp(&at[b]));
        let resender_answers = soonest_path.is_some_and(|j| weave.answering(now, view.paths[j].id));
        CopyRules {
            weave,
            view,
            at,
            soonest,
            i,
            before_tail,
            now,
            lossy: view
                .paths
                .iter()
                .filter(|q| q.loss_rate >= weave.cfg.lossy_path)
                .map(|q| q.id)
                .collect(),
            soonest_path,
            resender_answers,
        }
    }

    fn me(&self) -> PathId {
        self.view.paths[self.i].id
    }

    /// Before the task's tail, with no path losing `lossy_path` or more and every path's
    /// arrival clock past zero (a request without a model is taken to land then), only a
    /// request overdue on its path can qualify.
    fn overdue_only(&self) -> bool {
        self.before_tail && self.lossy.is_empty() && self.at.iter().all(|&a| a > 0.0)
    }

    /// The copy of `seq`, overdue on `path`, lands before its resend would (never resent: a
    /// request the scheduler did not make, or a path outside the view).
    fn before_resend(&self, path: PathId, seq: u64) -> bool {
        let predicted = self.weave.clocks.get(&path).and_then(|c| c.predicted.get(seq));
        self.lands_before(match (predicted, self.holder_resend(path)) {
            (Some(predicted), Some(holder)) => holder.lands(predicted),
            _ => Resend::Never,
        })
    }

    /// The resend model of `path`'s overdue requests (`Weave::holder_resend`).
    fn holder_resend(&self, path: PathId) -> Option<HolderResend> {
        let resender = self.soonest_path.map(|j| &self.view.paths[j]);
        self.weave
            .holder_resend(self.view, self.now, path, self.soonest, resender)
    }

    /// The copy lands before `resend`.
    fn lands_before(&self, resend: Resend) -> bool {
        let at = self.at[self.i];
        match resend {
            Resend::Lands(resent) => at < resent,
            Resend::Never => true,
            Resend::Stuck(resent) => at < resent && (self.soonest_path == Some(self.i) || !self.resender_answers),
        }
    }

    /// Every request in flight, lowest sequence number first, until one qualifies.
    fn walk(&self) -> Option<u64> {
        let (weave, view, at, i) = (self.weave, self.view, self.at, self.i);
        let me = self.me();
        let original_lands = |path: PathId, seq: u64| -> Option<f64> {
            weave
                .modelled_answer(self.now, path, seq)
                .or_else(|| view.paths.iter().position(|p| p.id == path).map(|j| at[j]))
        };
        // At the tail, the lossy paths whose losses show only by the time threshold or the RTO.
        let found_late: Vec<PathId> = view
            .paths
            .iter()
            .filter(|q| !self.before_tail && self.lossy.contains(&q.id) && q.cwnd <= PACKET_THRESHOLD)
            .map(|q| q.id)
            .collect();
        // Once per call, not once per request in flight.
        let overdue_after: Vec<(PathId, f64)> = view.paths.iter().map(|q| (q.id, weave.overdue_after(q))).collect();
        let mut found = None;
        view.scan_in_flight(&mut |seq, copies| {
            if copies == 1 && !weave.copied.contains(&seq) && !view.in_flight_on(seq, me) {
                let mut sooner = false;
                view.in_flight.paths_of(seq, &mut |p| {
                    let overdue_after = overdue_after
                        .iter()
                        .find(|&&(id, _)| id == p)
                        .map_or(0.0, |&(_, after)| after);
                    // Before the tail a request not overdue yet is only copied off a lossy
                    // path: elsewhere its answer is late, not lost.
                    let sooner_copies = !self.before_tail || self.lossy.contains(&p);
                    sooner |= original_lands(p, seq).is_some_and(|lands| {
                        if lands > 0.0 {
                            sooner_copies && (at[i] < lands || found_late.contains(&p))
                        } else if lands > overdue_after {
                            false
                        } else {
                            self.before_resend(p, seq)
                        }
                    })
                });
                if sooner {
                    found = Some(seq);
                    return false;
                }
            }
            true
        });
        found
    }

    /// What `walk` finds when `overdue_only` holds, from the overdue requests alone: those
    /// come first in their path's ring of modelled answers (a binary search finds where they
    /// end), and the lowest sequence number among them in flight there alone, not copied and
    /// copied sooner than resent qualifies. At the reorder buffer's limit the walk ran on
    /// every decision over thousands of requests on loopback. A path outside the view (the
    /// origin-only stretch hides the edges) counts a request overdue once its answer is due,
    /// as the walk does.
    fn in_answer_rings(&self) -> Option<u64> {
        let (weave, view) = (self.weave, self.view);
        let me = self.me();
        let mut found: Option<u64> = None;
        for (id, clock) in weave.clocks.iter().filter(|&(id, _)| id != me) {
            let overdue_after = view.path(id).map_or(0.0, |q| weave.overdue_after(q));
            let (overdue, _) = clock
                .answers
                .split(|at| weave.answer_in(self.now, id, at) <= overdue_after);
            let mut overdue = overdue.peekable();
            if overdue.peek().is_none() {
                continue;
            }
            // Once per path, not once per request (`Resend::Never` outside the view).
            let holder = self.holder_resend(id);
            let resend = |predicted| holder.map_or(Resend::Never, |h| h.lands(predicted));
            for (at, seq) in overdue {
                if found.is_some_and(|f| f <= seq) {
                    continue;
                }
                let Some(predicted) = clock.predicted.get(seq).filter(|p| p.at == at) else {
                    continue;
                };
                if !self.lands_before(resend(predicted)) || view.awaited_copies(seq) != 1 || weave.copied.contains(&seq)
                {
                    continue;
                }
                // The paths holding it, as the walk sees them: a tail loss probe holds its packet
                // on its path without counting among the copies (`Path::record_tail_probe`).
                let (mut on_it, mut on_me) = (false, false);
                view.in_flight.paths_of(seq, &mut |p| {
                    on_it |= p == id;
                    on_me |= p == me;
                });
                if on_it && !on_me {
                    found = Some(seq);
                }
            }
        }
        found
    }
}

impl Weave {
    /// The oldest packet in flight on one path only, not copied before, whose copy on `i`
    /// would land first: before the original's modelled answer (with its path's error terms;
    /// `before_tail`, only on a path losing `lossy_path` or more), or, if that answer is
    /// overdue, before the resend (`HolderResend::lands`). Without a model of the original (a request
    /// the scheduler did not make), before the answer of a request sent now on the original's
    /// path. At the task's tail, any packet on a path losing `lossy_path` or more whose window
    /// holds `PACKET_THRESHOLD` requests or fewer (a loss there is found late). `soonest`:
    /// seconds until the soonest path's answer.
    pub(super) fn copy_candidate(
        &self,
        view: &View<'_>,
        at: &[f64],
        soonest: f64,
        i: usize,
        before_tail: bool,
    ) -> Option<u64> {
        let rules = CopyRules::new(self, view, at, soonest, i, before_tail);
        if rules.overdue_only() {
            rules.in_answer_rings()
        } else {
            rules.walk()
        }
    }

    /// The next moment a request in flight on one path only and not copied turns overdue,
    /// once nothing is pending: `copy_candidate`'s trigger. When the late requests are the
    /// last ones their path holds, no other event comes until that path's RTO.
    pub(super) fn next_overdue(&self, view: &View<'_>) -> Option<Instant> {
        if !view.pending.is_empty() || !self.cfg.tail_copies {
            return None;
        }
        let now = view.now.since_epoch().as_secs_f64();
        let mut earliest = f64::INFINITY;
        // A path's requests turn overdue in the order of their modelled answers: the first
        // not overdue yet that is in flight there alone and not copied is the path's next.
        for (id, clock) in self.clocks.iter() {
            let Some(q) = view.path(id) else {
                continue;
            };
            let overdue_after = self.overdue_after(q);
            let until = |at| self.answer_in(now, id, at) - overdue_after;
            let (_, not_yet) = clock.answers.split(|at| until(at) <= 0.0);
            let next = not_yet.into_iter().find(|&(at, seq)| {
                clock.predicted.get(seq).is_some_and(|p| p.at == at)
                    && view.awaited_copies(seq) == 1
                    && sole_holder(view, seq) == Some(id)
                    && !self.copied.contains(&seq)
            });
            if let Some((at, _)) = next {
                earliest = earliest.min(until(at));
            }
        }
        // Whole microseconds past the moment: a wake that lands on it, rounded down, would
        // find nothing overdue and ask for itself again.
        earliest
            .is_finite()
            .then(|| view.now + Duration::from_micros((earliest * 1e6).ceil() as u64 + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::super::call::PerCall;
    use super::super::test_support::*;
    use super::*;
    use crate::scheduler::testing::xorshift;

    /// `next_overdue` as a walk over everything in flight: the reference.
    fn next_overdue_by_walk(w: &Weave, view: &View<'_>) -> Option<Instant> {
        if !view.pending.is_empty() {
            return None;
        }
        let now = view.now.since_epoch().as_secs_f64();
        let mut earliest = f64::INFINITY;
        view.scan_in_flight(&mut |seq, copies| {
            let holder = sole_holder(view, seq).and_then(|h| view.path(h));
            if let (1, false, Some(q)) = (copies, w.copied.contains(&seq), holder) {
                if let Some(lands) = w.modelled_answer(now, q.id, seq) {
                    let until = lands - w.overdue_after(q);
                    if until > 0.0 {
                        earliest = earliest.min(until);
                    }
                }
            }
            true
        });
        earliest
            .is_finite()
            .then(|| view.now + Duration::from_micros((earliest * 1e6).ceil() as u64 + 1))
    }

    #[test]
    fn the_answers_rings_find_what_the_walk_over_everything_in_flight_finds() {
        // Three paths at a 64-packet reorder buffer's limit, answers coming 0.5 to 3 RTTs
        // after their requests and 3 % of them lost: whenever only overdue requests can
        // qualify, every path's candidate from the rings is the walk's, and so is the next
        // moment one turns overdue.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let (mut compared, mut found, mut wakes) = (0, 0, 0);
        for _ in 0..12 {
            let rtts = [10, 25, 60];
            let paths = (0..3)
                .map(|p| measured(path(p, rtts[p as usize], 4 + xorshift(&mut x) % 24, 0)))
                .collect();
            let mut f = Fixture::new(paths, 0..64);
            f.task_end = 1_000_000;
            let mut w = Weave::default();
            let mut flying: Vec<(u64, u32, Instant, Duration)> = Vec::new();
            for _ in 0..300 {
                for pick in f.run(&mut w) {
                    let rtt = Duration::from_millis(rtts[pick.path.0 as usize]);
                    let late = Duration::from_micros(rtt.as_micros() as u64 * (xorshift(&mut x) % 250) / 100);
                    flying.push((pick.seq, pick.path.0, f.now, rtt / 2 + late));
                }
                let view = f.view();
                let mut call = PerCall::default();
                w.per_call(&view, &mut call);
                let soonest = Weave::soonest(&call);
                for i in 0..view.paths.len() {
                    let rules = CopyRules::new(&w, &view, &call.at, soonest, i, true);
                    if rules.overdue_only() {
                        let walked = rules.walk();
                        assert_eq!(rules.in_answer_rings(), walked, "path {i} at {:?}", view.now);
                        compared += 1;
                        found += usize::from(walked.is_some());
                    }
                }
                let wake = w.next_overdue(&view);
                assert_eq!(wake, next_overdue_by_walk(&w, &view), "at {:?}", view.now);
                wakes += usize::from(wake.is_some());
                f.now += Duration::from_micros(xorshift(&mut x) % 8_000);
                let now = f.now;
                flying.retain(|&(seq, p, sent, takes)| {
                    if now < sent + takes {
                        return true;
                    }
                    let duplicate = f.received(seq);
                    if !duplicate && xorshift(&mut x) % 100 < 3 {
                        f.lose(seq, p);
                        w.on_event(now, &SchedEvent::Lost { path: PathId(p), seq });
                    } else {
                        f.arrive(seq, p);
                        let rtt = now - sent;
                        w.on_event(
                            now,
                            &SchedEvent::Arrived {
                                path: PathId(p),
                                seq,
                                rtt,
                                duplicate,
                            },
                        );
                    }
                    false
                });
                f.new_end = f.new_end.max(f.cursor + 64);
            }
        }
        assert!(
            compared > 1000 && found > 50 && wakes > 50,
            "{compared} {found} {wakes}"
        );
    }
}
