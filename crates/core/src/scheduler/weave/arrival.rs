//! The arrival model: when the answer to a request sent now on each path comes.
//!
//! **Arrival clock**: a request sent now on path i is answered after the path's minimum
//! RTT, or after the requests already queued on it, whichever is later, plus what the
//! answers have shown this model to miss:
//! `A_i = max(min_rtt_i, clock_i − now + 1/R̂_i) + L_i + ē_i + d̄_i`, with `clock_i` the
//! modelled answer to the path's latest request, `R̂_i` its peak rate over the last 10
//! round trips (the bottleneck's rate; a windowed maximum, as BBR's bandwidth filter, so
//! an aged-out peak gives way to the best rate since; a round trip its own queue stretched
//! counts at most 4 minimum RTTs or 200 ms), sampled from the delivery rate
//! (Eq. 5) and from the rate each round trip's answers came at, which shows within one RTT
//! what Eq. 5's window of answers shows seconds later,
//! `L_i` Eq. 6's loss penalty (E − sRTT), on every answer, queued or not, but not in the
//! clock the next request queues behind (a request behind a queue is as likely lost; a
//! penalty chained into the clock made answers come early against the model, and the
//! error term learnt it away: Kondo's C, 20 seeds, 0.7–0.85 fewer underflows under LIA,
//! OLIA and BALIA; MPRD Fig. 8(a), (c), an edge losing 10 %, OFO and waiting time 22–32 %
//! lower), and `ē_i`, `d̄_i` the smoothed error of the model
//! against the measured answers and its mean deviation (RFC 6298 §2's SRTT and RTTVAR
//! estimators, gain 1/4, applied to the error). A burst of requests (a task's start, a
//! window opening) is answered over `n/R̂`, not all after one sRTT (before a peak is kept,
//! `R̂` is Eq. 5's stand-in, a window per sRTT); the error term carries
//! what the model cannot see (delay jitter, a queue other traffic builds), and the
//! deviation moves a jittery path's packets later in the order, because an answer that
//! comes late holds back everything the other paths delivered behind it, while one that
//! comes early only waits itself.

use super::seqmap::SeqMap;
use super::{Prediction, Weave, WeaveConfig, min_of};
use crate::estimate::{FullPipe, WindowedMax, expected_transmission_time};
use crate::path::PathId;
use crate::scheduler::PathView;
use crate::time::{Duration, Instant};
use std::collections::VecDeque;

/// Seconds until the answer to a request that meets no queue on path `p`: its minimum RTT
/// plus Eq. 6's loss penalty (E − sRTT), the loss rate taken at most `max_loss`.
#[inline]
pub(super) fn unqueued_answer(p: &PathView, max_loss: f64) -> f64 {
    (p.min_rtt + penalty(p, max_loss)).as_secs_f64()
}

/// `unqueued_answer` and Eq. 6's loss penalty on path `p` (E − sRTT), in seconds: what its
/// losses add to an answer on average, queued or not. One penalty for both: each call
/// computes them for each path whose view changed.
#[inline]
pub(super) fn answer_and_penalty(p: &PathView, max_loss: f64) -> (f64, f64) {
    let penalty = penalty(p, max_loss);
    ((p.min_rtt + penalty).as_secs_f64(), penalty.as_secs_f64())
}

/// Eq. 6's E on path `p`, its loss rate taken at most `max_loss`: the loss-event
/// rate moves only with the path's answers, and a path that lost every request it was sent
/// (a server down for a moment, its first window lost whole) has a rate of 1, an E without
/// end and, asked nothing more, no answer that could bring it down: random world 7018 under
/// BBR, a 64 Mbit/s edge whose server restarted at 0.3 s idle for the rest of the download.
#[inline]
pub(super) fn expected_time(p: &PathView, max_loss: f64) -> Duration {
    if p.loss_rate > max_loss {
        expected_transmission_time(p.srtt, p.rto, max_loss)
    } else {
        p.expected_time
    }
}

#[inline]
fn penalty(p: &PathView, max_loss: f64) -> Duration {
    expected_time(p, max_loss).saturating_sub(p.srtt)
}

/// What `weave` keeps of each path, indexed by the path's id: a download numbers its paths
/// from 0 and never reuses an id, so the ids are small, and a lookup is an index, not a hash
/// (several per path and decision).
#[derive(Debug, Default)]
pub(super) struct Clocks(Vec<Option<PathClock>>);

impl Clocks {
    #[inline]
    pub(super) fn get(&self, path: &PathId) -> Option<&PathClock> {
        self.0.get(path.0 as usize)?.as_ref()
    }

