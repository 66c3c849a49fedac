//! LIA, the Linked Increases Algorithm of MPTCP (RFC 6356): coupled across the paths of one
//! download.

use super::coupled::{Coupled, CoupledConfig, CoupledRule, PathState, established};

/// LIA's settings and coupling group: one instance per download (see [`CoupledConfig`]).
pub type LiaConfig = CoupledConfig<LiaRule>;

/// One path under LIA.
pub type Lia = Coupled<LiaRule>;

/// RFC 6356 §3: in congestion avoidance, each packet answered on path i adds
/// min(α·bytes·mss_i/cwnd_total, bytes·mss_i/cwnd_i) bytes to cwnd_i, with
///
/// α = cwnd_total · max_i(cwnd_i/rtt_i²) / (Σ_i cwnd_i/rtt_i)²
///
/// (windows in bytes). α is chosen so the multipath flow takes, at equilibrium, as much as
/// one TCP on its best path would (goal 1, "improve throughput") and no more (goal 3,
/// "balance congestion"), and the min() keeps any one path from being more aggressive than
/// TCP on it (goal 2, "do no harm"). A loss halves only the path it happened on (§4), as
/// Reno does; slow start and timeouts are per path, as Reno's.
#[derive(Clone, Copy, Debug, Default)]
pub struct LiaRule;

impl LiaRule {
    /// cwnd_total over the established paths, bytes.
    fn total(paths: &[PathState]) -> f64 {
        established(paths).map(|p| p.cwnd).sum()
    }
}

impl CoupledRule for LiaRule {
    const NAME: &'static str = "lia";

    fn alpha(_me: &PathState, paths: &[PathState]) -> f64 {
        if established(paths).count() <= 1 {
            // Alone, α is exactly 1 (RFC 6356's formula reduces to w·(w/r²)/(w/r)²).
            return 1.0;
        }
        let rtt = |p: &PathState| p.rtt.unwrap_or(1.0);
        let best = established(paths)
            .map(|p| p.cwnd / (rtt(p) * rtt(p)))
            .fold(0.0, f64::max);
        let sum: f64 = established(paths).map(|p| p.cwnd / rtt(p)).sum();
        if sum <= 0.0 {
            return 1.0;
        }
        Self::total(paths) * best / (sum * sum)
    }

    fn increase(me: &PathState, paths: &[PathState], bytes: f64) -> f64 {
        let total = Self::total(paths).max(me.cwnd);
        let coupled = Self::alpha(me, paths) * bytes * me.mss / total;
        let reno = bytes * me.mss / me.cwnd;
        coupled.min(reno)
    }
}

#[cfg(test)]
mod tests {
    use super::super::newreno::test_support::*;
    use super::super::{Controller, ControllerFactory, NewReno, NewRenoConfig};
    use super::*;
    use crate::time::{Duration, Instant};

    fn pair(config: &LiaConfig) -> (Lia, Lia) {
        (
            Lia::new(config, Instant::ZERO, MSS),
            Lia::new(config, Instant::ZERO, MSS),
        )
    }

    #[test]
    fn factory_builds_with_the_initial_window() {
        let config = LiaConfig::default();
        let cc = config.build(Instant::ZERO, 1200);
        assert_eq!(cc.name(), "lia");
        assert_eq!(cc.window(), 12_000);
        assert_eq!(cc.pacing_rate(), None);
    }

    #[test]
    fn alpha_by_hand() {
        let config = LiaConfig::default();
        let (mut a, mut b) = pair(&config);
        // a: 10 packets (10 000 B) over 100 ms; b: 20 packets (20 000 B) over 200 ms.
        a.force(10.0, ms(100), 0.0);
        b.force(20.0, ms(200), 0.0);
        // cwnd_total = 30 000; cwnd/rtt² = 10 000/0.01 = 1e6 and 20 000/0.04 = 5e5, max 1e6;
        // Σ cwnd/rtt = 100 000 + 100 000 = 2e5. α = 30 000 · 1e6 / 4e10 = 0.75.
        assert!((a.alpha() - 0.75).abs() < 1e-12);
        assert!((b.alpha() - 0.75).abs() < 1e-12);
        // One packet answered on a: min(0.75 · 1000 · 1000 / 30 000, 1000 · 1000 / 10 000)
        // = min(25, 100) = 25 bytes. On b: min(25, 50) = 25 bytes.
        a.on_data(&arrival(at(ms(1000)), at(ms(1100))));
        assert_eq!(a.window(), 10_025);
        // (a now holds 10 025 B; b's increase uses the new total: 0.75' · 1e6 / 30 025.)
        let before = b.window();
        b.on_data(&arrival(at(ms(1000)), at(ms(1200))));
        let grown = b.window() - before;
        assert!((24..=25).contains(&grown), "{grown}");
    }

