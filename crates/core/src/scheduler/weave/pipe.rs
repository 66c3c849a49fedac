//! The pipe cap and its start-up test: how many requests a path may hold in flight.
//!
//! **Pipe cap**: a path keeps at most `1.25 · R̂_i ÷ (1 − loss) · rtt_i` plus 4 requests
//! in flight (BBR's in-flight bound with its 1.25 probing gain, Cardwell et al. 2016):
//! enough to keep its bottleneck busy and to measure more rate when there is more, but no
//! standing queue whose length the congestion control sets (a loss-based control fills
//! the whole buffer, and answers then come a buffer's delay late). `rtt_i` is the minimum
//! RTT, or, once the path has delivered below `R̂_i ÷ 1.25` (its pipe was not full, so no
//! queue of its own was there to inflate the RTT), the smallest RTT sample of the last
//! round trip measured then: under delay jitter the minimum RTT is an outlier, a cap
//! sized by it starves the path, and the peak rate then decays with the starved rate.
//! When that round trip's samples spread by more than a quarter of the smallest (jitter;
//! a queue lifts them together), their mean: a request meets the mean RTT.
//! Only requests the model queued behind less than a fifth of their RTT give such samples:
//! the answers to a burst (a task's start) measure the burst's own queue, and a cap sized
//! by them lets the queue grow until the bottleneck drops packets.
//! While a path starts up (its round trips' answer rate still grows by a quarter within
//! 3 round trips, BBR's full-pipe test; once over, for good) and no first frame is
//! awaited, the gain is 1.75: the peak rate lags a window that doubles
//! each round trip, and a cap at 1.25 of it held Copa's growth back (Pscheduler Fig. 17:
//! 9.66 s against ECF's 9.64, now 9.60).

use super::{PathClock, Round, Weave};
use crate::path::PACKET_THRESHOLD;
use crate::scheduler::{PathView, View};

impl Round {
    /// RTT a request met on this round trip when no queue of the path's own was ahead of
    /// it: the smallest unqueued sample, or their mean when they spread by more than
    /// `jitter_spread` of it. A queue lifts every sample of a round trip together; delay
    /// jitter spreads them, and a request then meets the mean, not the smallest (Little's
    /// law: in flight = rate × mean RTT).
    pub(super) fn pipe_rtt(&self, jitter_spread: f64) -> Option<f64> {
        let least = self.least_unqueued?;
        let mean = self.unqueued_sum / f64::from(self.unqueued_count);
        Some(if mean - least > jitter_spread * least {
            mean
        } else {
            least
        })
    }
}

impl PathClock {
    /// Ends the start-up once a round trip's answer rate has not grown by `startup_growth`
    /// over the best before it for `startup_flat_rounds` round trips (BBR's full-pipe test,
    /// `estimate::FullPipe`, on the answers instead of the delivery-rate filter). Once over,
    /// for good: a task's start after a pause is a window reopening, not a pipe to discover.
    pub(super) fn on_round_rate(&mut self, rate: f64) {
        self.startup.on_round(rate);
    }

    /// The path's start-up is over.
    pub(super) fn started(&self) -> bool {
        self.startup.is_full()
    }
}

impl Weave {
    /// The path's requests in flight are under its pipe cap (always, before a rate is kept).
    pub(super) fn under_pipe_cap(&self, view: &View<'_>, p: &PathView) -> bool {
        if !self.cfg.pipe_cap {
            return true;
        }
        let Some(state) = self.clocks.get(&p.id) else {
            return true;
        };
        let Some(peak) = state.peak.get() else {
            return true;
        };
        let min_rtt = p.min_rtt.as_secs_f64();
        let rtt = state.pipe_rtt.map_or(min_rtt, |r| r.max(min_rtt));
        let pipe = peak / (1.0 - p.loss_rate.min(self.cfg.max_loss)) * rtt / view.packet_size as f64;
        // Lossy or not: the full-pipe test ends the start-up when the answer rate stops
        // growing, and a lossy link's random loss says nothing of the pipe. Not before the
        // first frame: its packets would wait in the deeper queue.
        let starting = self.cfg.startup_test && !state.started() && view.first_frame_shown() != Some(false);
        let gain = if starting {
            self.cfg.startup_pipe_gain
        } else {
            self.cfg.pipe_gain
        };
        (p.in_flight as f64) < gain * pipe + self.allowance(state)
    }

