//! Throughput of the core alone: a client and 4 servers exchanging 1400-byte packets with no
//! I/O and no links (`DirectPair`). Criterion reports delivered packets per second; the run is
//! single-threaded, so that is packets per second of CPU. `pcdn bench core` measures the same
//! with process CPU time.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pcdn_core::harness::DirectPair;
use pcdn_core::{DownloadConfig, cc, scheduler};

const LENGTH: u64 = 50_000_000;
const PACKET: u32 = 1400;

fn download(paths: usize, keep_data: bool) -> u64 {
    let mut config = DownloadConfig::new(Default::default(), LENGTH, PACKET);
    config.keep_data = keep_data;
    let mut pair = DirectPair::new(
        config,
        scheduler::by_name("minrtt", 1).unwrap(),
        cc::by_name("cubic").unwrap().as_ref(),
        paths,
    );
    pair.run();
    pair.client.stats().packets_delivered
}

fn bench(c: &mut Criterion) {
    let packets = LENGTH.div_ceil(u64::from(PACKET));
    let mut group = c.benchmark_group("core");
    group.sample_size(10);
    group.throughput(Throughput::Elements(packets));
    group.bench_function("4_servers_count", |b| b.iter(|| download(4, false)));
    group.bench_function("4_servers_keep_and_read", |b| b.iter(|| download(4, true)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
