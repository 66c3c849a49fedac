//! Garbage bodies, paths, queries, headers and methods sent to every route of `/openapi.json`:
//! every answer must be a 4xx with the JSON error shape, never a 5xx.

mod common;

use common::*;
use reqwest::Method;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

/// Bodies that are not what any JSON route expects.
fn garbage_bodies() -> Vec<Vec<u8>> {
    let mut bodies: Vec<Vec<u8>> = [
        "",
        "{",
        "}",
        "null",
        "[]",
        "{}",
        "42",
        "\"text\"",
        "{\"id\": 5}",
        "{\"id\": \"edge-1\", \"addr\": 7}",
        "{\"id\": \"edge-1\", \"addr\": \"127.0.0.1:1\", \"upload_capacity_bps\": -1}",
        "{\"id\": \"edge-1\", \"addr\": \"127.0.0.1:1\", \"upload_capacity_bps\": 1e400}",
        "{\"id\": \"edge-1\", \"addr\": \"127.0.0.1:1\", \"upload_capacity_bps\": 18446744073709551616}",
        "{\"sessions\": 4294967296, \"upload_bps\": 0, \"healthy\": true}",
        "{\"sessions\": 1, \"upload_bps\": 0, \"healthy\": \"yes\"}",
        "{\"contents\": \"abc\"}",
        "{\"contents\": [1, 2]}",
        "{\"contents\": [\"zz\"]}",
        "{\"a\": 1} trailing",
        "{\"id\": \"\\ud800\"}",
    ]
    .iter()
    .map(|text| text.as_bytes().to_vec())
    .collect();
    bodies.push(vec![0xff, 0xfe, 0x00, 0x80]);
    bodies.push(b"[".repeat(100_000));
    bodies.push(vec![b'a'; 17 << 20]);
    bodies
}

/// Values for path parameters that are neither device ids nor content ids.
const BAD_PATH_VALUES: &[&str] = &[
    "",
    "%FF",
    "%00",
    "a%20b",
    "a%2Fb",
    "..",
    "%C3%A9",
    "x!",
    "0123456789012345678901234567890123456789012345678901234567890123456789",
];

/// A good request's parts for one operation.
struct Operation {
    method: Method,
    path: String,
    needs_auth: bool,
    has_body: bool,
}

fn concrete(path: &str, id: &str, cid: &str) -> String {
    path.replace("{id}", id).replace("{cid}", cid)
}

async fn assert_4xx_json(api: &Api, request: reqwest::RequestBuilder, what: &str) -> Value {
    let answer = api.send(request).await;
    assert!(
        answer.status.is_client_error(),
        "{what}: status {} (body {:?})",
        answer.status,
        String::from_utf8_lossy(&answer.bytes[..answer.bytes.len().min(300)])
    );
    assert_error_shape(&answer);
    answer.json()
}