    /// Path `path`'s clock, to change: its version moves on (`PathClock::version`).
    #[inline]
    pub(super) fn get_mut(&mut self, path: &PathId) -> Option<&mut PathClock> {
        let clock = self.0.get_mut(path.0 as usize)?.as_mut()?;
        clock.version += 1;
        Some(clock)
    }

    /// Path `path`'s clock, for a caller that changes nothing `PerCall` reads (the modelled
    /// answers of its requests): its version stays.
    #[inline]
    pub(super) fn get_mut_unversioned(&mut self, path: &PathId) -> Option<&mut PathClock> {
        self.0.get_mut(path.0 as usize)?.as_mut()
    }

    /// Path `path`'s clock, a new one if none is kept, to change: its version moves on.
    #[inline]
    pub(super) fn entry(&mut self, path: PathId, cfg: &WeaveConfig) -> &mut PathClock {
        let clock = self.entry_unversioned(path, cfg);
        clock.version += 1;
        clock
    }

    /// As `entry`, for a caller that moves the version on itself if it changes anything.
    /// Inlined: `update_peaks` calls it for every path on every call.
    #[inline]
    pub(super) fn entry_unversioned(&mut self, path: PathId, cfg: &WeaveConfig) -> &mut PathClock {
        let i = path.0 as usize;
        if self.0.len() <= i {
            self.0.resize_with(i + 1, || None);
        }
        self.0[i].get_or_insert_with(|| PathClock::new(cfg))
    }

    /// Every path's clock, with the path's id.
    pub(super) fn iter(&self) -> impl Iterator<Item = (PathId, &PathClock)> {
        let id = |i: usize| PathId(u32::try_from(i).expect("path ids are u32"));
        self.0
            .iter()
            .enumerate()
            .filter_map(move |(i, c)| c.as_ref().map(|c| (id(i), c)))
    }

    pub(super) fn remove(&mut self, path: &PathId) {
        if let Some(clock) = self.0.get_mut(path.0 as usize) {
            *clock = None;
        }
    }
}

#[cfg(test)]
impl std::ops::Index<&PathId> for Clocks {
    type Output = PathClock;
    fn index(&self, path: &PathId) -> &PathClock {
        self.get(path).expect("a clock kept for the path")
    }
}

/// What `weave` keeps of one path.
#[derive(Debug, Default)]
pub(super) struct PathClock {
    /// Peak delivery rate (bytes per second) over the last `peak_window_rtts` round trips.
    pub(super) peak: WindowedMax<f64>,
    /// Largest congestion window (packets) over the same round trips.
    pub(super) window_peak: WindowedMax<u64>,
    /// Modelled answer to the latest request, before the error terms.
    pub(super) clock: Option<Instant>,
    /// Smoothed seconds the answers came after the model's prediction (negative: before).
    pub(super) error: f64,
    /// Smoothed mean deviation of the answers' error from `error`.
    pub(super) deviation: f64,
    /// RTT the pipe cap is sized by, when measured larger than the minimum (seconds).
    pub(super) pipe_rtt: Option<f64>,
    /// The round trip under way.
    pub(super) round: Option<Round>,
    /// RTT that could size the pipe cap (`Round::pipe_rtt`), from the last complete round
    /// trip that had one.
    pub(super) last_round_pipe_rtt: Option<f64>,
    /// Rate of the last complete round trip's answers (packets per second).
    pub(super) last_round_rate: Option<f64>,
    /// BBR's full-pipe test on the round trips' answer rates (packets per second): once
    /// full, the path's start-up is over, for good.
    pub(super) startup: FullPipe,
    /// Smallest RTT sample (seconds): the queueing delay is measured above it.
    pub(super) least_rtt: Option<f64>,
    /// The modelled answer of each request in flight on the path, by sequence number.
    pub(super) predicted: SeqMap<Prediction>,
    /// The modelled answers of the path's requests, earliest on top, with the requests'
    /// sequence numbers; entries no longer in `predicted` are dropped when they reach the top
    /// (`Weave::earliest_answer`).
    pub(super) answers: Answers,
    /// What `peak` and `window_peak` were last updated with (now, rate, sRTT, window): an
    /// update with the same again changes neither, and is skipped (`Weave::update_peaks`).
    pub(super) peaks_updated: Option<(Instant, f64, Duration, u64)>,
    /// Losses declared on the path since its last answer, of requests sent after the latest
    /// one answered: no answer behind them, so no packet or time threshold (RFC 9002 §6.1)
    /// can declare them, only the timeout.
    pub(super) loss_run: u64,
    /// The longest such run that took every request the path had in flight
    /// (`WeaveConfig::loss_bursts`).
    pub(super) loss_burst: u64,
    /// Send order (`Weave::requests`) of the latest-sent request answered on the path.
    pub(super) answered_order: u64,
    /// While requests sent to the path with nothing in flight await its first answer, the
    /// earliest its next request may go (`WeaveConfig::idle_pacing`).
    pub(super) paced_until: Option<Instant>,
    /// Moves on with every change to the clock: `PerCall` recomputes a path's values only when
    /// its view or its clock's version changed (or the time).
    pub(super) version: u64,
}

