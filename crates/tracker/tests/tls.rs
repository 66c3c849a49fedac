//! The tracker over HTTPS (rustls), with certificates from a throwaway CA: the API answers over
//! TLS to a client trusting that CA, a plain-HTTP request gets a JSON 400 saying to use https,
//! and unusable certificate or key files are refused at start with errors naming them.

mod common;
#[path = "common/pki.rs"]
mod pki;

use pcdn_tracker::{StoreUrl, TlsFiles, TrackerConfig, bind};
use pki::Ca;
use std::time::Duration;

fn config(tls: TlsFiles) -> TrackerConfig {
    let mut config = TrackerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        StoreUrl::SqliteMemory,
        common::operator().public(),
    );
    config.tls = Some(tls);
    config
}

fn client(ca: &Ca) -> reqwest::Client {
    let pem = std::fs::read(&ca.cert).unwrap();
    reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(&pem).unwrap())
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_api_answers_over_https_and_plain_http_is_told_to_use_https() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let server = ca.server(dir.path(), "tracker", &["localhost"]);
    let tracker = bind(config(TlsFiles {
        cert: server.cert,
        key: server.key,
    }))
    .await
    .unwrap();
    let port = tracker.local_addr().port();
    let https = client(&ca);

    let health = https
        .get(format!("https://localhost:{port}/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let body: serde_json::Value = health.json().await.unwrap();
    assert_eq!(body["status"], "ok");
    // A device request goes through TLS too (and reaches the API: a 401 without a signature).
    let register = https
        .post(format!("https://localhost:{port}/v1/devices"))
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(register.status(), 401);

    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/health"))
        .send()
        .await
        .expect("a plain-HTTP request gets an answer");
    assert_eq!(plain.status(), 400);
    let body: serde_json::Value = plain.json().await.unwrap();
    assert_eq!(body["error"], "https_required", "{body}");
    assert!(body["message"].as_str().unwrap().contains("https://"), "{body}");

    // A client that does not trust the CA (the system's roots only) is refused by itself.
    let error = reqwest::Client::new()
        .get(format!("https://localhost:{port}/health"))
        .send()
        .await
        .unwrap_err();
    let chain = format!("{:?}", error);
    assert!(chain.contains("UnknownIssuer"), "{chain}");
    tracker.stop().await.unwrap();
}

#[tokio::test]
async fn unusable_certificate_or_key_files_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let server = ca.server(dir.path(), "tracker", &["localhost"]);
    let other = ca.server(dir.path(), "other", &["localhost"]);
    let missing = dir.path().join("missing.crt");
    let not_pem = dir.path().join("not-pem.txt");
    std::fs::write(&not_pem, "hello\n").unwrap();

    let cases = [
        (
            missing.clone(),
            server.key.clone(),
            vec!["cannot read the TLS certificate file", missing.to_str().unwrap()],
        ),
        (
            not_pem.clone(),
            server.key.clone(),
            vec!["holds no PEM CERTIFICATE", not_pem.to_str().unwrap()],
        ),
        (
            server.cert.clone(),
            not_pem.clone(),
            vec!["holds no PEM private key", not_pem.to_str().unwrap()],
        ),
        // The key is in the cert slot and the certificate in the key slot.
        (
            server.key.clone(),
            server.cert.clone(),
            vec!["holds no PEM CERTIFICATE", server.key.to_str().unwrap()],
        ),
        (
            server.cert.clone(),
            other.key.clone(),
            vec![
                "cannot be used together",
                server.cert.to_str().unwrap(),
                other.key.to_str().unwrap(),
            ],
        ),
    ];
    for (cert, key, expected) in cases {
        let error = match bind(config(TlsFiles { cert, key })).await {
            Ok(_) => panic!("a tracker started with unusable TLS files ({expected:?})"),
            Err(error) => format!("{error:#}"),
        };
        for part in expected {
            assert!(error.contains(part), "{part:?} not in {error:?}");
        }
    }
}
