//! Lookups spread viewers over the holders of a content between heartbeats and skip devices at
//! their cap (docs/tracker.md, "Lookup order"), on SQLite and on a real Redis server. Each
//! scenario runs against a real tracker over HTTP.

mod common;

use common::*;
use pcdn_core::manifest::{Container, Manifest, SignedManifest, VideoInfo};
use pcdn_tracker::StoreUrl;
use std::collections::BTreeMap;
use std::time::Duration;

const TTL: Duration = Duration::from_secs(60);
/// Free upload of the holders that have room: well above the 250 kbit/s cap threshold and a
/// few viewers' charges of 4 Mbit/s (the default per-viewer estimate).
const ROOM: u64 = 20_000_000;

/// Registers `id` with `capacity`, reports `upload` in use and announces `content`.
async fn holder(api: &Api, id: &str, capacity: u64, upload: u64, content: &str) {
    api.register(id, "127.0.0.1:7901", capacity).await.expect(200);
    api.heartbeat(id, 0, upload, true).await.expect(200);
    api.announce(id, &[content]).await.expect(200);
}

/// The first server of each of `lookups` lookups asking for `n` servers, counted by id.
async fn first_choices(api: &Api, content: &str, n: usize, lookups: usize) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for _ in 0..lookups {
        let servers = ids(&api.lookup(content, Some(n)).await["servers"]);
        *counts.entry(servers[0].clone()).or_default() += 1;
    }
    counts
}

