//! The viewers' random draws (arrival times, videos, how much they watch), from the seed alone,
//! so that every scheduler of a comparison meets the same viewers.

use super::ViewerSpec;
use pcdn_core::time::{Duration, Instant};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One viewer, before it arrives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Arrival {
    pub at: Instant,
    pub video: usize,
    /// Fraction of the video watched before leaving.
    pub watch: f64,
    /// Which of the run's schedulers the viewer uses (an A/B test's group).
    pub group: usize,
}

/// Every viewer of `spec` over `videos` videos, in arrival order, each in one of `groups`
/// groups drawn at random with equal chances (from a stream of its own, so that the arrivals
/// and choices are the same whatever the number of groups).
pub(super) fn arrivals(spec: &ViewerSpec, videos: usize, groups: usize, seed: u64) -> Vec<Arrival> {
    let mut rng = ChaCha8Rng::seed_from_u64(stream_seed(seed, "viewers"));
    let mut group_rng = ChaCha8Rng::seed_from_u64(stream_seed(seed, "groups"));
    let zipf = ZipfTable::new(videos, spec.zipf);
    let window_s = spec.arrival_window.as_secs_f64();
    let times: Vec<f64> = if spec.load_profile.is_empty() {
        // Exponential gaps: a Poisson process (inverse transform of a uniform in (0, 1]).
        let mean_gap = window_s / spec.count.max(1) as f64;
        let mut t = 0.0;
        (0..spec.count)
            .map(|_| {
                t += -(1.0 - rng.random::<f64>()).ln() * mean_gap;
                t
            })
            .collect()
    } else {
        // A Poisson process of piecewise-constant rate, given its number of arrivals: that
        // many times drawn independently from the rate's density, sorted (its order statistics).
        let slices = ZipfTable::from_weights(&spec.load_profile);
        let slice_s = window_s / spec.load_profile.len() as f64;
        let mut times: Vec<f64> = (0..spec.count)
            .map(|_| {
                let slice = slices.sample(rng.random::<f64>());
                (slice as f64 + rng.random::<f64>()) * slice_s
            })
            .collect();
        times.sort_by(f64::total_cmp);
        times
    };
    times
        .into_iter()
        .map(|t| {
            let video = zipf.sample(rng.random::<f64>());
            let (lo, hi) = spec.watch;
            let watch = lo + (hi - lo) * rng.random::<f64>();
            Arrival {
                at: Instant::ZERO + Duration::from_secs_f64(t),
                video,
                watch,
                group: if groups > 1 {
                    group_rng.random_range(0..groups)
                } else {
                    0
                },
            }
        })
        .collect()
}

/// A seed for one named stream of draws, independent of the others.
pub(crate) fn stream_seed(seed: u64, stream: &str) -> u64 {
    let mut h = blake3::Hasher::new_derive_key("pcdn-sim 2026 fleet stream");
    h.update(&seed.to_le_bytes());
    h.update(stream.as_bytes());
    u64::from_le_bytes(h.finalize().as_bytes()[..8].try_into().expect("8 bytes"))
}

/// A discrete law by inverse transform on its cumulative weights: Zipf's over `n` items, or
/// any weights.
pub struct ZipfTable {
    cumulative: Vec<f64>,
}

impl ZipfTable {
    fn from_weights(weights: &[f64]) -> ZipfTable {
        let mut total = 0.0;
        let cumulative = weights
            .iter()
            .map(|w| {
                total += w.max(0.0);
                total
            })
            .collect();
        ZipfTable { cumulative }
    }

    /// Zipf's law over `n` items: item k (from 0) has weight 1 ÷ (k + 1)^`exponent`.
    pub fn new(n: usize, exponent: f64) -> ZipfTable {
        let mut total = 0.0;
        let cumulative = (0..n)
            .map(|k| {
                total += 1.0 / ((k + 1) as f64).powf(exponent);
                total
            })
            .collect();
        ZipfTable { cumulative }
    }

    /// The item for a uniform draw `u` in [0, 1).
    pub fn sample(&self, u: f64) -> usize {
        let total = self.cumulative.last().copied().unwrap_or(0.0);
        let target = u * total;
        self.cumulative
            .partition_point(|&c| c <= target)
            .min(self.cumulative.len().saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::LinkConfig;

    fn viewers(count: usize, zipf: f64) -> ViewerSpec {
        ViewerSpec {
            count,
            arrival_window: Duration::from_secs(100),
            load_profile: Vec::new(),
            zipf,
            watch: (0.5, 1.0),
            access_down: LinkConfig::fixed(50_000_000, Duration::from_millis(5)),
            access_up: LinkConfig::fixed(10_000_000, Duration::from_millis(5)),
            edges_per_viewer: 4,
            jump_to_cdn: None,
        }
    }

    #[test]
    fn a_load_profile_shapes_the_arrivals_and_keeps_their_number() {
        let mut spec = viewers(6000, 1.0);
        // Quiet first half, busy second half (three times the rate).
        spec.load_profile = vec![1.0, 3.0];
        let a = arrivals(&spec, 10, 1, 3);
        assert_eq!(a.len(), 6000);
        assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
        let late = a
            .iter()
            .filter(|v| (v.at - Instant::ZERO).as_secs_f64() >= 50.0)
            .count();
        let share = late as f64 / a.len() as f64;
        assert!((0.72..0.78).contains(&share), "{share}");
        assert!(a.iter().all(|v| (v.at - Instant::ZERO).as_secs_f64() < 100.0));
    }

    #[test]
    fn zipf_weights_follow_the_law() {
        let table = ZipfTable::new(3, 1.0);
        // Weights 1, 1/2, 1/3 of a total 11/6.
        assert_eq!(table.sample(0.0), 0);
        assert_eq!(table.sample(0.54), 0);
        assert_eq!(table.sample(0.56), 1);
        assert_eq!(table.sample(0.81), 1);
        assert_eq!(table.sample(0.83), 2);
        assert_eq!(table.sample(0.999_999), 2);
    }

    #[test]
    fn arrivals_are_reproducible_skewed_and_spread_over_the_window() {
        let spec = viewers(4000, 1.0);
        let a = arrivals(&spec, 10, 1, 7);
        assert_eq!(a, arrivals(&spec, 10, 1, 7));
        assert_ne!(a, arrivals(&spec, 10, 1, 8));
        assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
        let last = (a.last().unwrap().at - Instant::ZERO).as_secs_f64();
        assert!(
            (85.0..115.0).contains(&last),
            "last arrival at {last} s of a 100 s window"
        );
        let mut counts = [0usize; 10];
        for v in &a {
            counts[v.video] += 1;
            assert!((0.5..=1.0).contains(&v.watch));
        }
        // Video 0 is about twice as popular as video 1 and ten times video 9.
        let ratio = counts[0] as f64 / counts[1] as f64;
        assert!((1.7..2.4).contains(&ratio), "{counts:?}");
        assert!(counts[0] > 6 * counts[9], "{counts:?}");
    }

    #[test]
    fn groups_split_the_viewers_evenly_without_changing_who_arrives_when() {
        let spec = viewers(3000, 1.0);
        let one = arrivals(&spec, 10, 1, 5);
        let three = arrivals(&spec, 10, 3, 5);
        assert!(one.iter().all(|v| v.group == 0));
        let mut counts = [0usize; 3];
        for (a, b) in one.iter().zip(&three) {
            assert_eq!((a.at, a.video, a.watch), (b.at, b.video, b.watch));
            counts[b.group] += 1;
        }
        assert!(counts.iter().all(|&c| (900..1100).contains(&c)), "{counts:?}");
    }
}
