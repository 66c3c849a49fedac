//! `weave`, pcdn's own scheduler: paths pick packets by predicted arrival, and a task's tail
//! goes where it completes soonest.
//!
//! Every path with room for a request asks: when would the answer to a request sent now on
//! me come, and which pending packet will the in-order cursor need then? The answer to the
//! first is the **arrival model** (`arrival`): the path's minimum RTT or the requests already
//! queued on it at its peak rate, whichever is later, plus Pscheduler's Eq. 6 loss penalty and
//! the model's own measured error and its deviation (RFC 6298's estimators applied to the
//! error). The answer to the second is the **order** (`order`), Pscheduler's Eq. 7 on those
//! clocks: the soonest path takes the head of the queue, a later one the packet the sooner
//! paths will not have delivered by the time its answer lands (Wei et al., "QoE-Optimized
//! MultiPath Scheduling for Video Services in Large-Scale Peer-to-Peer CDNs", IEEE JSAC
//! 2025). A path whose turn lies past the queue's end takes the last packet only if it lands
//! first.
//!
//! Around that core, mechanisms that each fix one way the model alone loses time, each with
//! a switch in [`WeaveConfig`] (all on by default; docs/weave.md has the design and the
//! ablation table):
//! - the **pipe cap**, its **start-up test** and its room for **loss bursts** (`pipe`): no
//!   more in flight than keeps the bottleneck busy, so that no standing queue makes the
//!   answers late, and enough that a burst of losses leaves an answer behind it;
//! - **copies** (`copies`, `candidate`, `resend`, `player`): at the task's tail, of
//!   requests overdue or on a lossy path once the buffer is full, and of the first frame's
//!   packets at risk, each where the copy lands before the original or its resend;
//! - **stall shaping** (`stall`): playback about to run dry stalls at a frame's start;
//! - the **shared-queue trial** (`shared`): a later path that waits in a sooner one's queue
//!   is left idle once a trial shows the sooner one carries both shares; with `shared_line`
//!   (`line`), one path of a group behind one line at a time, judged by the group's rate.
//!
//! Each module's doc says what its mechanism solves and the measurements behind it; every
//! tuning constant is a [`WeaveConfig`] field, and the loss thresholds weave reasons with are
//! the core's own (`crate::path::PACKET_THRESHOLD`, `TIME_THRESHOLD`).

mod arrival;
mod call;
mod candidate;
mod config;
mod copies;
mod line;
mod order;
mod pipe;
mod player;
mod resend;
mod seqmap;
mod shared;
mod stall;
#[cfg(test)]
mod test_support;

pub use config::WeaveConfig;

use super::{Pick, SchedEvent, Scheduler, View};
use crate::estimate::SharedBottleneck;
use crate::path::PathId;
use crate::player::Player;
use crate::scheduler::PathView;
use crate::time::{Duration, Instant};
use arrival::{Clocks, PathClock, Round, unqueued_answer};
use call::PerCall;
use shared::Sharing;
use stall::{ArrivalRate, Queue};
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasherDefault;

/// Maps keyed by path ids and sequence numbers: ours, not an attacker's, so a fast hash
/// (`ahash`, fixed keys) rather than SipHash, which took 18 % of `pcdn bench core --scheduler
/// weave`'s samples (1.13 → 1.70 M packets per CPU second with `ahash`). Nothing iterates them
/// in an order that could reach a decision.
type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<ahash::AHasher>>;
type FastSet<T> = HashSet<T, BuildHasherDefault<ahash::AHasher>>;

/// The one path `seq` is in flight on, if exactly one.
fn sole_holder(view: &View<'_>, seq: u64) -> Option<PathId> {
    let mut holders = 0;
    let mut holder = None;
    view.in_flight.paths_of(seq, &mut |p| {
        holders += 1;
        holder = Some(p);
    });
    holder.filter(|_| holders == 1)
}

