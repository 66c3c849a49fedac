//! Throughput of the core alone: a client and its servers exchanging 1400-byte packets
//! through the in-memory harness, no I/O. Reports delivered packets per second of CPU.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pcdn_core::harness::{Harness, PathSpec};
use pcdn_core::{DownloadConfig, Duration, cc, scheduler};

const LENGTH: u64 = 20_000_000;
const PACKET: u32 = 1400;

fn download(paths: usize, keep_data: bool) -> u64 {
    let specs: Vec<PathSpec> = (0..paths)
        .map(|i| {
            let mut p = PathSpec::new(10_000_000_000, Duration::from_millis(5 + i as u64), 0.0);
            p.queue_packets = 100_000;
            p
        })
        .collect();
    let mut config = DownloadConfig::new(Default::default(), LENGTH, PACKET);
    config.keep_data = keep_data;
    let mut h = Harness::new(
        config,
        scheduler::by_name("minrtt", 1).unwrap(),
        cc::by_name("cubic").unwrap().as_ref(),
        &specs,
        1,
    );
    assert!(h.run(Duration::from_secs(3600)));
    h.client.stats().packets_delivered
}

fn bench(c: &mut Criterion) {
    let packets = LENGTH.div_ceil(u64::from(PACKET));
    let mut group = c.benchmark_group("core");
    group.sample_size(10);
    group.throughput(Throughput::Elements(packets));
    for paths in [1, 4] {
        group.bench_function(format!("download_{paths}_paths_verified"), |b| {
            b.iter(|| download(paths, true))
        });
        group.bench_function(format!("download_{paths}_paths_discard"), |b| {
            b.iter(|| download(paths, false))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
