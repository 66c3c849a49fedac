//! Smart-ban reports over real HTTP from distinct loopback source addresses (127.0.0.x): a
//! device reported by enough distinct clients is quarantined (left out of lookups) on SQLite
//! and on Redis, one client reporting many times counts once, and the operator can clear it.

mod common;

use common::*;
use pcdn_tracker::{QuarantineConfig, RateLimits, RunningTracker, StoreUrl, TrackerConfig, bind};
use reqwest::Method;
use serde_json::{Value, json};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

async fn start_tracker(store: StoreUrl, window: Duration) -> RunningTracker {
    let mut config = TrackerConfig::new("127.0.0.1:0".parse().unwrap(), store, operator().public());
    config.heartbeat = Duration::from_secs(1);
    // One client sends 100 reports quickly here; the rate limits are tested on their own.
    config.rate_limits = RateLimits::OFF;
    config.quarantine = QuarantineConfig {
        reporters: 3,
        window,
        ..QuarantineConfig::default()
    };
    bind(config).await.expect("tracker starts")
}

/// A client whose connections come from 127.0.0.`last`.
fn client_from(api: &Api, last: u8) -> Api {
    let http = reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, last)))
        .build()
        .unwrap();
    let mut client = api.unsigned();
    client.http = http;
    client
}

async fn report(api: &Api, device: &str, content: &str) -> Value {
    api.call(
        Method::POST,
        "/v1/reports",
        Some(json!({"device": device, "content": content, "reason": "corrupt"})),
    )
    .await
    .expect(200)
    .json()
}

async fn quarantined_ids(api: &Api) -> Vec<String> {
    let list = api.call(Method::GET, "/v1/quarantine", None).await.expect(200).json();
    ids(&list["devices"])
}

async fn distinct_clients_quarantine_and_one_client_does_not(store: StoreUrl) {
    let tracker = start_tracker(store, Duration::from_secs(3600)).await;
    let api = Api::new(tracker.local_addr());
    let content = cid(7);
    for id in ["bad-edge", "good-edge"] {
        api.register(id, "127.0.0.1:7901", 1_000).await.expect(200);
        api.announce(id, &[&content]).await.expect(200);
    }

    // One client, 100 reports: it counts once.
    let one = client_from(&api, 1);
    for _ in 0..100 {
        let answer = report(&one, "bad-edge", &content).await;
        assert_eq!(
            answer,
            json!({"device": "bad-edge", "reporters": 1, "quarantined": false})
        );
    }
    assert_eq!(api.server_ids(&content).await.len(), 2);
    assert!(quarantined_ids(&api).await.is_empty());

    // Two more distinct clients: the third report quarantines it.
    let second = report(&client_from(&api, 2), "bad-edge", &content).await;
    assert_eq!(
        (&second["reporters"], &second["quarantined"]),
        (&json!(2), &json!(false))
    );
    let third = report(&client_from(&api, 3), "bad-edge", &content).await;
    assert_eq!((&third["reporters"], &third["quarantined"]), (&json!(3), &json!(true)));
    assert_eq!(api.server_ids(&content).await, ["good-edge"]);
    assert_eq!(quarantined_ids(&api).await, ["bad-edge"]);
    let metrics = api.metrics().await;
    assert_eq!(metric(&metrics, "pcdn_tracker_quarantined_devices"), Some(1.0));
    assert_eq!(metric(&metrics, "pcdn_tracker_reports_total"), Some(102.0));

    // Bad reports are refused with the field named.
    let bad = api
        .call(
            Method::POST,
            "/v1/reports",
            Some(json!({"device": "good-edge", "content": content, "reason": "slow"})),
        )
        .await
        .expect_error(400, "invalid_field");
    assert!(String::from_utf8_lossy(&bad.bytes).contains("reason"), "{bad:?}");

    // Only a device a lookup of the content lists can be reported.
    let unknown = api
        .call(
            Method::POST,
            "/v1/reports",
            Some(json!({"device": "made-up-edge", "content": content, "reason": "corrupt"})),
        )
        .await
        .expect_error(404, "unknown_holder");
    assert!(
        String::from_utf8_lossy(&unknown.bytes).contains("made-up-edge"),
        "{unknown:?}"
    );

    // Clearing needs the operator's signature, and ends the quarantine.
    api.unsigned()
        .call(Method::POST, "/v1/quarantine/clear", Some(json!({"id": "bad-edge"})))
        .await
        .expect(401);
    let cleared = api
        .call(Method::POST, "/v1/quarantine/clear", Some(json!({"id": "bad-edge"})))
        .await
        .expect(200)
        .json();
    assert_eq!(cleared, json!({"id": "bad-edge", "cleared": true}));
    assert_eq!(api.server_ids(&content).await.len(), 2);
    assert!(quarantined_ids(&api).await.is_empty());
    assert_eq!(
        metric(&api.metrics().await, "pcdn_tracker_quarantined_devices"),
        Some(0.0)
    );
}

#[tokio::test]
async fn sqlite_distinct_clients_quarantine_and_one_client_does_not() {
    let dir = tempfile::tempdir().unwrap();
    distinct_clients_quarantine_and_one_client_does_not(StoreUrl::Sqlite(dir.path().join("tracker.db"))).await;
}

#[tokio::test]
async fn redis_distinct_clients_quarantine_and_one_client_does_not() {
    let redis = RedisServer::start();
    distinct_clients_quarantine_and_one_client_does_not(StoreUrl::Redis(redis.url())).await;
}

#[tokio::test]
async fn a_quarantine_ends_when_its_reports_leave_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let window = Duration::from_secs(2);
    let tracker = start_tracker(StoreUrl::Sqlite(dir.path().join("tracker.db")), window).await;
    let api = Api::new(tracker.local_addr());
    let content = cid(8);
    api.register("bad-edge", "127.0.0.1:7901", 1_000).await.expect(200);
    api.announce("bad-edge", &[&content]).await.expect(200);
    for last in 1..=3 {
        report(&client_from(&api, last), "bad-edge", &content).await;
    }
    assert!(api.server_ids(&content).await.is_empty());
    // Generous: the device must come back, however loaded the machine.
    wait_until(Duration::from_secs(60), "the quarantine to end", || async {
        api.server_ids(&content).await == ["bad-edge"]
    })
    .await;
    // A device heartbeats meanwhile in real use; here the ttl (30 s) outlives the window.
}