/// The smaller of two optional values.
fn min_of<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b < a { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// The scheduler: one per download. [`Weave::default`] is weave as `pcdn` ships it,
/// [`Weave::with_config`] the same with other switches or constants.
#[derive(Debug)]
pub struct Weave {
    cfg: WeaveConfig,
    copied: FastSet<u64>,
    requests: u64,
    copies: u64,
    clocks: Clocks,
    /// Coherence of the paths' queueing delays.
    queues: SharedBottleneck,
    /// Pairs (smaller id first) taken, or on trial, to share a queue.
    sharing: FastMap<(PathId, PathId), Sharing>,
    /// Pairs whose trial failed.
    separate: FastSet<(PathId, PathId)>,
    /// The groups of paths behind one line and their trials (`WeaveConfig::shared_line`).
    lines: line::Lines,
    /// When a request in flight turns overdue, after a call that picked nothing
    /// (`Weave::next_overdue`).
    wake: Option<Instant>,
    /// The per-path values of the call under way (`PerCall`); boxed, so that `next` takes it
    /// out and puts it back as a pointer, not a copy of its vectors.
    call: Option<Box<PerCall>>,
    /// Room for `Weave::steady_out_of_order`'s median.
    scratch: Vec<f64>,
    /// When the arrivals were last sampled: a second sample at the same instant changes
    /// nothing (`Weave::sample_arrivals`).
    sampled_at: Option<Instant>,
    /// Unique packets arrived, and their rate over `front_window`.
    arrived: u64,
    front_rate: ArrivalRate,
    /// The in-order cursor at the first call (before any arrival).
    first_cursor: Option<u64>,
    /// While playing: each round trip's start and the most video out of order in it
    /// (`steady_out_of_order`).
    out_of_order: VecDeque<(Instant, f64)>,
    /// The median of the complete round trips' most in `out_of_order`, kept as they change.
    steady: Option<f64>,
    /// The packet held back for a stall once a pick went past it, and its frame
    /// (`Weave::stall_hold`).
    held: Option<(u64, u64)>,
    /// What the last call saw, if it picked nothing and changed nothing a decision reads
    /// (`Idle`): a call on the same again picks nothing either.
    idle: Option<Idle>,
    /// The last call started, confirmed or ended a shared-queue trial.
    sharing_moved: bool,
}

/// What a call that picked nothing saw besides the paths' views (`PerCall::views` keeps those):
/// the time, the in-order cursor, the task's end, the buffer's limit, the player's buffer, the
/// packet size, and the pending queue
/// (its holes' count and ends, the new numbers' range). With no player attached, no event
/// since and no trial moved, a call on the same views and these picks nothing again (every
/// value it reads is the same, and what it updates, the peaks and the arrival samples, it
/// updates to the same), so the calls that follow a poll whose windows are all at their pipe
/// cap cost a comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Idle {
    now: Instant,
    cursor: u64,
    task_end: u64,
    reorder_limit: u64,
    player_buffer: Option<Duration>,
    packet_size: u64,
    holes: (usize, Option<u64>, Option<u64>),
    new: (u64, u64),
}

impl Idle {
    fn of(view: &View<'_>) -> Idle {
        let holes = view.pending.holes;
        Idle {
            now: view.now,
            cursor: view.cursor,
            task_end: view.task_end,
            reorder_limit: view.reorder_limit,
            player_buffer: view.player_buffer,
            packet_size: view.packet_size,
            holes: (holes.len(), holes.first().copied(), holes.last().copied()),
            new: (view.pending.next_new, view.pending.new_end),
        }
    }
}

/// The model's answer to one request in flight.
#[derive(Debug, Clone, Copy)]
pub(super) struct Prediction {
    /// When the answer is modelled to come, before the error terms.
    at: Instant,
    /// Seconds of it the model put down to the requests queued ahead on the path.
    queued: f64,
    /// When the request was sent.
    sent: Instant,
    /// Its place among the scheduler's requests (`Weave::requests`, from 1): requests sent
    /// at one instant are still sent one after another.
    order: u64,
}

