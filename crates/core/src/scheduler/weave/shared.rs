//! The pairwise shared-queue trial (`shared_line` off): a later path in a sooner one's queue idles.
//!
//! **Shared bottleneck**: a path whose answers take at least twice the minimum RTT of a
//! sooner one, and whose queueing delay moves with that path's at the same scale
//! (coherence ≥ 0.9, `estimate::shared`) while the sooner path's peak covers what both
//! carry, waits in the same queue: it adds no rate, only packets that arrive out of order.
//! Once it carries a tenth of the pair's rate or more (enough to measure), it is left idle
//! for a trial of 8 of the sooner path's RTTs; if the sooner path then carries 90 % of
//! what both carried, the later one stays idle while the sooner answers sooner (it takes
//! over if the sooner fails or falls behind); otherwise the pair is not suspected again
//! (two separate links the same requests fill at once, which the coherence alone cannot
//! tell apart). While a path is idle, Eq. 7 counts its rate from the kept path's answer
//! on (the queue gives the kept path what the idle one leaves), so no path skips packets
//! for it that it will not ask for; weave is called back when the trial ends, even with
//! nothing in flight.
//! One trial at a time per queue: a pair is tried only while neither path is in another
//! trial, the later path keeps none idle and the sooner is idle in no one's place. Several
//! paths behind one access line share one rate, and trials run at once each credited the
//! kept path's gain to themselves: on `scenarios/shared-access.toml` (four edges behind a
//! 12 Mbit/s line) the three later edges were left idle together behind the near edge, whose
//! own 8 Mbit/s link could not carry their shares (`weft`, seed 1: aggregation 0.808, 0.974
//! with one trial at a time), or tried behind an edge that was itself idle.

use super::{PerCall, Weave};
use crate::path::PathId;
use crate::scheduler::{PathView, View};
use crate::time::Instant;

/// Two paths found to wait in one queue: the sooner is kept, the other left idle.
#[derive(Debug, Clone, Copy)]
pub(super) enum Sharing {
    /// Since `since`; the kept path must then carry `needed` packets per second (a share of
    /// what both carried).
    Trial {
        keep: PathId,
        since: Instant,
        needed: f64,
    },
    Confirmed {
        keep: PathId,
    },
}

impl Weave {
    /// Path `i` waits in the queue of a path kept in its place (see the module's doc).
    pub(super) fn shadowed(&mut self, view: &View<'_>, call: &PerCall, i: usize) -> bool {
        if self.cfg.shared_line {
            return self.line_shadowed(view, call, i);
        }
        let at = &call.at;
        let me = &view.paths[i];
        let answered = |p: &PathView| self.clocks.get(&p.id).and_then(|c| c.last_round_rate).unwrap_or(0.0);
        for (j, kept) in view.paths.iter().enumerate() {
            // With no pair taken or on trial, only a path answering no later than this one
            // can shadow it: the others are passed before any hashing.
            if j == i || (self.sharing.is_empty() && at[j] > at[i]) {
                continue;
            }
            let pair = (me.id.min(kept.id), me.id.max(kept.id));
            // Most downloads never suspect a pair: no hashing then.
            if !self.separate.is_empty() && self.separate.contains(&pair) {
                continue;
            }
            let sharing = if self.sharing.is_empty() {
                None
            } else {
                self.sharing.get(&pair).copied()
            };
            match sharing {
                Some(Sharing::Confirmed { keep }) => {
                    // Only while the kept path answers sooner: it may fail or fall behind.
                    if keep == kept.id && at[j] <= at[i] {
                        return true;
                    }
                }
                Some(Sharing::Trial { keep, since, needed }) if keep == kept.id => {
                    if view.now < self.trial_end_of(view, keep, since) {
                        return true;
                    }
                    if answered(kept) >= needed {
                        self.sharing.insert(pair, Sharing::Confirmed { keep });
                        self.sharing_moved = true;
                        return true;
                    }
                    self.sharing.remove(&pair);
                    self.separate.insert(pair);
                    self.sharing_moved = true;
                }
                Some(Sharing::Trial { .. }) => {}
                None => {
                    let later = at[j] <= at[i]
                        && me.min_rtt.as_secs_f64() >= self.cfg.shared_rtt_ratio * kept.min_rtt.as_secs_f64();
                    // Evaluated last: most pairs fail a cheaper test first.
                    let coherent = || {
                        self.queues
                            .coherence(me.id, kept.id)
                            .is_some_and(|c| c >= self.cfg.shared_coherence)
                            && self
                                .queues
                                .deviations(me.id, kept.id)
                                .is_some_and(|(a, b)| a.min(b) >= self.cfg.shared_queue_floor)
                    };
                    // The two carry no more than the kept path has carried alone (half of
                    // this path's rate is the margin), this path carries enough of it for the
                    // trial to measure, and there is work to carry.
                    if !later {
                        continue;
                    }
                    let (mine, theirs) = (answered(me), answered(kept));
                    let no_gain = theirs + self.cfg.shared_headroom * mine <= call.rate[j];
                    let measurable = theirs > 0.0 && mine > 0.0 && mine >= self.cfg.shared_min_share * (mine + theirs);
                    if no_gain
                        && measurable
                        && !view.pending.is_empty()
                        && self.free_for_a_trial(kept.id, me.id)
                        && coherent()
                    {
                        self.sharing_moved = true;
                        self.sharing.insert(
                            pair,
                            Sharing::Trial {
                                keep: kept.id,
                                since: view.now,
                                needed: self.cfg.shared_confirm * (mine + theirs),
                            },
                        );
                        return true;
                    }
                }
            }
        }
        false
    }

