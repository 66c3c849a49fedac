//! `weft`'s characteristic behaviour in the simulator: a path with 10 % random loss runs at
//! its loss-adjusted rate, where CUBIC reads every loss as congestion and starves it.
//!
//! The world is MPRD Fig. 7(b)'s low-rate pair, shortened: a 10 Mbit/s CDN 10 ms away and a
//! 4 Mbit/s edge 20 ms away with 10 % Bernoulli loss on its data direction, behind the
//! default 100-packet queues, fetched by `weave` (the default scheduler). Margins are from
//! measured runs; the comment above each assertion gives the value the other control reaches.

use pcdn_core::time::Duration;
use pcdn_sim::link::{LinkConfig, Loss, QueueLimit};
use pcdn_sim::world::{Outcome, ServerSpec, WorldSpec, run};

const PACKET: u32 = 1400;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn server(name: &str, mbit: u64, delay_ms: u64, loss: f64, origin: bool) -> ServerSpec {
    let mut link = LinkConfig::fixed(mbit * 1_000_000, ms(delay_ms));
    if loss > 0.0 {
        link = link.with_loss(Loss::Bernoulli(loss));
    }
    ServerSpec {
        name: name.into(),
        origin,
        link,
        uplink: LinkConfig::fixed(10_000_000_000, ms(delay_ms)).with_queue(QueueLimit::UNLIMITED),
        fail_at: None,
        recover_at: None,
        upload_limit: None,
    }
}

fn world(servers: Vec<ServerSpec>) -> WorldSpec {
    WorldSpec {
        weave: Default::default(),
        reordering: Default::default(),
        tail_probes: true,
        content_length: 12_000_000,
        packet_size: PACKET,
        task_size: None,
        reorder_buffer: 4_000_000,
        servers,
        bottlenecks: Vec::new(),
        duration: Duration::from_secs(300),
    }
}

fn fetch(spec: &WorldSpec, cc: &str, seed: u64) -> Outcome {
    let out = run(spec, "default", cc, seed).unwrap();
    assert!(out.completed, "{cc}, seed {seed}: did not finish");
    out
}

/// Bytes the server at `index` delivered, per second of the download.
fn path_goodput_bps(out: &Outcome, index: usize) -> f64 {
    let path = &out.stats.paths[index];
    path.bytes as f64 * 8.0 / out.stats.elapsed().unwrap().as_secs_f64()
}

#[test]
fn a_lossy_edge_alone_runs_at_its_loss_adjusted_rate() {
    let spec = world(vec![server("edge", 4, 20, 0.10, true)]);
    // 4 Mbit/s × 0.9 = 3.6 Mbit/s of capacity, 1400 of every 1426 bytes payload.
    for seed in 1..=2 {
        let weft = fetch(&spec, "weft", seed);
        let cubic = fetch(&spec, "cubic", seed);
        // CUBIC: ≈ 0.21 (the Mathis bound at 40 ms and p = 0.1).
        assert!(cubic.stats.aggregation(cubic.capacity_bps) < 0.35);
        let aggregation = weft.stats.aggregation(weft.capacity_bps);
        assert!(aggregation > 0.9, "seed {seed}: weft aggregation {aggregation}");
    }
}

#[test]
fn the_mprd_fig7b_pair_meets_the_loss_target_with_weft() {
    // The target: 95 % of the loss-adjusted capacity, 10 + 3.6 Mbit/s.
    let spec = world(vec![
        server("cdn", 10, 10, 0.0, true),
        server("edge", 4, 20, 0.10, false),
    ]);
    for seed in 1..=2 {
        let weft = fetch(&spec, "weft", seed);
        let cubic = fetch(&spec, "cubic", seed);
        // CUBIC: ≈ 0.78, the edge contributing ≈ 0.8 Mbit/s.
        let cubic_aggregation = cubic.stats.aggregation(cubic.capacity_bps);
        assert!(cubic_aggregation < 0.85, "seed {seed}: cubic {cubic_aggregation}");
        assert!(path_goodput_bps(&cubic, 1) < 1.5e6);
        let aggregation = weft.stats.aggregation(weft.capacity_bps);
        assert!(aggregation > 0.95, "seed {seed}: weft aggregation {aggregation}");
        // The edge runs near its 3.6 Mbit/s, counted with the copies it delivers.
        let edge = path_goodput_bps(&weft, 1);
        assert!(edge > 3.0e6, "seed {seed}: edge {edge}");
        // Random loss is repaired by asking again, not by copies: waste stays small.
        assert!(weft.stats.waste() < 0.02, "seed {seed}: waste {}", weft.stats.waste());
    }
}

#[test]
fn without_loss_weft_aggregates_like_cubic() {
    let spec = world(vec![
        server("cdn", 10, 10, 0.0, true),
        server("edge", 4, 20, 0.0, false),
    ]);
    let weft = fetch(&spec, "weft", 1);
    let cubic = fetch(&spec, "cubic", 1);
    let (w, c) = (
        weft.stats.aggregation(weft.capacity_bps),
        cubic.stats.aggregation(cubic.capacity_bps),
    );
    assert!(w > 0.95 && w > c - 0.01, "weft {w}, cubic {c}");
}
