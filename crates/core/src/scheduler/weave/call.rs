//! What one `next()` call reads of each path, kept between calls: the arrival clocks, the
//! rates, the pipe-cap verdicts and the order, recomputed only for the paths that changed.

use super::Weave;
use super::arrival::{PathClock, answer_and_penalty, expected_time};
use crate::scheduler::{PathView, View};
use crate::time::{Duration, Instant};

/// What one `next()` call reads of each path, computed once per call rather than once per
/// use (each path's Eq. 7 offset and drain time read every sooner path's rate): the arrival
/// clock, the path's rate, the rate it counts at in a later path's offset, and whether it is
/// under its pipe cap; and the paths that may send, soonest first. Kept between calls so
/// that a call allocates nothing, and recomputes only the paths that changed (`per_call`).
#[derive(Debug, Default)]
pub(super) struct PerCall {
    pub(super) at: Vec<f64>,
    pub(super) rate: Vec<f64>,
    pub(super) sooner: Vec<f64>,
    /// Eq. 6's loss penalty and the answer to a request that meets no queue
    /// (`arrival::answer_and_penalty`): a pick on the path reads them
    /// again, on the view they were computed on.
    pub(super) penalty: Vec<f64>,
    pub(super) unqueued: Vec<f64>,
    pub(super) under_cap: Vec<bool>,
    /// For a path left idle in another's place by the pairwise trial (`shared`), the path
    /// that carries its share meanwhile: Eq. 7 counts the idle path's rate from that path's
    /// answer on.
    pub(super) stand_in: Vec<Option<usize>>,
    pub(super) order: Vec<usize>,
    /// What the values were computed from: the time, whether the first frame was shown and
    /// the packet size; each path's view and its clock's version.
    pub(super) key: Option<(Instant, Option<bool>, u64)>,
    pub(super) views: Vec<PathView>,
    pub(super) versions: Vec<Option<u64>>,
    /// The paths whose values this call recomputed.
    pub(super) changed: Vec<usize>,
}

impl Weave {
    /// Keeps each path's peak delivery rate over the last `peak_window_rtts` round trips, and
    /// the pipe cap's RTT from a round measured while the path's pipe was not full.
    #[cfg(test)]
    pub(super) fn update_peaks(&mut self, view: &View<'_>) {
        self.update_peaks_since(view, None);
    }

    /// `update_peaks`, with the last call's values (`last`): at the same instant and packet
    /// size, a path whose view the core promises unchanged (`View::only_changed`) and whose
    /// clock is as that call left it would feed its filters the sample they were last fed,
    /// so only its pipe-cap RTT is looked at (the peak may have moved after that call's look).
    pub(super) fn update_peaks_since(&mut self, view: &View<'_>, last: Option<&PerCall>) {
        let promised = last.and_then(|call| Self::promised(view, call));
        let unchanged = |j: usize| promised.is_some_and(|i| i != j);
        for (j, p) in view.paths.iter().enumerate() {
            let Some(rate) = p.delivery_rate else { continue };
            let state = self.clocks.entry_unversioned(p.id, &self.cfg);
            let same = unchanged(j) && last.is_some_and(|call| call.versions[j] == Some(state.version));
            if let (Some(peak), Some(rtt)) = (state.peak.get(), state.last_round_pipe_rtt) {
                if rate * self.cfg.pipe_gain < peak && state.pipe_rtt != Some(rtt) {
                    state.pipe_rtt = Some(rtt);
                    state.version += 1;
                }
            }
            if same {
                // The key below is the one the filters were last updated with.
                continue;
            }
            // The delivery rate is measured over a window's worth of answers, seconds when the
            // window is large and the cap holds the path to a few requests in flight; the last
            // round trip's answers show within one RTT that the path carries more.
            let rate = rate.max(state.last_round_rate.unwrap_or(0.0) * view.packet_size as f64);
            // Between picks at one instant nothing of this changes: the filters, fed the same
            // sample at the same time over the same window, would stay as they are.
            let key = (view.now, rate, p.srtt, p.cwnd);
            if state.peaks_updated == Some(key) {
                continue;
            }
            state.peaks_updated = Some(key);
            state.version += 1;
            let round = p
                .srtt
                .min((p.min_rtt.mul_f64(self.cfg.peak_window_queue)).max(self.cfg.peak_window_least));
            let window = Duration::from_secs_f64(self.cfg.peak_window_rtts * round.as_secs_f64());
            // Once the peak ages out, the best rate measured since takes over, not the latest:
            // that one may come from a window the control has just cut (BBR's ProbeRTT at 4
            // packets for 200 ms, longer than the delivery rate's lag behind its recovery).
            state.peak.update(view.now, rate, window);
            state.window_peak.update(view.now, p.cwnd, window);
        }
    }

    /// Packets per second: the peak delivery rate (the Eq. 5 estimate before one is kept), or
    /// the rate of the last round trip's answers if higher. The delivery rate is measured over
    /// a window of answers and lags a rising rate (a rate-based control such as Vivace ramping
    /// up), and a clock spaced by a lagging rate predicts a queue that is not there.
    pub(super) fn rate(state: Option<&PathClock>, view: &View<'_>, p: &PathView) -> f64 {
        let bytes = match state.and_then(|c| c.peak.get()) {
            Some(peak) => peak,
            None => p.throughput(view.packet_size),
        };
        let answered = state.and_then(|c| c.last_round_rate).unwrap_or(0.0);
        (bytes / view.packet_size as f64).max(answered)
    }

