//! Popularity and placement over real HTTP, on SQLite and on a real redis-server: lookups are
//! counted and ranked, `/metrics` exports only the top contents, and devices that report a
//! cache get their assignment in heartbeat answers.

mod common;

use common::*;
use pcdn_tracker::{PlacementSettings, RunningTracker, StoreUrl, TrackerConfig, bind};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

const TTL: Duration = Duration::from_secs(30);

async fn start_placing(store: StoreUrl, policy: &str) -> RunningTracker {
    let mut config = TrackerConfig::new("127.0.0.1:0".parse().unwrap(), store, operator().public());
    config.ttl = TTL;
    config.heartbeat = Duration::from_secs(1);
    config.rate_limits = pcdn_tracker::RateLimits::OFF;
    config.placement = PlacementSettings {
        policy: policy.into(),
        interval: Duration::from_millis(200),
        ..PlacementSettings::default()
    };
    bind(config).await.expect("tracker starts")
}

async fn cache_heartbeat(api: &Api, id: &str, cache_bytes: u64) -> Value {
    let body =
        json!({"sessions": 0, "upload_bps": 0, "healthy": true, "cache_bytes": cache_bytes, "free_bytes": 1u64 << 40});
    api.call(Method::POST, &format!("/v1/devices/{id}/heartbeat"), Some(body))
        .await
        .expect(200)
        .json()
}

/// An origin that published `count` manifests (10,000-byte contents); their ids.
async fn publish(api: &Api, count: u8) -> Vec<String> {
    let signer = key(1);
    api.register_origin("origin-1", "127.0.0.1:7900", &signer)
        .await
        .expect(200);
    let mut ids = Vec::new();
    for seed in 1..=count {
        let (content, bytes) = signed_manifest(seed, &signer);
        api.put_manifest(&content, bytes).await.expect(204);
        ids.push(content);
    }
    ids
}

async fn popular(api: &Api, n: usize) -> Value {
    api.call(Method::GET, &format!("/v1/contents/popular?n={n}"), None)
        .await
        .expect(200)
        .json()
}