/// 20 lookups of a content held by 4 devices with the same free upload, between two heartbeats,
/// spread over all 4 as first choice; a lookup listing all 4 charges them alike, and a lookup of
/// 2 servers lists each device 10 times in 20.
async fn lookups_spread_over_equal_holders(store: StoreUrl) {
    let tracker = start_unlimited(store, TTL).await;
    let api = Api::new(tracker.local_addr());
    let content = cid(1);
    let edges = ["edge-a", "edge-b", "edge-c", "edge-d"];
    for id in edges {
        holder(&api, id, ROOM, 0, &content).await;
    }
    let counts = first_choices(&api, &content, 1, 20).await;
    assert_eq!(counts.len(), 4, "every holder is a first choice: {counts:?}");
    for (id, count) in &counts {
        assert!(
            (4..=6).contains(count),
            "{id} first in {count} of 20 lookups: {counts:?}"
        );
    }
    // Lookups of the default 8 list all four, none left out by the charges.
    for _ in 0..5 {
        let mut listed = ids(&api.lookup(&content, None).await["servers"]);
        listed.sort();
        assert_eq!(listed, edges);
    }
    // Two servers a lookup: each device is listed 10 ± 1 times in 20.
    let mut listed: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..20 {
        for id in ids(&api.lookup(&content, Some(2)).await["servers"]) {
            *listed.entry(id).or_default() += 1;
        }
    }
    assert_eq!(listed.len(), 4, "{listed:?}");
    for (id, count) in &listed {
        assert!(
            (9..=11).contains(count),
            "{id} listed in {count} of 20 lookups: {listed:?}"
        );
    }
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn sqlite_lookups_spread_over_equal_holders() {
    lookups_spread_over_equal_holders(StoreUrl::SqliteMemory).await;
}

#[tokio::test]
async fn redis_lookups_spread_over_equal_holders() {
    let redis = RedisServer::start();
    lookups_spread_over_equal_holders(redis.url().parse().unwrap()).await;
}

/// Devices at their cap (free upload 0, or under the 250 kbit/s threshold) are not listed while
/// a holder has room, however much lookups charged those; when every holder is at its cap they
/// are listed (and the client falls back to the origin as they refuse).
async fn devices_at_their_cap_are_left_out(store: StoreUrl) {
    let tracker = start_unlimited(store, TTL).await;
    let api = Api::new(tracker.local_addr());
    let content = cid(2);
    // Capacity 100 Mbit/s all in use, or all but 100 kbit/s: at the cap, with the most capacity.
    holder(&api, "full", 100_000_000, 100_000_000, &content).await;
    holder(&api, "tight", 100_000_000, 99_900_000, &content).await;
    holder(&api, "roomy", ROOM, 0, &content).await;
    holder(&api, "some", 2_000_000, 1_000_000, &content).await;
    // 10 lookups charge "roomy" and "some" 20 Mbit/s each, far past their free upload: they
    // still come first, and alone.
    for _ in 0..10 {
        assert_eq!(ids(&api.lookup(&content, None).await["servers"]), ["roomy", "some"]);
    }
    assert_eq!(ids(&api.lookup(&content, Some(1)).await["servers"]), ["roomy"]);

    // Every holder at its cap: all listed, the most free first.
    api.heartbeat("roomy", 0, ROOM, true).await.expect(200);
    api.heartbeat("some", 0, 1_900_000, true).await.expect(200);
    assert_eq!(
        ids(&api.lookup(&content, None).await["servers"]),
        ["some", "tight", "full", "roomy"]
    );
    // One with room again: the others leave the list.
    api.heartbeat("tight", 0, 90_000_000, true).await.expect(200);
    assert_eq!(ids(&api.lookup(&content, None).await["servers"]), ["tight"]);
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn sqlite_devices_at_their_cap_are_left_out() {
    devices_at_their_cap_are_left_out(StoreUrl::SqliteMemory).await;
}

#[tokio::test]
async fn redis_devices_at_their_cap_are_left_out() {
    let redis = RedisServer::start();
    devices_at_their_cap_are_left_out(redis.url().parse().unwrap()).await;
}

/// A heartbeat clears what lookups charged the device, whether its load changed or not; another
/// device's heartbeat clears only that device's charges.
async fn a_heartbeat_clears_the_charges(store: StoreUrl) {
    let tracker = start_unlimited(store, TTL).await;
    let api = Api::new(tracker.local_addr());
    let content = cid(3);
    // Free 10 and 9 Mbit/s; each lookup of one server charges it 4 Mbit/s.
    holder(&api, "ten", 10_000_000, 0, &content).await;
    holder(&api, "nine", 10_000_000, 1_000_000, &content).await;
    let sequence = |api: Api, content: String| async move {
        let mut firsts = Vec::new();
        for _ in 0..3 {
            firsts.push(ids(&api.lookup(&content, Some(1)).await["servers"])[0].clone());
        }
        firsts
    };
    // ten −10 → −6, nine −9 → −5, ten −6 → −2 (Mbit/s): "nine" would come next.
    assert_eq!(sequence(api.clone(), content.clone()).await, ["ten", "nine", "ten"]);
    // The same load reported again: the charges are gone, the sequence starts over.
    api.heartbeat("ten", 0, 0, true).await.expect(200);
    api.heartbeat("nine", 0, 1_000_000, true).await.expect(200);
    assert_eq!(sequence(api.clone(), content.clone()).await, ["ten", "nine", "ten"]);
    // Only "nine" reports (a new load): ten stays charged at −2, nine is at −8.5 → −4.5 → −0.5.
    api.heartbeat("nine", 0, 1_500_000, true).await.expect(200);
    assert_eq!(sequence(api.clone(), content.clone()).await, ["nine", "nine", "ten"]);
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn sqlite_a_heartbeat_clears_the_charges() {
    a_heartbeat_clears_the_charges(StoreUrl::SqliteMemory).await;
}

#[tokio::test]
async fn redis_a_heartbeat_clears_the_charges() {
    let redis = RedisServer::start();
    a_heartbeat_clears_the_charges(redis.url().parse().unwrap()).await;
}

/// A content whose manifest the tracker holds is charged at its video's bitrate, not at the
/// default 4 Mbit/s estimate.
async fn a_known_bitrate_is_the_charge(store: StoreUrl) {
    let tracker = start_unlimited(store, TTL).await;
    let api = Api::new(tracker.local_addr());
    let origin_key = key(5);
    api.register_origin("origin", "127.0.0.1:7800", &origin_key)
        .await
        .expect(200);
    let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
    let video = VideoInfo {
        bitrate_bps: 1_000_000,
        duration_ms: 80,
        container: Container::Mp4,
        files: Vec::new(),
    };
    let manifest = Manifest::from_bytes(&data, 1024, 4096)
        .unwrap()
        .with_video(video)
        .unwrap();
    let signed = SignedManifest::sign(manifest, &origin_key);
    let (video_cid, other) = (hex::encode(signed.content_id().0), cid(4));
    api.put_manifest(&video_cid, signed.encode()).await.expect(204);
    // Free 10 and 8.5 Mbit/s, holding both contents.
    for (id, upload) in [("ten", 0), ("eight", 1_500_000)] {
        holder(&api, id, 10_000_000, upload, &video_cid).await;
        api.announce(id, &[&video_cid, &other]).await.expect(200);
    }
    // Charged 1 Mbit/s, "ten" (now −9) stays before "eight" (−8.5).
    let firsts = first_choices(&api, &video_cid, 1, 2).await;
    assert_eq!(firsts, BTreeMap::from([("ten".to_owned(), 2)]));
    // Without a manifest: charged 4 Mbit/s, "ten" (now −6) goes after "eight".
    let firsts = first_choices(&api, &other, 1, 2).await;
    assert_eq!(firsts, BTreeMap::from([("eight".to_owned(), 1), ("ten".to_owned(), 1)]));
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn sqlite_a_known_bitrate_is_the_charge() {
    a_known_bitrate_is_the_charge(StoreUrl::SqliteMemory).await;
}

#[tokio::test]
async fn redis_a_known_bitrate_is_the_charge() {
    let redis = RedisServer::start();
    a_known_bitrate_is_the_charge(redis.url().parse().unwrap()).await;
}
