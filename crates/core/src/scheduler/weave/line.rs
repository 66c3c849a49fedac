//! The set trial: the paths behind one line are tried one at a time, judged by their summed rate.
//!
//! Paths whose queueing delays move together (`estimate::shared`) form a group: the connected
//! components of the coherent pairs. Once every member has left its start-up, the farthest
//! member that carries a share worth measuring, with room in the others' peaks for it, is
//! tried: the group's summed delivered rate is measured over `shared_measure_rtts` of the
//! members' largest sRTT with everyone sending, then the member is left idle for
//! `shared_trial_rtts` of the kept members' largest sRTT, their summed rate measured over the
//! last `shared_measure_rtts`. If they carry `shared_confirm` of what the group carried, it
//! stays idle (and is measured again over each such span: it sends again once they fall
//! short); otherwise it sends again and is not tried again. One trial per group at a time,
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
}

/// One path's trial behind a line.
#[derive(Debug, Clone)]
enum LineTrial {
    /// Every member still sends: the group's summed rate is measured from `from` (its
    /// members had `delivered` then) until `until`.
    Baseline {
        members: Vec<PathId>,
        from: Instant,
        delivered: u64,
        until: Instant,
    },
    /// The path is idle until `until`; the kept members' summed rate is measured from the
    /// first call at or after `measure` (`sample`: its time and their deliveries then), and
    /// must reach `needed`.
    Idle {
        kept: Vec<PathId>,
        needed: f64,
        measure: Instant,
        sample: Option<(Instant, u64)>,
        until: Instant,
    },
    /// The kept members carried the group's rate alone: the path stays idle while one of them
    /// that sends answers sooner, and while they keep carrying `needed`, measured again over
    /// each `span` seconds from `sample` (their deliveries then).
    Kept {
        kept: Vec<PathId>,
        needed: f64,
        span: f64,
        sample: (Instant, u64),
    },
}

impl Lines {
    fn state(&self, path: PathId) -> Option<&LineTrial> {
        self.trials.iter().find(|(p, _)| *p == path).map(|(_, t)| t)
    }

    /// The path is left idle (on trial, or kept so).
    fn idle(&self, path: PathId) -> bool {
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

/// Packets a second delivered since `(from, delivered)`, `sum` delivered by `now`.
fn rate_since((from, delivered): (Instant, u64), now: Instant, sum: u64) -> f64 {
    (sum - delivered) as f64 / (now - from).as_secs_f64()
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
        let mut k = 0;
        while k < lines.trials.len() {
            let path = lines.trials[k].0;
            // `None`: the trial ends and the path sends again; `Some(true)` with it, failed.
            let mut end = None;
            match &mut lines.trials[k].1 {
                LineTrial::Baseline {
                    members,
                    from,
                    delivered,
                    until,
                } => {
                    if now >= *until {
                        match delivered_of(view, members) {
                            Some(sum) if sum > *delivered => {
                                let rate = rate_since((*from, *delivered), now, sum);
                                let kept: Vec<PathId> = members.iter().copied().filter(|&p| p != path).collect();
                                let srtt = largest_srtt(view, &kept);
                                let until = after(now, cfg.shared_trial_rtts * srtt);
                                lines.trials[k].1 = LineTrial::Idle {
                                    kept,
                                    needed: cfg.shared_confirm * rate,
                                    measure: after(now, (cfg.shared_trial_rtts - cfg.shared_measure_rtts) * srtt),
                                    sample: None,
                                    until,
                                };
                            }
                            _ => end = Some(false),
                        }
                        self.sharing_moved = true;
                    }
                }
                LineTrial::Idle {
                    kept,
                    needed,
                    measure,
                    sample,
                    until,
                } => match delivered_of(view, kept) {
                    None => end = Some(false),
                    Some(sum) => {
                        if sample.is_none() && now >= *measure {
                            *sample = Some((now, sum));
                            self.sharing_moved = true;
                        }
                        if let Some((from, before)) = *sample {
                            if now >= *until && now > from {
                                let rate = rate_since((from, before), now, sum);
                                if rate >= *needed {
                                    lines.trials[k].1 = LineTrial::Kept {
                                        kept: std::mem::take(kept),
                                        needed: *needed,
                                        span: (now - from).as_secs_f64(),
                                        sample: (now, sum),
                                    };
                                } else {
                                    end = Some(true);
                                }
                                self.sharing_moved = true;
                            }
                        }
                    }
                },
                LineTrial::Kept {
                    kept,
                    needed,
                    span,
                    sample,
                } => match delivered_of(view, kept) {
                    None => end = Some(false),
                    // The line's rate may fall later (a kept member's control backs off, or
                    // the trial measured a start-up's burst): the path sends again.
                    Some(sum) if (now - sample.0).as_secs_f64() >= *span => {
                        let rate = rate_since(*sample, now, sum);
                        if rate < *needed {
                            end = Some(true);
                        } else {
                            *sample = (now, sum);
                        }
                        self.sharing_moved = true;
                    }
                    Some(_) => {}
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
            // before, the group carries less than the line, and any trial would pass.
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
                            from: now,
                            delivered,
                            until: after(now, cfg.shared_measure_rtts * srtt),
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

    /// The pairwise trial in place of the set trial.
    fn pairwise() -> WeaveConfig {
        WeaveConfig {
            shared_line: false,
            ..WeaveConfig::default()
        }
    }

    /// A fast 10 ms path (full window, 1500 packets/s peak) answering 1000 packets/s and two
    /// later ones, 30 and 40 ms, answering 200 each, their queueing delays on one saw: three
    /// paths behind one line. From the moment the 40 ms path is left idle, the fast one
    /// answers `trial_rate`. Every 10 ms weave is called with no path able to send (the
    /// trials move on); at each of `at_ms` it is asked which of the two later paths would
    /// send, each alone: `(30 ms path, 40 ms path)`, whether each would pick.
    fn three_paths_behind_one_line(cfg: WeaveConfig, trial_rate: f64, at_ms: &[u64]) -> Vec<(bool, bool)> {
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
            let mut due: Vec<u32> = vec![0; fast as usize];
            if ms % 5 == 1 {
                due.push(1);
            }
            if ms % 5 == 3 && !idle {
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
        let steps = three_paths_behind_one_line(set_trial(), 1200.0, &[400, 600, 750]);
        assert_eq!(steps, vec![(true, true), (true, false), (true, false)]);
        // The line's rate fell without it: it sends again after its trial (700 ms).
        let steps = three_paths_behind_one_line(set_trial(), 1000.0, &[400, 600, 750]);
        assert_eq!(steps, vec![(true, true), (true, false), (true, true)]);
    }

    #[test]
    fn the_pairwise_trial_leaves_two_paths_behind_one_line_idle_at_once() {
        // What the set trial replaces: both later paths on trial behind the fast one together,
        // each crediting the fast path's gain to itself.
        let steps = three_paths_behind_one_line(pairwise(), 1200.0, &[600]);
        assert_eq!(steps, vec![(false, false)]);
    }
}