/// Modelled answers and their requests' sequence numbers, earliest first (by answer, then
/// number): a min-heap's order, kept sorted in a ring. The model puts a request's answer after
/// the path's latest one (its clock), so a push goes to the back and a pop takes the front,
/// where a `BinaryHeap` sifted on each (about 60 instructions an answer).
#[derive(Debug, Default)]
pub(super) struct Answers(VecDeque<(Instant, u64)>);

impl Answers {
    #[inline]
    pub(super) fn push(&mut self, at: Instant, seq: u64) {
        let entry = (at, seq);
        if self.0.back().is_none_or(|&last| last <= entry) {
            self.0.push_back(entry);
        } else {
            let place = self.0.partition_point(|&e| e <= entry);
            self.0.insert(place, entry);
        }
    }

    /// The earliest.
    #[inline]
    pub(super) fn peek(&self) -> Option<&(Instant, u64)> {
        self.0.front()
    }

    /// Drops the earliest.
    #[inline]
    pub(super) fn pop(&mut self) {
        self.0.pop_front();
    }

    /// The entries split where `first(answer)` stops holding, which it must do once and for
    /// good (a test monotone in the answer): the entries before, earliest first, and those
    /// after. A binary search.
    pub(super) fn split(
        &self,
        first: impl Fn(Instant) -> bool,
    ) -> (
        impl Iterator<Item = (Instant, u64)> + '_,
        impl Iterator<Item = (Instant, u64)> + '_,
    ) {
        let end = self.0.partition_point(|&(at, _)| first(at));
        (self.0.range(..end).copied(), self.0.range(end..).copied())
    }
}

/// One round trip of a path's answers: it lasts its smallest RTT sample.
#[derive(Debug, Clone, Copy)]
pub(super) struct Round {
    pub(super) start: Instant,
    /// Smallest RTT sample so far (seconds).
    pub(super) least: f64,
    /// Smallest RTT sample so far of a request the model queued behind less than
    /// `pipe_sample_queue` of it (seconds).
    pub(super) least_unqueued: Option<f64>,
    /// Sum and count of those samples.
    pub(super) unqueued_sum: f64,
    pub(super) unqueued_count: u32,
    /// Answers after the first.
    pub(super) answers: u64,
}

impl PathClock {
    pub(super) fn new(cfg: &WeaveConfig) -> Self {
        PathClock {
            startup: FullPipe::new(cfg.startup_growth, cfg.startup_flat_rounds),
            ..PathClock::default()
        }
    }

    /// Seconds added to the model's prediction.
    pub(super) fn shift(&self) -> f64 {
        self.error + self.deviation
    }

    /// Folds an answer's RTT sample into the round trip it belongs to; a round trip lasts its
    /// smallest RTT sample.
    pub(super) fn on_rtt_sample(&mut self, now: Instant, rtt: f64, queued: f64, cfg: &WeaveConfig) {
        // A request sent behind a queue the model expected (a task's first burst, a window
        // opening) measures that queue, not the path: it says nothing about the pipe.
        let unqueued = (queued <= cfg.pipe_sample_queue * rtt).then_some(rtt);
        let fresh = Round {
            start: now,
            least: rtt,
            least_unqueued: unqueued,
            unqueued_sum: unqueued.unwrap_or(0.0),
            unqueued_count: u32::from(unqueued.is_some()),
            answers: 0,
        };
        match self.round.as_mut() {
            Some(round) if (now - round.start).as_secs_f64() < round.least => {
                round.least = round.least.min(rtt);
                round.least_unqueued = min_of(round.least_unqueued, unqueued);
                round.unqueued_sum += unqueued.unwrap_or(0.0);
                round.unqueued_count += u32::from(unqueued.is_some());
                round.answers += 1;
            }
            Some(round) => {
                // This answer closes the round trip: it counts in it.
                if let Some(rtt) = round.pipe_rtt(cfg.jitter_spread) {
                    self.last_round_pipe_rtt = Some(rtt);
                }
                let rate = (round.answers + 1) as f64 / (now - round.start).as_secs_f64();
                self.last_round_rate = Some(rate);
                self.on_round_rate(rate);
                self.round = Some(fresh);
            }
            None => self.round = Some(fresh),
        }
    }