    /// Fills `call` for `view`: each path's rates, the seconds from now until the answer to a
    /// request sent now on it, and whether it is under its pipe cap; and the paths that may
    /// send, soonest answer first. A path's values are recomputed only if the time, its view or
    /// its clock changed since the last call: between the picks of one instant, only the path
    /// that took the last pick has.
    pub(super) fn per_call(&self, view: &View<'_>, call: &mut PerCall) {
        let now = view.now.since_epoch().as_secs_f64();
        let n = view.paths.len();
        let key = (view.now, view.first_frame_shown(), view.packet_size);
        let whole = call.key != Some(key) || call.views.len() != n;
        if whole {
            call.key = Some(key);
            call.views.clear();
            call.views.extend_from_slice(view.paths);
            call.versions.clear();
            call.versions.resize(n, None);
            for values in [
                &mut call.at,
                &mut call.rate,
                &mut call.sooner,
                &mut call.penalty,
                &mut call.unqueued,
            ] {
                values.clear();
                values.resize(n, 0.0);
            }
            call.under_cap.clear();
            call.under_cap.resize(n, false);
        }
        call.changed.clear();
        // The call's key is this one's (else `whole`), so the core's promise holds as given.
        let promised = if whole { None } else { view.only_changed };
        for (j, p) in view.paths.iter().enumerate() {
            let state = self.clocks.get(&p.id);
            let version = state.map(|c| c.version);
            if !whole && call.versions[j] == version && (promised.is_some_and(|i| i != j) || call.views[j] == *p) {
                continue;
            }
            call.changed.push(j);
            let rate = Self::rate(state, view, p);
            let (base, penalty) = answer_and_penalty(p, self.cfg.max_loss);
            let at = match state {
                // Before a rate is kept, Eq. 5's stand-in (a window per sRTT): a burst sent
                // at once is still answered one request after another.
                Some(state @ PathClock { clock: Some(clock), .. }) => {
                    // A request queued behind others is as likely lost as one that is not:
                    // the penalty goes on either answer.
                    let queued = clock.since_epoch().as_secs_f64() - now + 1.0 / rate;
                    let model = base.max(queued + penalty);
                    // No answer comes before the minimum RTT, whatever the error says.
                    (model + state.shift()).max(p.min_rtt.as_secs_f64())
                }
                // Nothing asked on the path yet: Eq. 6 as Pscheduler has it.
                _ => expected_time(p, self.cfg.max_loss).as_secs_f64(),
            };
            call.at[j] = at;
            call.rate[j] = rate;
            call.sooner[j] = self.sooner_rate(state, rate, p);
            call.penalty[j] = penalty;
            call.unqueued[j] = base;
            call.under_cap[j] = self.under_pipe_cap(view, p);
            call.versions[j] = version;
            if !whole {
                call.views[j].clone_from(p);
            }
        }
        // Soonest answer first, ties by path id: a strict order (the ids differ), so the paths
        // whose values stayed keep their places among themselves, and only the changed ones
        // are put back where they now belong.
        let at = &call.at;
        let before = |a: usize, b: usize| {
            at[a]
                .total_cmp(&at[b])
                .then(view.paths[a].id.cmp(&view.paths[b].id))
                .is_lt()
        };
        if whole {
            call.order.clear();
        } else {
            for j in &call.changed {
                if let Some(place) = call.order.iter().position(|k| k == j) {
                    call.order.remove(place);
                }
            }
        }
        for &j in &call.changed {
            if view.paths[j].can_send {
                let place = call
                    .order
                    .iter()
                    .position(|&k| before(j, k))
                    .unwrap_or(call.order.len());
                call.order.insert(place, j);
            }
        }
    }

    /// `Some(i)`: every path's view but `paths[i]`'s is the one `call` was computed on, as the
    /// core promises (`View::only_changed`) for a call at the same instant and packet size;
    /// `None`: no promise.
    fn promised(view: &View<'_>, call: &PerCall) -> Option<usize> {
        let i = view.only_changed?;
        let comparable = call.views.len() == view.paths.len()
            && call
                .key
                .is_some_and(|(now, _, size)| now == view.now && size == view.packet_size);
        comparable.then_some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    #[test]
    fn a_round_trip_stretched_by_its_own_queue_counts_as_four_minimum_rtts_in_the_peak() {
        // An 8 ms path whose requests queue for 13 s: a burst read at 4 times its rate at 0 s
        // ages out after 10 round trips of max(4 × 8 ms, 200 ms) = 2 s, not 10 × 13 s.
        let mut p = path(0, 8, 10, 0);
        p.srtt = Duration::from_secs(13);
        p.delivery_rate = Some(4_000_000.0);
        let mut f = Fixture::new(vec![p], 0..1000);
        let mut w = Weave::default();
        w.update_peaks(&f.view());
        f.path_mut(0).delivery_rate = Some(1_000_000.0);
        for (ms, peak) in [(1_000, 4e6), (2_100, 1e6)] {
            f.now = Instant::from_nanos(ms * 1_000_000);
            w.update_peaks(&f.view());
            assert_eq!(
                w.clocks.get(&PathId(0)).and_then(|c| c.peak.get()),
                Some(peak),
                "at {ms} ms"
            );
        }
    }
}