impl Default for Weave {
    fn default() -> Self {
        Weave::with_config(WeaveConfig::default())
    }
}

impl Weave {
    /// weave with the switches and constants of `cfg`.
    pub fn with_config(cfg: WeaveConfig) -> Self {
        Weave {
            front_rate: ArrivalRate::new(cfg.front_window, cfg.front_sample),
            cfg,
            copied: FastSet::default(),
            requests: 0,
            copies: 0,
            clocks: Clocks::default(),
            queues: SharedBottleneck::default(),
            sharing: FastMap::default(),
            separate: FastSet::default(),
            lines: line::Lines::default(),
            wake: None,
            call: None,
            scratch: Vec::new(),
            sampled_at: None,
            arrived: 0,
            first_cursor: None,
            out_of_order: VecDeque::new(),
            steady: None,
            held: None,
            idle: None,
            sharing_moved: false,
        }
    }

    /// The switches and constants this weave runs with.
    pub fn config(&self) -> &WeaveConfig {
        &self.cfg
    }

    /// What weave keeps of path `path` (kept from now on).
    fn clock_mut(&mut self, path: PathId) -> &mut PathClock {
        self.clocks.entry(path, &self.cfg)
    }

    /// Sends `seq` on path `p`, the `j`th of the call's views, whose answer is predicted
    /// `call.at[j]` seconds from now.
    fn pick(&mut self, now: Instant, p: &PathView, seq: u64, call: &PerCall, j: usize) -> Option<Pick> {
        self.requests += 1;
        let path = p.id;
        let order = self.requests;
        let pacing_gain = self.cfg.idle_pacing.then_some(self.cfg.pipe_gain);
        let state = self.clock_mut(path);
        // The clock chains the model's predictions; the error terms are added when read, and
        // the loss penalty too: it is what a loss adds on average to this answer, not a delay
        // the next request waits behind.
        let model = (call.at[j] - state.shift()).max(0.0);
        let model = (model - call.penalty[j]).max(p.min_rtt.as_secs_f64());
        let raw = Instant::from_nanos(((now.since_epoch().as_secs_f64() + model) * 1e9) as u64);
        state.clock = Some(raw);
        state.answers.push(raw, seq);
        // A burst to a path with nothing in flight meets its bottleneck's queue at once; spaced
        // a little faster than the path's rate, it is answered as soon and queues little.
        if let Some(gain) =
            pacing_gain.filter(|_| (p.in_flight == 0 || state.paced_until.is_some()) && state.peak.get().is_some())
        {
            state.paced_until = Some(now + Duration::from_secs_f64(1.0 / (gain * call.rate[j])));
        }
        let queued = (model - call.unqueued[j]).max(0.0);
        state.predicted.insert(
            seq,
            Prediction {
                at: raw,
                queued,
                sent: now,
                order,
            },
        );
        Some(Pick { path, seq })
    }

    /// Asks again on path `p` for `seq`, in flight elsewhere: once per packet (again after a
    /// request of it is lost), against the cap.
    fn copy(&mut self, now: Instant, p: &PathView, seq: u64, call: &PerCall, j: usize) -> Option<Pick> {
        self.copied.insert(seq);
        self.copies += 1;
        self.pick(now, p, seq, call, j)
    }