    /// The path has nothing in flight after the answer at `now` (`WeaveConfig::idle_rounds`):
    /// the round trip under way ends with it, if it holds at least `idle_round_answers`
    /// answers after the first, so that the time the path then idles counts in no round
    /// trip's rate. A burst's answers then measure the rate they came at (packet-train
    /// dispersion, Dovrolis et al., "Packet-Dispersion Techniques and a Capacity-Estimation
    /// Methodology", IEEE/ACM ToN 2004), not the burst over the idle gap after it.
    pub(super) fn on_idle(&mut self, now: Instant, cfg: &WeaveConfig) {
        let min_answers = cfg.idle_round_answers;
        let Some(round) = self.round else { return };
        let elapsed = (now - round.start).as_secs_f64();
        if round.answers < min_answers.max(1) || elapsed <= 0.0 {
            return;
        }
        if let Some(rtt) = round.pipe_rtt(cfg.jitter_spread) {
            self.last_round_pipe_rtt = Some(rtt);
        }
        let rate = round.answers as f64 / elapsed;
        self.last_round_rate = Some(rate);
        self.on_round_rate(rate);
        self.round = None;
    }

    /// Folds the error of a modelled answer into the averages (RFC 6298 §2.3's order:
    /// the deviation against the old average first).
    pub(super) fn on_error(&mut self, error: f64, gain: f64) {
        self.deviation += gain * ((error - self.error).abs() - self.deviation);
        self.error += gain * (error - self.error);
    }
}

impl Weave {
    /// Seconds from `now` (since the epoch) until the modelled answer to `seq` on `path`, with
    /// that path's error terms; negative once overdue. `None` for a request the scheduler
    /// did not make.
    pub(super) fn modelled_answer(&self, now: f64, path: PathId, seq: u64) -> Option<f64> {
        let predicted = self.clocks.get(&path)?.predicted.get(seq)?;
        Some(self.answer_in(now, path, predicted.at))
    }

    /// Seconds from `now` until an answer the model put at `at` on `path`, with that path's
    /// error terms.
    pub(super) fn answer_in(&self, now: f64, path: PathId, at: Instant) -> f64 {
        let shift = self.clocks.get(&path).map_or(0.0, PathClock::shift);
        at.since_epoch().as_secs_f64() + shift - now
    }
}

#[cfg(test)]
mod tests {
    use super::super::call::PerCall;
    use super::super::test_support::*;
    use super::*;
    use crate::scheduler::testing::xorshift;

    #[test]
    fn answers_come_out_in_a_min_heaps_order() {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut answers = Answers::default();
        let mut heap = BinaryHeap::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut clock = 0;
        for _ in 0..50_000 {
            xorshift(&mut x);
            if x % 3 == 0 {
                assert_eq!(
                    answers.peek().copied(),
                    heap.peek().map(|e: &Reverse<(Instant, u64)>| e.0)
                );
                answers.pop();
                heap.pop();
            } else {
                // Mostly after the latest, some before it, some ties.
                clock += x / 3 % 4;
                let at = Instant::from_nanos(if x % 7 == 0 {
                    clock.saturating_sub(x / 21 % 8)
                } else {
                    clock
                });
                answers.push(at, x / 5 % 16);
                heap.push(Reverse((at, x / 5 % 16)));
            }
        }
        while let Some(Reverse(e)) = heap.pop() {
            assert_eq!(answers.peek(), Some(&e));
            answers.pop();
        }
        assert_eq!(answers.peek(), None);
    }

    #[test]
    fn a_path_that_lost_everything_it_was_asked_is_asked_again() {
        // The 50 ms path lost its first requests: a loss rate of 1 and Eq. 6's E without end.
        // Taken at `max_loss` (0.3), E is 50 + 150 · 0.3 / 0.7 = 114 ms, and its turn, 104
        // packets behind the full 10 ms path's, lies within the queue. Taken at 1, its turn
        // never comes, and no answer could ever bring its loss rate down.
        let mut lost = path(1, 50, 10, 0);
        lost.loss_rate = 1.0;
        lost.expected_time = Duration::MAX;
        let f = Fixture::new(vec![measured(path(0, 10, 10, 10)), lost], 0..1000);
        let pick = Weave::default().next(&f.view());
        assert_eq!(pick.map(|p| (p.path, p.seq)), Some((PathId(1), 104)));
    }

