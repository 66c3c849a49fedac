//! The server's packet reads (`StoreSource::read`, one `pread` per packet) beside a copy from
//! a memory map of the same file, the way the store read before: 1024-byte packets in order
//! over a 64 MiB content held in the page cache.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pcdn_core::ContentSource;
use pcdn_core::manifest::DEFAULT_PACKET_SIZE;
use pcdn_net::Store;

const LEN: usize = 64 << 20;
const PACKET: usize = DEFAULT_PACKET_SIZE as usize;

fn reads(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("content");
    std::fs::write(&file, (0..LEN).map(|i| (i % 251) as u8).collect::<Vec<u8>>()).unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    let id = store.add(&file).unwrap();
    let source = store.source(DEFAULT_PACKET_SIZE);
    assert!(source.info(&id).is_some());
    let data = std::fs::File::open(store.data_path(&id)).unwrap();
    // SAFETY: the benchmark's own file, not changed while mapped.
    let map = unsafe { memmap2::Mmap::map(&data) }.unwrap();
    let packets = LEN / PACKET;

    let mut group = c.benchmark_group("store_read");
    group.throughput(Throughput::Bytes(LEN as u64));
    group.sample_size(20);
    let mut buf = vec![0u8; PACKET];
    group.bench_function("pread", |b| {
        b.iter(|| {
            for k in 0..packets {
                assert!(source.read(&id, (k * PACKET) as u64, &mut buf));
            }
            std::hint::black_box(&buf);
        })
    });
    group.bench_function("mmap copy", |b| {
        b.iter(|| {
            for k in 0..packets {
                buf.copy_from_slice(&map[k * PACKET..(k + 1) * PACKET]);
                std::hint::black_box(&buf);
            }
        })
    });
    group.finish();
}

criterion_group!(benches, reads);
criterion_main!(benches);
