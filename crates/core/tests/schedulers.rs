//! Every registered scheduler through the in-memory harness: complete, byte-exact downloads
//! over heterogeneous paths, and each scheduler's characteristic behaviour.
//! Run with `--nocapture` to see the metrics per scheduler.

use pcdn_core::cc;
use pcdn_core::harness::{Harness, PathSpec};
use pcdn_core::scheduler::{self, SCHEDULERS};
use pcdn_core::{DownloadConfig, Duration, Stats};

const MB: u64 = 1_000_000;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn mbit(n: u64) -> u64 {
    n * 1_000_000
}

/// A completed, byte-exact download with Cubic on every path.
fn run(scheduler: &str, length: u64, reorder_buffer: u64, specs: &[PathSpec], seed: u64) -> Harness {
    let mut config = DownloadConfig::new(Default::default(), length, 1400);
    config.seed = seed;
    config.reorder_buffer = reorder_buffer;
    let mut h = Harness::new(
        config,
        scheduler::by_name(scheduler, seed).expect("registered"),
        cc::by_name("cubic").expect("registered").as_ref(),
        specs,
        seed,
    );
    assert!(
        h.run(Duration::from_secs(300)),
        "{scheduler}: the download did not complete"
    );
    assert_eq!(
        h.verified, length,
        "{scheduler}: every byte, checked against the content"
    );
    h
}

fn report(label: &str, h: &Harness) {
    let s: &Stats = h.client.stats();
    let requests: Vec<u64> = s.paths.iter().map(|p| p.requests).collect();
    println!(
        "{label:<28} goodput {:6.2} Mbit/s  aggregation {:.3}  ofo mean {:7.0} B max {:7} B  wait p99 {:>10.1?}  waste {:.3}  losses {:4}  requests/path {requests:?}",
        s.goodput_bps() / 1e6,
        s.aggregation(h.capacity_bps()),
        s.ofo_mean_bytes(),
        s.ofo_max_bytes(),
        s.wait_p99(),
        s.waste(),
        s.losses,
    );
}

fn requests_share(s: &Stats, path: usize) -> f64 {
    let total: u64 = s.paths.iter().map(|p| p.requests).sum();
    s.paths[path].requests as f64 / total as f64
}

#[test]
fn every_scheduler_completes_byte_exact_over_three_heterogeneous_paths() {
    let specs = [
        PathSpec::new(mbit(10), ms(10), 0.0),
        PathSpec::new(mbit(6), ms(30), 0.0),
        PathSpec::new(mbit(3), ms(60), 0.0),
    ];
    for (i, (name, _)) in SCHEDULERS.iter().enumerate() {
        let h = run(name, 4 * MB, 4 * MB, &specs, 20 + i as u64);
        report(name, &h);
    }
}

#[test]
fn every_scheduler_completes_byte_exact_with_loss() {
    // Loss leaves holes below the first never-requested number; every scheduler must fill them.
    let specs = [
        PathSpec::new(mbit(10), ms(15), 0.02),
        PathSpec::new(mbit(5), ms(40), 0.05),
    ];
    for (i, (name, _)) in SCHEDULERS.iter().enumerate() {
        let h = run(name, 2 * MB, 1_000_000, &specs, 40 + i as u64);
        report(&format!("{name}, lossy"), &h);
        assert!(h.client.stats().losses > 0);
    }
}

#[test]
fn redundant_fetches_one_copy_per_path() {
    let specs: Vec<PathSpec> = (0..3).map(|_| PathSpec::new(mbit(10), ms(15), 0.0)).collect();
    let h = run("redundant", 3 * MB, 4 * MB, &specs, 60);
    report("redundant, 3 equal paths", &h);
    let waste = h.client.stats().waste();
    // n − 1 = 2 extra copies per packet, within ±25 %.
    assert!((1.5..=2.5).contains(&waste), "waste {waste}");
}

#[test]
fn gr_sty_stays_on_the_path_that_matters() {
    let specs = [
        PathSpec::new(mbit(20), ms(10), 0.0),
        PathSpec::new(mbit(1), ms(50), 0.0),
    ];
    let h = run("gr-sty", 4 * MB, 4 * MB, &specs, 61);
    report("gr-sty, 20 + 1 Mbit/s", &h);
    let share = requests_share(h.client.stats(), 0);
    assert!(share > 0.8, "the fast path carries most requests: {share:.3}");
}

#[test]
fn tp_sty_settles_on_the_path_with_the_most_throughput() {
    // The other paths' window estimates never beat the fast path's measured rate, so TP-STY
    // never leaves it: sticky to the point of being single-path.
    let specs = [
        PathSpec::new(mbit(10), ms(10), 0.0),
        PathSpec::new(mbit(6), ms(30), 0.0),
        PathSpec::new(mbit(3), ms(60), 0.0),
    ];
    let h = run("tp-sty", 2 * MB, 4 * MB, &specs, 63);
    report("tp-sty, 10 + 6 + 3 Mbit/s", &h);
    assert_eq!(requests_share(h.client.stats(), 0), 1.0);
}

#[test]
fn blest_and_ecf_reorder_less_than_minrtt_with_a_small_buffer() {
    // A slow second path and a 300 kB reorder buffer: minRTT hands the slow path packets
    // that pin the buffer while the fast path waits; BLEST and ECF hold back instead.
    // Queues of 60 packets keep the fast path's sRTT from bloating past the slow one's.
    let mut specs = [
        PathSpec::new(mbit(20), ms(10), 0.0),
        PathSpec::new(mbit(10), ms(60), 0.0),
    ];
    for s in &mut specs {
        s.queue_packets = 60;
    }
    let buffer = 300_000;
    let ofo = |name: &str| {
        let h = run(name, 5 * MB, buffer, &specs, 64);
        report(&format!("{name}, 300 kB buffer"), &h);
        let s = h.client.stats();
        assert!(s.ofo_max_bytes() <= buffer);
        (s.ofo_max_bytes(), s.ofo_mean_bytes())
    };
    let minrtt = ofo("minrtt");
    for name in ["blest", "ecf"] {
        let (max, mean) = ofo(name);
        assert!(max < minrtt.0, "{name}: ofo max {max} vs minrtt {}", minrtt.0);
        assert!(mean < minrtt.1 / 2.0, "{name}: ofo mean {mean} vs minrtt {}", minrtt.1);
    }
}
