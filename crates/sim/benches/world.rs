//! Simulation speed: simulated DATA packets per wall-clock second for the MPRD high-rate
//! scenario (MPRD, Srinivasan and Aryafar, ICDCS 2025, Fig. 7(d): a 500 Mbit/s CDN origin and edges of 350, 350, 200 and
//! 200 Mbit/s), a 200 MB download with minRTT and CUBIC, on one core.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pcdn_sim::world::{World, mprd_high_rate};

fn bench(c: &mut Criterion) {
    let spec = mprd_high_rate();
    let probe = World::new(&spec, "minrtt", "cubic", 1).unwrap().run().unwrap();
    assert!(probe.completed);
    let mut group = c.benchmark_group("sim");
    group.sample_size(10);
    group.throughput(Throughput::Elements(probe.data_packets));
    group.bench_function("mprd_high_rate_5_servers", |b| {
        b.iter(|| {
            World::new(&spec, "minrtt", "cubic", 1)
                .unwrap()
                .run()
                .unwrap()
                .data_packets
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
