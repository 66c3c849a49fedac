//! Loss-event rate as TFRC computes it, RFC 5348 §5.

use std::collections::VecDeque;

use crate::time::{Duration, Instant};

/// RFC 5348 §5.4: n = 8 loss intervals, weighted 1, 1, 1, 1, 0.8, 0.6, 0.4, 0.2 (most recent
/// first), so the estimate follows a change within a few events without jumping on one.
const WEIGHTS: [f64; 8] = [1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];
/// Events kept: the current one plus the starts of the 8 closed intervals before it.
const MAX_EVENTS: usize = WEIGHTS.len() + 1;

/// The first lost request of one loss event.
#[derive(Clone, Copy, Debug)]
struct LossEvent {
    pn: u64,
    sent: Instant,
}

/// TFRC loss-event rate of one path. Requests are numbered per path in send order
/// (`pn`); outcomes may be reported out of order, since a loss is known only later.
///
/// The intervals are counted in request numbers (§5.3): a closed interval runs from the
/// first loss of one event up to (not including) the first loss of the next; the open
/// interval I_0 runs from the first loss of the newest event to the highest request
/// answered, both ends included. Before the first event there is no interval to average,
/// and the sender-side synthesis of §6.3.1 needs the TCP throughput equation; instead the
/// requests before the first loss count as one interval, as if request `first − 1` had
/// been lost. That stand-in drops out once 8 real intervals exist.
#[derive(Clone, Debug, Default)]
pub struct LossEventRate {
    /// Loss events in request-number order, at most [`MAX_EVENTS`].
    events: VecDeque<LossEvent>,
    /// An event was dropped from the front: the oldest kept event has no known start.
    forgot: bool,
    /// Lowest request number reported (answered or lost).
    lowest: Option<u64>,
    /// Highest request number answered.
    highest_arrival: Option<u64>,
    /// What the mean takes from the closed intervals, which change only with a loss event
    /// (or a new lowest request), while the open one grows with every arrival.
    closed: ClosedIntervals,
}

/// The closed intervals' part of §5.4's sums, computed once per change of the events.
#[derive(Clone, Debug, Default)]
struct ClosedIntervals {
    /// k, the number of closed intervals (the stand-in included).
    k: usize,
    /// I_1 + … + I_min(k−1, 3): the closed intervals that share weight 1 with I_0 in I_tot0.
    /// Sums of integers are exact in f64, so I_0 can be added to them first.
    ones: u64,
    /// I_i·w_i for i = 4..k−1, the rest of I_tot0, in order.
    tail: [f64; WEIGHTS.len()],
    /// I_tot1 and W_tot.
    tot1: f64,
    w_tot: f64,
}

impl LossEventRate {
    pub fn new() -> Self {
        Self::default()
    }
    /// Data for request `pn` arrived.
    pub fn on_arrival(&mut self, pn: u64) {
        self.note_pn(pn);
        self.highest_arrival = Some(self.highest_arrival.map_or(pn, |h| h.max(pn)));
    }
    /// Request `pn`, sent at `sent`, was lost. Losses within one `rtt` of the first loss of
    /// an event belong to that event (§5.2).
    pub fn on_loss(&mut self, pn: u64, sent: Instant, rtt: Duration) {
        self.note_pn(pn);
        if self.add_loss(pn, sent, rtt) {
            self.closed = self.closed_intervals();
        }
    }

