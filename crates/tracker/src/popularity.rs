//! Content popularity: lookups counted per content with exponential decay, and the demand rate
//! they imply (docs/tracker.md, "Popularity").
//!
//! A decayed count is kept as one number, its log-score `s = log2(count at t) + t / half-life`
//! (t in ms): the count at any later time u is `2^(s − u / half-life)`, so the pair (value,
//! last update) is folded into a score that never needs rewriting as time passes, orders the
//! contents by their current count at any instant (a Redis sorted set ranks them directly), and
//! cannot overflow (it grows with t linearly, not exponentially).

use pcdn_core::wire::ContentId;
use std::collections::HashMap;
use std::sync::Mutex;

/// The log-score after adding `count` lookups at `now_ms` to a content whose score was `score`.
pub(crate) fn add(score: Option<f64>, count: f64, now_ms: u64, half_life_ms: u64) -> f64 {
    let clock = now_ms as f64 / half_life_ms as f64;
    let value = score.map_or(0.0, |score| (score - clock).exp2()) + count;
    value.log2() + clock
}

/// The decayed count of a content of log-score `score` at `now_ms`.
pub(crate) fn count(score: f64, now_ms: u64, half_life_ms: u64) -> f64 {
    (score - now_ms as f64 / half_life_ms as f64).exp2()
}

/// The lookup rate (per second) a decayed count stands for: a steady rate r keeps the count at
/// r × half-life / ln 2, the integral of r·2^(−t/half-life).
pub(crate) fn per_second(count: f64, half_life_ms: u64) -> f64 {
    count * std::f64::consts::LN_2 / (half_life_ms as f64 / 1000.0)
}

/// Lookups counted since the last flush to the store, per content. Lookups only touch this
/// (a mutex and a hash map), so counting costs them no store round trip; the tracker flushes it
/// every second. At most `max_pending` contents are kept between flushes; lookups of others
/// are dropped until the next flush (`dropped`).
#[derive(Debug)]
pub(crate) struct Tally {
    pending: Mutex<HashMap<ContentId, u64>>,
    max_pending: usize,
}

impl Tally {
    pub fn new(max_pending: usize) -> Tally {
        Tally {
            pending: Mutex::new(HashMap::new()),
            max_pending,
        }
    }

    /// Counts one lookup; false if it was dropped (too many contents pending).
    pub fn count(&self, content: ContentId) -> bool {
        let mut pending = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let full = pending.len() >= self.max_pending;
        match pending.get_mut(&content) {
            Some(count) => *count += 1,
            None if full => return false,
            None => {
                pending.insert(content, 1);
            }
        }
        true
    }

    /// Everything counted since the last call, ordered by content id.
    pub fn take(&self) -> Vec<(ContentId, u64)> {
        let taken = std::mem::take(&mut *self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        let mut counts: Vec<(ContentId, u64)> = taken.into_iter().collect();
        counts.sort_unstable();
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HALF_LIFE: u64 = 600_000;

    #[test]
    fn counts_halve_every_half_life_and_add_up() {
        let start = 1_700_000_000_000;
        let score = add(None, 8.0, start, HALF_LIFE);
        assert!((count(score, start, HALF_LIFE) - 8.0).abs() < 1e-6);
        assert!((count(score, start + HALF_LIFE, HALF_LIFE) - 4.0).abs() < 1e-6);
        let later = add(Some(score), 1.0, start + 2 * HALF_LIFE, HALF_LIFE);
        assert!((count(later, start + 2 * HALF_LIFE, HALF_LIFE) - 3.0).abs() < 1e-6);
        // Scores order contents by their current count.
        let old_many = add(None, 100.0, start, HALF_LIFE);
        let new_few = add(None, 30.0, start + 2 * HALF_LIFE, HALF_LIFE);
        assert!(new_few > old_many);
    }

    #[test]
    fn a_steady_rate_reads_back_as_that_rate() {
        // One lookup a second for ten half-lives.
        let mut score = None;
        let mut now = 1_000;
        for _ in 0..6_000 {
            now += 1_000;
            score = Some(add(score, 1.0, now, HALF_LIFE));
        }
        let rate = per_second(count(score.unwrap(), now, HALF_LIFE), HALF_LIFE);
        assert!((rate - 1.0).abs() < 0.01, "{rate}");
    }

    #[test]
    fn the_tally_is_bounded() {
        let tally = Tally::new(2);
        assert!(tally.count(ContentId([1; 32])));
        assert!(tally.count(ContentId([2; 32])));
        assert!(!tally.count(ContentId([3; 32])));
        assert!(tally.count(ContentId([1; 32])));
        assert_eq!(tally.take(), [(ContentId([1; 32]), 2), (ContentId([2; 32]), 1)]);
        assert!(tally.take().is_empty());
    }
}
