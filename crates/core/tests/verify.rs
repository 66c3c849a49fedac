//! Downloads checked block by block against a manifest, through the in-memory harness, with
//! servers that serve corrupt bytes: who gets banned, who does not, and that the file is
//! byte-exact (the harness checks every byte read against the content).

use pcdn_core::cc;
use pcdn_core::download::ConfigError;
use pcdn_core::harness::{Corruption, Harness, PathSpec, PatternContent};
use pcdn_core::manifest::DEFAULT_BLOCK_SIZE;
use pcdn_core::scheduler;
use pcdn_core::{Download, DownloadConfig, Duration, Event, Manifest, PathError, PathId, Stats};
use std::collections::BTreeSet;
use std::sync::Arc;

const KB: u64 = 1024;
const PACKET: u32 = 1024;
const BLOCK: u64 = DEFAULT_BLOCK_SIZE as u64;

fn path(mbit_s: u64, one_way_ms: u64) -> PathSpec {
    PathSpec::new(mbit_s * 1_000_000, Duration::from_millis(one_way_ms), 0.0)
}

fn manifest(length: u64) -> Arc<Manifest> {
    Arc::new(PatternContent::new(length).manifest(PACKET, DEFAULT_BLOCK_SIZE))
}

/// A verified download of `length` bytes in 1024-byte packets and 64 KiB blocks.
fn config(length: u64) -> DownloadConfig {
    let mut config = DownloadConfig::new(Default::default(), length, PACKET);
    config.verify = Some(manifest(length));
    config
}

fn harness(config: DownloadConfig, scheduler: &str, specs: &[PathSpec], seed: u64) -> Harness {
    let scheduler = scheduler::by_name(scheduler, seed).expect("scheduler");
    Harness::new(config, scheduler, cc::by_name("cubic").unwrap().as_ref(), specs, seed)
}

fn events(h: &mut Harness) -> Vec<Event> {
    std::iter::from_fn(|| h.client.poll_event()).collect()
}

/// The paths that failed, with their reasons, in order.
fn failures(events: &[Event]) -> Vec<(PathId, PathError)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::PathFailed { path, reason } => Some((*path, *reason)),
            _ => None,
        })
        .collect()
}

/// Every path named in a BlockRejected event.
fn rejected_paths(events: &[Event]) -> BTreeSet<PathId> {
    events
        .iter()
        .flat_map(|e| match e {
            Event::BlockRejected { paths, .. } => paths.clone(),
            _ => Vec::new(),
        })
        .collect()
}

fn banned(stats: &Stats) -> Vec<bool> {
    stats.paths.iter().map(|p| p.banned).collect()
}

/// Runs to completion within `limit_secs` and checks that every byte was read, byte-exact.
fn completes(h: &mut Harness, limit_secs: u64, length: u64) {
    assert!(h.run(Duration::from_secs(limit_secs)), "not done after {limit_secs} s");
    assert_eq!(h.verified, length, "every byte read and checked");
}

#[test]
fn a_clean_verified_download_is_byte_exact() {
    let length = 3 * 1024 * KB + 5000; // a partial last block
    for scheduler in ["default", "minrtt", "round-robin"] {
        let specs = [path(10, 10), path(8, 20), path(5, 30)];
        let mut h = harness(config(length), scheduler, &specs, 1);
        completes(&mut h, 60, length);
        let s = h.client.stats();
        assert_eq!(s.blocks_verified, length.div_ceil(BLOCK), "{scheduler}");
        assert_eq!(s.blocks_rejected, 0, "{scheduler}");
        assert_eq!(banned(s), [false; 3], "{scheduler}");
        assert!(s.waits_us.len() as u64 == s.packets_delivered && s.packets_delivered == s.packets_needed);
        assert!(!events(&mut h).iter().any(|e| matches!(e, Event::BlockRejected { .. })));
    }
}

#[test]
fn one_corrupting_server_among_three_is_banned_and_the_file_is_exact() {
    let length = 4 * 1024 * KB;
    for (scheduler, seed) in [("default", 2), ("minrtt", 3), ("round-robin", 4)] {
        let specs = [path(10, 10), path(10, 12), path(10, 14)];
        let mut h = harness(config(length), scheduler, &specs, seed);
        // Server 1 flips one byte in each of four blocks.
        h.corrupt_server(1, Corruption::byte_in(BLOCK, &[2, 9, 20, 40], 3000));
        completes(&mut h, 120, length);
        let events = events(&mut h);
        let bad = h.path_ids[1];
        assert_eq!(failures(&events), [(bad, PathError::Corrupt)], "{scheduler}");
        let s = h.client.stats();
        assert_eq!(banned(s), [false, true, false], "{scheduler}");
        assert!(s.blocks_rejected >= 1, "{scheduler}");
        assert!(s.paths[1].corrupt_packets >= 1, "{scheduler}: proven by a packet");
        assert_eq!(s.paths[0].corrupt_packets + s.paths[2].corrupt_packets, 0);
        assert_eq!(s.blocks_verified, length / BLOCK);
        assert!(h.client.is_path_failed(bad));
    }
}

