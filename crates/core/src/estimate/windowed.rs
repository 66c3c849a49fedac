//! Windowed extremes: the least or greatest sample of the last stretch of time.
//!
//! The filter keeps only the samples that could still become the extreme, in a deque ordered
//! by time and by value (a sample beaten by a newer one never can), so an update costs O(1)
//! amortised and the extreme is the front. When the extreme ages out of the window the next
//! best sample inside it takes over, not the newest one: Linux's `win_minmax` (used by BBR for
//! its bandwidth and RTprop filters) approximates the same with three samples.

use std::collections::VecDeque;

use crate::time::{Duration, Instant};

/// The greatest (`GREATEST = true`) or least sample seen over the last window of time.
#[derive(Clone, Debug, Default)]
pub struct WindowedExtreme<T, const GREATEST: bool> {
    /// Samples that could still become the extreme: oldest first, each beating the one after.
    samples: VecDeque<(Instant, T)>,
}

/// The least sample of a window (a minimum RTT).
pub type WindowedMin<T> = WindowedExtreme<T, false>;
/// The greatest sample of a window (a peak delivery rate).
pub type WindowedMax<T> = WindowedExtreme<T, true>;

impl<T: PartialOrd + Copy, const GREATEST: bool> WindowedExtreme<T, GREATEST> {
    /// Takes `value` seen at `now` and returns the extreme of the samples seen within `window`
    /// of `now` (the newest sample at least, however old the others).
    pub fn update(&mut self, now: Instant, value: T, window: Duration) -> T {
        let beaten = |kept: T| if GREATEST { kept <= value } else { kept >= value };
        while self.samples.back().is_some_and(|&(_, kept)| beaten(kept)) {
            self.samples.pop_back();
        }
        self.samples.push_back((now, value));
        while self.samples.len() > 1 && self.samples.front().is_some_and(|&(at, _)| at + window < now) {
            self.samples.pop_front();
        }
        self.samples.front().map_or(value, |&(_, extreme)| extreme)
    }

    /// The extreme as of the last update, if any sample was taken.
    pub fn get(&self) -> Option<T> {
        self.samples.front().map(|&(_, extreme)| extreme)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn an_expired_peak_gives_way_to_the_best_sample_inside_the_window() {
        let window = Duration::from_millis(100);
        let mut peak = WindowedMax::default();
        assert_eq!(peak.update(at(0), 10.0, window), 10.0);
        assert_eq!(peak.update(at(40), 8.0, window), 10.0);
        assert_eq!(peak.update(at(80), 3.0, window), 10.0);
        // The 10 has aged out; the 8 of 40 ms is still inside the window, the 3 is not the peak.
        assert_eq!(peak.update(at(120), 2.0, window), 8.0);
        assert_eq!(peak.update(at(150), 1.0, window), 3.0);
        assert_eq!(peak.get(), Some(3.0));
    }

    #[test]
    fn old_samples_are_forgotten_but_the_newest_stays_whatever_its_age() {
        let window = Duration::from_millis(10);
        let mut least = WindowedMin::default();
        least.update(at(0), 5u32, window);
        assert_eq!(least.update(at(5), 7, window), 5);
        assert_eq!(least.update(at(12), 9, window), 7);
        assert_eq!(least.update(at(13), 1, window), 1);
        assert_eq!(least.update(at(100), 3, window), 3);
    }

    #[test]
    fn a_newer_sample_that_matches_the_extreme_renews_it() {
        let window = Duration::from_millis(100);
        let mut least = WindowedMin::default();
        least.update(at(0), Duration::from_millis(30), window);
        least.update(at(90), Duration::from_millis(30), window);
        assert_eq!(
            least.update(at(150), Duration::from_millis(50), window),
            Duration::from_millis(30)
        );
        // Only the newest sample is left once everything else has aged out.
        assert_eq!(
            least.update(at(400), Duration::from_millis(60), window),
            Duration::from_millis(60)
        );
    }
}
