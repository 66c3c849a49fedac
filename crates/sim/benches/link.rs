//! Link-model throughput: 1 million 1500-byte packets through a 2-link route in virtual time,
//! the way the simulator's main loop drives the network (run to the next delivery or the next
//! send, drain deliveries, send).
//!
//! Run: `cargo bench -p pcdn-sim --bench link`. Prints packets per wall-clock second and the
//! cost per packet-hop; the simulator needs ≥ 1 M packets/s, i.e. well under 200 ns per hop.

use std::hint::black_box;
use std::time::{Duration, Instant as WallClock};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pcdn_core::time::Instant;
use pcdn_sim::{LinkConfig, Loss, Network, Packet, QueueLimit};

const PACKETS: u64 = 1_000_000;
const HOPS: u64 = 2;

/// Sends `PACKETS` at 95 % of a 1 Gbit/s access link, through a 1 % lossy access link and a
/// 1 Gbit/s core link with a 1000-packet queue; returns the packets delivered.
fn run() -> u64 {
    let mut net = Network::new(1);
    let access = LinkConfig::fixed(1_000_000_000, Duration::from_millis(5))
        .with_loss(Loss::Bernoulli(0.01))
        .with_queue(QueueLimit::packets(1000));
    let core = LinkConfig::fixed(1_000_000_000, Duration::from_millis(10)).with_queue(QueueLimit::packets(1000));
    let a = net.add_link(&access).unwrap();
    let b = net.add_link(&core).unwrap();
    let route = net.add_route(&[a, b]);
    // 12 µs per 1500 B at 1 Gbit/s; 12.6 µs is 95 % load.
    let gap = 12_600;
    let mut next_send = 0u64;
    let mut sent = 0u64;
    let mut delivered = 0u64;
    loop {
        // The sender's next send plays the part of the nodes' earliest timer.
        let limit = if sent < PACKETS { next_send } else { u64::MAX };
        if let Some(t) = net.next_delivery(Instant::from_nanos(limit)) {
            while let Some((_, p)) = net.poll_delivered(t) {
                delivered += 1;
                black_box(p);
            }
        } else if sent < PACKETS {
            net.send(Instant::from_nanos(next_send), route, Packet::new(1500, sent));
            sent += 1;
            next_send += gap;
        } else {
            return delivered;
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut best = Duration::MAX;
    let mut delivered = 0;
    for _ in 0..5 {
        let start = WallClock::now();
        delivered = run();
        best = best.min(start.elapsed());
    }
    let secs = best.as_secs_f64();
    println!(
        "link: {PACKETS} packets ({delivered} delivered) through a {HOPS}-link route in {:.1} ms: \
         {:.2} M packets/s, {:.0} ns per packet-hop",
        secs * 1e3,
        PACKETS as f64 / secs / 1e6,
        secs * 1e9 / (PACKETS * HOPS) as f64,
    );

    let mut g = c.benchmark_group("link");
    g.throughput(Throughput::Elements(PACKETS));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("1M packets, 2-link route", |b| b.iter(run));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
