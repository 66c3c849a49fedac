//! Shared-bottleneck detection: paths whose queueing delays rise and fall together, at the
//! same scale, wait in one queue.
//!
//! RFC 8382 groups flows by summary statistics of their one-way delay (skewness,
//! variability, oscillation) over seconds; Rubenstein, Kurose and Towsley (SIGMETRICS 2000)
//! compare the cross-correlation of two flows' delays with each one's own. pcdn takes the
//! second, faster form, made stricter: each path's queueing-delay samples (RTT above its
//! minimum; requests are small, so the delay is the data's) are averaged over 10 ms bins
//! common to all paths, and each pair of paths keeps exponentially weighted moments of the
//! bins both had samples in. Their **coherence**, `2·cov / (var_a + var_b)` (that is,
//! `1 − var(a − b) / (var_a + var_b)`), is 1 only when the two series move together *and*
//! by the same amount, as the delays of two paths through one queue do; a correlation alone
//! is also high for separate queues a common cause fills at once.
//!
//! Measured on the reproduction scenarios: two paths behind Pscheduler Fig. 5's shared
//! 30 Mbit/s link reach 0.95–1.00 within 0.6–1.7 s and stay there; separate links reach at
//! most 0.85 in Figs. 15–18, but reach 1 where the same requests fill them at once (the start-up
//! of MPRD Fig. 7's five servers, Kondo A's player on two equal links), so a caller confirms
//! by measurement before it acts (`scheduler::weave`).

use crate::path::PathId;
use crate::time::{Duration, Instant};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// Width of the common time bins: a path answering 660 packets a second (Fig. 5's slow
/// path) has several samples in one.
pub const BIN: Duration = Duration::from_millis(10);
/// Weight of a new bin in a pair's moments: they follow the last ~64 bins (0.64 s).
const GAIN: f64 = 1.0 / 64.0;
/// Bins two paths must have shared before their coherence is reported.
pub const MIN_BINS: u64 = 30;

/// Exponentially weighted first and second moments of a pair's bin means.
#[derive(Debug, Default, Clone, Copy)]
struct PairStats {
    bins: u64,
    mean_a: f64,
    mean_b: f64,
    var_a: f64,
    var_b: f64,
    cov: f64,
}

impl PairStats {
    /// The weighted incremental update (Finch 2009, "Incremental calculation of weighted
    /// mean and variance", §9): deviations from the old means, scaled by `1 − GAIN`.
    fn update(&mut self, a: f64, b: f64) {
        if self.bins == 0 {
            self.mean_a = a;
            self.mean_b = b;
        }
        self.bins += 1;
        let (da, db) = (a - self.mean_a, b - self.mean_b);
        self.mean_a += GAIN * da;
        self.mean_b += GAIN * db;
        self.var_a = (1.0 - GAIN) * (self.var_a + GAIN * da * da);
        self.var_b = (1.0 - GAIN) * (self.var_b + GAIN * db * db);
        self.cov = (1.0 - GAIN) * (self.cov + GAIN * da * db);
    }

    fn coherence(&self) -> Option<f64> {
        let sum = self.var_a + self.var_b;
        (self.bins >= MIN_BINS && sum > 0.0).then(|| 2.0 * self.cov / sum)
    }
}

/// Coherence of the paths' queueing delays over common time bins.
#[derive(Debug, Default)]
pub struct SharedBottleneck {
    /// The bin being filled (its index, `now / BIN`).
    bin: u64,
    /// Sum and count of each path's samples in the current bin: a few paths, searched in
    /// place (a sample per answer, where hashing its id cost more than the search).
    current: Vec<(PathId, (f64, u32))>,
    /// Moments per pair, keyed with the smaller id first; our own keys, so a fast hash
    /// (`ahash`, fixed keys). Nothing iterates it in an order a result could see.
    pairs: HashMap<(PathId, PathId), PairStats, BuildHasherDefault<ahash::AHasher>>,
    /// Bins folded so far: the coherences change only when it moves.
    folded: u64,
}

fn key(a: PathId, b: PathId) -> (PathId, PathId) {
    (a.min(b), a.max(b))
}

impl SharedBottleneck {
    /// A queueing-delay sample (seconds) on `path` at `now`; samples come in time order.
    pub fn on_sample(&mut self, now: Instant, path: PathId, delay: f64) {
        let bin = (now.since_epoch().as_nanos() / BIN.as_nanos()) as u64;
        if bin != self.bin {
            self.close_bin();
            self.bin = bin;
        }
        let slot = match self.current.iter().position(|&(p, _)| p == path) {
            Some(i) => &mut self.current[i].1,
            None => {
                self.current.push((path, (0.0, 0)));
                &mut self.current.last_mut().expect("just pushed").1
            }
        };
        slot.0 += delay;
        slot.1 += 1;
    }

