//! Whole fetches over real UDP sockets on 127.0.0.1 from real servers (one origin, three
//! edges), configured directly (`--server` style, no tracker).

mod common;

use std::io::{Seek, SeekFrom, Write};
use std::time::Duration;

use common::{Lab, files_in};
use pcdn_net::{FetchError, Store, fetch};

const FIVE_MB: usize = 5_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_megabytes_from_an_origin_and_three_edges_arrive_byte_identical() {
    let lab = Lab::new(FIVE_MB, 3);
    let origin = lab.serve(&lab.origin_store, true, None).await;
    let mut edges = Vec::new();
    for store in &lab.edge_stores {
        edges.push(lab.serve(store, false, None).await);
    }
    let out_dir = lab.out_dir();
    let output = out_dir.join("video.bin");
    let config = lab.fetch_config(&output, &edges.iter().collect::<Vec<_>>(), &[&origin]);
    let report = fetch(config).await.unwrap();

    assert!(
        std::fs::read(&output).unwrap() == lab.data,
        "the output differs from the content"
    );
    assert_eq!(files_in(&out_dir), vec!["video.bin"], "no temporary file left");
    assert_eq!(report.bytes, FIVE_MB as u64);
    assert_eq!(
        (report.scheduler.as_str(), report.cc.as_str()),
        ("weave", "weft"),
        "the report names the defaults by their own names"
    );
    assert_eq!(report.paths.len(), 4);
    assert_eq!(report.paths.iter().filter(|p| p.origin).count(), 1);
    assert!(report.paths.iter().all(|p| p.outcome == "ok"), "{:#?}", report.paths);
    assert_eq!(report.blocks_rejected, 0);
    assert!(report.banned_paths.is_empty());
    let received: u64 = report.paths.iter().map(|p| p.bytes).sum();
    assert!(received >= FIVE_MB as u64);
    let origin_bytes: u64 = report.paths.iter().filter(|p| p.origin).map(|p| p.bytes).sum();
    assert!((report.cdn_share - origin_bytes as f64 / received as f64).abs() < 1e-9);
    assert!(report.goodput_mbps > 0.0 && report.completion_s.is_some());

    // Every server saw a session and sent data.
    for server in edges.iter().chain([&origin]) {
        assert!(server.stats().sessions_opened >= 1, "{} was not used", server.id());
    }
    for server in edges.into_iter().chain([origin]) {
        server.shutdown().await.unwrap();
    }
}

