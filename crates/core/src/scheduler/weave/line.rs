//! The set trial: the paths behind one line are tried one at a time, judged by their summed rate.
//!
//! Paths whose queueing delays move together (`estimate::shared`) form a group: the connected
//! components of the coherent pairs. Once every member has left its start-up, the farthest
//! member that carries a share worth measuring, with room in the others' peaks for it, is
//! tried: the group's summed delivered rate is measured over `shared_measure_rtts` of the
//! members' largest sRTT with everyone sending, then the member is left idle, and from
//! `shared_trial_rtts − shared_measure_rtts` of the kept members' largest sRTT on their
//! summed rate is measured over `shared_measure_rtts`. Only time with something to ask counts
//! (`Meter`): a task's tail measures the application, not the line. If they carry
//! `shared_confirm` of what the group carried, it stays idle (and is measured again over each
//! such span: it sends again once they fall short); otherwise it sends again and is not tried
//! again. An idle member sends nothing that could pass its last requests: if the line's queue
//! dropped them, only its RTO finds them, and the copy rules (`copies`) count with that.
//! One trial per group at a time,
//! never behind an idle member: the pairwise trial (`shared`) tried several pairs behind one
//! line at once, behind a near edge whose own link could not carry their shares, or behind
//! an edge that was itself idle (`scenarios/shared-access.toml`, docs/weave.md).

use super::{PerCall, Weave, WeaveConfig};
use crate::estimate::SharedBottleneck;
use crate::path::PathId;
use crate::scheduler::View;
use crate::time::Instant;

/// The set trial's state (`WeaveConfig::shared_line`): the groups of paths whose queueing
/// delays move together, and the trials run over them.
#[derive(Debug, Default)]
pub(super) struct Lines {
    /// The coherence estimator's version the groups were formed at.
    formed: Option<u64>,
    /// The paths the groups were formed over, in the view's order.
    ids: Vec<PathId>,
    /// Each path's group, by index in `ids`: the smallest index of a path in it.
    group: Vec<usize>,
    /// The paths on trial or kept idle, in the order their trials started.
    trials: Vec<(PathId, LineTrial)>,
    /// Paths whose trial failed: not tried again.
    failed: Vec<PathId>,
    /// Until when the paths' answers still show a call with less to ask than one request for
    /// each path with room (the task's tail, or the reorder buffer's limit): that call's time
    /// plus the largest sRTT, while the gap it leaves in the answers passes (`Meter`).
    limited: Instant,
}

/// A summed delivery rate counted over the time the paths had something to ask: between two
/// calls the paths delivered `sum` more packets over the seconds between them, counted
/// unless the answers then still showed a call with nothing to ask (`Lines::limited`). A
/// gap the application leaves measures it, not the line: under BBR on Pscheduler Fig. 5
/// (2 MB tasks, 0.57 s each at the line's rate) the round trip without answers at each
/// task's start fell in most measurements, and the kept path, at the line's rate between
/// tasks, was judged short of it and sent again.
#[derive(Debug, Clone, Copy)]
struct Meter {
    /// The last call's time and the paths' deliveries then.
    at: Instant,
    sum: u64,
    /// Seconds counted and the packets delivered in them.
    secs: f64,
    delivered: u64,
}

impl Meter {
    fn new(at: Instant, sum: u64) -> Meter {
        Meter {
            at,
            sum,
            secs: 0.0,
            delivered: 0,
        }
    }

    /// Counts the time since the last call unless the answers in it show an application gap.
    fn update(&mut self, now: Instant, sum: u64, limited: Instant) {
        if limited <= self.at {
            self.secs += (now - self.at).as_secs_f64();
            self.delivered += sum.saturating_sub(self.sum);
        }
        self.at = now;
        self.sum = sum;
    }

    /// Packets a second over the counted time.
    fn rate(&self) -> f64 {
        self.delivered as f64 / self.secs
    }
}

/// One path's trial behind a line.
#[derive(Debug, Clone)]
enum LineTrial {
    /// Every member still sends: the group's summed rate is measured over `span` counted
    /// seconds.
    Baseline {
        members: Vec<PathId>,
        meter: Meter,
        span: f64,
    },
    /// The path is idle; from the first call at or after `measure`, the kept members' summed
    /// rate is measured over `span` counted seconds and must reach `needed`.
    Idle {
        kept: Vec<PathId>,
        needed: f64,
        measure: Instant,
        meter: Option<Meter>,
        span: f64,
    },
    /// The kept members carried the group's rate alone: the path stays idle while one of them
    /// that sends answers sooner, and while they keep carrying `needed`, measured again over
    /// each `span` counted seconds.
    Kept {
        kept: Vec<PathId>,
        needed: f64,
        span: f64,
        meter: Meter,
    },
}

