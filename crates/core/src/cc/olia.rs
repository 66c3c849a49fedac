//! OLIA, the Opportunistic Linked Increases Algorithm (Khalili, Gast, Popovic & Le Boudec,
//! "MPTCP is not Pareto-optimal", IEEE/ACM ToN 2013; CoNEXT 2012): coupled across the paths
//! of one download.

use super::coupled::{Coupled, CoupledConfig, CoupledRule, PathState, established};

/// OLIA's settings and coupling group: one instance per download (see [`CoupledConfig`]).
pub type OliaConfig = CoupledConfig<OliaRule>;

/// One path under OLIA.
pub type Olia = Coupled<OliaRule>;

/// OLIA (paper eq. 5): in congestion avoidance each packet answered on path r adds
///
/// (w_r/rtt_r²) / (Σ_p w_p/rtt_p)² + α_r/w_r packets,
///
/// the first term the optimal (Kelly–Voice) increase that makes the flow Pareto-optimal,
/// the second moving window from the paths with the largest windows to the best paths
/// faster than the first term alone would:
///
/// - ℓ_r = max(l₁, l₂), the bytes delivered between the last two losses on r and since the
///   last one; the best paths B are those with the largest ℓ_r/rtt_r² (≈ the square of the
///   rate a TCP would get there), and M those with the largest window;
/// - α_r = 1/(n·|B∖M|) for r in B∖M, −1/(n·|M|) for r in M, when B∖M is not empty, and 0
///   otherwise; n is the number of paths.
///
/// As Linux's `mptcp_olia.c`, windows are compared in whole packets for M, paths without an
/// RTT are left out, and a loss halves the path it happened on (Reno's decrease). The window
/// a negative increase leaves is floored at the 2-packet minimum.
#[derive(Clone, Copy, Debug, Default)]
pub struct OliaRule;

impl OliaRule {
    /// ℓ_p/rtt_p².
    fn quality(p: &PathState) -> f64 {
        let rtt = p.rtt.unwrap_or(1.0);
        p.since_loss.max(p.between_losses) / (rtt * rtt)
    }
}

impl CoupledRule for OliaRule {
    const NAME: &'static str = "olia";

    fn alpha(me: &PathState, paths: &[PathState]) -> f64 {
        let n = established(paths).count() as f64;
        let max_window = established(paths).map(|p| p.packets().floor()).fold(0.0, f64::max);
        let best = established(paths).map(Self::quality).fold(0.0, f64::max);
        let in_m = |p: &PathState| p.packets().floor() == max_window;
        let in_b = |p: &PathState| Self::quality(p) >= best * (1.0 - 1e-12);
        let m = established(paths).filter(|p| in_m(p)).count() as f64;
        let b_not_m = established(paths).filter(|p| in_b(p) && !in_m(p)).count() as f64;
        if b_not_m == 0.0 || me.rtt.is_none() {
            0.0
        } else if in_b(me) && !in_m(me) {
            1.0 / (n * b_not_m)
        } else if in_m(me) {
            -1.0 / (n * m)
        } else {
            0.0
        }
    }

    fn increase(me: &PathState, paths: &[PathState], bytes: f64) -> f64 {
        let Some(rtt) = me.rtt else { return 0.0 };
        let w = me.packets();
        let sum: f64 = established(paths).map(PathState::rate).sum();
        let per_packet = (w / (rtt * rtt)) / (sum * sum) + Self::alpha(me, paths) / w;
        // `bytes` answered are bytes/mss packets, each adding per_packet packets of mss bytes.
        bytes * per_packet
    }
}

#[cfg(test)]
mod tests {
    use super::super::newreno::test_support::*;
    use super::super::{Controller, ControllerFactory};
    use super::*;
    use crate::time::Instant;

    #[test]
    fn factory_builds_with_the_initial_window() {
        let config = OliaConfig::default();
        let cc = config.build(Instant::ZERO, 1200);
        assert_eq!(cc.name(), "olia");
        assert_eq!(cc.window(), 12_000);
    }

