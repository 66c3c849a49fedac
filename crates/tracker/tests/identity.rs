//! Per-device identity at a real tracker over real HTTP: a device acts only as itself and in
//! its role, captured requests cannot be replayed (also across two instances on one Redis), bad
//! credentials are refused with clear errors, and revoked devices are refused and gone.

mod common;

use common::*;
use pcdn_identity::{OperatorKey, Role, request, unix_millis};
use reqwest::Method;
use serde_json::json;
use std::time::Duration;

const LONG_TTL: Duration = Duration::from_secs(60);

fn registration(id: &str, addr: &str) -> serde_json::Value {
    json!({"id": id, "addr": addr, "origin": false, "upload_capacity_bps": 1_000})
}

#[tokio::test]
async fn a_device_acts_only_as_itself_and_in_its_role() {
    let dir = tempfile::tempdir().unwrap();
    let tracker = start_sqlite(dir.path(), LONG_TTL).await;
    let api = Api::new(tracker.local_addr());
    let publisher = key(1);
    api.register_origin("id-origin", "127.0.0.1:7800", &publisher)
        .await
        .expect(200);
    api.register("id-victim", "127.0.0.1:7901", 1_000).await.expect(200);
    let content = cid(1);
    api.announce("id-victim", &[&content]).await.expect(200);

    // A device with a valid credential of its own, acting as the victim on every route.
    let attacker = api.as_device("id-attacker");
    attacker.identity("id-attacker", Some(Role::Edge));
    let refused = attacker
        .call(
            Method::POST,
            "/v1/devices",
            Some(registration("id-victim", "127.0.0.1:6666")),
        )
        .await
        .expect_error(403, "wrong_device");
    let message = refused.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("id-attacker") && message.contains("id-victim"),
        "{message}"
    );
    attacker
        .heartbeat("id-victim", 0, 0, false)
        .await
        .expect_error(403, "wrong_device");
    attacker
        .announce("id-victim", &[] as &[&str])
        .await
        .expect_error(403, "wrong_device");
    attacker.remove("id-victim").await.expect_error(403, "wrong_device");
    // ... and as the origin.
    attacker
        .call(
            Method::POST,
            "/v1/devices",
            Some(json!({"id": "id-origin", "addr": "127.0.0.1:6666", "origin": true,
                "upload_capacity_bps": 1, "public_key": hex::encode(key(9).verifying_key().to_bytes())})),
        )
        .await
        .expect_error(403, "wrong_device");
    // Nothing changed: the victim is still listed at its own address, healthy.
    let lookup = api.lookup(&content, None).await;
    assert_eq!(ids(&lookup["servers"]), ["id-victim"]);
    assert_eq!(lookup["servers"][0]["addr"], "127.0.0.1:7901");
    assert_eq!(lookup["servers"][0]["healthy"], true);
    assert_eq!(ids(&lookup["origins"]), ["id-origin"]);

    // An edge cannot register as an origin, nor publish a manifest, even signed by a key.
    let edge_key = key(7);
    let as_origin = json!({"id": "id-attacker", "addr": "127.0.0.1:6666", "origin": true,
        "upload_capacity_bps": 1, "public_key": hex::encode(edge_key.verifying_key().to_bytes())});
    let refused = attacker
        .call(Method::POST, "/v1/devices", Some(as_origin))
        .await
        .expect_error(403, "wrong_role");
    assert!(
        refused.json()["message"].as_str().unwrap().contains("enrolled as edge"),
        "{}",
        refused.json()
    );
    let mut with_key = registration("id-attacker", "127.0.0.1:6666");
    with_key["public_key"] = json!(hex::encode(edge_key.verifying_key().to_bytes()));
    attacker
        .call(Method::POST, "/v1/devices", Some(with_key))
        .await
        .expect(200);
    let (edge_cid, edge_manifest) = signed_manifest(3, &edge_key);
    attacker
        .put_manifest(&edge_cid, edge_manifest)
        .await
        .expect_error(403, "wrong_role");
    api.get_manifest(&edge_cid).await.expect_error(404, "unknown_manifest");
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn a_manifest_is_never_replaced_by_another_origins_signer() {
    let dir = tempfile::tempdir().unwrap();
    let tracker = start_sqlite(dir.path(), LONG_TTL).await;
    let api = Api::new(tracker.local_addr());
    let (first_key, second_key) = (key(11), key(12));
    api.register_origin("mf-origin-1", "127.0.0.1:7800", &first_key)
        .await
        .expect(200);
    api.register_origin("mf-origin-2", "127.0.0.1:7801", &second_key)
        .await
        .expect(200);
    let (content, manifest) = signed_manifest(21, &first_key);
    let first = api.as_device("mf-origin-1");
    let second = api.as_device("mf-origin-2");
    first.put_manifest(&content, manifest.clone()).await.expect(204);
    // The second origin can sign the very same content, but not replace the first's manifest.
    let (same_content, rival) = signed_manifest(21, &second_key);
    assert_eq!(same_content, content);
    let refused = second
        .put_manifest(&content, rival.clone())
        .await
        .expect_error(409, "manifest_conflict");
    assert!(
        refused.json()["message"]
            .as_str()
            .unwrap()
            .contains(&hex::encode(first_key.verifying_key().to_bytes())),
        "{}",
        refused.json()
    );
    // Nor can it publish a manifest signed by the first origin's key under its own name.
    second
        .put_manifest(&content, manifest.clone())
        .await
        .expect_error(403, "wrong_signer");
    assert_eq!(api.get_manifest(&content).await.expect(200).bytes, manifest);
    // The first origin may put it again.
    first.put_manifest(&content, manifest.clone()).await.expect(204);
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn a_captured_request_is_refused_when_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let tracker = start_sqlite(dir.path(), LONG_TTL).await;
    let api = Api::new(tracker.local_addr());
    api.register("rp-edge", "127.0.0.1:7901", 1_000).await.expect(200);
    // A heartbeat reporting the device unhealthy, captured on the wire and replayed.
    let path = "/v1/devices/rp-edge/heartbeat";
    let body = serde_json::to_vec(&json!({"sessions": 0, "upload_bps": 0, "healthy": false})).unwrap();
    let authorization = api.authorization(&Method::POST, path, &body).unwrap();
    let captured = || {
        api.request(Method::POST, path)
            .header(reqwest::header::AUTHORIZATION, authorization.clone())
            .body(body.clone())
    };
    api.send(captured()).await.expect(200);
    let replayed = api.send(captured()).await.expect_error(401, "replayed_request");
    assert!(replayed.json()["message"].as_str().unwrap().contains("nonce"));
    // The same signature over another body or path is a bad signature.
    let other = api
        .request(Method::POST, "/v1/devices/rp-edge/heartbeat")
        .header(reqwest::header::AUTHORIZATION, authorization.clone())
        .body(&b"{\"sessions\":0,\"upload_bps\":0,\"healthy\":true}"[..]);
    api.send(other).await.expect_error(401, "bad_signature");

    // A request signed outside the clock window is refused whatever its nonce.
    let identity = api.identity("rp-edge", None);
    let stale = request::device_authorization(
        &identity,
        "POST",
        path,
        &body,
        unix_millis() - 120_000,
        request::random_nonce().unwrap(),
    );
    let answer = api
        .send(
            api.request(Method::POST, path)
                .header(reqwest::header::AUTHORIZATION, stale)
                .body(body.clone()),
        )
        .await
        .expect_error(401, "stale_timestamp");
    assert!(answer.json()["message"].as_str().unwrap().contains("clock"));
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn a_request_replayed_at_another_instance_on_the_same_redis_is_refused() {
    let redis = RedisServer::start();
    let store: pcdn_tracker::StoreUrl = redis.url().parse().unwrap();
    let one = start(store.clone(), LONG_TTL).await;
    let two = start(store, LONG_TTL).await;
    let (api1, api2) = (Api::new(one.local_addr()), Api::new(two.local_addr()));
    api1.register("rr-edge", "127.0.0.1:7901", 1_000).await.expect(200);
    let path = "/v1/devices/rr-edge";
    let authorization = api1.authorization(&Method::DELETE, path, b"").unwrap();
    let delete = |api: &Api| {
        api.request(Method::DELETE, path)
            .header(reqwest::header::AUTHORIZATION, authorization.clone())
    };
    api1.send(delete(&api1)).await.expect(204);
    api1.register("rr-edge", "127.0.0.1:7901", 1_000).await.expect(200);
    // The captured deregistration, replayed at the other instance, does not remove it again.
    api2.send(delete(&api2)).await.expect_error(401, "replayed_request");
    assert_eq!(api2.health().await["devices"], 1);
    one.stop().await.unwrap();
    two.stop().await.unwrap();
}

#[tokio::test]
async fn expired_foreign_and_tampered_credentials_are_refused_with_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let tracker = start_sqlite(dir.path(), LONG_TTL).await;
    let api = Api::new(tracker.local_addr());
    let now = unix_millis();
    let body = registration("bc-edge", "127.0.0.1:7901");

    // Expired an hour ago: the message says when and what to do.
    let expired = operator()
        .enroll("bc-edge", Role::Edge, now - 7_200_000, now / 1000 - 3_600)
        .unwrap();
    api.set_identity(expired);
    let answer = api
        .call(Method::POST, "/v1/devices", Some(body.clone()))
        .await
        .expect_error(401, "expired_credential");
    let message = answer.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("expired on") && message.contains("UTC") && message.contains("pcdn operator enroll"),
        "{message}"
    );

    // Enrolled by another operator.
    let stranger = OperatorKey::from_secret([7; 32]);
    api.set_identity(stranger.enroll("bc-edge", Role::Edge, now, now / 1000 + 3_600).unwrap());
    let answer = api
        .call(Method::POST, "/v1/devices", Some(body.clone()))
        .await
        .expect_error(401, "unknown_operator");
    let message = answer.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains(&hex::encode(operator().public().as_bytes())),
        "{message}"
    );

    // A valid edge credential whose role byte was changed to origin.
    let edge = operator()
        .enroll("bc-edge", Role::Edge, now, now / 1000 + 3_600)
        .unwrap();
    let mut bytes = edge.credential.encode();
    bytes[1] = 1;
    let tampered_hex = hex::encode(&bytes);
    let header = request::device_authorization(&edge, "POST", "/v1/devices", b"{}", now, [1; 16])
        .replace(&edge.credential.to_hex(), &tampered_hex);
    let answer = api
        .send(
            api.request(Method::POST, "/v1/devices")
                .header(reqwest::header::AUTHORIZATION, header)
                .body("{}"),
        )
        .await
        .expect_error(401, "bad_signature");
    assert!(
        answer.json()["message"].as_str().unwrap().contains("altered"),
        "{}",
        answer.json()
    );

    // A request signed with another key than the credential's device key.
    let other = operator()
        .enroll("bc-edge", Role::Edge, now, now / 1000 + 3_600)
        .unwrap();
    let header = request::device_authorization(&other, "POST", "/v1/devices", b"{}", now, [2; 16])
        .replace(&other.credential.to_hex(), &edge.credential.to_hex());
    api.send(
        api.request(Method::POST, "/v1/devices")
            .header(reqwest::header::AUTHORIZATION, header)
            .body("{}"),
    )
    .await
    .expect_error(401, "bad_signature");

    // The operator route refuses another operator's key.
    let foreign = request::operator_authorization(&stranger, "POST", "/v1/revocations", b"{}", now, [3; 16]);
    api.send(
        api.request(Method::POST, "/v1/revocations")
            .header(reqwest::header::AUTHORIZATION, foreign)
            .body("{}"),
    )
    .await
    .expect_error(401, "unknown_operator");
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn a_revoked_device_is_refused_and_gone_until_enrolled_again() {
    let dir = tempfile::tempdir().unwrap();
    let tracker = start_sqlite(dir.path(), LONG_TTL).await;
    let api = Api::new(tracker.local_addr());
    let content = cid(5);
    for id in ["rv-edge", "rv-other"] {
        api.register(id, "127.0.0.1:7901", 1_000).await.expect(200);
        api.announce(id, &[&content]).await.expect(200);
    }
    assert_eq!(api.server_ids(&content).await.len(), 2);

    let revoked = api
        .call(Method::POST, "/v1/revocations", Some(json!({"id": "rv-edge"})))
        .await
        .expect(200)
        .json();
    assert_eq!((&revoked["id"], &revoked["removed"]), (&json!("rv-edge"), &json!(true)));
    // Gone from lookups at once, and refused from its next request on.
    assert_eq!(api.server_ids(&content).await, ["rv-other"]);
    let answer = api.heartbeat("rv-edge", 0, 0, true).await.expect_error(403, "revoked");
    assert!(
        answer.json()["message"]
            .as_str()
            .unwrap()
            .contains("pcdn operator enroll"),
        "{}",
        answer.json()
    );
    api.register("rv-edge", "127.0.0.1:7901", 1_000)
        .await
        .expect_error(403, "revoked");
    api.heartbeat("rv-other", 0, 0, true).await.expect(200);

    // The revocation survives a restart; a credential enrolled after it is accepted.
    tracker.stop().await.unwrap();
    let tracker = start_sqlite(dir.path(), LONG_TTL).await;
    let api = Api::new(tracker.local_addr());
    api.register("rv-edge", "127.0.0.1:7901", 1_000)
        .await
        .expect_error(403, "revoked");
    tokio::time::sleep(Duration::from_millis(5)).await;
    api.set_identity(enroll("rv-edge", Role::Edge));
    api.register("rv-edge", "127.0.0.1:7901", 1_000).await.expect(200);
    tracker.stop().await.unwrap();
}
