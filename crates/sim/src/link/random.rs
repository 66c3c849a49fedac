//! The random parts of a link: per-packet loss (Bernoulli, Gilbert–Elliott) and jitter draws,
//! all from the link's own seeded generator so a run depends only on its seed.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::config::{Jitter, JitterDist, Loss};

/// A loss model plus the Gilbert–Elliott chain's current state.
#[derive(Clone, Debug)]
pub(crate) struct LossState {
    pub model: Loss,
    bad: bool,
}

impl LossState {
    /// A new model starts in the good state.
    pub fn new(model: Loss) -> LossState {
        LossState { model, bad: false }
    }

    /// Decides one packet's fate. Draws nothing when a probability is 0, so a lossless link
    /// costs no random numbers (nor a call: this runs for every packet).
    #[inline]
    pub fn lose(&mut self, rng: &mut ChaCha8Rng) -> bool {
        match self.model {
            Loss::None => false,
            _ => self.draw_loss(rng),
        }
    }

    /// The link was idle for `slots` of its own packet times before this packet: a
    /// Gilbert–Elliott chain takes that many steps at once, drawn from its `slots`-step
    /// transition, P(bad) = π_bad + (bad₀ − π_bad)·(1 − p − r)^slots. A loss burst is a
    /// state of the channel in time (Gilbert, "Capacity of a burst-noise channel", Bell
    /// System Technical Journal, 1960, steps the chain once per symbol): stepped only per
    /// packet sent, as netem's `gemodel` does, a link that went bad stays bad across any
    /// silence, so a path probed once per backed-off RTO finds it bad for tens of seconds.
    /// No draw for `slots` = 0 (packets back to back) nor for other models.
    pub fn pass_idle(&mut self, slots: u64, rng: &mut ChaCha8Rng) {
        let Loss::GilbertElliott(g) = self.model else { return };
        if slots == 0 {
            return;
        }
        let stationary = g.stationary_bad();
        let bad_before = if self.bad { 1.0 } else { 0.0 };
        let decay = (1.0 - g.p_good_to_bad - g.p_bad_to_good).powf(slots as f64);
        self.bad = chance(rng, stationary + (bad_before - stationary) * decay);
    }

    fn draw_loss(&mut self, rng: &mut ChaCha8Rng) -> bool {
        match self.model {
            Loss::None => false,
            Loss::Bernoulli(p) => chance(rng, p),
            Loss::GilbertElliott(g) => {
                // netem's loss_gilb_ell(): the packet sees the loss rate of the state the chain
                // is in, then the chain takes one step.
                let (loss, flip) = if self.bad {
                    (g.loss_bad, g.p_bad_to_good)
                } else {
                    (g.loss_good, g.p_good_to_bad)
                };
                let lost = chance(rng, loss);
                if chance(rng, flip) {
                    self.bad = !self.bad;
                }
                lost
            }
        }
    }
}

fn chance(rng: &mut ChaCha8Rng, p: f64) -> bool {
    p > 0.0 && (p >= 1.0 || rng.random::<f64>() < p)
}

/// Draws jitter in nanoseconds (may be negative). `spare` caches Box–Muller's second normal.
#[inline]
pub(crate) fn jitter_ns(jitter: &Jitter, rng: &mut ChaCha8Rng, spare: &mut Option<f64>) -> i64 {
    match jitter.dist {
        JitterDist::None => 0,
        _ => draw_jitter(jitter, rng, spare),
    }
}

fn draw_jitter(jitter: &Jitter, rng: &mut ChaCha8Rng, spare: &mut Option<f64>) -> i64 {
    match jitter.dist {
        JitterDist::None => 0,
        JitterDist::Uniform(spread) => {
            let s = i64::try_from(spread.as_nanos()).unwrap_or(i64::MAX / 2);
            if s == 0 { 0 } else { rng.random_range(-s..=s) }
        }
        JitterDist::Normal(sigma) => {
            let z = spare.take().unwrap_or_else(|| {
                let (a, b) = box_muller(rng);
                *spare = Some(b);
                a
            });
            (z * sigma.as_nanos() as f64).round() as i64
        }
    }
}

/// Two independent standard normals from two uniforms (Box–Muller), to avoid a dependency for
/// one distribution.
fn box_muller(rng: &mut ChaCha8Rng) -> (f64, f64) {
    // 1 − U lies in (0, 1], so the logarithm is finite.
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    let r = (-2.0 * u1.ln()).sqrt();
    let theta = std::f64::consts::TAU * u2;
    (r * theta.cos(), r * theta.sin())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use std::time::Duration;

    #[test]
    fn normal_jitter_has_the_asked_spread() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut spare = None;
        let j = Jitter::normal(Duration::from_millis(2), false);
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| jitter_ns(&j, &mut rng, &mut spare) as f64).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        assert!(mean.abs() < 20_000.0, "mean {mean}");
        assert!((sd - 2e6).abs() < 2e4, "sd {sd}");
    }

    #[test]
    fn uniform_jitter_stays_in_its_range() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let j = Jitter::uniform(Duration::from_micros(5), true);
        let xs: Vec<i64> = (0..10_000).map(|_| jitter_ns(&j, &mut rng, &mut None)).collect();
        assert!(xs.iter().all(|x| x.abs() <= 5_000));
        assert!(xs.iter().any(|&x| x < -4_000) && xs.iter().any(|&x| x > 4_000));
    }
}
