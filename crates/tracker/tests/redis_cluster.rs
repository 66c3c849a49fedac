//! Two tracker instances on one real redis-server act as one registry. Fails (does not skip)
//! when redis-server is missing: scripts/test.sh installs it.

mod common;

use common::*;
use pcdn_tracker::{StoreUrl, TrackerConfig, bind};
use serde_json::json;
use std::time::{Duration, Instant};

fn redis_store(server: &RedisServer) -> StoreUrl {
    server.url().parse().unwrap()
}

#[tokio::test]
async fn two_instances_on_one_redis_share_devices_manifests_and_expiry() {
    let redis = RedisServer::start();
    let ttl = Duration::from_secs(3);
    let one = start(redis_store(&redis), ttl).await;
    let two = start(redis_store(&redis), ttl).await;
    assert_eq!((one.store_kind(), two.store_kind()), ("redis", "redis"));
    let (api1, api2) = (Api::new(one.local_addr()), Api::new(two.local_addr()));
    let content = cid(1);

    // A device registered through one is found through two, and either can take its heartbeats.
    let registered = api1
        .register("edge-1", "127.0.0.1:7901", 4_000_000)
        .await
        .expect(200)
        .json();
    assert_eq!(registered["generation"], 1);
    api1.announce("edge-1", &[&content]).await.expect(200);
    let ack = api2.heartbeat("edge-1", 3, 1_200_000, true).await.expect(200).json();
    assert_eq!(ack["generation"], 1, "{ack}");
    let found = api2.lookup(&content, None).await;
    assert_eq!(
        found["servers"],
        json!([{"id": "edge-1", "addr": "127.0.0.1:7901", "origin": false, "upload_capacity_bps": 4_000_000,
                "upload_bps": 1_200_000, "free_upload_bps": 2_800_000, "sessions": 3, "healthy": true}])
    );

    // Ranking is the same as on SQLite, whichever instance answers.
    api2.register("edge-2", "127.0.0.1:7902", 9_000_000).await.expect(200);
    api2.announce("edge-2", &[content.clone(), cid(2)]).await.expect(200);
    api1.register("edge-3", "127.0.0.1:7903", 2_800_000).await.expect(200);
    api1.announce("edge-3", &[&content]).await.expect(200);
    api1.register("sick", "127.0.0.1:7904", 99_000_000).await.expect(200);
    api1.heartbeat("sick", 0, 0, false).await.expect(200);
    api1.announce("sick", &[&content]).await.expect(200);
    for api in [&api1, &api2] {
        // edge-2 free 9 M; edge-1 and edge-3 free 2.8 M: edge-3 has fewer sessions.
        assert_eq!(
            ids(&api.lookup(&content, None).await["servers"]),
            ["edge-2", "edge-3", "edge-1"]
        );
        assert_eq!(ids(&api.lookup(&content, Some(1)).await["servers"]), ["edge-2"]);
    }
    // Announcing replaces the set everywhere; removing through one is seen by two.
    api1.announce("edge-2", &[cid(2)]).await.expect(200);
    assert_eq!(api2.server_ids(&content).await, ["edge-3", "edge-1"]);
    api1.remove("edge-3").await.expect(204);
    assert_eq!(api2.server_ids(&content).await, ["edge-1"]);
    api2.remove("edge-3").await.expect_error(404, "unknown_device");
    // Re-registering clears the announced set, whichever instance announced it, and takes the
    // id's next generation, which the other instance's heartbeat answers carry.
    let again = api2
        .register("edge-2", "127.0.0.1:7905", 9_000_000)
        .await
        .expect(200)
        .json();
    assert_eq!(again["generation"], 2);
    assert_eq!(
        api1.heartbeat("edge-2", 0, 0, true).await.expect(200).json()["generation"],
        2
    );
    assert!(api1.server_ids(&cid(2)).await.is_empty());
    // A removed id's generation is kept.
    assert_eq!(
        api1.register("edge-3", "127.0.0.1:7903", 1_000)
            .await
            .expect(200)
            .json()["generation"],
        2
    );
    api1.remove("edge-3").await.expect(204);

    // A manifest put through two (by an origin registered through two) is served by one.
    let publisher = key(1);
    api2.register_origin("origin", "127.0.0.1:7800", &publisher)
        .await
        .expect(200);
    let (manifest_cid, manifest) = signed_manifest(2, &publisher);
    api2.put_manifest(&manifest_cid, manifest.clone()).await.expect(204);
    assert_eq!(api1.get_manifest(&manifest_cid).await.expect(200).bytes, manifest);
    assert_eq!(ids(&api1.lookup(&content, None).await["origins"]), ["origin"]);
    let (foreign_cid, foreign) = signed_manifest(3, &key(2));
    api1.put_manifest(&foreign_cid, foreign)
        .await
        .expect_error(403, "wrong_signer");
    let mut tampered = manifest.clone();
    *tampered.last_mut().unwrap() ^= 1;
    api1.put_manifest(&manifest_cid, tampered)
        .await
        .expect_error(400, "invalid_manifest");
    for api in [&api1, &api2] {
        assert_eq!(
            api.health().await,
            json!({"status": "ok", "store": "redis", "devices": 4})
        );
    }

    // Expiry: with no more heartbeats every device disappears from both instances, not before
    // one ttl, and each expiry is counted exactly once across the two.
    let last_heard = Instant::now();
    api1.heartbeat("edge-1", 3, 1_200_000, true).await.expect(200);
    wait_until(Duration::from_secs(30), "both instances to see the expiry", || async {
        let mut gone = true;
        for api in [&api1, &api2] {
            let found = api.lookup(&content, None).await;
            gone &= found["servers"] == json!([]) && found["origins"] == json!([]);
        }
        gone
    })
    .await;
    assert!(
        last_heard.elapsed() + Duration::from_millis(1) >= ttl,
        "expired after {:?}",
        last_heard.elapsed()
    );
    for api in [&api1, &api2] {
        api.heartbeat("edge-1", 0, 0, true)
            .await
            .expect_error(404, "unknown_device");
        api.announce("edge-1", &[&content])
            .await
            .expect_error(404, "unknown_device");
    }
    // An expired origin has no registered key: it must register again to publish.
    let (late_cid, late) = signed_manifest(4, &publisher);
    api1.put_manifest(&late_cid, late)
        .await
        .expect_error(403, "wrong_signer");
    wait_until(
        Duration::from_secs(30),
        "the sweepers to count 4 expirations",
        || async {
            let mut total = 0.0;
            for api in [&api1, &api2] {
                total += metric(&api.metrics().await, "pcdn_tracker_expirations_total").unwrap();
            }
            assert!(total <= 4.0, "an expiry was counted twice: {total}");
            total == 4.0
        },
    )
    .await;
    for api in [&api1, &api2] {
        assert_eq!(api.health().await["devices"], 0);
    }
    // Manifests do not expire.
    assert_eq!(api2.get_manifest(&manifest_cid).await.expect(200).bytes, manifest);

    // A device that comes back is a fresh registration with nothing announced.
    api2.register("edge-1", "127.0.0.1:7901", 4_000_000).await.expect(200);
    assert!(api1.server_ids(&content).await.is_empty());
    api2.announce("edge-1", &[&content]).await.expect(200);
    assert_eq!(api1.server_ids(&content).await, ["edge-1"]);

    one.stop().await.unwrap();
    two.stop().await.unwrap();
}