#[test]
fn innocent_paths_that_shared_failed_blocks_are_not_banned() {
    // One server corrupts every packet: every block it takes part in fails, with the innocent
    // servers' packets in it too, and many such blocks are in flight at once.
    let length = 4 * 1024 * KB;
    let specs = [path(10, 10), path(10, 12), path(10, 14)];
    for scheduler in ["default", "minrtt", "round-robin"] {
        for seed in 1..=3 {
            let bad = seed as usize % 3;
            let mut h = harness(config(length), scheduler, &specs, seed);
            h.corrupt_server(bad, Corruption::everything(BLOCK));
            completes(&mut h, 120, length);
            let events = events(&mut h);
            let shared = rejected_paths(&events);
            let innocent: Vec<PathId> = (0..3).filter(|&i| i != bad).map(|i| h.path_ids[i]).collect();
            assert!(
                innocent.iter().any(|p| shared.contains(p)),
                "{scheduler}/{seed}: an innocent path took part in a failed block: {shared:?}"
            );
            assert_eq!(
                failures(&events),
                [(h.path_ids[bad], PathError::Corrupt)],
                "{scheduler}/{seed}"
            );
            let banned = banned(h.client.stats());
            assert_eq!(
                banned,
                (0..3).map(|i| i == bad).collect::<Vec<_>>(),
                "{scheduler}/{seed}"
            );
        }
    }
}

#[test]
fn a_server_corrupting_everything_beside_one_good_server_is_banned() {
    let length = 3 * 1024 * KB;
    for (scheduler, seed) in [("default", 6), ("minrtt", 7)] {
        // The corrupting server is the faster one, so it sends most of the data.
        let specs = [path(4, 20), path(12, 10)];
        let mut h = harness(config(length), scheduler, &specs, seed);
        h.corrupt_server(1, Corruption::everything(BLOCK));
        completes(&mut h, 120, length);
        let events = events(&mut h);
        assert_eq!(failures(&events), [(h.path_ids[1], PathError::Corrupt)], "{scheduler}");
        assert_eq!(banned(h.client.stats()), [false, true], "{scheduler}");
    }
}

#[test]
fn alternating_requests_cannot_hide_a_corrupter() {
    // Round-robin spreads every retry of a failed block over both servers, so without a retry
    // from one server alone every retry would fail again and prove nothing.
    let length = 2 * 1024 * KB;
    for bad in 0..2 {
        let mut h = harness(config(length), "round-robin", &[path(10, 10), path(10, 10)], 13);
        h.corrupt_server(bad, Corruption::everything(BLOCK));
        completes(&mut h, 60, length);
        let events = events(&mut h);
        assert_eq!(failures(&events), [(h.path_ids[bad], PathError::Corrupt)]);
        assert!(h.client.stats().paths[bad].corrupt_packets > 0);
    }
}