    /// The decision of one `next()` call, on the per-path values of `call`.
    fn choose(&mut self, view: &View<'_>, call: &mut PerCall, queue: Queue<'_>) -> Option<Pick> {
        if self.cfg.shared_trial && self.cfg.shared_line {
            self.advance_lines(view, call);
        }
        self.mark_stand_ins(view, call);
        let call = &*call;
        let pending = queue.len();
        let soonest = Self::soonest(call);
        // Copies so far against their cap; it moves only with a pick, which ends the call.
        let may_copy = self.copies < self.cfg.copy_allowance + (self.requests as f64 * self.cfg.copy_share) as u64;
        // Some path with room reached the copy rules.
        let mut could_copy = false;
        let at_task_tail = view.reorder_limit >= view.task_end;
        // Whether a copy before the task's tail is possible at all, once asked.
        let mut before_tail = None;
        let first_frame_end = view.first_frame_end();
        // Soonest answer first: it takes the head of the queue, the others their offsets.
        for &j in &call.order {
            let p = &view.paths[j];
            if !call.under_cap[j] || (self.cfg.shared_trial && self.shadowed(view, call, j)) {
                continue;
            }
            if let Some(until) = self
                .cfg
                .idle_pacing
                .then(|| self.clocks.get(&p.id).and_then(|c| c.paced_until))
                .flatten()
                .filter(|&u| u > view.now)
            {
                self.wake = min_of(self.wake, Some(until));
                continue;
            }
            could_copy |= may_copy;
            let k = Self::offset(call, j);
            // Nothing of the first frame left for the soonest path to ask for: what is at
            // risk of it. A later path's copy would land after the soonest path's, which only
            // has to ask for what of the frame is left first (by Eq. 7, no more than the
            // later path's offset) or wait for its window.
            let frame_copy = first_frame_end
                .filter(|&end| {
                    may_copy
                        && self.cfg.first_frame_copies
                        && call.at[j] <= soonest
                        && queue.nth(k).is_none_or(|seq| seq >= end)
                })
                .and_then(|end| self.first_frame_copy(view, call, j, end));
            if let Some(seq) = frame_copy {
                return self.copy(view.now, p, seq, call, j);
            }
            if k < pending {
                let seq = queue.nth(k)?;
                return self.pick(view.now, p, seq, call, j);
            }
            if pending > 0 {
                // The queue ends (the task's tail, or the reorder buffer's limit) before this
                // path's turn: the last packet, if it lands before the sooner paths get to it.
                let theirs = Self::drain_time(call, j, pending).map_or(f64::INFINITY, |d| d + soonest);
                if !self.cfg.tail_wait || call.at[j] < theirs {
                    let seq = queue.nth(pending - 1)?;
                    return self.pick(view.now, p, seq, call, j);
                }
                continue;
            }
            if may_copy
                && self.cfg.tail_copies
                && (at_task_tail || *before_tail.get_or_insert_with(|| self.may_copy_before_tail(view, call)))
            {
                if let Some(seq) = self.copy_candidate(view, &call.at, soonest, j, !at_task_tail) {
                    return self.copy(view.now, p, seq, call, j);
                }
            }
        }
        if could_copy {
            self.wake = min_of(self.wake, self.next_overdue(view));
        }
        // A path left idle for a trial is judged when the trial ends: be called then, even
        // if nothing is in flight to call sooner.
        self.wake = min_of(self.wake, self.trial_end(view));
        None
    }
}