    /// Requests in flight beyond the gain's: `pipe_allowance`, or, with `loss_bursts`, the
    /// path's longest run of losses (up to `max_loss_burst`) plus RFC 9002 §6.1.1's packet
    /// threshold if more. A burst that takes every request in flight leaves no answer behind
    /// it to declare it, and only the timeout finds it, which a loss-based control answers
    /// by starting over from one packet: world 7115 under CUBIC, a 1.8 Mbit/s edge at 7 ms
    /// (a cap of 5) losing bursts of 6.5 on average, idled 0.5-1 s after each.
    fn allowance(&self, state: &PathClock) -> f64 {
        let burst = if self.cfg.loss_bursts {
            state.loss_burst.min(self.cfg.max_loss_burst) + PACKET_THRESHOLD
        } else {
            0
        };
        self.cfg.pipe_allowance.max(burst as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    /// The pipe-cap RTT of a round trip of 100 ms (opened by a 100 ms sample at 0) whose
    /// other answers, none queued behind the model's requests, measured `samples_ms`; closed
    /// by an answer at 100 ms.
    fn round_pipe_rtt(samples_ms: &[f64]) -> Option<f64> {
        let mut clock = PathClock::new(&WeaveConfig::default());
        clock.on_rtt_sample(Instant::ZERO, 0.1, 0.0, &WeaveConfig::default());
        for (i, &rtt) in samples_ms.iter().enumerate() {
            clock.on_rtt_sample(
                Instant::from_nanos(1_000_000 * (i as u64 + 1)),
                rtt / 1e3,
                0.0,
                &WeaveConfig::default(),
            );
        }
        clock.on_rtt_sample(Instant::from_nanos(100_000_000), 0.1, 0.0, &WeaveConfig::default());
        clock.last_round_pipe_rtt
    }

    #[test]
    fn a_jittery_round_trip_sizes_the_pipe_cap_by_its_mean_rtt_and_a_queued_one_by_its_least() {
        // Samples from 100 to 120 ms (a queue's rise, or little jitter): the smallest.
        let tight = round_pipe_rtt(&[105.0, 110.0, 115.0, 120.0]).unwrap();
        assert!((tight - 0.100).abs() < 1e-9, "{tight}");
        // From 100 to 220 ms: mean 160 ms, 60 % above the smallest.
        let jittery = round_pipe_rtt(&[130.0, 160.0, 190.0, 220.0]).unwrap();
        assert!((jittery - 0.160).abs() < 1e-9, "{jittery}");
        // A request the model queued behind most of its RTT says nothing of the pipe.
        let mut clock = PathClock::new(&WeaveConfig::default());
        clock.on_rtt_sample(Instant::ZERO, 0.1, 0.09, &WeaveConfig::default());
        clock.on_rtt_sample(Instant::from_nanos(100_000_000), 0.1, 0.09, &WeaveConfig::default());
        assert_eq!(clock.last_round_pipe_rtt, None);
    }

    #[test]
    fn a_path_at_its_pipe_cap_gets_no_request() {
        // 10 ms at 1000 packets/s: a 10-packet pipe, so at most 1.25 · 10 + 4 = 16.5 in flight,
        // however large the window.
        let mut f = Fixture::new(vec![measured(path(0, 10, 100, 16))], 0..1000);
        let mut w = Weave::default();
        end_start_up(w.clock_mut(PathId(0)));
        assert!(w.next(&f.view()).is_some(), "16 in flight: under the cap");
        f.path_mut(0).in_flight = 17;
        assert_eq!(w.next(&f.view()), None, "17 in flight: at the cap");
    }

    /// A path with the cap of the test above (16.5, so 17 requests in flight, sent by one run
    /// of the fixture), with `loss_bursts`: the requests `before` are answered, then all
    /// others but `after` lost in order, then `after` answered. Returns the most the path may
    /// then hold in flight and still take a request.
    fn most_in_flight_after(before: &[u64], after: &[u64]) -> u64 {
        let mut f = Fixture::new(vec![measured(path(0, 10, 100, 0))], 0..1000);
        let mut w = Weave::with_config(WeaveConfig {
            loss_bursts: true,
            ..WeaveConfig::default()
        });
        end_start_up(w.clock_mut(PathId(0)));
        assert_eq!(f.run(&mut w).len(), 17);
        let arrive = |f: &mut Fixture, w: &mut Weave, seqs: &[u64]| {
            for &seq in seqs {
                f.arrive(seq, 0);
                w.on_event(Instant::ZERO, &answer(0, seq, 10));
            }
        };
        arrive(&mut f, &mut w, before);
        for seq in (0..17).filter(|seq| !before.contains(seq) && !after.contains(seq)) {
            f.lose(seq, 0);
            w.on_event(Instant::ZERO, &SchedEvent::Lost { path: PathId(0), seq });
        }
        arrive(&mut f, &mut w, after);
        (0..100)
            .take_while(|&n| {
                f.path_mut(0).in_flight = n;
                w.next(&f.view()).is_some()
            })
            .last()
            .unwrap()
    }

    #[test]
    fn only_a_burst_that_took_every_request_in_flight_widens_the_cap() {
        // All 17 lost, no answer behind them (only the timeout finds such a burst): room for
        // the burst and the packet threshold, 1.25 · 10 + 17 + 3 = 32.5.
        assert_eq!(most_in_flight_after(&[], &[]), 32);
        // The last 3 answered, then the 14 before them lost: the packet threshold declares
        // those without a timeout, and the cap stays at 1.25 · 10 + 4 = 16.5.
        assert_eq!(most_in_flight_after(&[14, 15, 16], &[]), 16);
        // 16 lost in a row, the last request still in flight and answered after them: the
        // run left an answer to come.
        assert_eq!(most_in_flight_after(&[], &[16]), 16);
    }

    #[test]
    fn without_loss_bursts_a_burst_leaves_the_cap() {
        let mut f = Fixture::new(vec![measured(path(0, 10, 100, 0))], 0..1000);
        let mut w = Weave::with_config(WeaveConfig {
            loss_bursts: false,
            ..WeaveConfig::default()
        });
        end_start_up(w.clock_mut(PathId(0)));
        assert_eq!(f.run(&mut w).len(), 17);
        for seq in 0..17 {
            f.lose(seq, 0);
            w.on_event(Instant::ZERO, &SchedEvent::Lost { path: PathId(0), seq });
        }
        f.path_mut(0).in_flight = 17;
        assert_eq!(w.next(&f.view()), None, "the cap of 16.5");
    }

    #[test]
    fn a_starting_path_has_the_larger_cap_lossy_or_not() {
        // The same pipe while the path starts up: 1.75 · 10 + 4 = 21.5 in flight.
        let mut f = Fixture::new(vec![measured(path(0, 10, 100, 21))], 0..1000);
        let mut w = Weave::default();
        assert!(w.next(&f.view()).is_some(), "21 in flight: under the start-up cap");
        f.path_mut(0).in_flight = 22;
        assert_eq!(w.next(&f.view()), None, "22 in flight: at the start-up cap");
        // A lossy path too (1.75 · 10 / 0.97 + 4 = 22.0), until the test ends.
        f.path_mut(0).in_flight = 21;
        f.path_mut(0).loss_rate = 0.03;
        assert!(w.next(&f.view()).is_some(), "3 % loss: still the start-up cap");
        end_start_up(w.clock_mut(PathId(0)));
        assert_eq!(w.next(&f.view()), None, "started: the steady cap of 16.9");
    }

    #[test]
    fn the_start_up_ends_for_good_after_three_round_trips_without_growth() {
        let mut clock = PathClock::new(&WeaveConfig::default());
        // Each round trip 25 % faster or more: still starting.
        for rate in [100.0, 125.0, 160.0, 250.0] {
            clock.on_round_rate(rate);
        }
        assert!(!clock.started());
        // Two round trips under 312.5 (1.25 · 250), then one past it: the count starts over.
        for rate in [300.0, 310.0, 320.0] {
            clock.on_round_rate(rate);
        }
        assert!(!clock.started());
        for rate in [330.0, 340.0] {
            clock.on_round_rate(rate);
        }
        assert!(!clock.started(), "2 flat round trips after 320");
        clock.on_round_rate(350.0);
        assert!(clock.started(), "3 flat round trips");
        // A later burst of growth (a task's start after a pause) does not start it again.
        clock.on_round_rate(1000.0);
        assert!(clock.started());
    }

    /// A path with a 10 ms minimum RTT and a 1000 packets/s peak, answered in 40 ms over a whole
    /// round trip, then delivering `rate` bytes/s: may it take a request with 30 in flight?
    fn takes_a_request_after_slow_rounds(rate: f64) -> bool {
        let mut f = Fixture::new(vec![measured(path(0, 10, 100, 30))], 0..1000);
        let mut w = Weave::default();
        assert_eq!(w.next(&f.view()), None, "30 in flight: over the 16.5 cap of 10 ms");
        for (at_ms, seq) in [(0, 500), (50, 501)] {
            w.on_event(Instant::from_nanos(at_ms * 1_000_000), &answer(0, seq, 40));
        }
        f.now = Instant::from_nanos(50_000_000);
        f.path_mut(0).delivery_rate = Some(rate);
        w.next(&f.view()).is_some()
    }

    #[test]
    fn a_path_below_its_peak_sizes_its_cap_by_the_rtt_it_measures() {
        // Delivering 400 packets/s of its 1000 peak, the path's pipe is not full, so its 40 ms
        // answers are no queue of its own: the cap grows to 1.25 · 1000 · 0.04 + 4 = 54.
        assert!(takes_a_request_after_slow_rounds(400_000.0));
        // At its peak, the same 40 ms may be its own queue: the cap stays at the minimum RTT's.
        assert!(!takes_a_request_after_slow_rounds(1_000_000.0));
    }

    #[test]
    fn a_round_of_answers_faster_than_the_delivery_rate_raises_the_cap() {
        // The delivery rate says 100 packets/s (it is measured over a window's worth of
        // answers, and lags); a round trip of answers 1 ms apart says 1100. The peak takes the
        // faster at once, and the cap with it: 1.25 · 1100 · 0.01 + 4 = 17.75 in flight, where
        // the delivery rate alone allows 1.25 · 100 · 0.01 + 4 = 5.25.
        let mut f = Fixture::new(vec![measured(path(0, 10, 100, 10))], 0..1000);
        f.path_mut(0).delivery_rate = Some(100_000.0);
        let mut w = Weave::default();
        assert_eq!(w.next(&f.view()), None, "10 in flight: over the delivery rate's cap");
        for i in 0..=20u64 {
            w.on_event(Instant::from_nanos(i * 1_000_000), &answer(0, 500 + i, 10));
        }
        f.now = Instant::from_nanos(20_000_000);
        assert!(w.next(&f.view()).is_some(), "10 in flight: under the answers' cap");
    }

    #[test]
    fn a_burst_s_own_queue_does_not_size_the_cap() {
        // The path takes 17 requests at once (its cap): the model answers the k-th k ms after
        // the first, so the last two were queued 15 and 16 ms of their 40 ms RTT, more than a
        // fifth. Slow rounds of those answers say the burst queued, not that the pipe is
        // longer: the cap stays the minimum RTT's, where the same answers to requests sent
        // into an empty pipe grow it (the test above).
        let mut f = Fixture::new(vec![measured(path(0, 10, 100, 0))], 0..1000);
        let mut w = Weave::default();
        end_start_up(w.clock_mut(PathId(0)));
        assert_eq!(f.run(&mut w).len(), 17);
        for (at_ms, seq) in [(0, 16), (50, 15)] {
            w.on_event(Instant::from_nanos(at_ms * 1_000_000), &answer(0, seq, 40));
        }
        f.now = Instant::from_nanos(50_000_000);
        f.path_mut(0).in_flight = 30;
        f.path_mut(0).delivery_rate = Some(400_000.0);
        assert_eq!(w.next(&f.view()), None);
    }
}