    /// Marks in `call.stand_in` each path a running pairwise trial leaves idle, with the kept
    /// path that carries its share. (A confirmed pair idles its path only while the kept one
    /// answers sooner, so Eq. 7 counts it after the kept path's answer anyway.)
    pub(super) fn mark_stand_ins(&self, view: &View<'_>, call: &mut PerCall) {
        let mut stand_in = std::mem::take(&mut call.stand_in);
        stand_in.clear();
        stand_in.resize(view.paths.len(), None);
        if self.cfg.shared_trial && !self.cfg.shared_line {
            let index = |id: PathId| view.paths.iter().position(|p| p.id == id);
            for (&(a, b), sharing) in &self.sharing {
                let Sharing::Trial { keep, since, .. } = *sharing else {
                    continue;
                };
                let other = if keep == a { b } else { a };
                if view.now < self.trial_end_of(view, keep, since)
                    && let (Some(k), Some(o)) = (index(keep), index(other))
                {
                    stand_in[o] = Some(k);
                }
            }
        }
        call.stand_in = stand_in;
    }

    /// When a trial that keeps `keep` since `since` ends.
    fn trial_end_of(&self, view: &View<'_>, keep: PathId, since: Instant) -> Instant {
        let srtt = view.path(keep).map_or(0.0, |p| p.srtt.as_secs_f64());
        since + crate::time::Duration::from_secs_f64(self.cfg.shared_trial_rtts * srtt)
    }

    /// The end of the soonest running pairwise trial.
    pub(super) fn trial_end(&self, view: &View<'_>) -> Option<Instant> {
        self.sharing
            .values()
            .filter_map(|sharing| match *sharing {
                Sharing::Trial { keep, since, .. } => Some(self.trial_end_of(view, keep, since)),
                Sharing::Confirmed { .. } => None,
            })
            .filter(|&end| end > view.now)
            .min()
    }

