//! BALIA, the Balanced Linked Adaptation algorithm (Peng, Walid, Hwang & Low, "Multipath TCP:
//! Analysis, Design, and Implementation", IEEE/ACM ToN 2016): coupled across the paths of
//! one download.

use super::coupled::{Coupled, CoupledConfig, CoupledRule, PathState, established};

/// BALIA's settings and coupling group: one instance per download (see [`CoupledConfig`]).
pub type BaliaConfig = CoupledConfig<BaliaRule>;

/// One path under BALIA.
pub type Balia = Coupled<BaliaRule>;

/// BALIA: with x_k = w_k/rtt_k (packets per second) and α_r = max_k x_k / x_r, each packet
/// answered on path r adds
///
/// x_r / (rtt_r · (Σ_k x_k)²) · ((1 + α_r)/2) · ((4 + α_r)/5) packets,
///
/// and a loss on r takes w_r/2 · min(α_r, 1.5) packets off it. On the fastest path α = 1 and
/// both are Reno's on its share; slower paths grow faster (the (1 + α)(4 + α)/10 factor) and
/// back off harder (up to 3/4 of their window), which balances TCP-friendliness against
/// responsiveness better than LIA (too aggressive, unresponsive) and OLIA (flappy).
/// Slow start and timeouts are Reno's, per path.
#[derive(Clone, Copy, Debug, Default)]
pub struct BaliaRule;

impl CoupledRule for BaliaRule {
    const NAME: &'static str = "balia";

    fn alpha(me: &PathState, paths: &[PathState]) -> f64 {
        let best = established(paths).map(PathState::rate).fold(0.0, f64::max);
        let own = me.rate();
        if own <= 0.0 { 1.0 } else { best.max(own) / own }
    }

    fn increase(me: &PathState, paths: &[PathState], bytes: f64) -> f64 {
        let Some(rtt) = me.rtt else { return 0.0 };
        let x = me.rate();
        let sum: f64 = established(paths).map(PathState::rate).sum();
        let alpha = Self::alpha(me, paths);
        let per_packet = x / (rtt * sum * sum) * ((1.0 + alpha) / 2.0) * ((4.0 + alpha) / 5.0);
        bytes * per_packet
    }

    fn reduced(me: &PathState, paths: &[PathState]) -> f64 {
        me.cwnd - me.cwnd / 2.0 * Self::alpha(me, paths).min(1.5)
    }
}

#[cfg(test)]
mod tests {
    use super::super::newreno::test_support::*;
    use super::super::{Controller, ControllerFactory};
    use super::*;
    use crate::time::Instant;

    fn pair(config: &BaliaConfig) -> (Balia, Balia) {
        let mut a = Balia::new(config, Instant::ZERO, MSS);
        let mut b = Balia::new(config, Instant::ZERO, MSS);
        // a: 10 packets over 100 ms, x = 100 packets/s; b: 10 over 200 ms, x = 50.
        a.force(10.0, ms(100), 0.0);
        b.force(10.0, ms(200), 0.0);
        (a, b)
    }

    #[test]
    fn factory_builds_with_the_initial_window() {
        let config = BaliaConfig::default();
        let cc = config.build(Instant::ZERO, 1200);
        assert_eq!(cc.name(), "balia");
        assert_eq!(cc.window(), 12_000);
    }

    #[test]
    fn alpha_and_increase_by_hand() {
        let config = BaliaConfig::default();
        let (mut a, mut b) = pair(&config);
        // α = max x / x: a 100/100 = 1, b 100/50 = 2.
        assert_eq!((a.alpha(), b.alpha()), (1.0, 2.0));
        // Σx = 150, squared 22 500.
        // a: 100/(0.1 · 22 500) · (2/2) · (5/5) = 0.044 44 packets = 44.4 B per packet.
        a.on_data(&arrival(at(ms(1000)), at(ms(1100))));
        assert_eq!(a.window(), 10_044);
        // b: 50/(0.2 · 150²) · (3/2) · (6/5) = 0.011 11 · 1.8 = 0.02 packets = 20 B, were a
        // still at 10 packets; a's 44 B raised x_a to 100.444, so Σx = 150.444 and
        // α_b = 2.0089: 50/(0.2 · 150.444²) · (3.0089/2) · (6.0089/5) = 19.97 B.
        let (sum, alpha) = (150.444_44, 100.444_44 / 50.0);
        let expected = 10_000.0 + 1000.0 * 50.0 / (0.2 * sum * sum) * (1.0 + alpha) / 2.0 * (4.0 + alpha) / 5.0;
        b.on_data(&arrival(at(ms(1000)), at(ms(1200))));
        assert_eq!(b.window(), expected as u64);
        assert_eq!(b.window(), 10_019);
    }

    #[test]
    fn loss_takes_more_off_the_slower_path() {
        let config = BaliaConfig::default();
        let (mut a, mut b) = pair(&config);
        // a (α = 1): 10 − 10/2 · 1 = 5 packets, Reno's halving.
        a.on_loss(&loss(at(ms(1000)), at(ms(1100)), false));
        assert_eq!(a.window(), 5_000);
        // That brought x_a down to 50 = x_b; put a back at 10 packets for b's turn.
        a.force(10.0, ms(100), 0.0);
        // b (α = 2): 10 − 10/2 · min(2, 1.5) = 10 − 7.5 = 2.5 packets.
        b.on_loss(&loss(at(ms(1000)), at(ms(1200)), false));
        assert_eq!(b.window(), 2_500);
        // Once per event, and a timeout still collapses to one packet.
        b.on_loss(&loss(at(ms(1100)), at(ms(1300)), false));
        assert_eq!(b.window(), 2_500);
        b.on_loss(&loss(at(ms(1250)), at(ms(2300)), true));
        assert_eq!(b.window(), MSS);
    }

    #[test]
    fn dropping_a_path_updates_the_group() {
        let config = BaliaConfig::default();
        let (a, mut b) = pair(&config);
        assert_eq!(b.alpha(), 2.0);
        drop(a);
        // b alone: α = 1, increase x/(rtt·x²) = 1/w: Reno's 100 B per packet.
        assert_eq!(config.group().len(), 1);
        assert_eq!(b.alpha(), 1.0);
        b.on_data(&arrival(at(ms(1000)), at(ms(1200))));
        assert_eq!(b.window(), 10_100);
    }
}