impl Scheduler for Weave {
    fn name(&self) -> &'static str {
        "weave"
    }

    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        if let Some(idle) = self.idle.take() {
            if view.player.is_none()
                && idle == Idle::of(view)
                && self.call.as_ref().is_some_and(|call| call.views == view.paths)
            {
                // `wake` stays what that call set.
                self.idle = Some(idle);
                return None;
            }
        }
        self.wake = None;
        self.sharing_moved = false;
        let mut call = self.call.take().unwrap_or_default();
        self.update_peaks_since(view, Some(&call));
        self.first_cursor.get_or_insert(view.cursor);
        self.sample_arrivals(view.now);
        let hold = self.stall_hold(view);
        self.per_call(view, &mut call);
        // Held only while something else is pending: the task cannot end without the packet,
        // and the paths would idle until playback stalls.
        let queue = Queue {
            pending: view.pending,
            held: hold
                .and_then(|(seq, _)| view.pending.rank(seq))
                .filter(|_| view.pending.len() > 1),
        };
        let pick = self.choose(view, &mut call, queue);
        if let (Some(hold), Some(pick)) = (hold, pick) {
            // A pick past the packet: it is held from now on, even as the prediction moves.
            if pick.seq > hold.0 && queue.held.is_some() {
                self.held = Some(hold);
            }
        }
        self.call = Some(call);
        if queue.held.is_some() {
            // The hold ends once playback stalls at it: be called then.
            let dry = view
                .player
                .and_then(Player::runs_dry_at)
                .map(|at| at + Duration::from_micros(1));
            self.wake = min_of(self.wake, dry);
        }
        if pick.is_none() && view.player.is_none() && !self.sharing_moved {
            self.idle = Some(Idle::of(view));
        }
        pick
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.wake
    }

    fn on_event(&mut self, now: Instant, event: &SchedEvent) {
        self.idle = None;
        match *event {
            SchedEvent::Arrived {
                path,
                seq,
                rtt,
                duplicate,
            } => {
                self.arrived += u64::from(!duplicate);
                if !self.copied.is_empty() {
                    self.copied.remove(&seq);
                }
                let state = self.clocks.entry(path, &self.cfg);
                state.loss_run = 0;
                // The answers clock the path's requests again.
                state.paced_until = None;
                let predicted = state.predicted.remove(seq);
                if let Some(p) = predicted {
                    state.answered_order = state.answered_order.max(p.order);
                    // Answers mostly come in the order modelled: the answered request's entry
                    // is then the earliest, and it goes without the lookup `earliest_answer`
                    // makes.
                    if state.answers.peek() == Some(&(p.at, seq)) {
                        state.answers.pop();
                    }
                }
                // A zero RTT: no sample (no request answered, or Karn's rule).
                if rtt > Duration::ZERO {
                    let rtt = rtt.as_secs_f64();
                    state.on_rtt_sample(now, rtt, predicted.map_or(0.0, |p| p.queued), &self.cfg);
                    let least = state.least_rtt.map_or(rtt, |l| l.min(rtt));
                    state.least_rtt = Some(least);
                    self.queues.on_sample(now, path, rtt - least);
                }
                // The same for the model's error: an answer to a request declared lost, matched
                // to the resend's prediction, reads its lateness as an answer a round trip early,
                // and the deviation the copy rules read would grow by a quarter RTT with it though
                // the path's answers do not vary.
                if let Some(predicted) = predicted.filter(|_| rtt > Duration::ZERO) {
                    state.on_error(
                        now.since_epoch().as_secs_f64() - predicted.at.since_epoch().as_secs_f64(),
                        self.cfg.error_gain,
                    );
                }
                if self.earliest_answer(path).is_none() && self.cfg.idle_rounds {
                    if let Some(state) = self.clocks.get_mut(&path) {
                        state.on_idle(now, &self.cfg);
                    }
                }
            }
            SchedEvent::Lost { path, seq } => {
                let lost = self
                    .clocks
                    .get_mut_unversioned(&path)
                    .and_then(|c| c.predicted.remove(seq));
                // One of its requests is gone: a copied packet has one out again, and the copy
                // rules judge it afresh (each packet copied once per request lost).
                if !self.copied.is_empty() {
                    self.copied.remove(&seq);
                }
                let emptied = self.earliest_answer(path).is_none();
                let state = self.clocks.entry(path, &self.cfg);
                // A loss with an answer to a later request behind it was found by the packet
                // or time threshold (RFC 9002 §6.1) and cost no timeout: not part of a burst.
                if lost.is_some_and(|l| l.order > state.answered_order) {
                    state.loss_run += 1;
                }
                // Only a run that left nothing in flight had no answer to come after it.
                if emptied {
                    state.loss_burst = state.loss_burst.max(state.loss_run);
                }
            }
            SchedEvent::PathRemoved(path) => {
                self.clocks.remove(&path);
                self.queues.remove(path);
                self.sharing.retain(|&(a, b), _| a != path && b != path);
                self.separate.retain(|&(a, b)| a != path && b != path);
                self.lines.remove(path);
            }
            _ => {}
        }
    }
}