    /// Neither path is part of another trial, `idle` keeps no path idle and `keep` is idle
    /// in no path's place. One queue has one rate to share: trials that run at once, or a
    /// kept path that is itself left idle, measure each other's shares (see the module's doc).
    fn free_for_a_trial(&self, keep: PathId, idle: PathId) -> bool {
        self.sharing.iter().all(|(&(a, b), sharing)| {
            let (kept, trial) = match *sharing {
                Sharing::Trial { keep, .. } => (keep, true),
                Sharing::Confirmed { keep } => (keep, false),
            };
            let left_idle = if kept == a { b } else { a };
            let involved = |p: PathId| p == a || p == b;
            !involved(idle) && left_idle != keep && !(trial && kept == keep)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    /// A 10 ms path (full window, 1500 packets/s peak) and a 30 ms one, answered for 400 ms:
    /// the fast one at 1000 packets/s, the slow one at 200, their RTTs `fast_queue(bin)` and
    /// `slow_queue(bin)` ms above their minimum in each 10 ms bin. Then, for 100 ms, the fast
    /// path alone at `trial_rate`. Returns the picks the slow path makes at 400 ms (the start
    /// of the trial, if any) and at 500 ms (after it).
    fn slow_path_picks_beside_a_queue(
        fast_queue: impl Fn(u64) -> f64,
        slow_queue: impl Fn(u64) -> f64,
        trial_rate: f64,
    ) -> (Option<Pick>, Option<Pick>) {
        let mut fast = path(0, 10, 10, 10);
        fast.delivery_rate = Some(1_500_000.0);
        let mut f = Fixture::new(vec![fast, measured(path(1, 30, 10, 0))], 0..1000);
        let mut w = Weave::with_config(pairwise());
        w.update_peaks(&f.view());
        let mut answers: Vec<(u64, u32, f64)> = Vec::new();
        for us in (0..400_000).step_by(1000) {
            answers.push((us, 0, 10.0 + fast_queue(us / 10_000)));
        }
        for us in (0..400_000).step_by(5000) {
            answers.push((us + 500, 1, 30.0 + slow_queue(us / 10_000)));
        }
        for us in (400_000..500_000).step_by((1e6 / trial_rate) as usize) {
            answers.push((us, 0, 10.0));
        }
        answers.sort_by_key(|a| a.0);
        let mut picks = Vec::new();
        for (seq, (us, p, rtt_ms)) in (5000..).zip(answers) {
            if us >= 400_000 && picks.is_empty() {
                f.now = Instant::from_nanos(400_000_000);
                picks.push(w.next(&f.view()));
            }
            let rtt = Duration::from_secs_f64(rtt_ms / 1e3);
            w.on_event(
                Instant::from_nanos(us * 1000),
                &SchedEvent::Arrived {
                    path: PathId(p),
                    seq,
                    rtt,
                    duplicate: false,
                },
            );
        }
        f.now = Instant::from_nanos(500_000_000);
        picks.push(w.next(&f.view()));
        (picks[0], picks[1])
    }

    /// The pairwise trial in place of the set trial.
    fn pairwise() -> WeaveConfig {
        WeaveConfig {
            shared_line: false,
            ..WeaveConfig::default()
        }
    }

    #[test]
    fn a_path_left_idle_for_a_trial_leaves_the_task_tail_to_the_others_and_is_called_back_when_it_ends() {
        // The 10 ms path is left idle while the 50 ms one is on trial; three packets are left
        // at the task's tail. Counted in Eq. 7's sums, the idle path would take all three
        // before the 30 ms path's request landed, so no path asked for them, and with nothing
        // in flight no one called the scheduler again.
        let paths = vec![
            measured(path(0, 10, 10, 0)),
            measured(path(1, 30, 10, 0)),
            measured(path(2, 50, 10, 0)),
        ];
        let mut f = Fixture::new(paths, 0..3);
        let mut w = Weave::with_config(pairwise());
        let trial = Sharing::Trial {
            keep: PathId(2),
            since: Instant::ZERO,
            needed: 1.0,
        };
        w.sharing.insert((PathId(0), PathId(2)), trial);
        let pick = w.next(&f.view()).expect("the tail is asked for");
        assert_eq!((pick.path, pick.seq), (PathId(1), 0));
        // With the other two paths' windows full, nothing is picked until the trial ends at
        // 8 of the kept path's 50 ms RTTs.
        f.path_mut(1).in_flight = 10;
        f.path_mut(1).can_send = false;
        f.path_mut(2).in_flight = 10;
        f.path_mut(2).can_send = false;
        f.now = Instant::from_nanos(1_000_000);
        assert_eq!(w.next(&f.view()), None);
        assert_eq!(w.poll_timeout(), Some(Instant::from_nanos(400_000_000)));
    }

    /// A queueing delay that moves 0-4 ms in a 50 ms cycle.
    fn saw(bin: u64) -> f64 {
        (bin % 5) as f64
    }

    #[test]
    fn a_slower_path_in_the_same_queue_is_left_idle_once_the_sooner_one_carries_its_share() {
        // One queue: the slow path waits while the fast path is on trial, and after it, as the
        // fast path then carried 1200 answers a second (the 1200 both carried before).
        let (at_start, after) = slow_path_picks_beside_a_queue(saw, saw, 1200.0);
        assert_eq!(at_start, None);
        assert_eq!(after, None);
        // The fast path could not take the slow one's share: they are not one bottleneck.
        let (at_start, after) = slow_path_picks_beside_a_queue(saw, saw, 800.0);
        assert_eq!(at_start, None);
        assert_eq!(after.map(|p| p.path), Some(PathId(1)));
        // Separate queues (the slow one's moves on another rhythm): no trial at all.
        let (at_start, _) = slow_path_picks_beside_a_queue(saw, |bin| ((bin * 7) % 3) as f64, 1200.0);
        assert_eq!(at_start.map(|p| p.path), Some(PathId(1)));
    }

    #[test]
    fn a_second_path_is_not_tried_behind_one_already_on_trial() {
        // The fast path (full window, 1500 packets/s peak) answers 1000 packets/s, two later
        // paths 200 each, all three queueing delays on one saw: both later ones qualify for a
        // trial behind the fast one. The first is left idle; the second, tried at once, would
        // credit the fast path's gain from the first's share to itself: it keeps its requests
        // until the first trial ends.
        let mut fast = path(0, 10, 10, 10);
        fast.delivery_rate = Some(1_500_000.0);
        let f = Fixture::new(
            vec![fast, measured(path(1, 30, 10, 0)), measured(path(2, 40, 10, 0))],
            0..1000,
        );
        let mut w = Weave::with_config(pairwise());
        w.update_peaks(&f.view());
        let mut answers: Vec<(u64, u32, f64)> = Vec::new();
        for us in (0..400_000).step_by(1000) {
            answers.push((us, 0, 10.0 + saw(us / 10_000)));
        }
        for (p, rtt) in [(1, 30.0), (2, 40.0)] {
            for us in (0..400_000).step_by(5000) {
                answers.push((us + 500 * u64::from(p), p, rtt + saw(us / 10_000)));
            }
        }
        answers.sort_by_key(|a| a.0);
        for (seq, (us, p, rtt_ms)) in (5000..).zip(answers) {
            w.on_event(
                Instant::from_nanos(us * 1000),
                &SchedEvent::Arrived {
                    path: PathId(p),
                    seq,
                    rtt: Duration::from_secs_f64(rtt_ms / 1e3),
                    duplicate: false,
                },
            );
        }
        let mut f = f;
        f.now = Instant::from_nanos(400_000_000);
        assert_eq!(w.next(&f.view()).map(|p| p.path), Some(PathId(2)));
    }
}
