//! Devices and a fetch against a real in-process tracker serving HTTPS, with certificates from a
//! throwaway CA: the whole fetch works over https://, and an untrusted CA, a host name the
//! certificate does not name, plain http against HTTPS and https against plain HTTP each fail
//! with an error saying what is wrong.

mod common;
#[path = "../../tracker/tests/common/pki.rs"]
mod pki;

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use common::Lab;
use pcdn_identity::{DeviceIdentity, OperatorKey, Role, unix_millis};
use pcdn_net::tracker_client::TrackerError;
use pcdn_net::{FetchConfig, ServerConfig, ServerHandle, TrackerClient, TrackerSettings, fetch, spawn_server};
use pcdn_tracker::{RunningTracker, StoreUrl, TlsFiles, TrackerConfig};
use pki::Ca;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The operator key the test tracker trusts.
fn operator() -> OperatorKey {
    OperatorKey::from_secret([42; 32])
}

/// A credential for a fresh id from the test operator.
fn enroll(origin: bool) -> DeviceIdentity {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    let role = if origin { Role::Origin } else { Role::Edge };
    let id = format!("{role}-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let now = unix_millis();
    operator().enroll(&id, role, now, now / 1000 + 3600).unwrap()
}

async fn tracker(tls: Option<TlsFiles>) -> RunningTracker {
    let mut config = TrackerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        StoreUrl::SqliteMemory,
        operator().public(),
    );
    config.ttl = Duration::from_secs(3);
    config.heartbeat = Duration::from_secs(1);
    config.tls = tls;
    pcdn_tracker::bind(config).await.unwrap()
}

async fn serve(store: &Path, origin: bool, url: &str, ca: &Path) -> ServerHandle {
    let mut config = ServerConfig::new(store, "127.0.0.1:0".parse().unwrap());
    config.origin = origin;
    config.tracker = Some(TrackerSettings {
        url: url.to_owned(),
        identity: enroll(origin),
    });
    config.tracker_ca = Some(ca.to_owned());
    spawn_server(config).await.unwrap()
}

/// Polls `check` until it holds; panics with `what` after 30 s.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(std::time::Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_over_https_is_byte_identical() {
    let lab = Lab::new(2_000_000, 1);
    let ca = Ca::new(lab.dir.path(), "ca");
    let files = ca.server(lab.dir.path(), "tracker", &["localhost"]);
    let tracker = tracker(Some(TlsFiles {
        cert: files.cert,
        key: files.key,
    }))
    .await;
    let url = format!("https://localhost:{}", tracker.local_addr().port());
    let origin = serve(&lab.origin_store, true, &url, &ca.cert).await;
    let edge = serve(&lab.edge_stores[0], false, &url, &ca.cert).await;
    let client = TrackerClient::new(&url, None)
        .unwrap()
        .with_tracker_ca(&ca.cert)
        .unwrap();
    eventually("the edge and the origin are registered over https", || async {
        let lookup = client.servers(&lab.id, 8).await;
        let manifest = client.get_manifest(&lab.id).await;
        matches!((lookup, manifest), (Ok(l), Ok(Some(_))) if l.servers.len() == 1 && l.origins.len() == 1)
    })
    .await;

    let output = lab.out_dir().join("over-https.bin");
    let mut config = FetchConfig::new(lab.id, &output);
    config.tracker = Some(url.clone());
    config.tracker_ca = Some(ca.cert.clone());
    config.timeout = Some(Duration::from_secs(60));
    fetch(config).await.unwrap();
    assert!(std::fs::read(&output).unwrap() == lab.data, "the fetched bytes differ");
    assert!(edge.stats().data_packets_out + origin.stats().data_packets_out > 0);
    origin.shutdown().await.unwrap();
    edge.shutdown().await.unwrap();
    tracker.stop().await.unwrap();
}

fn transport_detail(error: TrackerError) -> String {
    match error {
        TrackerError::Transport { detail, .. } => detail,
        other => panic!("expected a transport error, got {other}"),
    }
}

#[tokio::test]
async fn wrong_ca_wrong_name_and_wrong_scheme_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let stranger = Ca::new(dir.path(), "stranger");
    let files = ca.server(dir.path(), "tracker", &["localhost"]);
    let https_tracker = tracker(Some(TlsFiles {
        cert: files.cert,
        key: files.key,
    }))
    .await;
    let port = https_tracker.local_addr().port();
    let content = pcdn_core::wire::ContentId([7; 32]);

    // The right CA and name: an answer.
    let good = TrackerClient::new(&format!("https://localhost:{port}"), None)
        .unwrap()
        .with_tracker_ca(&ca.cert)
        .unwrap();
    assert!(good.servers(&content, 8).await.unwrap().servers.is_empty());

    // A CA that did not sign the tracker's certificate.
    let untrusted = TrackerClient::new(&format!("https://localhost:{port}"), None)
        .unwrap()
        .with_tracker_ca(&stranger.cert)
        .unwrap();
    let detail = transport_detail(untrusted.servers(&content, 8).await.unwrap_err());
    assert!(
        detail.contains("UnknownIssuer") && detail.contains("--tracker-ca"),
        "{detail}"
    );

    // The certificate names localhost, not 127.0.0.1.
    let misnamed = TrackerClient::new(&format!("https://127.0.0.1:{port}"), None)
        .unwrap()
        .with_tracker_ca(&ca.cert)
        .unwrap();
    let detail = transport_detail(misnamed.servers(&content, 8).await.unwrap_err());
    assert!(
        detail.contains("not valid for name") && detail.contains("does not name this host"),
        "{detail}"
    );

    // Plain http to the HTTPS tracker: its JSON answer says to use https.
    let plain = TrackerClient::new(&format!("http://localhost:{port}"), None).unwrap();
    match plain.servers(&content, 8).await.unwrap_err() {
        TrackerError::Status {
            status, code, message, ..
        } => {
            assert_eq!((status, code.as_str()), (400, "https_required"));
            assert!(message.contains("https://"), "{message}");
        }
        other => panic!("expected a 400 https_required, got {other}"),
    }

    // https to a plain-HTTP tracker.
    let http_tracker = tracker(None).await;
    let wrong_scheme = TrackerClient::new(&format!("https://localhost:{}", http_tracker.local_addr().port()), None)
        .unwrap()
        .with_tracker_ca(&ca.cert)
        .unwrap();
    let detail = transport_detail(wrong_scheme.servers(&content, 8).await.unwrap_err());
    assert!(detail.contains("http:// URL"), "{detail}");

    // CA files: unreadable, not PEM, or given for an http:// URL.
    let missing = dir.path().join("missing.pem");
    let error = good.clone().with_tracker_ca(&missing).unwrap_err().to_string();
    assert!(
        error.contains(missing.to_str().unwrap()) && error.contains("cannot read"),
        "{error}"
    );
    let not_pem = dir.path().join("not.pem");
    std::fs::write(&not_pem, "hello").unwrap();
    let error = good.clone().with_tracker_ca(&not_pem).unwrap_err().to_string();
    assert!(
        error.contains(not_pem.to_str().unwrap()) && error.contains("no PEM CERTIFICATE"),
        "{error}"
    );
    let error = plain.with_tracker_ca(&ca.cert).unwrap_err().to_string();
    assert!(error.contains("https://"), "{error}");
    https_tracker.stop().await.unwrap();
    http_tracker.stop().await.unwrap();
}