    #[test]
    fn a_lossy_paths_penalty_stays_on_its_answers_once_they_come_in_time() {
        // One 20 ms path whose losses add 10 ms to an answer on average (Eq. 6's E − sRTT),
        // room for 4 requests: asked at once, answered 5 ms apart (a window per sRTT) from
        // 20 ms on, as the model chains them, the penalty not among the delays it chains.
        let mut f = Fixture::new(vec![path(0, 20, 4, 0)], 0..100);
        f.path_mut(0).expected_time = Duration::from_millis(30);
        let mut w = Weave::default();
        let picks = f.run(&mut w);
        assert_eq!(seqs_of(&picks), vec![0, 1, 2, 3]);
        for seq in 0..4 {
            f.now = Instant::from_nanos(20_000_000 + seq * 5_000_000);
            f.arrive(seq, 0);
            let event = SchedEvent::Arrived {
                path: PathId(0),
                seq,
                rtt: f.now - Instant::ZERO,
                duplicate: false,
            };
            w.on_event(f.now, &event);
        }
        // The answers came as modelled: no error to learn (a penalty among the chained delays
        // would have been learnt away as an error of −6.8 ms).
        let clock = &w.clocks[&PathId(0)];
        assert!(clock.error.abs() < 1e-9 && clock.deviation.abs() < 1e-9, "{clock:?}");
        // The next request, sent into an empty pipe, is answered after the minimum RTT plus
        // the penalty.
        let mut call = PerCall::default();
        w.per_call(&f.view(), &mut call);
        assert!((call.at[0] - 0.030).abs() < 1e-9, "{:?}", call.at);
    }

    #[test]
    fn a_paths_values_follow_its_clock_between_calls_at_one_instant() {
        // Two calls at one instant on the same views: the second recomputes only a path whose
        // clock changed, and that path's answer moves with its error term.
        let f = Fixture::new(
            vec![measured(path(0, 10, 10, 0)), measured(path(1, 50, 10, 0))],
            0..1000,
        );
        let mut w = Weave::default();
        w.clock_mut(PathId(1)).clock = Some(Instant::ZERO);
        let mut call = PerCall::default();
        w.per_call(&f.view(), &mut call);
        let before = call.at.clone();
        w.clock_mut(PathId(1)).error = 0.005;
        w.per_call(&f.view(), &mut call);
        assert_eq!(call.at[0], before[0]);
        assert!(
            (call.at[1] - before[1] - 0.005).abs() < 1e-9,
            "{before:?} then {:?}",
            call.at
        );
    }