impl Lines {
    fn state(&self, path: PathId) -> Option<&LineTrial> {
        self.trials.iter().find(|(p, _)| *p == path).map(|(_, t)| t)
    }

    /// The group of `path`, if it is in the view the groups were formed over.
    fn group_of(&self, path: PathId) -> Option<usize> {
        self.ids.iter().position(|&p| p == path).map(|j| self.group[j])
    }

    /// The path is left idle (on trial, or kept so).
    pub(super) fn idle(&self, path: PathId) -> bool {
        matches!(self.state(path), Some(LineTrial::Idle { .. } | LineTrial::Kept { .. }))
    }

    /// Forgets a path: its trial, and the trials it was measured in or kept for.
    pub(super) fn remove(&mut self, path: PathId) {
        self.trials.retain(|(p, trial)| {
            let members = match trial {
                LineTrial::Baseline { members, .. } => members,
                LineTrial::Idle { kept, .. } | LineTrial::Kept { kept, .. } => kept,
            };
            *p != path && !members.contains(&path)
        });
        self.failed.retain(|&p| p != path);
        self.formed = None;
    }

    /// Groups the view's paths: connected components of the pairs whose queueing delays are
    /// coherent (`estimate::shared`), formed again when the coherences or the paths change.
    fn form(&mut self, view: &View<'_>, queues: &SharedBottleneck, cfg: &WeaveConfig) {
        let same_paths = self.ids.len() == view.paths.len() && self.ids.iter().zip(view.paths).all(|(a, p)| *a == p.id);
        if same_paths && self.formed == Some(queues.version()) {
            return;
        }
        self.formed = Some(queues.version());
        self.ids.clear();
        self.ids.extend(view.paths.iter().map(|p| p.id));
        let n = self.ids.len();
        self.group.clear();
        self.group.extend(0..n);
        for a in 0..n {
            for b in a + 1..n {
                let (x, y) = (self.ids[a], self.ids[b]);
                let coherent = queues.coherence(x, y).is_some_and(|c| c >= cfg.shared_coherence)
                    && queues
                        .deviations(x, y)
                        .is_some_and(|(da, db)| da.min(db) >= cfg.shared_queue_floor);
                let (ga, gb) = (self.group[a], self.group[b]);
                if coherent && ga != gb {
                    // Each label is its group's smallest index: relabel the larger group.
                    let (keep, drop) = (ga.min(gb), ga.max(gb));
                    for g in &mut self.group {
                        if *g == drop {
                            *g = keep;
                        }
                    }
                }
            }
        }
    }
}

/// What the paths `ids` have delivered together, if all are in the view.
fn delivered_of(view: &View<'_>, ids: &[PathId]) -> Option<u64> {
    ids.iter()
        .map(|id| view.paths.iter().find(|p| p.id == *id).map(|p| p.delivered))
        .sum()
}

/// The largest smoothed RTT of the paths `ids` in the view (seconds).
fn largest_srtt(view: &View<'_>, ids: &[PathId]) -> f64 {
    view.paths
        .iter()
        .filter(|p| ids.contains(&p.id))
        .map(|p| p.srtt.as_secs_f64())
        .fold(0.0, f64::max)
}

/// `at` plus `secs` seconds.
fn after(at: Instant, secs: f64) -> Instant {
    at + crate::time::Duration::from_secs_f64(secs.max(0.0))
}