    /// Folds the finished bin into every pair that had samples in it.
    fn close_bin(&mut self) {
        let mut means: Vec<(PathId, f64)> = self
            .current
            .drain(..)
            .map(|(path, (sum, n))| (path, sum / f64::from(n)))
            .collect();
        self.folded += 1;
        // Ascending ids: each pair's first value is its smaller id's.
        means.sort_by_key(|&(path, _)| path);
        for (x, &(a, va)) in means.iter().enumerate() {
            for &(b, vb) in &means[x + 1..] {
                self.pairs.entry((a, b)).or_default().update(va, vb);
            }
        }
    }

    /// Coherence of two paths' queueing delays, once they shared `MIN_BINS` bins.
    pub fn coherence(&self, a: PathId, b: PathId) -> Option<f64> {
        self.pairs.get(&key(a, b)).and_then(PairStats::coherence)
    }

    /// Standard deviation of each path's bin means over the bins the pair shared (seconds),
    /// in the order asked.
    pub fn deviations(&self, a: PathId, b: PathId) -> Option<(f64, f64)> {
        let stats = self.pairs.get(&key(a, b))?;
        let (lo, hi) = (stats.var_a.sqrt(), stats.var_b.sqrt());
        Some(if a <= b { (lo, hi) } else { (hi, lo) })
    }

    /// Moves on with every bin folded into the pairs: a caller may keep what it derived from
    /// the coherences until it changes.
    pub fn version(&self) -> u64 {
        self.folded
    }

    /// Forgets a path.
    pub fn remove(&mut self, path: PathId) {
        self.current.retain(|&(p, _)| p != path);
        self.folded += 1;
        self.pairs.retain(|&(a, b), _| a != path && b != path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const A: PathId = PathId(0);
    const B: PathId = PathId(1);

    /// Feeds `bins` bins, three samples per path in each, of the delays `f(bin)` gives.
    fn feed(d: &mut SharedBottleneck, bins: u64, mut f: impl FnMut(u64) -> (f64, f64)) {
        for bin in 0..bins {
            let (a, b) = f(bin);
            for k in 0..3 {
                let at = Instant::from_nanos(bin * BIN.as_nanos() as u64 + k * 3_000_000);
                d.on_sample(at, A, a);
                d.on_sample(at, B, b);
            }
        }
    }

    /// Coherence after 200 bins of a random queue `q` (0-20 ms) that path A sees as it is
    /// and path B as `b_of(q, rng)`.
    fn coherence_of(seed: u64, b_of: impl Fn(f64, &mut ChaCha8Rng) -> f64) -> f64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut d = SharedBottleneck::default();
        feed(&mut d, 200, |_| {
            let q = rng.random_range(0.0..0.02);
            (q, b_of(q, &mut rng))
        });
        d.coherence(A, B).unwrap()
    }

    #[test]
    fn one_queue_is_coherent_and_separate_queues_are_not() {
        let c = coherence_of(7, |q, rng| q + rng.random_range(0.0..0.001));
        assert!(c > 0.95, "one queue: {c}");
        let c = coherence_of(7, |_, rng| rng.random_range(0.0..0.02));
        assert!(c.abs() < 0.5, "separate queues: {c}");
    }

    #[test]
    fn the_same_rhythm_at_another_scale_is_not_one_queue() {
        // Perfectly correlated, but b moves a third as far: correlation 1, coherence 0.6.
        let c = coherence_of(9, |q, _| q / 3.0);
        assert!((c - 0.6).abs() < 0.01, "{c}");
    }

    #[test]
    fn nothing_is_reported_before_enough_common_bins() {
        let mut d = SharedBottleneck::default();
        // Only bins where both paths have samples count; the last bin is still open.
        feed(&mut d, MIN_BINS, |bin| (bin as f64 * 1e-3, bin as f64 * 1e-3));
        assert_eq!(d.coherence(A, B), None);
        d.on_sample(Instant::from_nanos((MIN_BINS + 1) * BIN.as_nanos() as u64), A, 0.0);
        assert!(d.coherence(B, A).is_some_and(|c| c > 0.99));
        d.remove(B);
        assert_eq!(d.coherence(A, B), None);
    }
}