    #[test]
    fn two_equal_paths_add_half_a_packet_per_round_trip_together() {
        // Two paths of 10 packets and 100 ms: α = 20·(10/r²)/(20/r)² = 1/2 and each packet
        // answered adds α·mss/cwnd_total = 1000/(2 · 20) = 25 bytes. A round trip answers 10
        // packets on each: +250 B per path, +500 B in all: half of what one Reno flow of 20
        // packets on the same bottleneck adds (1000 B).
        //
        // That is RFC 6356's design, not a shortfall: a loss halves only the path that saw
        // it, so the aggregate also backs off by half as much as Reno's, and at equal loss
        // rates both settle at the same total window (see the test below).
        let config = LiaConfig::default();
        let (mut a, mut b) = pair(&config);
        a.force(10.0, ms(100), 0.0);
        b.force(10.0, ms(100), 0.0);
        assert!((a.alpha() - 0.5).abs() < 1e-12);
        let start = (a.window() + b.window()) as f64;
        for i in 0..10u64 {
            let sent = at(ms(1000 + 10 * i));
            a.on_data(&arrival(sent, sent + ms(100)));
            b.on_data(&arrival(sent, sent + ms(100)));
        }
        let grown = (a.window() + b.window()) as f64 - start;
        // 20 × 25 B, a little less as cwnd_total grows along the round: 1e6 / 2 / 20 500.
        assert!((485.0..=500.0).contains(&grown), "{grown}");
        let mut reno = NewReno::new(&NewRenoConfig::default(), Instant::ZERO, MSS);
        let t = round(&mut reno, Instant::ZERO, ms(100)); // 20 packets
        reno.on_loss(&loss(at(ms(50)), t, false)); // 10
        let t = round(&mut reno, t + ms(1), ms(100)); // 11 …
        round(&mut reno, t, ms(100));
        assert_eq!(reno.window(), 12_000); // … +1 packet per round trip
    }

    /// Average total window over `rounds` round trips when every path loses one packet in
    /// `every` it delivers, all paths with a 100 ms RTT.
    fn mean_window_under_loss(paths: &mut [&mut dyn Controller], every: u64, rounds: u32) -> f64 {
        let rtt = ms(100);
        let mut delivered = vec![0u64; paths.len()];
        let mut t = at(ms(1000));
        let mut sum = 0.0;
        for r in 0..rounds {
            for (cc, count) in paths.iter_mut().zip(delivered.iter_mut()) {
                let n = (cc.window() / MSS).max(1);
                for i in 0..n {
                    let sent = t + rtt * i as u32 / n as u32;
                    *count += 1;
                    if *count % every == 0 {
                        cc.on_loss(&loss(sent, sent + rtt, false));
                    } else {
                        cc.on_data(&arrival(sent, sent + rtt));
                    }
                }
            }
            if r >= rounds / 4 {
                sum += paths.iter().map(|cc| cc.window() as f64).sum::<f64>();
            }
            t += rtt;
        }
        sum / (rounds - rounds / 4) as f64 / MSS as f64
    }