    /// Records the loss in the events; returns whether they changed.
    fn add_loss(&mut self, pn: u64, sent: Instant, rtt: Duration) -> bool {
        // Index of the first event starting after `pn`; the one before it, if any, is the
        // event `pn` would join.
        let after = self.events.partition_point(|e| e.pn <= pn);
        if after > 0 {
            let prev = self.events[after - 1];
            if prev.pn == pn || sent <= prev.sent + rtt {
                return false;
            }
        } else if self.forgot && !self.events.is_empty() {
            // Older than the oldest kept event: its interval has already been forgotten.
            return false;
        }
        self.events.insert(after, LossEvent { pn, sent });
        // A loss reported late may be the true first loss of the event that follows it:
        // that event then starts here instead (§5.2 measures from the first loss).
        if let Some(next) = self.events.get(after + 1).copied() {
            if next.sent <= sent + rtt {
                self.events.remove(after + 1);
            }
        }
        if self.events.len() > MAX_EVENTS {
            self.events.pop_front();
            self.forgot = true;
        }
        true
    }
    /// Loss-event rate p = 1 / mean loss interval (§5.4, weights over the last 8 intervals,
    /// the open interval counted when it raises the mean); 0 before the first loss.
    pub fn rate(&self) -> f64 {
        match self.mean_interval() {
            Some(mean) if mean > 0.0 => 1.0 / mean,
            _ => 0.0,
        }
    }
    /// The weighted mean loss interval I_mean in requests (§5.4); `None` before the first
    /// loss.
    pub fn mean_interval(&self) -> Option<f64> {
        let newest = self.events.back()?;
        // I_0, the open interval.
        let top = self.highest_arrival.unwrap_or(newest.pn).max(newest.pn);
        let open = top - newest.pn + 1;
        let c = &self.closed;
        // k closed intervals; §5.4:
        //   I_tot0 = Σ_{i=0}^{k-1} I_i·w_i,  I_tot1 = Σ_{i=1}^{k} I_i·w_{i-1},
        //   W_tot = Σ_{i=0}^{k-1} w_i,       I_mean = max(I_tot0, I_tot1) / W_tot.
        // I_tot0 summed in this order, the weight-1 terms first: bit for bit the plain sum.
        let tot0 = match open.checked_add(c.ones).filter(|&s| s < 1 << 53) {
            Some(ones) if c.k > 0 => c.tail[..c.k.saturating_sub(4)]
                .iter()
                .fold(ones as f64, |tot, term| tot + term),
            Some(_) => 0.0,
            // Beyond 2^53 the terms round one by one; sum them as §5.4 writes it.
            None => {
                let mut intervals = self.closed_list();
                intervals[0] = open;
                WEIGHTS
                    .iter()
                    .zip(&intervals)
                    .take(c.k)
                    .fold(0.0, |tot, (w, &i)| tot + i as f64 * w)
            }
        };
        Some(tot0.max(c.tot1) / c.w_tot)
    }

    /// Intervals newest first, with I_0 left at 0: I_1..I_k (closed), then zeros.
    fn closed_list(&self) -> [u64; MAX_EVENTS] {
        let mut intervals = [0u64; MAX_EVENTS];
        let mut count = 1;
        for j in (1..self.events.len()).rev() {
            if count == intervals.len() {
                break;
            }
            intervals[count] = self.events[j].pn - self.events[j - 1].pn;
            count += 1;
        }
        if !self.forgot && count < intervals.len() {
            if let Some(oldest) = self.events.front().map(|e| e.pn) {
                let first = self.lowest.unwrap_or(oldest).min(oldest);
                intervals[count] = oldest - first + 1;
            }
        }
        intervals
    }

    fn closed_intervals(&self) -> ClosedIntervals {
        if self.events.is_empty() {
            return ClosedIntervals::default();
        }
        // The same count as the list: events − 1 intervals between events, plus the
        // stand-in unless forgotten, at most MAX_EVENTS − 1.
        let between = self.events.len() - 1;
        let stand_in = usize::from(!self.forgot && between + 1 < MAX_EVENTS);
        let k = (between + stand_in).min(MAX_EVENTS - 1);
        let intervals = self.closed_list();
        let mut c = ClosedIntervals {
            k,
            ones: intervals[1..k.min(4)].iter().sum(),
            ..ClosedIntervals::default()
        };
        for (i, w) in WEIGHTS.iter().enumerate().take(k) {
            if i >= 4 {
                c.tail[i - 4] = intervals[i] as f64 * w;
            }
            c.tot1 += intervals[i + 1] as f64 * w;
            c.w_tot += w;
        }
        c
    }