#[tokio::test]
async fn a_tracker_restarted_on_redis_keeps_the_registry() {
    let redis = RedisServer::start();
    let first = start(redis_store(&redis), Duration::from_secs(30)).await;
    let api = Api::new(first.local_addr());
    api.register("edge-1", "127.0.0.1:7901", 1_000).await.expect(200);
    api.announce("edge-1", &[cid(1)]).await.expect(200);
    first.stop().await.unwrap();
    let second = start(redis_store(&redis), Duration::from_secs(30)).await;
    let api = Api::new(second.local_addr());
    assert_eq!(api.server_ids(&cid(1)).await, ["edge-1"]);
    second.stop().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_redis_is_a_clear_start_error_and_a_503_later() {
    let redis = RedisServer::start();
    let url = redis.url();
    let tracker = start(redis_store(&redis), Duration::from_secs(30)).await;
    let api = Api::new(tracker.local_addr());
    api.register("edge-1", "127.0.0.1:7901", 1_000).await.expect(200);
    drop(redis);
    // Bad input is still a 4xx: validation happens before the store is asked.
    api.call(reqwest::Method::GET, "/v1/contents/xyz/servers", None)
        .await
        .expect_error(400, "invalid_path");
    // A well-formed request the store cannot answer is a 503, and /health says so.
    api.heartbeat("edge-1", 0, 0, true)
        .await
        .expect_error(503, "store_unavailable");
    let health = api.call(reqwest::Method::GET, "/health", None).await.expect(503).json();
    assert_eq!(
        (&health["status"], &health["store"]),
        (&json!("unavailable"), &json!("redis"))
    );
    tracker.stop().await.unwrap();

    let config = TrackerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        url.parse().unwrap(),
        operator().public(),
    );
    let error = format!("{:#}", bind(config).await.err().expect("no redis to connect to"));
    assert!(
        error.contains("cannot reach the Redis store") && error.contains(&url),
        "{error}"
    );
}