/// Overwrites `len` bytes from the middle of a store's data file, in place, as disk rot or a
/// malicious device would.
fn corrupt_middle(store: &std::path::Path, id: &pcdn_core::wire::ContentId, len: usize) {
    let path = Store::open(store).unwrap().data_path(id);
    let size = std::fs::metadata(&path).unwrap().len();
    let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.seek(SeekFrom::Start(size / 2 - len as u64 / 2)).unwrap();
    file.write_all(&vec![0xee; len]).unwrap();
    file.sync_all().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_serving_corrupt_data_is_banned_and_the_file_is_still_right() {
    let lab = Lab::new(FIVE_MB, 3);
    // All but the first and last blocks: wherever the scheduler sends this edge's requests
    // (a loaded machine may let it serve only a few hundred packets), some are corrupt.
    corrupt_middle(&lab.edge_stores[1], &lab.id, FIVE_MB - 2 * 65536);
    let origin = lab.serve(&lab.origin_store, true, None).await;
    let mut edges = Vec::new();
    for store in &lab.edge_stores {
        edges.push(lab.serve(store, false, None).await);
    }
    let bad = edges[1].local_addr().to_string();
    let out_dir = lab.out_dir();
    let output = out_dir.join("video.bin");
    let config = lab.fetch_config(&output, &edges.iter().collect::<Vec<_>>(), &[&origin]);
    let report = fetch(config).await.unwrap();

    assert!(
        std::fs::read(&output).unwrap() == lab.data,
        "the output differs from the content"
    );
    assert_eq!(files_in(&out_dir), vec!["video.bin"]);
    assert_eq!(report.banned_paths, vec![bad.clone()], "{:#?}", report.paths);
    assert!(report.blocks_rejected >= 1);
    let bad_path = report.paths.iter().find(|p| p.name == bad).unwrap();
    assert!(bad_path.banned && bad_path.outcome == "corrupt", "{bad_path:?}");
    assert!(bad_path.corrupt_packets >= 1);
    assert!(
        report.paths.iter().filter(|p| p.name != bad).all(|p| !p.banned),
        "only the corrupt edge is banned: {:#?}",
        report.paths
    );
    for server in edges.into_iter().chain([origin]) {
        server.shutdown().await.unwrap();
    }
}

/// Waits until `server` has sent at least `packets` DATA packets, or `download` ended.
async fn until_sent<T>(server: &pcdn_net::ServerHandle, packets: u64, download: &tokio::task::JoinHandle<T>) {
    while server.stats().data_packets_out < packets && !download.is_finished() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_killed_mid_download_does_not_stop_it() {
    let lab = Lab::new(FIVE_MB, 3);
    // Capped servers make the download last long enough to kill one mid-way.
    let cap = Some(16_000_000);
    let origin = lab.serve(&lab.origin_store, true, cap).await;
    let mut edges = Vec::new();
    for store in &lab.edge_stores {
        edges.push(lab.serve(store, false, cap).await);
    }
    let out_dir = lab.out_dir();
    let output = out_dir.join("video.bin");
    let config = lab.fetch_config(&output, &edges.iter().collect::<Vec<_>>(), &[&origin]);
    let download = tokio::spawn(fetch(config));

    let victim = edges.remove(0);
    let victim_name = victim.local_addr().to_string();
    until_sent(&victim, 200, &download).await;
    assert!(
        !download.is_finished(),
        "the download ended before the edge could be killed"
    );
    victim.shutdown().await.unwrap();

    let report = download.await.unwrap().unwrap();
    assert!(
        std::fs::read(&output).unwrap() == lab.data,
        "the output differs from the content"
    );
    assert_eq!(files_in(&out_dir), vec!["video.bin"]);
    let killed = report.paths.iter().find(|p| p.name == victim_name).unwrap();
    assert!(killed.bytes > 0 && killed.bytes < FIVE_MB as u64 / 2, "{killed:?}");
    for server in edges.into_iter().chain([origin]) {
        server.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_server_is_gone_the_error_names_each_and_only_the_partial_file_is_left() {
    let lab = Lab::new(FIVE_MB, 3);
    let cap = Some(8_000_000);
    let origin = lab.serve(&lab.origin_store, true, cap).await;
    let mut edges = Vec::new();
    for store in &lab.edge_stores {
        edges.push(lab.serve(store, false, cap).await);
    }
    let out_dir = lab.out_dir();
    let output = out_dir.join("video.bin");
    let mut config = lab.fetch_config(&output, &edges.iter().collect::<Vec<_>>(), &[&origin]);
    // Fewer timeouts in a row before a path fails, so the test takes seconds rather than the
    // default's twelve.
    config.max_consecutive_timeouts = 3;
    let names: Vec<String> = edges
        .iter()
        .chain([&origin])
        .map(|s| s.local_addr().to_string())
        .collect();
    let download = tokio::spawn(fetch(config));
    until_sent(&origin, 100, &download).await;
    assert!(!download.is_finished());
    assert!(
        files_in(&out_dir).iter().any(|f| f == "video.bin.pcdn-partial"),
        "the download writes to the partial file"
    );
    for server in edges.into_iter().chain([origin]) {
        server.shutdown().await.unwrap();
    }

    let error = download.await.unwrap().unwrap_err();
    let FetchError::AllPathsFailed(failures) = &error else {
        panic!("expected every path to fail, got {error}");
    };
    assert_eq!(failures.len(), 4);
    let text = error.to_string();
    for name in &names {
        assert!(text.contains(name), "the error names {name}: {text}");
    }
    assert!(failures.iter().all(|(_, why)| why == "timeout"), "{text}");
    // No output; at most the partial file, kept for a rerun when it holds a verified block.
    let left = files_in(&out_dir);
    assert!(
        left.iter().all(|f| f == "video.bin.pcdn-partial"),
        "left behind: {left:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_without_the_content_reject_and_the_error_says_so() {
    let lab = Lab::new(100_000, 1);
    let empty_store = lab.dir.path().join("empty");
    let edge = lab.serve(&empty_store, false, None).await;
    let out_dir = lab.out_dir();
    let output = out_dir.join("x");
    let config = lab.fetch_config(&output, &[&edge], &[]);
    let error = fetch(config).await.unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains(&edge.local_addr().to_string()) && text.contains("rejected: unknown content"),
        "{text}"
    );
    assert!(files_in(&out_dir).is_empty());
    edge.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_from_an_untrusted_signer_or_for_another_content_is_refused() {
    let lab = Lab::new(100_000, 1);
    let edge = lab.serve(&lab.edge_stores[0], false, None).await;
    let out_dir = lab.out_dir();
    let output = out_dir.join("x");

    // The edge's own manifest is genuine, but signed by the edge, not the trusted origin.
    let mut config = lab.fetch_config(&output, &[&edge], &[]);
    config.manifest = Some(
        Store::open(&lab.edge_stores[0])
            .unwrap()
            .manifest_bytes(&lab.id)
            .unwrap(),
    );
    let text = fetch(config).await.unwrap_err().to_string();
    assert!(text.contains("not by the --origin-key given"), "{text}");

    // A manifest of another content under this id.
    let other = lab.dir.path().join("other.bin");
    std::fs::write(&other, b"something else").unwrap();
    let origin = Store::open(&lab.origin_store).unwrap();
    let other_id = origin.add(&other).unwrap();
    let mut config = lab.fetch_config(&output, &[&edge], &[]);
    config.manifest = Some(origin.manifest_bytes(&other_id).unwrap());
    let text = fetch(config).await.unwrap_err().to_string();
    assert!(text.contains("describes another content"), "{text}");

    // A flipped bit in the signature.
    let mut bytes = origin.manifest_bytes(&lab.id).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    let mut config = lab.fetch_config(&output, &[&edge], &[]);
    config.manifest = Some(bytes);
    let text = fetch(config).await.unwrap_err().to_string();
    assert!(text.contains("signature"), "{text}");
    assert!(files_in(&out_dir).is_empty());
    edge.shutdown().await.unwrap();
}