fn listed(popular: &Value) -> Vec<String> {
    popular["contents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["content"].as_str().unwrap().to_owned())
        .collect()
}

async fn popularity_and_placement(store: StoreUrl) {
    let tracker = start_placing(store, "popularity").await;
    let api = Api::new(tracker.local_addr());
    let contents = publish(&api, 3).await;
    for id in ["edge-1", "edge-2", "edge-3"] {
        api.register(id, "127.0.0.1:7901", 8_000_000).await.expect(200);
    }
    for (content, lookups) in contents.iter().zip([20, 5, 0]) {
        for _ in 0..lookups {
            api.lookup(content, None).await;
        }
    }

    // The popular list ranks by lookups and gives each rate, size and demand.
    let top = popular(&api, 5).await;
    assert_eq!(listed(&top), contents[..2]);
    assert_eq!(top["half_life_secs"], json!(600.0));
    let first = &top["contents"][0];
    let rate = first["lookups_per_s"].as_f64().unwrap();
    // 20 lookups with a 600 s half-life: 20 × ln 2 / 600 per second, less a little decay.
    assert!(
        rate > 0.0225 && rate <= 20.0 * std::f64::consts::LN_2 / 600.0 + 1e-9,
        "{rate}"
    );
    assert_eq!(first["size"], json!(10_000));
    let demand = first["demand_bps"].as_f64().unwrap();
    assert!((demand - rate * 80_000.0).abs() < 1e-6, "{demand}");
    let second = top["contents"][1]["lookups_per_s"].as_f64().unwrap();
    assert!((rate / second - 4.0).abs() < 0.01, "{rate} / {second}");
    assert_eq!(listed(&popular(&api, 1).await), contents[..1]);
    api.call(Method::GET, "/v1/contents/popular?n=101", None)
        .await
        .expect_error(400, "invalid_query");

    // Devices reporting a cache get an assignment (both looked-up contents: two replicas each
    // at least); a device that reports none gets no assignment field.
    let want = json!(
        [contents[0].clone(), contents[1].clone()]
            .iter()
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
    );
    for id in ["edge-1", "edge-2"] {
        wait_until(Duration::from_secs(20), "an assignment", || async {
            let answer = cache_heartbeat(&api, id, 1_000_000).await;
            answer.get("assignment").map(|list| {
                let mut list: Vec<String> = serde_json::from_value(list.clone()).unwrap();
                list.sort();
                json!(list)
            }) == Some(want.clone())
        })
        .await;
    }
    let plain = api.heartbeat("edge-3", 0, 0, true).await.expect(200).json();
    assert_eq!(plain, json!({"ttl_secs": 30, "generation": 1}));
    // A free-disk figure needs the cache size.
    let body = json!({"sessions": 0, "upload_bps": 0, "healthy": true, "free_bytes": 5});
    let refused = api
        .call(Method::POST, "/v1/devices/edge-3/heartbeat", Some(body))
        .await
        .expect_error(400, "invalid_field");
    assert!(
        refused.json()["message"].as_str().unwrap().contains("free_bytes"),
        "{refused:?}"
    );
    let metrics = api.metrics().await;
    assert!(
        metric(&metrics, "pcdn_tracker_placement_rounds_total").unwrap() >= 1.0,
        "{metrics}"
    );
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn lookups_rank_contents_and_caches_get_assignments_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    popularity_and_placement(StoreUrl::Sqlite(dir.path().join("tracker.db"))).await;
    // Counts and assignments survive a restart.
    let tracker = start_placing(StoreUrl::Sqlite(dir.path().join("tracker.db")), "popularity").await;
    let api = Api::new(tracker.local_addr());
    assert_eq!(listed(&popular(&api, 5).await).len(), 2);
    // A round before the device reports its disk again keeps its assignment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let answer = api.heartbeat("edge-1", 0, 0, true).await.expect(200).json();
    assert_eq!(answer["assignment"].as_array().map(Vec::len), Some(2), "{answer}");
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn lookups_rank_contents_and_caches_get_assignments_on_redis() {
    let redis = RedisServer::start();
    popularity_and_placement(redis.url().parse().unwrap()).await;
}

#[tokio::test]
async fn two_redis_instances_share_the_counts_and_the_assignments() {
    let redis = RedisServer::start();
    let one = start_placing(redis.url().parse().unwrap(), "popularity").await;
    let two = start_placing(redis.url().parse().unwrap(), "popularity").await;
    let (api1, api2) = (Api::new(one.local_addr()), Api::new(two.local_addr()));
    let contents = publish(&api1, 2).await;
    for _ in 0..3 {
        api1.lookup(&contents[0], None).await;
        api2.lookup(&contents[0], None).await;
    }
    api2.lookup(&contents[1], None).await;
    for api in [&api1, &api2] {
        // Each instance counts its own lookups into Redis every second.
        wait_until(Duration::from_secs(20), "both instances' counts", || async {
            let top = popular(api, 5).await;
            listed(&top) == contents
                && top["contents"][0]["lookups_per_s"].as_f64()
                    > Some(top["contents"][1]["lookups_per_s"].as_f64().unwrap_or(0.0) * 5.0)
        })
        .await;
        let top = popular(api, 5).await;
        let (a, b) = (
            top["contents"][0]["lookups_per_s"].as_f64().unwrap(),
            top["contents"][1]["lookups_per_s"].as_f64().unwrap(),
        );
        assert!((a / b - 6.0).abs() < 0.01, "{a} / {b}");
    }
    api1.register("edge-1", "127.0.0.1:7901", 8_000_000).await.expect(200);
    api2.register("edge-2", "127.0.0.1:7902", 8_000_000).await.expect(200);
    for (api, id) in [(&api1, "edge-2"), (&api2, "edge-1")] {
        wait_until(Duration::from_secs(20), "an assignment", || async {
            let answer = cache_heartbeat(api, id, 1_000_000).await;
            answer["assignment"].as_array().map(Vec::len) == Some(2)
        })
        .await;
    }
    one.stop().await.unwrap();
    two.stop().await.unwrap();
}

#[tokio::test]
async fn metrics_export_only_the_top_ten_contents() {
    let tracker = start_placing(StoreUrl::SqliteMemory, "none").await;
    let api = Api::new(tracker.local_addr());
    let contents = publish(&api, 15).await;
    for (i, content) in contents.iter().enumerate() {
        for _ in 0..=i {
            api.lookup(content, None).await;
        }
    }
    let metrics = api.metrics().await;
    let labelled = |name: &str| {
        metrics
            .lines()
            .filter(|line| line.starts_with(&format!("{name}{{")))
            .count()
    };
    assert_eq!(labelled("pcdn_tracker_content_lookups_per_second"), 10, "{metrics}");
    assert_eq!(labelled("pcdn_tracker_content_demand_bits_per_second"), 10, "{metrics}");
    // The ten most looked up, not the first ten.
    assert!(metrics.contains(&format!("content=\"{}\"", contents[14])));
    assert!(!metrics.contains(&format!("content=\"{}\"", contents[0])));
    // `none` sends no assignment even to a cache.
    let generation = api
        .register("edge-1", "127.0.0.1:7901", 8_000_000)
        .await
        .expect(200)
        .json()["generation"]
        .clone();
    assert_eq!(
        cache_heartbeat(&api, "edge-1", 1_000_000).await,
        json!({"ttl_secs": 30, "generation": generation})
    );
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn on_miss_gives_a_looked_up_content_to_the_least_loaded_caches() {
    let tracker = start_placing(StoreUrl::SqliteMemory, "on-miss").await;
    let api = Api::new(tracker.local_addr());
    let contents = publish(&api, 1).await;
    // Upload in use: edge-1 9 of 10 Mbit/s, edge-2 1, edge-3 2.
    for (id, upload) in [("edge-1", 9_000_000u64), ("edge-2", 1_000_000), ("edge-3", 2_000_000)] {
        api.register(id, "127.0.0.1:7901", 10_000_000).await.expect(200);
        let body = json!({"sessions": 1, "upload_bps": upload, "healthy": true, "cache_bytes": 1_000_000});
        api.call(Method::POST, &format!("/v1/devices/{id}/heartbeat"), Some(body))
            .await
            .expect(200);
    }
    api.lookup(&contents[0], None).await;
    let assignment = |id: &'static str| {
        let api = &api;
        async move {
            let body = json!({"sessions": 1, "upload_bps": 0, "healthy": true, "cache_bytes": 1_000_000});
            api.call(Method::POST, &format!("/v1/devices/{id}/heartbeat"), Some(body))
                .await
                .expect(200)
                .json()["assignment"]
                .clone()
        }
    };
    wait_until(Duration::from_secs(20), "edge-2's assignment", || async {
        assignment("edge-2").await == json!([contents[0].clone()])
    })
    .await;
    // The reported loads above decided: the heartbeats of this test report 0 only after the
    // round that placed the content, and a round keeps a placed content where it is.
    assert_eq!(assignment("edge-3").await, json!([contents[0].clone()]));
    assert_eq!(assignment("edge-1").await, json!([]));
    tracker.stop().await.unwrap();
}

async fn counts_are_bounded(store: StoreUrl) {
    let mut config = TrackerConfig::new("127.0.0.1:0".parse().unwrap(), store, operator().public());
    config.rate_limits = pcdn_tracker::RateLimits::OFF;
    config.limits.max_tracked_contents = 3;
    let tracker = bind(config).await.unwrap();
    let api = Api::new(tracker.local_addr());
    // Contents 1..=5 looked up 1..=5 times, one content per flush.
    for seed in 1..=5u8 {
        for _ in 0..seed {
            api.lookup(&cid(seed), None).await;
        }
        popular(&api, 1).await;
    }
    assert_eq!(listed(&popular(&api, 100).await), [cid(5), cid(4), cid(3)]);
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn the_least_looked_up_beyond_the_bound_are_forgotten() {
    counts_are_bounded(StoreUrl::SqliteMemory).await;
    let redis = RedisServer::start();
    counts_are_bounded(redis.url().parse().unwrap()).await;
}
