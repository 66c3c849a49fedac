//! Attacks on the tracker's stores (issue 40): strict device ids and addresses, bounded lookups
//! whatever the holders and origins, manifest size, quotas and orphans. Each test performs the
//! attack against a real tracker over HTTP.

mod common;

use common::*;
use pcdn_core::ed25519_dalek::SigningKey;
use pcdn_core::manifest::{Manifest, SignedManifest};
use pcdn_tracker::{RunningTracker, Spread, StoreLimits, StoreUrl, TrackerConfig, bind};
use reqwest::Method;
use serde_json::json;
use std::time::Duration;

const TTL: Duration = Duration::from_secs(30);

#[tokio::test]
async fn dot_ids_and_addresses_clients_cannot_reach_are_refused() {
    let tracker = start_unlimited(StoreUrl::SqliteMemory, TTL).await;
    let api = Api::new(tracker.local_addr());
    let register = |id: &str, addr: &str| json!({"id": id, "addr": addr, "upload_capacity_bps": 1_000});
    let mut refused = Vec::new();
    for id in [".", "..", "..."] {
        refused.push((register(id, "127.0.0.1:7801"), "`id`", "not only dots"));
    }
    for addr in [
        "255.255.255.255:7801",
        "224.0.0.1:7801",
        "[ff02::1]:7801",
        "169.254.169.254:80",
        "[fe80::1]:7801",
        "[::ffff:255.255.255.255]:7801",
        "[::]:7801",
        "127.0.0.1:0",
    ] {
        refused.push((register("edge-1", addr), "`addr`", "expected a unicast IP"));
    }
    for (body, field, expected) in refused {
        let answer = api
            .call(Method::POST, "/v1/devices", Some(body.clone()))
            .await
            .expect_error(400, "invalid_field");
        let message = answer.json()["message"].as_str().unwrap().to_owned();
        assert!(
            message.contains(field) && message.contains(expected),
            "{body}: {message}"
        );
    }
    assert_eq!(api.health().await["devices"], 0, "a refused device was registered");

    // Loopback, private and public unicast addresses, and ids with dots among other characters,
    // stay accepted.
    for (id, addr) in [
        ("edge.1", "127.0.0.1:7801"),
        ("..a", "[::1]:7801"),
        ("b..", "10.0.0.1:7801"),
        ("c", "[2001:db8::1]:7801"),
    ] {
        api.register(id, addr, 1_000).await.expect(200);
    }
    assert_eq!(api.health().await["devices"], 4);
    tracker.stop().await.unwrap();
}