#[test]
fn the_only_source_of_a_block_failing_twice_is_banned() {
    // One server, one bad block: nothing can prove it wrong packet by packet, but it was the
    // only source of the block twice.
    let length = 1024 * KB;
    let mut h = harness(config(length), "default", &[path(10, 10)], 8);
    h.corrupt_server(0, Corruption::byte_in(BLOCK, &[5], 100));
    assert!(!h.run(Duration::from_secs(60)));
    assert!(!h.step(), "nothing left to happen");
    let events = events(&mut h);
    let rejected: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::BlockRejected { block, paths } => Some((*block, paths.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(rejected, [(5, vec![h.path_ids[0]]), (5, vec![h.path_ids[0]])]);
    assert_eq!(failures(&events), [(h.path_ids[0], PathError::Corrupt)]);
    // The blocks before the bad one were delivered and read; nothing after it.
    assert_eq!(h.verified, 5 * BLOCK);
    assert_eq!(h.client.stats().paths[0].corrupt_packets, 0, "no packet was proven");
}

#[test]
fn when_every_server_corrupts_every_path_is_banned_without_a_hang() {
    let length = 2 * 1024 * KB;
    let specs = [path(10, 10), path(8, 15), path(6, 20)];
    let mut h = harness(config(length), "default", &specs, 9);
    for i in 0..3 {
        h.corrupt_server(i, Corruption::everything(BLOCK));
    }
    assert!(!h.run(Duration::from_secs(600)), "a corrupt file is never done");
    // The run ended because nothing was left to happen, not at the time limit.
    assert!(!h.step());
    assert!(h.now < pcdn_core::Instant::ZERO + Duration::from_secs(600));
    let events = events(&mut h);
    let mut failed: Vec<_> = failures(&events);
    failed.sort_by_key(|&(p, _)| p);
    assert_eq!(
        failed,
        h.path_ids.iter().map(|&p| (p, PathError::Corrupt)).collect::<Vec<_>>()
    );
    let s = h.client.stats();
    assert_eq!(banned(s), [true; 3]);
    assert_eq!(s.blocks_verified, 0);
    assert_eq!(s.packets_delivered, 0);
    assert_eq!(h.verified, 0, "nothing unverified was ever readable");
}

#[test]
fn tasks_on_block_boundaries_with_gaps_are_verified() {
    let length = 2 * 1024 * KB + 777;
    let mut config = config(length);
    // A gap between the tasks, and a last task ending at the content's end mid-block.
    config.tasks = vec![0..4 * BLOCK, 10 * BLOCK..12 * BLOCK, 30 * BLOCK..length];
    let specs = [path(10, 10), path(10, 15)];
    let mut h = harness(config, "default", &specs, 10);
    h.corrupt_server(1, Corruption::byte_in(BLOCK, &[1, 11, 32], 5));
    let expected = 4 * BLOCK + 2 * BLOCK + (length - 30 * BLOCK);
    completes(&mut h, 60, expected);
    let completed: Vec<_> = events(&mut h)
        .into_iter()
        .filter_map(|e| match e {
            Event::TaskComplete { index } => Some(index),
            _ => None,
        })
        .collect();
    assert_eq!(completed, [0, 1, 2]);
    assert_eq!(h.client.stats().blocks_verified, 4 + 2 + 3);
}

#[test]
fn late_data_from_a_banned_path_is_dropped() {
    // The corrupter is slow and deep-queued: many of its packets are still on the way when it
    // is banned, and none of them may be used.
    let length = 2 * 1024 * KB;
    let mut slow = path(2, 80);
    slow.queue_packets = 2000;
    let specs = [path(10, 10), slow];
    let mut h = harness(config(length), "round-robin", &specs, 11);
    h.corrupt_server(1, Corruption::everything(BLOCK));
    completes(&mut h, 120, length);
    let s = h.client.stats();
    assert_eq!(banned(s), [false, true]);
    assert!(s.invalid > 0, "the banned path's late packets were dropped");
}

fn new_download(config: DownloadConfig) -> Result<Download, ConfigError> {
    Download::new(config, scheduler::by_name("default", 0).unwrap())
}

#[test]
fn misaligned_or_inconsistent_settings_are_config_errors() {
    let length = 1024 * KB + 100;
    let mut c = config(length);
    c.tasks = vec![0..BLOCK, BLOCK + 1024..3 * BLOCK];
    let err = new_download(c).unwrap_err();
    assert_eq!(
        err,
        ConfigError::UnalignedTask {
            index: 1,
            start: BLOCK + 1024,
            end: 3 * BLOCK,
            block_size: DEFAULT_BLOCK_SIZE
        }
    );
    assert!(err.to_string().contains("task 1"), "{err}");

    let mut c = config(length);
    c.tasks = vec![0..BLOCK + 5, 2 * BLOCK..3 * BLOCK];
    assert!(matches!(
        new_download(c),
        Err(ConfigError::UnalignedTask { index: 0, .. })
    ));

    // Ending at the content's end is fine even mid-block.
    let mut c = config(length);
    c.tasks = vec![0..BLOCK, 2 * BLOCK..length];
    assert!(new_download(c).is_ok());

    let mut c = config(length);
    c.keep_data = false;
    assert_eq!(new_download(c).unwrap_err(), ConfigError::VerifyWithoutData);

    let mut c = config(length);
    c.content_length = length + 1;
    assert!(matches!(
        new_download(c),
        Err(ConfigError::ManifestMismatch { field: "length", .. })
    ));

    let mut c = config(length);
    c.packet_size = 1000;
    assert!(matches!(
        new_download(c),
        Err(ConfigError::ManifestMismatch {
            field: "packet_size",
            ..
        })
    ));

    let mut c = config(length);
    c.reorder_buffer = BLOCK - 1;
    assert!(matches!(
        new_download(c),
        Err(ConfigError::ReorderBufferBelowBlock { .. })
    ));

    let mut c = config(length);
    c.max_unresolved_strikes = 0;
    assert_eq!(new_download(c).unwrap_err(), ConfigError::NoStrikes);

    let mut c = config(length);
    let mut m = (**c.verify.as_ref().unwrap()).clone();
    m.block_hashes.pop();
    c.verify = Some(Arc::new(m));
    assert!(matches!(new_download(c), Err(ConfigError::Manifest(_))));
}

#[test]
fn stats_json_without_a_manifest_keeps_its_shape() {
    let mut h = harness(
        DownloadConfig::new(Default::default(), 200 * KB, PACKET),
        "default",
        &[path(10, 10)],
        12,
    );
    completes(&mut h, 10, 200 * KB);
    let json = serde_json::to_string(h.client.stats()).unwrap();
    for key in ["blocks_verified", "blocks_rejected", "corrupt_packets", "banned"] {
        assert!(!json.contains(key), "{key} in {json}");
    }
    let mut h = harness(config(200 * KB), "default", &[path(10, 10)], 12);
    completes(&mut h, 10, 200 * KB);
    let json = serde_json::to_string(h.client.stats()).unwrap();
    assert!(json.contains("\"blocks_verified\":4"), "{json}");
}
