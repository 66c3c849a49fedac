//! BBR's full-pipe test: the bottleneck is full once a rate stops growing.

/// Cardwell et al., "BBR: Congestion-Based Congestion Control" (ACM Queue 2016), §"Startup
/// and Drain": the pipe is full once `rounds` round trips in a row failed to raise the rate
/// by the factor `growth` over the best before them. Once full, for good (until
/// [`FullPipe::restart_growth`] and new growth). BBR feeds it its bottleneck-bandwidth
/// estimate at each round's start; weave the rate of each round trip's answers.
#[derive(Clone, Debug, Default)]
pub struct FullPipe {
    growth: f64,
    rounds: u32,
    /// Best rate the count of flat rounds is measured against.
    best: f64,
    /// Round trips since the rate last grew by `growth`.
    flat: u32,
    full: bool,
}

impl FullPipe {
    pub fn new(growth: f64, rounds: u32) -> Self {
        FullPipe {
            growth,
            rounds,
            ..FullPipe::default()
        }
    }

    /// Folds in one round trip's rate; returns whether the pipe is full.
    pub fn on_round(&mut self, rate: f64) -> bool {
        if self.full {
            return true;
        }
        if rate >= self.best * self.growth {
            self.best = rate;
            self.flat = 0;
        } else {
            self.flat += 1;
            self.full = self.flat >= self.rounds;
        }
        self.full
    }

    pub fn is_full(&self) -> bool {
        self.full
    }

    /// Forgets the best rate, so that the next round counts as growth (Linux
    /// `bbr_set_state` on TCP_CA_Loss resets `full_bw`); the count and the verdict stay.
    pub fn restart_growth(&mut self) {
        self.best = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pipe_is_full_after_three_round_trips_without_growth_and_stays_full() {
        let mut pipe = FullPipe::new(1.25, 3);
        // Each round trip 25 % faster or more: still growing.
        for rate in [100.0, 125.0, 160.0, 250.0] {
            assert!(!pipe.on_round(rate));
        }
        // Two round trips under 312.5 (1.25 · 250), then one past it: the count starts over.
        for rate in [300.0, 310.0, 320.0, 330.0, 340.0] {
            assert!(!pipe.on_round(rate));
        }
        assert!(pipe.on_round(350.0), "3 flat round trips after 320");
        // A later burst of growth does not make it empty again.
        assert!(pipe.on_round(1000.0));
        assert!(pipe.is_full());
    }

    #[test]
    fn a_restart_counts_the_next_round_as_growth() {
        let mut pipe = FullPipe::new(1.25, 3);
        pipe.on_round(100.0);
        pipe.on_round(100.0);
        pipe.on_round(100.0);
        pipe.restart_growth();
        // 10 is growth over nothing: the count of flat rounds starts over.
        assert!(!pipe.on_round(10.0));
        assert!(!pipe.on_round(10.0));
        assert!(!pipe.on_round(10.0));
        assert!(pipe.on_round(10.0));
    }
}