impl Weave {
    /// The set trial, once per call before the paths choose: forms the groups, moves the
    /// trials under way on, and starts one in each group without one (see the module's doc).
    pub(super) fn advance_lines(&mut self, view: &View<'_>, call: &PerCall) {
        if view.paths.len() < 2 && self.lines.trials.is_empty() {
            return;
        }
        let cfg = &self.cfg;
        let lines = &mut self.lines;
        lines.form(view, &self.queues, cfg);
        let now = view.now;
        // Nothing to ask, or less than one request for each path that may send: the
        // application limits them, not the line.
        let open = (0..view.paths.len())
            .filter(|&j| view.paths[j].can_send && call.under_cap[j] && !lines.idle(view.paths[j].id))
            .count();
        if view.pending.is_empty() || view.pending.len() < open as u64 {
            let all: Vec<PathId> = view.paths.iter().map(|p| p.id).collect();
            lines.limited = lines.limited.max(after(now, largest_srtt(view, &all)));
        }
        let limited = lines.limited;
        let mut k = 0;
        while k < lines.trials.len() {
            let path = lines.trials[k].0;
            // `None`: the trial ends and the path sends again; `Some(true)` with it, failed.
            let mut end = None;
            // Groups formed apart may merge (their queues found to move together later): one
            // trial at a time in each, the earliest kept.
            let group = lines.group_of(path);
            let on_trial = |t: &LineTrial| !matches!(t, LineTrial::Kept { .. });
            if on_trial(&lines.trials[k].1)
                && lines.trials[..k]
                    .iter()
                    .any(|(p, t)| on_trial(t) && group.is_some() && lines.group_of(*p) == group)
            {
                end = Some(false);
            }
            let state = if end.is_none() {
                Some(&mut lines.trials[k].1)
            } else {
                None
            };
            match state {
                None => {}
                Some(LineTrial::Baseline { members, meter, span }) => match delivered_of(view, members) {
                    None => end = Some(false),
                    Some(sum) => {
                        meter.update(now, sum, limited);
                        if meter.secs >= *span {
                            if meter.delivered > 0 {
                                let rate = meter.rate();
                                let kept: Vec<PathId> = members.iter().copied().filter(|&p| p != path).collect();
                                let srtt = largest_srtt(view, &kept);
                                lines.trials[k].1 = LineTrial::Idle {
                                    kept,
                                    needed: cfg.shared_confirm * rate,
                                    measure: after(now, (cfg.shared_trial_rtts - cfg.shared_measure_rtts) * srtt),
                                    meter: None,
                                    span: cfg.shared_measure_rtts * srtt,
                                };
                            } else {
                                end = Some(false);
                            }
                            self.sharing_moved = true;
                        }
                    }
                },
                Some(LineTrial::Idle {
                    kept,
                    needed,
                    measure,
                    meter,
                    span,
                }) => match delivered_of(view, kept) {
                    None => end = Some(false),
                    Some(sum) => match meter {
                        None if now >= *measure => {
                            *meter = Some(Meter::new(now, sum));
                            self.sharing_moved = true;
                        }
                        None => {}
                        Some(m) => {
                            m.update(now, sum, limited);
                            if m.secs >= *span {
                                if m.rate() >= *needed {
                                    lines.trials[k].1 = LineTrial::Kept {
                                        kept: std::mem::take(kept),
                                        needed: *needed,
                                        span: *span,
                                        meter: Meter::new(now, sum),
                                    };
                                } else {
                                    end = Some(true);
                                }
                                self.sharing_moved = true;
                            }
                        }
                    },
                },
                Some(LineTrial::Kept {
                    kept,
                    needed,
                    span,
                    meter,
                }) => match delivered_of(view, kept) {
                    None => end = Some(false),
                    Some(sum) => {
                        meter.update(now, sum, limited);
                        // The line's rate may fall later (a kept member's control backs off,
                        // or the trial measured a start-up's burst): the path sends again.
                        if meter.secs >= *span {
                            if meter.rate() < *needed {
                                end = Some(true);
                            } else {
                                *meter = Meter::new(now, sum);
                            }
                            self.sharing_moved = true;
                        }
                    }
                },
            }
            match end {
                Some(failed) => {
                    lines.trials.remove(k);
                    if failed {
                        lines.failed.push(path);
                    }
                    self.sharing_moved = true;
                }
                None => k += 1,
            }
        }
        if view.pending.is_empty() {
            return;
        }
        for g in 0..lines.ids.len() {
            if lines.group[g] != g {
                continue;
            }
            // The group's members that send; none on trial.
            let mut busy = false;
            let mut active: Vec<usize> = Vec::new();
            for (j, _) in lines.group.iter().enumerate().filter(|&(_, &l)| l == g) {
                match lines.state(lines.ids[j]) {
                    Some(LineTrial::Kept { .. }) => {}
                    Some(_) => busy = true,
                    None => active.push(j),
                }
            }
            // The line's rate is measured once every member's control has left its start-up:
            // before, the group carries less than the line, and any trial would pass; and
            // start-ups fill every queue at once, so that paths seem to share one.
            let started = |j: &usize| self.clocks.get(&lines.ids[*j]).is_some_and(|c| c.started());
            if busy || active.len() < 2 || !active.iter().all(started) {
                continue;
            }
            let answered = |j: usize| {
                self.clocks
                    .get(&lines.ids[j])
                    .and_then(|c| c.last_round_rate)
                    .unwrap_or(0.0)
            };
            let total: f64 = active.iter().map(|&j| answered(j)).sum();
            // The farthest first: its answers come last, and the near members' take its place
            // soonest.
            let mut candidates = active.clone();
            candidates.sort_by_key(|&j| std::cmp::Reverse((view.paths[j].min_rtt, lines.ids[j])));
            for &c in &candidates {
                if lines.failed.contains(&lines.ids[c]) {
                    continue;
                }
                let kept = active.iter().copied().filter(|&j| j != c);
                let soonest = kept.clone().map(|j| view.paths[j].min_rtt).min();
                let far = soonest
                    .is_some_and(|s| view.paths[c].min_rtt.as_secs_f64() >= cfg.shared_rtt_ratio * s.as_secs_f64());
                let mine = answered(c);
                let theirs = total - mine;
                let measurable = mine > 0.0 && theirs > 0.0 && mine >= cfg.shared_min_share * total;
                // The kept members' peaks cover what they carry and a share of this path's.
                let room = kept.map(|j| call.rate[j]).sum::<f64>() >= theirs + cfg.shared_headroom * mine;
                if far && measurable && room {
                    let members: Vec<PathId> = active.iter().map(|&j| lines.ids[j]).collect();
                    let srtt = largest_srtt(view, &members);
                    let delivered = delivered_of(view, &members).unwrap_or(0);
                    lines.trials.push((
                        lines.ids[c],
                        LineTrial::Baseline {
                            members,
                            meter: Meter::new(now, delivered),
                            span: cfg.shared_measure_rtts * srtt,
                        },
                    ));
                    self.sharing_moved = true;
                    break;
                }
            }
        }
    }