#[tokio::test]
async fn garbage_to_every_route_is_a_4xx_json_error() {
    let dir = tempfile::tempdir().unwrap();
    let tracker = start_sqlite(dir.path(), Duration::from_secs(30)).await;
    let api = Api::new(tracker.local_addr());
    let publisher = key(1);
    api.register_origin("origin", "127.0.0.1:7800", &publisher)
        .await
        .expect(200);
    api.register("edge-1", "127.0.0.1:7901", 1_000).await.expect(200);
    let (content, manifest) = signed_manifest(1, &publisher);

    let document = api.call(Method::GET, "/openapi.json", None).await.expect(200).json();
    let mut operations = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            operations.push(Operation {
                method: method.to_uppercase().parse().unwrap(),
                path: path.clone(),
                needs_auth: operation.get("security").is_some(),
                has_body: operation.get("requestBody").is_some(),
            });
        }
    }
    assert_eq!(operations.len(), 16);

    let mut checked = 0;
    for operation in &operations {
        let good_path = concrete(&operation.path, "edge-1", &content);
        let what = |detail: &str| format!("{} {}: {detail}", operation.method, operation.path);

        if operation.needs_auth {
            let bad_headers: [Option<HeaderValue>; 7] = [
                None,
                Some(HeaderValue::from_static("Bearer wrong")),
                Some(HeaderValue::from_static("PCDN-Device")),
                Some(HeaderValue::from_static("PCDN-Device credential=00, timestamp=1")),
                Some(HeaderValue::from_static("Basic dGVzdC1zZWNyZXQ=")),
                Some(HeaderValue::from_static(
                    "PCDN-Operator key=zz, timestamp=1, nonce=00, signature=00",
                )),
                Some(HeaderValue::from_bytes(b"PCDN-Device \xff\xfe").unwrap()),
            ];
            for header in bad_headers {
                let mut request = api.request(operation.method.clone(), &good_path);
                if let Some(header) = &header {
                    request = request.header(AUTHORIZATION, header.clone());
                }
                if operation.has_body {
                    request = request.body(manifest.clone());
                }
                let error = assert_4xx_json(&api, request, &what(&format!("auth {header:?}"))).await;
                assert_eq!(error["error"], "unauthorized");
                checked += 1;
            }
        }

        for parameter in ["{id}", "{cid}"] {
            if !operation.path.contains(parameter) {
                continue;
            }
            let mut values: Vec<String> = BAD_PATH_VALUES.iter().map(|v| v.to_string()).collect();
            if parameter == "{cid}" {
                values.extend([cid(1)[..63].to_owned(), format!("{}00", cid(1)), "g".repeat(64)]);
            }
            for value in values {
                let path = operation.path.replace(parameter, &value);
                let path = concrete(&path, "edge-1", &content);
                let body = if operation.has_body { "{}" } else { "" };
                let request = api.signed(operation.method.clone(), &path, body);
                assert_4xx_json(&api, request, &what(&format!("path {path}"))).await;
                checked += 1;
            }
        }

        if operation.has_body {
            for body in garbage_bodies() {
                let request = api.signed(operation.method.clone(), &good_path, body.clone());
                let shown = String::from_utf8_lossy(&body[..body.len().min(60)]).into_owned();
                let error = assert_4xx_json(&api, request, &what(&format!("body {shown:?}"))).await;
                let code = error["error"].as_str().unwrap();
                assert!(
                    ["invalid_json", "invalid_field", "invalid_manifest", "body_too_large"].contains(&code),
                    "{}: {error}",
                    what(&shown)
                );
                checked += 1;
            }
        }

        if operation.path.ends_with("/popular") {
            for query in ["n=0", "n=101", "n=abc", "n=-1", "n=", "n=99999999999999999999999"] {
                let request = api.request(operation.method.clone(), &format!("{good_path}?{query}"));
                let error = assert_4xx_json(&api, request, &what(query)).await;
                assert_eq!(error["error"], "invalid_query", "{query}");
                assert!(error["message"].as_str().unwrap().contains("`n`"), "{error}");
                checked += 1;
            }
        }

        if operation.path.ends_with("/servers") {
            for query in [
                "n=0",
                "n=65",
                "n=abc",
                "n=-1",
                "n=1.5",
                "n=",
                "n=%FF",
                "n=99999999999999999999999",
                "punch=",
                "punch=0011",
                "punch=zzzzzzzzzzzzzzzz",
                "punch=00112233445566778899",
            ] {
                let request = api.request(operation.method.clone(), &format!("{good_path}?{query}"));
                let error = assert_4xx_json(&api, request, &what(query)).await;
                assert_eq!(error["error"], "invalid_query", "{query}");
                assert!(
                    error["message"]
                        .as_str()
                        .unwrap()
                        .contains(if query.starts_with("punch") { "`punch`" } else { "`n`" })
                        || query == "n=%FF",
                    "{error}"
                );
                checked += 1;
            }
        }

        let allowed: BTreeSet<Method> = operations
            .iter()
            .filter(|other| other.path == operation.path)
            .map(|other| other.method.clone())
            .collect();
        for method in [Method::GET, Method::POST, Method::PUT, Method::DELETE, Method::PATCH] {
            if !allowed.contains(&method) {
                let request = api.request(method.clone(), &good_path).body("{}");
                let error = assert_4xx_json(&api, request, &what(&format!("method {method}"))).await;
                assert_eq!(error["error"], "method_not_allowed");
                checked += 1;
            }
        }
    }

    // Semantically wrong registrations name the field.
    for (body, field) in [
        (
            json!({"id": "", "addr": "127.0.0.1:1", "upload_capacity_bps": 1}),
            "`id`",
        ),
        (
            json!({"id": "a b", "addr": "127.0.0.1:1", "upload_capacity_bps": 1}),
            "`id`",
        ),
        (
            json!({"id": "x", "addr": "localhost:1", "upload_capacity_bps": 1}),
            "`addr`",
        ),
        (
            json!({"id": "x", "addr": "0.0.0.0:7801", "upload_capacity_bps": 1}),
            "`addr`",
        ),
        (
            json!({"id": "x", "addr": "127.0.0.1:0", "upload_capacity_bps": 1}),
            "`addr`",
        ),
        (json!({"id": "x", "addr": "127.0.0.1:1"}), "upload_capacity_bps"),
        (
            json!({"id": "x", "addr": "127.0.0.1:1", "upload_capacity_bps": 1, "origin": true}),
            "`public_key`",
        ),
        (
            json!({"id": "x", "addr": "127.0.0.1:1", "upload_capacity_bps": 1, "public_key": "12"}),
            "`public_key`",
        ),
        (
            json!({"id": "x", "addr": "127.0.0.1:1", "upload_capacity_bps": "1"}),
            "upload_capacity_bps",
        ),
    ] {
        let request = api.signed(Method::POST, "/v1/devices", serde_json::to_vec(&body).unwrap());
        let error = assert_4xx_json(&api, request, &body.to_string()).await;
        assert!(error["message"].as_str().unwrap().contains(field), "{body}: {error}");
        checked += 1;
    }
    let contents = json!({"contents": [cid(1), "nothex"]});
    let request = api.signed(
        Method::PUT,
        "/v1/devices/edge-1/contents",
        serde_json::to_vec(&contents).unwrap(),
    );
    let error = assert_4xx_json(&api, request, "bad second content id").await;
    assert!(error["message"].as_str().unwrap().contains("`contents[1]`"), "{error}");

    // Paths that match no route.
    for path in [
        "/",
        "/v1",
        "/v1/devices/edge-1/heartbeat/extra",
        "/v2/devices",
        "/v1/contents/servers",
    ] {
        let error = assert_4xx_json(&api, api.request(Method::GET, path), path).await;
        assert_eq!(error["error"], "not_found", "{path}");
        checked += 1;
    }
    assert!(checked > 150, "only {checked} bad requests were checked");

    // After all that, the tracker still works and counted no 5xx.
    api.heartbeat("edge-1", 0, 0, true).await.expect(200);
    let metrics = api.metrics().await;
    assert!(!metrics.contains("status=\"5"), "{metrics}");
    tracker.stop().await.unwrap();
}