/// Registers `count` devices concurrently: edges `edge-{i}` announcing `content` (capacity
/// rising with `i`, so the best are the last ones), or origins `origin-{i}` with distinct keys.
async fn register_many(api: &Api, count: usize, origins: bool, content: &str) {
    let mut tasks = tokio::task::JoinSet::new();
    let workers = 16;
    for worker in 0..workers {
        let (api, content) = (api.clone(), content.to_owned());
        tasks.spawn(async move {
            for i in (worker..count).step_by(workers) {
                if origins {
                    let mut seed = [0u8; 32];
                    seed[..8].copy_from_slice(&(i as u64 + 1).to_le_bytes());
                    let key = SigningKey::from_bytes(&seed);
                    api.register_origin(&format!("origin-{i}"), "127.0.0.1:7800", &key)
                        .await
                        .expect(200);
                } else {
                    let id = format!("edge-{i}");
                    api.register(&id, "127.0.0.1:7801", 1_000 + i as u64).await.expect(200);
                    api.announce(&id, &[&content]).await.expect(200);
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

/// The lookup records the tracker read per lookup over `lookups` lookups of `path`.
async fn records_per_lookup(api: &Api, path: &str, lookups: u32) -> f64 {
    let metric = |text: &str| metric(text, "pcdn_tracker_lookup_records_total").expect("records metric");
    let before = metric(&api.metrics().await);
    for _ in 0..lookups {
        api.call(Method::GET, path, None).await.expect(200);
    }
    (metric(&api.metrics().await) - before) / f64::from(lookups)
}

/// 2,000 holders of one content and 2,000 origins: a lookup still reads a bounded number of
/// records and answers `n` servers and at most 4 origins, the best ranked; a lookup of another
/// content is not slowed down either.
async fn lookups_are_bounded_whatever_the_holders_and_origins(store: StoreUrl) {
    const HOLDERS: usize = 2_000;
    const ORIGINS: usize = 2_000;
    // Lookups ranked by load reports alone, as this test reads them (spread.rs tests how
    // lookups spread viewers between heartbeats).
    let mut config = TrackerConfig::new("127.0.0.1:0".parse().unwrap(), store, operator().public());
    config.ttl = TTL;
    config.heartbeat = Duration::from_secs(1);
    config.rate_limits = pcdn_tracker::RateLimits::OFF;
    config.limits.spread = Spread {
        min_free_upload_bps: 0,
        session_bps: 0,
    };
    let tracker = bind(config).await.expect("tracker starts");
    let api = Api::new(tracker.local_addr());
    let (big, small) = (cid(1), cid(2));
    register_many(&api, HOLDERS, false, &big).await;
    register_many(&api, ORIGINS, true, &big).await;
    api.register("lonely", "127.0.0.1:7802", 5).await.expect(200);
    api.announce("lonely", &[&small]).await.expect(200);

    let found = api.lookup(&big, Some(1)).await;
    assert_eq!(ids(&found["servers"]), [format!("edge-{}", HOLDERS - 1)]);
    assert_eq!(
        found["origins"].as_array().unwrap().len(),
        1,
        "n=1 bounds the origins too"
    );
    let found = api.lookup(&big, None).await;
    let best: Vec<String> = (HOLDERS - 8..HOLDERS).rev().map(|i| format!("edge-{i}")).collect();
    assert_eq!(
        ids(&found["servers"]),
        best,
        "the 8 with the most free capacity, best first"
    );
    assert_eq!(found["origins"].as_array().unwrap().len(), 4, "origins are capped");
    let answer = api
        .call(Method::GET, &format!("/v1/contents/{big}/servers?n=1"), None)
        .await
        .expect(200);
    assert!(answer.bytes.len() < 2_000, "{} bytes for n=1", answer.bytes.len());

    // Origins are ranked like servers (then by id): those reporting upload move down.
    for id in ["origin-0", "origin-1", "origin-1000"] {
        api.heartbeat(id, 0, 99_000_000, true).await.expect(200);
    }
    api.heartbeat("origin-10", 0, 0, false).await.expect(200);
    let found = api.lookup(&small, Some(64)).await;
    assert_eq!(
        ids(&found["origins"]),
        ["origin-100", "origin-1001", "origin-1002", "origin-1003"]
    );
    assert_eq!(ids(&found["servers"]), ["lonely"]);
    // A heartbeat moves a server within the ranking: edge-0 now has the most free capacity,
    // edge-{HOLDERS-1} reports itself unhealthy and leaves it.
    api.heartbeat("edge-0", 0, 0, true).await.expect(200);
    api.register("edge-0", "127.0.0.1:7801", 10_000_000).await.expect(200);
    api.announce("edge-0", &[&big]).await.expect(200);
    api.heartbeat(&format!("edge-{}", HOLDERS - 1), 0, 0, false)
        .await
        .expect(200);
    let found = api.lookup(&big, Some(2)).await;
    assert_eq!(
        ids(&found["servers"]),
        ["edge-0".to_owned(), format!("edge-{}", HOLDERS - 2)]
    );

    // The work: at most n + the slack (64) records for the servers and as many for the origins,
    // whatever the 2,000 holders and 2,000 origins; the same for the big and the small content.
    let per_big = records_per_lookup(&api, &format!("/v1/contents/{big}/servers?n=8"), 50).await;
    let per_small = records_per_lookup(&api, &format!("/v1/contents/{small}/servers?n=8"), 50).await;
    eprintln!(
        "{HOLDERS} holders, {ORIGINS} origins: {per_big} records per lookup (n=8), {per_small} for a content of \
         one holder; {} bytes answer n=1",
        answer.bytes.len()
    );
    assert!(per_big <= 12.0, "a lookup of the big content read {per_big} records");
    assert!(
        per_small <= 5.0,
        "a lookup of the small content read {per_small} records"
    );
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn sqlite_lookups_are_bounded_whatever_the_holders_and_origins() {
    lookups_are_bounded_whatever_the_holders_and_origins(StoreUrl::SqliteMemory).await;
}

#[tokio::test]
async fn redis_lookups_are_bounded_whatever_the_holders_and_origins() {
    let redis = RedisServer::start();
    lookups_are_bounded_whatever_the_holders_and_origins(redis.url().parse().unwrap()).await;
}

/// A tracker on `store` with `limits` (ttl 5 s, so a sweep every 1.25 s).
async fn start_with(store: StoreUrl, limits: StoreLimits) -> RunningTracker {
    let mut config = TrackerConfig::new("127.0.0.1:0".parse().unwrap(), store, operator().public());
    config.ttl = Duration::from_secs(5);
    config.heartbeat = Duration::from_secs(1);
    config.limits = limits;
    bind(config).await.expect("tracker starts")
}

/// A signed manifest of `length` made-up bytes in blocks of `block` bytes.
fn manifest_of(seed: u8, length: usize, block: u32, signer: &SigningKey) -> (String, Vec<u8>) {
    let data: Vec<u8> = (0..length)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect();
    let signed = SignedManifest::sign(Manifest::from_bytes(&data, block.min(1024), block).unwrap(), signer);
    (hex::encode(signed.content_id().0), signed.encode())
}

/// Manifests are capped in size (8 MiB by default), counted and measured per origin key against
/// a quota, and deleted by the sweep once no live device holds them and their origin is gone
/// for the grace period, which frees the quota.
async fn manifests_are_capped_counted_and_orphans_removed(store: StoreUrl) {
    let limits = StoreLimits {
        manifests_per_origin: 2,
        manifest_bytes_per_origin: 3_000,
        orphan_grace: Duration::from_secs(2),
        ..StoreLimits::default()
    };
    let (one, two) = (key(1), key(2));
    // Over 8 MiB: 270,000 one-byte blocks need 8,640,000 bytes of hashes. (Made before the
    // tracker starts: hashing them may take longer than the ttl in a debug build.)
    let (huge_cid, huge) = manifest_of(1, 270_000, 1, &one);
    assert!(huge.len() > 8 << 20);
    let tracker = start_with(store, limits).await;
    let api = Api::new(tracker.local_addr());
    api.register_origin("origin-1", "127.0.0.1:7800", &one)
        .await
        .expect(200);
    api.register_origin("origin-2", "127.0.0.1:7810", &two)
        .await
        .expect(200);
    // Each origin publishes the manifests signed by its own key.
    let (origin_1, origin_2) = (api.as_device("origin-1"), api.as_device("origin-2"));
    let answer = origin_1
        .put_manifest(&huge_cid, huge)
        .await
        .expect_error(413, "manifest_too_large");
    assert!(
        answer.json()["message"].as_str().unwrap().contains("8388608"),
        "{}",
        answer.json()
    );

    // The count quota: two manifests, then a third is refused; putting one again is no more.
    let (first_cid, first) = signed_manifest(1, &one);
    let (second_cid, second) = signed_manifest(2, &one);
    let (third_cid, third) = signed_manifest(3, &one);
    origin_1.put_manifest(&first_cid, first.clone()).await.expect(204);
    origin_1.put_manifest(&second_cid, second.clone()).await.expect(204);
    origin_1.put_manifest(&first_cid, first.clone()).await.expect(204);
    let answer = origin_1
        .put_manifest(&third_cid, third.clone())
        .await
        .expect_error(403, "manifest_quota_exceeded");
    let message = answer.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains(&hex::encode(one.verifying_key().to_bytes())) && message.contains("quota"),
        "{message}"
    );
    api.get_manifest(&third_cid).await.expect_error(404, "unknown_manifest");

    // The byte quota, per key: 3,264 bytes of 98 block hashes are over 3,000 for origin-2.
    let (big_cid, big) = manifest_of(2, 100_000, 1024, &two);
    assert!(big.len() > 3_000, "{}", big.len());
    origin_2
        .put_manifest(&big_cid, big)
        .await
        .expect_error(403, "manifest_quota_exceeded");
    let (small_cid, small) = signed_manifest(4, &two);
    origin_2.put_manifest(&small_cid, small).await.expect(204);

    // Orphans: origin-1 leaves; its first manifest is held by a live edge, its second by no
    // one. Only the second goes, after the grace period, and that frees quota for the third.
    api.register("edge-1", "127.0.0.1:7901", 1_000).await.expect(200);
    api.announce("edge-1", &[&first_cid]).await.expect(200);
    api.remove("origin-1").await.expect(204);
    api.get_manifest(&second_cid).await.expect(200);
    wait_until(
        Duration::from_secs(60),
        "the orphaned manifest to be deleted",
        || async {
            api.heartbeat("edge-1", 0, 0, true).await.expect(200);
            api.heartbeat("origin-2", 0, 0, true).await.expect(200);
            api.get_manifest(&second_cid).await.status == 404
        },
    )
    .await;
    assert_eq!(api.get_manifest(&first_cid).await.expect(200).bytes, first);
    // origin-2 is live (it heartbeats above): its manifest no device holds stays.
    api.get_manifest(&small_cid).await.expect(200);
    api.register_origin("origin-1", "127.0.0.1:7800", &one)
        .await
        .expect(200);
    origin_1.put_manifest(&third_cid, third).await.expect(204);
    api.remove("origin-1").await.expect(204);

    // The last holder leaving makes the first an orphan too.
    api.remove("edge-1").await.expect(204);
    wait_until(Duration::from_secs(60), "the unheld manifest to be deleted", || async {
        api.heartbeat("origin-2", 0, 0, true).await.expect(200);
        api.get_manifest(&first_cid).await.status == 404 && api.get_manifest(&third_cid).await.status == 404
    })
    .await;
    api.get_manifest(&small_cid).await.expect(200);
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn sqlite_manifests_are_capped_counted_and_orphans_removed() {
    manifests_are_capped_counted_and_orphans_removed(StoreUrl::SqliteMemory).await;
}

#[tokio::test]
async fn redis_manifests_are_capped_counted_and_orphans_removed() {
    let redis = RedisServer::start();
    manifests_are_capped_counted_and_orphans_removed(redis.url().parse().unwrap()).await;
}