    #[test]
    fn two_unmeasured_paths_share_their_first_windows_in_turn() {
        // Nothing measured yet on either 80 ms path: a window of 4 per sRTT stands in for the
        // rate, so each request lands 20 ms after the path's one before, and the paths take
        // the head in turn. Modelled all at once, path 0 took 0-3 and path 1 4-7: path 1's
        // answers to 4-7 waited behind path 0's, and each of path 0's second to fourth
        // answers was overdue when path 1's first came (Kondo A: 7 copies before the first
        // frame, which came 9 ms late).
        let mut f = Fixture::new(vec![path(0, 80, 4, 0), path(1, 80, 4, 0)], 0..1000);
        let picks = f.run(&mut Weave::default());
        assert_eq!(paths_of(&picks), vec![0, 1, 0, 1, 0, 1, 0, 1]);
        assert_eq!(seqs_of(&picks), (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn requests_to_an_idle_path_are_paced_until_its_first_answer() {
        // One 10 ms path of 1000 packets per second, a window of 10, nothing in flight.
        let run = |idle_pacing: bool| {
            let mut f = Fixture::new(vec![measured(path(0, 10, 10, 0))], 0..1000);
            let mut w = Weave::with_config(WeaveConfig {
                idle_pacing,
                ..WeaveConfig::default()
            });
            let burst = seqs_of(&f.run(&mut w));
            (f, w, burst)
        };
        assert_eq!(run(false).2, (0..10).collect::<Vec<_>>(), "off: the window at once");
        let (mut f, mut w, burst) = run(true);
        assert_eq!(burst, vec![0], "on: one request, then the gate");
        // 1.25 × 1000 packets per second: 0.8 ms apart.
        let gap = Instant::from_nanos(800_000);
        assert_eq!(w.poll_timeout(), Some(gap));
        f.now = Instant::from_nanos(799_000);
        assert_eq!(w.next(&f.view()), None, "before the gap");
        f.now = gap;
        assert_eq!(seqs_of(&f.run(&mut w)), vec![1]);
        // The first answer ends the pacing: the rest of the window goes at once.
        f.now = Instant::from_nanos(10_000_000);
        f.arrive(0, 0);
        w.on_event(f.now, &answer(0, 0, 10));
        assert_eq!(seqs_of(&f.run(&mut w)), (2..11).collect::<Vec<_>>());
    }

    #[test]
    fn answers_faster_than_the_peak_space_the_clock() {
        // As above, but the slow path's last round trip brought 2000 answers per second: its
        // answers are predicted 0.5 ms apart, not 1 ms, and interleave half as far.
        let mut f = Fixture::new(
            vec![measured(path(0, 10, 10, 10)), measured(path(1, 50, 5, 0))],
            0..1000,
        );
        let mut w = Weave::default();
        for i in 0..=100u64 {
            w.on_event(Instant::from_nanos(i * 500_000), &answer(1, 2000 + i, 50));
        }
        f.now = Instant::from_nanos(50_000_000);
        let picks = f.run(&mut w);
        assert_eq!(paths_of(&picks), vec![1; 5]);
        assert_eq!(seqs_of(&picks), vec![40, 41, 43, 44, 46]);
    }

    /// The slow path's first request (seq 40) is answered `rtt_ms` after it was sent; returns
    /// the slow path's next pick.
    fn next_pick_after_an_answer(rtt_ms: u64) -> Pick {
        let mut f = Fixture::new(
            vec![measured(path(0, 10, 10, 10)), measured(path(1, 50, 1, 0))],
            0..1000,
        );
        let mut w = Weave::default();
        assert_eq!(seqs_of(&f.run(&mut w)), vec![40]);
        f.now = Instant::from_nanos(rtt_ms * 1_000_000);
        f.arrive(40, 1);
        w.on_event(f.now, &answer(1, 40, rtt_ms));
        w.next(&f.view()).unwrap()
    }

    #[test]
    fn a_late_answer_moves_the_path_later_in_the_order() {
        // On time (50 ms), the model stands: the slow path's next packet is 40 ahead again
        // (seq 41, with 40 taken). 20 ms late, the error average takes 5 ms of it and the
        // deviation 5 ms more: 10 ms later at 1000 packets/s, 10 packets further (seq 51).
        assert_eq!(next_pick_after_an_answer(50).seq, 41);
        assert_eq!(next_pick_after_an_answer(70).seq, 51);
    }

    #[test]
    fn a_burst_followed_by_nothing_in_flight_measures_the_rate_it_came_at() {
        // A 340 ms path answers 100 requests 1 ms apart (a task's share, sent at once), then
        // has nothing in flight; the next task's first answer comes at 0.9 s. With the round
        // trip ended at the burst's last answer (`idle_rounds`): 99 gaps in 99 ms, 1000
        // answers a second. Without: the round trip lasts until 0.9 s, 100 answers in it.
        let cfg = WeaveConfig {
            idle_rounds: true,
            ..WeaveConfig::default()
        };
        let rate = |idle: bool| {
            let mut clock = PathClock::new(&cfg);
            for i in 0..100 {
                clock.on_rtt_sample(Instant::from_nanos(i * 1_000_000), 0.34, 0.0, &cfg);
            }
            if idle {
                clock.on_idle(Instant::from_nanos(99_000_000), &cfg);
            }
            clock.on_rtt_sample(Instant::from_nanos(900_000_000), 0.34, 0.0, &cfg);
            clock.last_round_rate.unwrap()
        };
        assert!((rate(true) - 1000.0).abs() < 1e-6, "{}", rate(true));
        assert!((rate(false) - 100.0 / 0.9).abs() < 1e-6, "{}", rate(false));
        // A burst shorter than `idle_round_answers` leaves the round trip running.
        let mut clock = PathClock::new(&cfg);
        for i in 0..10 {
            clock.on_rtt_sample(Instant::from_nanos(i * 1_000_000), 0.34, 0.0, &cfg);
        }
        clock.on_idle(Instant::from_nanos(9_000_000), &cfg);
        assert!(clock.round.is_some() && clock.last_round_rate.is_none());
    }
}