    fn note_pn(&mut self, pn: u64) {
        if self.lowest.is_none_or(|l| pn < l) {
            self.lowest = Some(pn);
            // The stand-in interval starts at the lowest request.
            self.closed = self.closed_intervals();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Request `pn` is sent at `pn` ms: with the 100 ms RTT below, 100 requests per RTT.
    fn at(pn: u64) -> Instant {
        Instant::from_nanos(pn * 1_000_000)
    }

    fn lose(r: &mut LossEventRate, pn: u64, rtt_ms: u64) {
        r.on_loss(pn, at(pn), Duration::from_millis(rtt_ms));
    }

    fn arrive(r: &mut LossEventRate, pns: std::ops::RangeInclusive<u64>) {
        for pn in pns {
            r.on_arrival(pn);
        }
    }

    /// One loss event at each of `losses` (each the only loss of its event when the RTT is
    /// short enough), every other request up to `highest` answered.
    fn history(losses: &[u64], highest: u64, rtt_ms: u64) -> LossEventRate {
        let mut r = LossEventRate::new();
        for pn in 0..=highest {
            if losses.contains(&pn) {
                lose(&mut r, pn, rtt_ms);
            } else {
                r.on_arrival(pn);
            }
        }
        r
    }

    #[test]
    fn zero_before_any_loss() {
        let mut r = LossEventRate::new();
        assert_eq!(r.rate(), 0.0);
        arrive(&mut r, 0..=1000);
        assert_eq!(r.rate(), 0.0);
        assert_eq!(r.mean_interval(), None);
    }

    #[test]
    fn first_loss_uses_the_requests_before_it() {
        let mut r = history(&[99], 99, 100);
        // Stand-in closed interval I_1 = 99 − 0 + 1 = 100 (requests 0..=99).
        // Open interval I_0 = 99 − 99 + 1 = 1 (nothing answered after the loss).
        // k = 1: I_tot0 = 1·1, I_tot1 = 100·1, W_tot = 1 → I_mean = 100, p = 0.01.
        assert_eq!(r.mean_interval(), Some(100.0));
        assert!((r.rate() - 0.01).abs() < 1e-12);

        // I_0 = 249 − 99 + 1 = 151 > I_1 = 100: the open interval raises the mean (§5.4).
        arrive(&mut r, 100..=249);
        assert_eq!(r.mean_interval(), Some(151.0));
        assert!((r.rate() - 1.0 / 151.0).abs() < 1e-12);
    }

    #[test]
    fn losses_within_one_rtt_of_the_first_are_one_event() {
        let mut r = history(&[99], 148, 100);
        // Sent 50 ms and exactly 100 ms after pn 99: both join its event (§5.2).
        lose(&mut r, 149, 100);
        arrive(&mut r, 150..=198);
        lose(&mut r, 199, 100);
        arrive(&mut r, 200..=210);
        // Still one event at 99: I_1 = 100, I_0 = 210 − 99 + 1 = 112 → max(112, 100) = 112.
        assert_eq!(r.mean_interval(), Some(112.0));

        // 101 ms after pn 99: a new event.
        lose(&mut r, 200, 100);
        arrive(&mut r, 211..=239);
        // I_0 = 239 − 200 + 1 = 40, I_1 = 200 − 99 = 101, I_2 = stand-in 100.
        // k = 2: I_tot0 = 40 + 101 = 141, I_tot1 = 101 + 100 = 201, W_tot = 2 → 100.5.
        assert_eq!(r.mean_interval(), Some(100.5));
    }

    #[test]
    fn weighted_mean_of_the_last_eight_intervals() {
        // A 10 ms RTT makes every loss below its own event. Events at 99, 199, …, 799 and
        // then 839; every other request up to 859 answered.
        let mut losses: Vec<u64> = (1..=8).map(|i| i * 100 - 1).collect();
        losses.push(839);
        let r = history(&losses, 859, 10);
        // Newest first: I_0 = 859 − 839 + 1 = 21; closed I_1 = 839 − 799 = 40,
        // I_2..I_8 = 100 (799 − 699, …, 199 − 99); the stand-in (99 − 0 + 1) would be a
        // ninth closed interval and is left out.
        // I_tot0 = 21·1 + 40·1 + 100·(1 + 1 + 0.8 + 0.6 + 0.4 + 0.2)       = 61 + 400 = 461
        // I_tot1 = 40·1 + 100·(1 + 1 + 1 + 0.8 + 0.6 + 0.4 + 0.2)         = 40 + 500 = 540
        // W_tot = 6 → I_mean = 540 / 6 = 90, p = 1/90.
        assert_eq!(r.mean_interval(), Some(90.0));
        assert!((r.rate() - 1.0 / 90.0).abs() < 1e-12);

        // The same short interval as the oldest weighs 0.2 instead of 1: events at 99, 139,
        // 239, …, 839: I_1..I_7 = 100, I_8 = 40.
        // I_tot1 = 100·(1 + 1 + 1 + 1 + 0.8 + 0.6 + 0.4) + 40·0.2 = 580 + 8 = 588 → 98.
        let mut losses = vec![99, 139];
        losses.extend((1..=7).map(|i| 139 + i * 100));
        let r = history(&losses, 859, 10);
        // I_0 = 859 − 839 + 1 = 21 does not raise the mean:
        // I_tot0 = 21·1 + 100·(1 + 1 + 1 + 0.8 + 0.6 + 0.4 + 0.2) = 521 < 588.
        assert_eq!(r.mean_interval(), Some(98.0));
    }

    #[test]
    fn history_is_bounded_and_the_open_interval_counts_when_it_raises_the_mean() {
        // Ten events 1000 requests (1 s) apart: 999, 1999, …, 9999; the oldest is forgotten,
        // leaving eight closed intervals of 1000.
        let losses: Vec<u64> = (1..=10).map(|i| i * 1000 - 1).collect();
        let mut r = history(&losses, 10_498, 100);
        // I_0 = 10498 − 9999 + 1 = 500: I_tot0 = 500 + 1000·5 = 5500 < I_tot1 = 6000 → 1000.
        assert_eq!(r.mean_interval(), Some(1000.0));
        arrive(&mut r, 10_499..=11_998);
        // I_0 = 2000: I_tot0 = 2000 + 5000 = 7000 > 6000 → 7000 / 6.
        assert!((r.mean_interval().unwrap() - 7000.0 / 6.0).abs() < 1e-9);
        // A straggler report about pn 5 is older than every kept event.
        lose(&mut r, 5, 100);
        assert!((r.mean_interval().unwrap() - 7000.0 / 6.0).abs() < 1e-9);
    }

    #[test]
    fn out_of_order_reports() {
        // pn 4 lost, reported after 5, 6, 7 arrived.
        let mut r = LossEventRate::new();
        arrive(&mut r, 0..=3);
        arrive(&mut r, 5..=7);
        lose(&mut r, 4, 100);
        // I_1 = stand-in 4 − 0 + 1 = 5, I_0 = 7 − 4 + 1 = 4 → I_mean = max(4, 5) = 5.
        assert_eq!(r.mean_interval(), Some(5.0));

        // A later loss reported first, then an earlier one of the same event: the event
        // now starts at the earlier loss.
        let mut r = LossEventRate::new();
        arrive(&mut r, 0..=49);
        arrive(&mut r, 51..=59);
        arrive(&mut r, 61..=99);
        lose(&mut r, 60, 100);
        // I_1 = 60 − 0 + 1 = 61, I_0 = 99 − 60 + 1 = 40 → 61.
        assert_eq!(r.mean_interval(), Some(61.0));
        lose(&mut r, 50, 100);
        // 50 and 60 were sent 10 ms apart: one event from 50.
        // I_1 = 51, I_0 = 99 − 50 + 1 = 50 → 51.
        assert_eq!(r.mean_interval(), Some(51.0));

        // An earlier loss more than one RTT before an event opens an event of its own.
        lose(&mut r, 20, 10);
        // Events 20, 50: I_0 = 50, I_1 = 30, I_2 = stand-in 21.
        // I_tot0 = 50 + 30 = 80, I_tot1 = 30 + 21 = 51, W_tot = 2 → 40.
        assert_eq!(r.mean_interval(), Some(40.0));
    }
}
