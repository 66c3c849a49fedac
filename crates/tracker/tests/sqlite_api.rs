//! Every endpoint of the tracker API over real HTTP, on a SQLite store in a temporary directory.

mod common;

use common::*;
use reqwest::Method;
use serde_json::json;
use std::time::{Duration, Instant};

const LONG_TTL: Duration = Duration::from_secs(30);

#[tokio::test]
async fn device_lifecycle_and_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let tracker = start_sqlite(dir.path(), LONG_TTL).await;
    let api = Api::new(tracker.local_addr());
    let content = cid(1);

    let registered = api
        .register("edge-1", "127.0.0.1:7901", 4_000_000)
        .await
        .expect(200)
        .json();
    assert_eq!(
        registered,
        json!({"ttl_secs": 30, "heartbeat_secs": 1, "generation": 1})
    );
    let ack = api.heartbeat("edge-1", 3, 1_200_000, true).await.expect(200).json();
    assert_eq!(ack, json!({"ttl_secs": 30, "generation": 1}));
    let announced = api
        .announce("edge-1", &[content.clone(), cid(2), content.clone()])
        .await;
    assert_eq!(announced.expect(200).json(), json!({"announced": 2}));

    let found = api.lookup(&content, None).await;
    assert_eq!(
        found,
        json!({
            "content": content,
            "servers": [{"id": "edge-1", "addr": "127.0.0.1:7901", "origin": false,
                         "upload_capacity_bps": 4_000_000, "upload_bps": 1_200_000,
                         "free_upload_bps": 2_800_000, "sessions": 3, "healthy": true}],
            "origins": []
        })
    );
    // Unknown content: 200 with no servers.
    assert_eq!(api.lookup(&cid(9), Some(3)).await["servers"], json!([]));
    // Upper-case hex names the same content; the answer writes it lower-case.
    let upper = api.lookup(&content.to_uppercase(), None).await;
    assert_eq!(
        (&upper["content"], ids(&upper["servers"])),
        (&json!(content), vec!["edge-1".to_owned()])
    );

    // Announcing replaces the set.
    api.announce("edge-1", &[cid(2)]).await.expect(200);
    assert!(api.server_ids(&content).await.is_empty());
    assert_eq!(api.server_ids(&cid(2)).await, ["edge-1"]);

    // Re-registering replaces the device: new address, fresh load, empty announced set, and the
    // next generation, which heartbeats then carry.
    let again = api.register("edge-1", "127.0.0.1:7999", 5_000).await.expect(200).json();
    assert_eq!(again["generation"], 2);
    assert_eq!(
        api.heartbeat("edge-1", 0, 0, true).await.expect(200).json()["generation"],
        2
    );
    assert!(api.server_ids(&cid(2)).await.is_empty());
    api.announce("edge-1", &[cid(2)]).await.expect(200);
    let server = &api.lookup(&cid(2), None).await["servers"][0];
    assert_eq!(
        (&server["addr"], &server["upload_bps"]),
        (&json!("127.0.0.1:7999"), &json!(0))
    );

    assert_eq!(
        api.health().await,
        json!({"status": "ok", "store": "sqlite", "devices": 1})
    );
    api.remove("edge-1").await.expect(204);
    assert!(api.server_ids(&cid(2)).await.is_empty());
    api.remove("edge-1").await.expect_error(404, "unknown_device");
    api.heartbeat("edge-1", 0, 0, true)
        .await
        .expect_error(404, "unknown_device");
    api.announce("edge-1", &[cid(2)])
        .await
        .expect_error(404, "unknown_device");
    api.heartbeat("never", 0, 0, true)
        .await
        .expect_error(404, "unknown_device");
    assert_eq!(api.health().await["devices"], 0);

    let metrics = api.metrics().await;
    assert_eq!(
        metric(&metrics, "pcdn_tracker_registrations_total"),
        Some(2.0),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"pcdn_tracker_requests_total{route="/v1/devices/{id}",method="DELETE",status="404"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("pcdn_tracker_lookup_duration_seconds_count"),
        "{metrics}"
    );
    assert_eq!(metric(&metrics, "pcdn_tracker_live_devices"), Some(0.0), "{metrics}");
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn device_endpoints_need_a_signed_request_and_lookups_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let tracker = start_sqlite(dir.path(), LONG_TTL).await;
    let api = Api::new(tracker.local_addr());
    let stranger = api.unsigned();
    stranger
        .register("edge-1", "127.0.0.1:1", 1)
        .await
        .expect_error(401, "unauthorized");
    api.register("edge-1", "127.0.0.1:1", 1).await.expect(200);
    stranger
        .heartbeat("edge-1", 0, 0, true)
        .await
        .expect_error(401, "unauthorized");
    stranger
        .announce("edge-1", &[cid(1)])
        .await
        .expect_error(401, "unauthorized");
    stranger.remove("edge-1").await.expect_error(401, "unauthorized");
    let (content, bytes) = signed_manifest(1, &key(1));
    stranger
        .put_manifest(&content, bytes)
        .await
        .expect_error(401, "unauthorized");
    let answer = stranger
        .call(Method::POST, "/v1/revocations", Some(json!({"id": "edge-1"})))
        .await
        .expect_error(401, "unauthorized");
    assert!(answer.json()["message"].as_str().unwrap().contains("PCDN-Operator"));
    // Lookups, manifests and operations are public.
    stranger.lookup(&cid(1), None).await;
    stranger
        .get_manifest(&cid(1))
        .await
        .expect_error(404, "unknown_manifest");
    stranger.health().await;
    stranger.metrics().await;
    stranger.call(Method::GET, "/openapi.json", None).await.expect(200);
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn servers_are_ranked_by_free_capacity_then_sessions_then_id() {
    let dir = tempfile::tempdir().unwrap();
    let tracker = start_sqlite(dir.path(), LONG_TTL).await;
    let api = Api::new(tracker.local_addr());
    let content = cid(7);
    // (id, capacity, upload, sessions, healthy)
    let devices = [
        ("busy", 10_000_000, 9_000_000, 1, true),  // free 1 M
        ("wide", 50_000_000, 10_000_000, 4, true), // free 40 M
        ("b-tie", 8_000_000, 0, 2, true),          // free 8 M, 2 sessions
        ("a-tie", 8_000_000, 0, 2, true),          // free 8 M, 2 sessions: id a < b
        ("calm", 8_000_000, 0, 1, true),           // free 8 M, 1 session
        ("over", 1_000_000, 3_000_000, 0, true),   // free 0, saturating: at its cap, left out
        ("sick", 99_000_000, 0, 0, false),         // unhealthy: never listed
    ];
    for (id, capacity, upload, sessions, healthy) in devices {
        api.register(id, "127.0.0.1:7901", capacity).await.expect(200);
        api.heartbeat(id, sessions, upload, healthy).await.expect(200);
        api.announce(id, &[&content]).await.expect(200);
    }
    // A device that holds something else, and an origin, are not servers of this content.
    api.register("elsewhere", "127.0.0.1:7902", 1_000_000_000)
        .await
        .expect(200);
    api.announce("elsewhere", &[cid(8)]).await.expect(200);
    let origin_key = key(3);
    api.register_origin("origin", "127.0.0.1:7800", &origin_key)
        .await
        .expect(200);
    api.announce("origin", &[&content]).await.expect(200);

    // Each lookup charges the servers it lists an equal share: their order stays.
    let found = api.lookup(&content, None).await;
    assert_eq!(ids(&found["servers"]), ["wide", "calm", "a-tie", "b-tie", "busy"]);
    assert_eq!(ids(&found["origins"]), ["origin"]);
    assert_eq!(found["origins"][0]["origin"], true);
    assert_eq!(
        found["origins"][0]["public_key"],
        hex::encode(origin_key.verifying_key().to_bytes())
    );
    assert_eq!(ids(&api.lookup(&content, Some(2)).await["servers"]), ["wide", "calm"]);
    assert_eq!(ids(&api.lookup(&content, Some(1)).await["servers"]), ["wide"]);
    // Origins are listed for any content, known or not.
    assert_eq!(ids(&api.lookup(&cid(99), None).await["origins"]), ["origin"]);

    // A load report re-ranks and clears the lookups' charges: "wide" is now at its cap.
    for (id, capacity, upload, sessions, healthy) in devices {
        let upload = if id == "wide" { capacity - 100_000 } else { upload };
        api.heartbeat(id, sessions, upload, healthy).await.expect(200);
    }
    assert_eq!(
        ids(&api.lookup(&content, Some(3)).await["servers"]),
        ["calm", "a-tie", "b-tie"]
    );
    // Recovering health makes a device eligible again.
    api.heartbeat("sick", 0, 0, true).await.expect(200);
    assert_eq!(ids(&api.lookup(&content, Some(1)).await["servers"]), ["sick"]);
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn manifests_are_accepted_only_verified_and_from_an_origin() {
    let dir = tempfile::tempdir().unwrap();
    let tracker = start_sqlite(dir.path(), LONG_TTL).await;
    let api = Api::new(tracker.local_addr());
    let publisher = key(1);
    let stranger = key(2);
    api.register_origin("origin-1", "127.0.0.1:7800", &publisher)
        .await
        .expect(200);
    // A non-origin device that happens to carry a key is not a publisher.
    let body = json!({"id": "edge", "addr": "127.0.0.1:7901", "upload_capacity_bps": 1,
                      "public_key": hex::encode(stranger.verifying_key().to_bytes())});
    api.call(Method::POST, "/v1/devices", Some(body)).await.expect(200);
    let (edge_content, edge_bytes) = signed_manifest(8, &stranger);
    api.as_device("edge")
        .put_manifest(&edge_content, edge_bytes)
        .await
        .expect_error(403, "wrong_role");

    let (content, bytes) = signed_manifest(5, &publisher);
    api.get_manifest(&content).await.expect_error(404, "unknown_manifest");
    api.put_manifest(&content, bytes.clone()).await.expect(204);
    let answer = api.get_manifest(&content).await.expect(200);
    assert_eq!(answer.content_type, "application/octet-stream");
    assert_eq!(answer.bytes, bytes);
    // Putting it again is fine (idempotent).
    api.put_manifest(&content, bytes.clone()).await.expect(204);

    let (foreign, foreign_bytes) = signed_manifest(6, &stranger);
    api.put_manifest(&foreign, foreign_bytes)
        .await
        .expect_error(403, "wrong_signer");
    api.get_manifest(&foreign).await.expect_error(404, "unknown_manifest");

    // A flipped bit in a block hash breaks the signature (and changes the content id: put it
    // under its own id so that it is the signature that is refused).
    let mut tampered = bytes.clone();
    tampered[40] ^= 1;
    let tampered_cid = {
        let decoded = pcdn_core::manifest::SignedManifest::decode(&tampered).unwrap();
        hex::encode(decoded.content_id().0)
    };
    let refused = api.put_manifest(&tampered_cid, tampered.clone()).await;
    assert!(
        refused.expect_error(400, "invalid_manifest").json()["message"]
            .as_str()
            .unwrap()
            .contains("signature")
    );
    // A tampered signature.
    let mut bad_signature = bytes.clone();
    *bad_signature.last_mut().unwrap() ^= 0x80;
    api.put_manifest(&content, bad_signature)
        .await
        .expect_error(400, "invalid_manifest");
    // A valid manifest under another content's id.
    api.put_manifest(&cid(4), bytes.clone())
        .await
        .expect_error(400, "content_id_mismatch");
    // Not a manifest at all, truncated, with trailing bytes.
    api.put_manifest(&content, b"hello".to_vec())
        .await
        .expect_error(400, "invalid_manifest");
    api.put_manifest(&content, bytes[..bytes.len() - 1].to_vec())
        .await
        .expect_error(400, "invalid_manifest");
    let mut trailing = bytes.clone();
    trailing.push(0);
    api.put_manifest(&content, trailing)
        .await
        .expect_error(400, "invalid_manifest");
    // Nothing refused replaced the stored manifest.
    assert_eq!(api.get_manifest(&content).await.expect(200).bytes, bytes);

    // Once it is gone the origin must register (its key) again to publish.
    api.remove("origin-1").await.expect(204);
    let (other, other_bytes) = signed_manifest(7, &publisher);
    api.put_manifest(&other, other_bytes)
        .await
        .expect_error(403, "wrong_signer");
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn devices_expire_after_the_ttl_without_heartbeats() {
    let dir = tempfile::tempdir().unwrap();
    let ttl = Duration::from_secs(1);
    let tracker = start_sqlite(dir.path(), ttl).await;
    let api = Api::new(tracker.local_addr());
    let content = cid(1);
    api.register("edge", "127.0.0.1:7901", 1_000).await.expect(200);
    api.announce("edge", &[&content]).await.expect(200);

    // Heartbeats keep the device live well past one ttl.
    let kept_from = Instant::now();
    while kept_from.elapsed() < 3 * ttl {
        let sent = Instant::now();
        api.heartbeat("edge", 0, 0, true).await.expect(200);
        let servers = api.server_ids(&content).await;
        // Only meaningful if this lookup came within one ttl of the heartbeat.
        if sent.elapsed() < ttl {
            assert_eq!(servers, ["edge"]);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Then silence: the device disappears, but never before one ttl after its last heartbeat.
    let last_heartbeat = Instant::now();
    api.heartbeat("edge", 0, 0, true).await.expect(200);
    wait_until(Duration::from_secs(20), "the device to expire", || async {
        api.server_ids(&content).await.is_empty()
    })
    .await;
    // Expiry is kept in whole wall-clock milliseconds, hence the millisecond of slack.
    let silent = last_heartbeat.elapsed();
    assert!(silent + Duration::from_millis(1) >= ttl, "expired after {silent:?}");
    assert_eq!(api.health().await["devices"], 0);
    api.heartbeat("edge", 0, 0, true)
        .await
        .expect_error(404, "unknown_device");
    wait_until(
        Duration::from_secs(20),
        "the sweeper to count the expiration",
        || async { metric(&api.metrics().await, "pcdn_tracker_expirations_total") == Some(1.0) },
    )
    .await;

    // The device comes back by registering and announcing again.
    api.register("edge", "127.0.0.1:7901", 1_000).await.expect(200);
    assert!(
        api.server_ids(&content).await.is_empty(),
        "announced set survives expiry"
    );
    api.announce("edge", &[&content]).await.expect(200);
    assert_eq!(api.server_ids(&content).await, ["edge"]);
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn devices_and_manifests_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let publisher = key(1);
    let (content, manifest) = signed_manifest(3, &publisher);
    let first = start_sqlite(dir.path(), LONG_TTL).await;
    let api = Api::new(first.local_addr());
    api.register_origin("origin", "127.0.0.1:7800", &publisher)
        .await
        .expect(200);
    api.register("edge", "127.0.0.1:7901", 4_000).await.expect(200);
    api.heartbeat("edge", 2, 1_000, true).await.expect(200);
    api.announce("edge", &[content.clone(), cid(2)]).await.expect(200);
    api.register("gone", "127.0.0.1:7902", 4_000).await.expect(200);
    api.remove("gone").await.expect(204);
    // A removed id's generation is kept: its next registration is not mistaken for the last.
    assert_eq!(
        api.register("gone", "127.0.0.1:7902", 4_000).await.expect(200).json()["generation"],
        2
    );
    api.remove("gone").await.expect(204);
    api.put_manifest(&content, manifest.clone()).await.expect(204);
    let before = api.lookup(&content, None).await;
    first.stop().await.unwrap();

    let second = start_sqlite(dir.path(), LONG_TTL).await;
    let api = Api::new(second.local_addr());
    assert_eq!(api.lookup(&content, None).await, before);
    assert_eq!(api.server_ids(&cid(2)).await, ["edge"]);
    assert_eq!(api.get_manifest(&content).await.expect(200).bytes, manifest);
    assert_eq!(api.health().await["devices"], 2);
    assert_eq!(
        api.heartbeat("edge", 0, 0, true).await.expect(200).json()["generation"],
        1
    );
    api.heartbeat("gone", 0, 0, true)
        .await
        .expect_error(404, "unknown_device");
    // Generations survive a restart, of devices gone too.
    assert_eq!(
        api.register("gone", "127.0.0.1:7902", 4_000).await.expect(200).json()["generation"],
        3
    );
    api.remove("gone").await.expect(204);
    second.stop().await.unwrap();

    // A restart with a ttl that has since run out finds the devices expired, not the manifests.
    let third = start_sqlite(dir.path(), Duration::from_secs(1)).await;
    let api = Api::new(third.local_addr());
    wait_until(
        Duration::from_secs(20),
        "the devices to expire and be deleted",
        || async { metric(&api.metrics().await, "pcdn_tracker_expirations_total") == Some(2.0) },
    )
    .await;
    assert_eq!(api.health().await["devices"], 0);
    third.stop().await.unwrap();
    let fourth = start_sqlite(dir.path(), LONG_TTL).await;
    let api = Api::new(fourth.local_addr());
    assert_eq!(api.health().await["devices"], 0);
    assert!(api.server_ids(&content).await.is_empty());
    assert_eq!(api.get_manifest(&content).await.expect(200).bytes, manifest);
    fourth.stop().await.unwrap();
}

#[tokio::test]
async fn openapi_document_is_valid_and_every_route_exists() {
    let tracker = start(pcdn_tracker::StoreUrl::SqliteMemory, LONG_TTL).await;
    let api = Api::new(tracker.local_addr());
    let document = api.call(Method::GET, "/openapi.json", None).await.expect(200).json();
    assert!(
        document["openapi"].as_str().unwrap().starts_with("3."),
        "{}",
        document["openapi"]
    );
    assert!(document["info"]["title"].is_string() && document["info"]["version"].is_string());
    let paths = document["paths"].as_object().unwrap();
    let mut operations = 0;
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            operations += 1;
            assert!(
                operation["responses"].as_object().is_some_and(|r| !r.is_empty()),
                "{method} {path}"
            );
            // Each documented operation is routed: a request reaches its handler rather than
            // the 404/405 fallbacks.
            let concrete = path.replace("{id}", "some-device").replace("{cid}", &cid(1));
            let answer = api.call(method.to_uppercase().parse().unwrap(), &concrete, None).await;
            let code = if answer.status.is_success() {
                None
            } else {
                Some(answer.json()["error"].clone())
            };
            assert!(
                code != Some(json!("not_found")) && code != Some(json!("method_not_allowed")),
                "{method} {path} is documented but not routed: {code:?}"
            );
        }
    }
    assert_eq!(operations, 16);
    for documented in [
        "/v1/reports",
        "/v1/quarantine",
        "/v1/quarantine/clear",
        "/v1/rendezvous",
        "/v1/revocations",
        "/v1/devices",
        "/v1/devices/{id}/heartbeat",
        "/v1/devices/{id}/contents",
        "/v1/devices/{id}",
        "/v1/contents/{cid}/manifest",
        "/v1/contents/{cid}/servers",
        "/v1/contents/popular",
        "/health",
        "/metrics",
        "/openapi.json",
    ] {
        assert!(paths.contains_key(documented), "{documented} missing");
    }
    tracker.stop().await.unwrap();
}