    #[test]
    fn alpha_moves_window_from_the_largest_to_the_best_path() {
        let config = OliaConfig::default();
        let mut a = Olia::new(&config, Instant::ZERO, MSS);
        let mut b = Olia::new(&config, Instant::ZERO, MSS);
        // Both 100 ms. a: 10 packets, 100 packets since its last loss; b: 20 packets, 50.
        // ℓ/rtt²: a 100 000 B/0.01 = 1e7, b 5e6, so B = {a}; M = {b} (the larger window);
        // B∖M = {a}; n = 2. α_a = 1/(2·1) = 1/2, α_b = −1/(2·1) = −1/2.
        a.force(10.0, ms(100), 100.0);
        b.force(20.0, ms(100), 50.0);
        assert_eq!(a.alpha(), 0.5);
        assert_eq!(b.alpha(), -0.5);
        // Increase per packet: Σ w/rtt = 100 + 200 = 300 packets/s, squared 90 000.
        // a: (10/0.01)/90 000 + 0.5/10 = 0.011 11 + 0.05 = 0.061 11 packets = 61.1 B.
        a.on_data(&arrival(at(ms(1000)), at(ms(1100))));
        assert_eq!(a.window(), 10_061);
        // b: (20/0.01)/Σ² − 0.5/20 with Σ now 100.61 + 200: 2000/90 366 − 0.025 = −0.002 87
        // packets: the largest window shrinks while the best path grows.
        let sum = 300.0 + 0.61111;
        let expected = 20_000.0 + 1000.0 * ((20.0 / 0.01) / (sum * sum) - 0.025);
        b.on_data(&arrival(at(ms(1000)), at(ms(1100))));
        assert_eq!(b.window(), expected as u64);
        assert!(b.window() < 20_000);
    }

    #[test]
    fn alpha_is_zero_when_the_best_path_has_the_largest_window() {
        let config = OliaConfig::default();
        let mut a = Olia::new(&config, Instant::ZERO, MSS);
        let mut b = Olia::new(&config, Instant::ZERO, MSS);
        // a: 30 packets over 50 ms, 200 since loss (ℓ/rtt² = 2e5 B/0.0025 = 8e7); b: 10 over
        // 100 ms, 100 since loss (1e7). B = M = {a}: B∖M is empty, α = 0 on both, and each
        // grows by the Kelly–Voice term alone.
        a.force(30.0, ms(50), 200.0);
        b.force(10.0, ms(100), 100.0);
        assert_eq!((a.alpha(), b.alpha()), (0.0, 0.0));
        // Σ w/rtt = 600 + 100 = 700. b: (10/0.01)/490 000 = 0.002 04 packets = 2.04 B; a:
        // (30/0.0025)/490 000 = 0.024 49 packets = 24.5 B per packet answered.
        b.on_data(&arrival(at(ms(1000)), at(ms(1100))));
        assert_eq!(b.window(), 10_002);
        a.on_data(&arrival(at(ms(1000)), at(ms(1050))));
        assert_eq!(a.window(), 30_024);
    }

    #[test]
    fn equal_windows_count_as_the_largest() {
        let config = OliaConfig::default();
        let mut a = Olia::new(&config, Instant::ZERO, MSS);
        let mut b = Olia::new(&config, Instant::ZERO, MSS);
        let mut c = Olia::new(&config, Instant::ZERO, MSS);
        // a and b 20 packets (both in M), c 10 packets with the best ℓ/rtt²: B∖M = {c}, n = 3.
        // α_c = 1/(3·1) = 1/3; α_a = α_b = −1/(3·2) = −1/6.
        a.force(20.5, ms(100), 10.0);
        b.force(20.0, ms(100), 10.0);
        c.force(10.0, ms(100), 100.0);
        assert!((c.alpha() - 1.0 / 3.0).abs() < 1e-12);
        assert!((a.alpha() + 1.0 / 6.0).abs() < 1e-12);
        assert!((b.alpha() + 1.0 / 6.0).abs() < 1e-12);
    }

    #[test]
    fn losses_update_the_inter_loss_distance() {
        let config = OliaConfig::default();
        let mut a = Olia::new(&config, Instant::ZERO, MSS);
        // 10 + 20 packets delivered in slow start, then a loss: l₁ = 30 packets, l₂ = 0.
        let t = round(&mut a, Instant::ZERO, ms(100));
        round(&mut a, t, ms(100));
        a.on_loss(&loss(at(ms(150)), at(ms(260)), false));
        let me = config.group().paths()[0];
        assert_eq!((me.between_losses, me.since_loss), (30_000.0, 0.0));
        a.on_data(&arrival(at(ms(300)), at(ms(400))));
        assert_eq!(config.group().paths()[0].since_loss, 1000.0);
    }

    #[test]
    fn dropping_a_path_updates_the_group() {
        let config = OliaConfig::default();
        let mut a = Olia::new(&config, Instant::ZERO, MSS);
        let mut b = Olia::new(&config, Instant::ZERO, MSS);
        a.force(10.0, ms(100), 100.0);
        b.force(20.0, ms(100), 50.0);
        assert_eq!(a.alpha(), 0.5);
        drop(b);
        // a alone: it is both M and B, α = 0; (w/rtt²)/(w/rtt)² = 1/w: Reno's 100 B.
        assert_eq!(config.group().len(), 1);
        assert_eq!(a.alpha(), 0.0);
        a.on_data(&arrival(at(ms(1000)), at(ms(1100))));
        assert_eq!(a.window(), 10_100);
    }
}