    /// Path `i` is left idle by the set trial: on trial, or kept idle while a kept member that
    /// sends answers sooner (it takes over if they fail or fall behind).
    pub(super) fn line_shadowed(&self, view: &View<'_>, call: &PerCall, i: usize) -> bool {
        match self.lines.state(view.paths[i].id) {
            Some(LineTrial::Idle { .. }) => true,
            Some(LineTrial::Kept { kept, .. }) => view
                .paths
                .iter()
                .enumerate()
                .any(|(j, p)| kept.contains(&p.id) && !self.lines.idle(p.id) && call.at[j] <= call.at[i]),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    /// A queueing delay that moves 0-4 ms in a 50 ms cycle.
    fn saw(bin: u64) -> f64 {
        (bin % 5) as f64
    }

    /// A fast 10 ms path (full window, 1500 packets/s peak) answering 1000 packets/s and two
    /// later ones, 30 and 40 ms, answering 200 each, their queueing delays on one saw: three
    /// paths behind one line. From the moment the 40 ms path is left idle, the fast one
    /// answers `trial_rate`. Every 10 ms weave is called with no path able to send (the
    /// trials move on); at each of `at_ms` it is asked which of the two later paths would
    /// send, each alone: `(30 ms path, 40 ms path)`, whether each would pick. Over `gap_ms`
    /// nothing is pending and nothing answered (a task's tail and the next one's first round
    /// trip).
    fn three_paths_behind_one_line(
        cfg: WeaveConfig,
        trial_rate: f64,
        gap_ms: std::ops::Range<u64>,
        at_ms: &[u64],
    ) -> Vec<(bool, bool)> {
        let mut fast = path(0, 10, 10, 10);
        fast.delivery_rate = Some(1_500_000.0);
        let mut f = Fixture::new(
            vec![fast, measured(path(1, 30, 10, 10)), measured(path(2, 40, 10, 10))],
            0..100_000,
        );
        let mut w = Weave::with_config(cfg);
        let mut delivered = [0u64; 3];
        let mut answers = Vec::new();
        let mut seq = 5000;
        for ms in 0..1200u64 {
            let now = Instant::from_nanos(ms * 1_000_000);
            let idle = w.lines.idle(PathId(2));
            let fast_rate = if idle { trial_rate } else { 1000.0 };
            let fast = ((ms + 1) as f64 * fast_rate / 1e3).floor() - (ms as f64 * fast_rate / 1e3).floor();
            let gap = gap_ms.contains(&ms);
            let mut due: Vec<u32> = vec![0; if gap { 0 } else { fast as usize }];
            if ms % 5 == 1 && !gap {
                due.push(1);
            }
            if ms % 5 == 3 && !idle && !gap {
                due.push(2);
            }
            for p in due {
                let base = [10.0, 30.0, 40.0][p as usize];
                delivered[p as usize] += 1;
                seq += 1;
                w.on_event(
                    now,
                    &SchedEvent::Arrived {
                        path: PathId(p),
                        seq,
                        rtt: Duration::from_secs_f64((base + saw(ms / 10)) / 1e3),
                        duplicate: false,
                    },
                );
            }
            if ms % 10 != 0 {
                continue;
            }
            f.now = now;
            f.next_new = if gap { f.new_end } else { 0 };
            for (p, d) in f.paths.iter_mut().zip(delivered) {
                p.delivered = d;
                p.in_flight = p.cwnd;
                p.can_send = false;
            }
            w.next(&f.view());
            if at_ms.contains(&ms) {
                let mut would_send = |p: u32| {
                    for q in [1, 2] {
                        f.path_mut(q).can_send = q == p;
                        f.path_mut(q).in_flight = if q == p { 0 } else { 10 };
                    }
                    let pick = w.next(&f.view());
                    pick.is_some_and(|pick| pick.path == PathId(p))
                };
                answers.push((would_send(1), would_send(2)));
            }
        }
        answers
    }

    fn set_trial() -> WeaveConfig {
        WeaveConfig {
            shared_line: true,
            ..WeaveConfig::default()
        }
    }

    #[test]
    fn behind_one_line_one_path_at_a_time_is_tried_and_kept_idle_if_the_line_stays_full() {
        // From 300 ms the set trial measures the line (everyone sends); from 460 ms the 40 ms
        // path is idle and the 30 ms one still sends: one trial at a time. The fast path then
        // took the idle one's share (the line's summed rate held): the 40 ms path stays idle.
        let steps = three_paths_behind_one_line(set_trial(), 1200.0, 0..0, &[400, 600, 750]);
        assert_eq!(steps, vec![(true, true), (true, false), (true, false)]);
        // The line's rate fell without it: it sends again after its trial (700 ms).
        let steps = three_paths_behind_one_line(set_trial(), 1000.0, 0..0, &[400, 600, 750]);
        assert_eq!(steps, vec![(true, true), (true, false), (true, true)]);
    }

    #[test]
    fn a_gap_with_nothing_to_ask_is_not_counted_against_the_kept_paths() {
        // A task's tail and the next one's first round trip (40 ms with nothing pending and
        // nothing answered) in the trial's measurement, at its end, or in a later one: the
        // kept paths carry the line's rate whenever they have something to ask, and the
        // 40 ms path stays idle. Counted, each gap took the fast path below the line's rate.
        for gap in [600..640, 640..680, 800..840] {
            let steps = three_paths_behind_one_line(set_trial(), 1200.0, gap.clone(), &[750, 900, 1100]);
            assert_eq!(steps, vec![(true, false); 3], "{gap:?}");
        }
    }

    /// The task's last 3 packets went to the 40 ms path 1 (RTO 120 ms) at 0 ms; it is then
    /// left idle by the set trial (`idle`) or not. At 43 ms all three are overdue: which does
    /// the 10 ms path 0 copy first, with a 5 ms path 2 (no room now) to take a resend?
    fn copies_an_overdue_packet_of_a_path(idle: bool) -> Option<u64> {
        let mut f = Fixture::new(vec![measured(path(1, 40, 10, 0))], 0..3);
        let mut w = Weave::with_config(set_trial());
        assert_eq!(paths_of(&f.run(&mut w)), vec![1; 3]);
        // Paths 0 and 2 come up once they are in flight.
        f.paths.insert(0, measured(path(0, 10, 10, 0)));
        let mut resender = measured(path(2, 5, 10, 0));
        resender.can_send = false;
        f.paths.push(resender);
        if idle {
            let trial = LineTrial::Idle {
                kept: vec![PathId(0)],
                needed: 0.0,
                measure: Instant::from_nanos(10_000_000_000),
                meter: None,
                span: 1.0,
            };
            w.lines.trials.push((PathId(1), trial));
        }
        f.path_mut(1).can_send = false;
        f.now = Instant::from_nanos(43_000_000);
        w.next(&f.view()).filter(|p| p.path == PathId(0)).map(|p| p.seq)
    }

    #[test]
    fn an_idle_paths_overdue_requests_are_copied_as_if_only_its_rto_found_them() {
        // Sending, path 1 finds the first two lost 45 ms after sending them (9/8 · sRTT, once
        // a later request is answered), and path 2's resend lands at 50 ms, before path 0's
        // copy: only the last, which no later request passes, is copied.
        assert_eq!(copies_an_overdue_packet_of_a_path(false), Some(2));
        // Idle, it sends nothing more: if the later requests are lost too, only its RTO
        // (120 ms) finds the first, and path 0 copies it now.
        assert_eq!(copies_an_overdue_packet_of_a_path(true), Some(0));
    }
}
