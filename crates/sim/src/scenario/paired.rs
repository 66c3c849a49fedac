//! Paired comparison over seeds: the mean difference of two schedulers' runs seed by seed and
//! its 95 % confidence interval (every scheduler of a scenario runs the same seeds, so the links
//! draw the same losses and jitter for both, and the pairs cancel what the seed alone decides).

/// Student's t at 97.5 % (two-sided 95 %) by degrees of freedom 1..=30; 1.96 past the table.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
    2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/// The mean of `a − b` over pairs and the half-width of its 95 % confidence interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Paired {
    pub pairs: usize,
    pub mean: f64,
    pub half_width: f64,
}

/// Scorecard differences smaller than this share of the best mean are level whatever the
/// interval says: the scorecard shows three significant digits, and runs that take the same
/// decisions up to floating-point rounding differ on every seed by the same speck, so their
/// interval is zero wide (`pcdn sim --random 1 --seed 7210 --cc cubic`: two aggregations
/// 5e-12 apart; world 7021: a first frame 8 ns later).
pub const RESOLUTION: f64 = 1e-3;

impl Paired {
    /// Whether the interval excludes zero: the difference is more than the seeds' draw.
    pub fn is_clear(&self) -> bool {
        self.mean.abs() > self.half_width
    }

    /// [`Paired::is_clear`], and the difference at least [`RESOLUTION`] of `reference` (the
    /// mean it is compared with).
    pub fn is_clear_of(&self, reference: f64) -> bool {
        self.is_clear() && self.mean.abs() >= RESOLUTION * reference.abs()
    }
}

/// `a[i] − b[i]` over the pairs (the same seed at the same index); `None` with fewer than two
/// pairs or unequal lengths.
pub fn paired(a: &[f64], b: &[f64]) -> Option<Paired> {
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    let n = a.len();
    let diffs = a.iter().zip(b).map(|(x, y)| x - y);
    let mean = diffs.clone().sum::<f64>() / n as f64;
    let variance = diffs.map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = T_975.get(n - 2).copied().unwrap_or(1.96);
    Some(Paired {
        pairs: n,
        mean,
        half_width: t * (variance / n as f64).sqrt(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_pairs_worked_by_hand() {
        // Differences 1, 1, 0.5: mean 5/6, sd 0.2887, standard error 0.1667, t(2) = 4.303.
        let p = paired(&[1.0, 2.0, 3.0], &[0.0, 1.0, 2.5]).unwrap();
        assert_eq!(p.pairs, 3);
        assert!((p.mean - 5.0 / 6.0).abs() < 1e-12);
        assert!(
            (p.half_width - 4.303 * (1.0f64 / 12.0).sqrt() / 3f64.sqrt()).abs() < 1e-9,
            "{p:?}"
        );
        assert!(p.is_clear());
    }

    #[test]
    fn a_difference_below_the_resolution_is_not_clear_even_with_no_spread() {
        // The same speck on every seed: a zero-wide interval that excludes zero.
        let a = [0.849235209, 0.849235209, 0.849235209];
        let b = [0.849235201, 0.849235201, 0.849235201];
        let p = paired(&a, &b).unwrap();
        assert!(p.is_clear());
        assert!(!p.is_clear_of(0.849235201));
        // A thousandth of the reference is the least difference that counts.
        let p = paired(&[1.002, 2.002], &[1.0, 2.0]).unwrap();
        assert!(p.is_clear_of(1.5));
        assert!(!p.is_clear_of(2.5));
    }

    #[test]
    fn a_spread_larger_than_the_mean_is_not_clear() {
        let p = paired(&[1.0, -1.0, 1.0, -1.0], &[0.0; 4]).unwrap();
        assert_eq!(p.mean, 0.0);
        assert!(!p.is_clear());
    }

    #[test]
    fn one_pair_or_unequal_lengths_give_nothing() {
        assert_eq!(paired(&[1.0], &[0.0]), None);
        assert_eq!(paired(&[1.0, 2.0], &[0.0]), None);
    }
}