    #[test]
    fn at_equal_loss_rates_two_paths_take_what_one_reno_flow_would() {
        // RFC 6356 §3 goals 1 and 3 for paths with the same RTT and loss rate p = 1/1200:
        // Reno's sawtooth W/2 → W with 3/8·W² packets per cycle gives W = √(8/(3p)) = 56.6
        // packets and a mean of 3/4·W = 42.4. Two LIA paths each gain 1/4 packet per round
        // trip: w/2 → w takes 2w round trips and 3/2·w² packets, so w = √(2/(3p)) = 28.3,
        // each means 21.2, 42.4 together: the same as the single Reno flow.
        let every = 1200;
        let mut reno = NewReno::new(&NewRenoConfig::default(), Instant::ZERO, MSS);
        let single = mean_window_under_loss(&mut [&mut reno], every, 4000);
        assert!((single - 42.4).abs() < 0.1 * 42.4, "reno {single}");
        let config = LiaConfig::default();
        let (mut a, mut b) = pair(&config);
        let coupled = mean_window_under_loss(&mut [&mut a, &mut b], every, 4000);
        assert!((coupled / single - 1.0).abs() < 0.10, "lia {coupled} vs reno {single}");
        // Uncoupled, two Reno flows would take twice as much.
        let (mut r1, mut r2) = (
            NewReno::new(&NewRenoConfig::default(), Instant::ZERO, MSS),
            NewReno::new(&NewRenoConfig::default(), Instant::ZERO, MSS),
        );
        let uncoupled = mean_window_under_loss(&mut [&mut r1, &mut r2], every, 4000);
        assert!(uncoupled > 1.8 * single, "{uncoupled}");
    }

    #[test]
    fn no_path_grows_faster_than_reno_would_on_it() {
        // a: 10 packets over 10 ms, b: 20 packets over 1 s. cwnd/rtt²: 10 000/1e-4 = 1e8
        // and 20 000/1 = 2e4, max 1e8; Σ cwnd/rtt = 1e6 + 2e4 = 1.02e6; cwnd_total = 30 000.
        // α = 30 000 · 1e8 / 1.02e6² = 2.8835, and α·mss/cwnd_total = 96.12 B per packet.
        let config = LiaConfig::default();
        let (mut a, mut b) = pair(&config);
        a.force(10.0, ms(10), 0.0);
        b.force(20.0, Duration::from_secs(1), 0.0);
        let alpha = 30_000.0 * 1e8 / (1.02e6f64 * 1.02e6);
        assert!((a.alpha() - alpha).abs() < 1e-9);
        // On a, under Reno's 1e6/10 000 = 100 B: the coupled term, 96 B.
        a.on_data(&arrival(at(ms(1000)), at(ms(1010))));
        assert_eq!(a.window(), 10_096);
        // On b the coupled term would exceed Reno's 1e6/20 000 = 50 B: the min() caps it
        // (RFC 6356 goal 2, do no harm).
        b.on_data(&arrival(at(ms(1000)), at(ms(2000))));
        assert_eq!(b.window(), 20_050);
    }

    #[test]
    fn dropping_a_path_uncouples_the_rest() {
        let config = LiaConfig::default();
        let (mut a, mut b) = pair(&config);
        a.force(10.0, ms(100), 0.0);
        b.force(10.0, ms(100), 0.0);
        assert!((a.alpha() - 0.5).abs() < 1e-12);
        drop(b);
        assert_eq!(config.group().len(), 1);
        // Alone: α = 1, and a packet adds Reno's 1000²/10 000 = 100 B.
        assert_eq!(a.alpha(), 1.0);
        a.on_data(&arrival(at(ms(1000)), at(ms(1100))));
        assert_eq!(a.window(), 10_100);
    }

    #[test]
    fn loss_halves_only_the_path_it_hit() {
        let config = LiaConfig::default();
        let (mut a, mut b) = pair(&config);
        a.force(20.0, ms(100), 0.0);
        b.force(30.0, ms(100), 0.0);
        a.on_loss(&loss(at(ms(1000)), at(ms(1100)), false));
        assert_eq!((a.window(), b.window()), (10_000, 30_000));
        // The group sees it: cwnd_total = 40 000 now.
        let total: f64 = config.group().paths().iter().map(|p| p.cwnd).sum();
        assert_eq!(total, 40_000.0);
        b.on_loss(&loss(at(ms(1000)), at(ms(1300)), true));
        assert_eq!(b.window(), MSS);
    }
}
