//! Simulation speed: simulated DATA packets per wall-clock second for the MPRD high-rate
//! scenario (seed 001 Fig. 7(d): a 500 Mbit/s CDN origin and edges of 350, 350, 200 and
//! 200 Mbit/s), a 200 MB download with minRTT and CUBIC, on one core.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pcdn_core::time::Duration;
use pcdn_sim::link::{LinkConfig, QueueLimit};
use pcdn_sim::world::{ServerSpec, WorldSpec, World};

pub fn mprd_high_rate() -> WorldSpec {
    let rates = [500u64, 350, 350, 200, 200];
    let servers = rates
        .iter()
        .enumerate()
        .map(|(i, &mbit)| {
            let delay = Duration::from_millis(5 + 5 * i as u64);
            ServerSpec {
                name: if i == 0 { "cdn".into() } else { format!("edge{i}") },
                origin: i == 0,
                link: LinkConfig::fixed(mbit * 1_000_000, delay).with_queue(QueueLimit::packets(1000)),
                uplink: LinkConfig::fixed(100_000_000_000, delay).with_queue(QueueLimit::UNLIMITED),
                fail_at: None,
                recover_at: None,
                upload_limit: None,
            }
        })
        .collect();
    WorldSpec {
        content_length: 200_000_000,
        packet_size: 1400,
        task_size: None,
        reorder_buffer: 16_000_000,
        servers,
        bottlenecks: Vec::new(),
        duration: Duration::from_secs(120),
    }
}

fn bench(c: &mut Criterion) {
    let spec = mprd_high_rate();
    let probe = World::new(&spec, "minrtt", "cubic", 1).unwrap().run().unwrap();
    assert!(probe.completed);
    let mut group = c.benchmark_group("sim");
    group.sample_size(10);
    group.throughput(Throughput::Elements(probe.data_packets));
    group.bench_function("mprd_high_rate_5_servers", |b| {
        b.iter(|| World::new(&spec, "minrtt", "cubic", 1).unwrap().run().unwrap().data_packets)
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
