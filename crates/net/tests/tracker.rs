//! Servers and a fetch against a real in-process tracker (SQLite in a temporary directory):
//! registration, announcements and manifests; a tracker restart in the middle of a download;
//! a tracker that lost its state (devices register again); deregistration on shutdown.

mod common;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use common::{Lab, files_in};
use pcdn_identity::{DeviceIdentity, OperatorKey, Role, unix_millis};
use pcdn_net::tracker_client::Lookup;
use pcdn_net::{FetchConfig, ServerConfig, ServerHandle, TrackerClient, TrackerSettings, fetch, spawn_server};
use pcdn_tracker::{StoreUrl, TrackerConfig};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The operator key the test trackers trust.
fn operator() -> OperatorKey {
    OperatorKey::from_secret([42; 32])
}

fn tracker_config(listen: SocketAddr, store: StoreUrl) -> TrackerConfig {
    let mut config = TrackerConfig::new(listen, store, operator().public());
    config.ttl = Duration::from_secs(3);
    config.heartbeat = Duration::from_secs(1);
    config
}

/// Sends the devices' and the tracker's logs to the test's output, which libtest shows when the
/// test fails: a tracker outage's story (retries, re-registrations) is in them.
fn show_logs_on_failure() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("pcdn_net=info,pcdn_tracker=info")
        .try_init();
}

/// Polls `check` until it holds; panics with `what` after 20 s.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(std::time::Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A tracker on a free loopback port, its base URL, and a client of it.
async fn start_tracker(store: StoreUrl) -> (pcdn_tracker::RunningTracker, String, TrackerClient) {
    let tracker = pcdn_tracker::bind(tracker_config("127.0.0.1:0".parse().unwrap(), store))
        .await
        .unwrap();
    let url = format!("http://{}", tracker.local_addr());
    let client = TrackerClient::new(&url, None).unwrap();
    (tracker, url, client)
}

/// The lookup lists `edges` edges and `origins` origins, and the tracker has the manifest.
async fn listed(client: &TrackerClient, lab: &Lab, edges: usize, origins: usize) -> bool {
    let lookup: Option<Lookup> = client.servers(&lab.id, 8).await.ok();
    let manifest = client.get_manifest(&lab.id).await.ok().flatten();
    lookup.is_some_and(|l| l.servers.len() == edges && l.origins.len() == origins)
        && (origins == 0 || manifest.is_some())
}

/// A device enrolled now by the test operator under a fresh id.
fn enroll(origin: bool) -> DeviceIdentity {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    let role = if origin { Role::Origin } else { Role::Edge };
    let id = format!("{role}-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let now = unix_millis();
    operator().enroll(&id, role, now, now / 1000 + 3600).unwrap()
}

async fn serve(store: &std::path::Path, origin: bool, tracker: &str) -> ServerHandle {
    let mut config = ServerConfig::new(store, "127.0.0.1:0".parse().unwrap());
    config.origin = origin;
    config.upload_limit_bps = Some(16_000_000);
    config.tracker = Some(TrackerSettings {
        url: tracker.to_owned(),
        identity: enroll(origin),
    });
    spawn_server(config).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_survives_a_tracker_restart_and_devices_find_a_new_tracker() {
    show_logs_on_failure();
    let lab = Lab::new(5_000_000, 3);
    let db = lab.dir.path().join("tracker.db");
    let (tracker, url, client) = start_tracker(StoreUrl::Sqlite(db.clone())).await;
    let tracker_addr = tracker.local_addr();

    let origin = serve(&lab.origin_store, true, &url).await;
    let mut edges = Vec::new();
    for store in &lab.edge_stores {
        edges.push(serve(store, false, &url).await);
    }
    eventually("every device is registered and the manifest published", || {
        listed(&client, &lab, 3, 1)
    })
    .await;
    let lookup = client.servers(&lab.id, 8).await.unwrap();
    assert_eq!(lookup.origins[0].id, origin.id());
    assert_eq!(
        lookup.origins[0].public_key.as_deref(),
        Some(hex::encode(origin.public_key()).as_str())
    );

    // A fetch that knows only the tracker and the content id.
    let out_dir = lab.out_dir();
    let output = out_dir.join("video.bin");
    let mut config = FetchConfig::new(lab.id, &output);
    config.tracker = Some(url.clone());
    let download = tokio::spawn(fetch(config));
    while origin.stats().data_packets_out < 100 && !download.is_finished() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(
        !download.is_finished(),
        "the download ended before the tracker could be stopped"
    );
    let down_at = std::time::Instant::now();
    tracker.stop().await.unwrap();
    tracing::info!(stop_took = ?down_at.elapsed(), "tracker stopped");
    assert!(client.servers(&lab.id, 8).await.is_err(), "the tracker is down");
    // Down for a while, then back on the same address and database.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let tracker = pcdn_tracker::bind(tracker_config(tracker_addr, StoreUrl::Sqlite(db)))
        .await
        .unwrap();
    tracing::info!(down_for = ?down_at.elapsed(), "tracker restarted");

    let report = download.await.unwrap().unwrap();
    assert!(
        std::fs::read(&output).unwrap() == lab.data,
        "the output differs from the content"
    );
    assert_eq!(files_in(&out_dir), vec!["video.bin"]);
    let mut names: Vec<&str> = report.paths.iter().map(|p| p.name.as_str()).collect();
    names.sort();
    let mut ids: Vec<&str> = edges.iter().chain([&origin]).map(|s| s.id()).collect();
    ids.sort();
    assert_eq!(names, ids, "one path per device, named by its tracker id");
    eventually("the devices are listed again after the restart", || {
        listed(&client, &lab, 3, 1)
    })
    .await;

    // A tracker that lost everything: heartbeats meet 404, devices register and announce
    // again, and the origin publishes its manifest again.
    tracker.stop().await.unwrap();
    let tracker = pcdn_tracker::bind(tracker_config(tracker_addr, StoreUrl::SqliteMemory))
        .await
        .unwrap();
    assert!(!listed(&client, &lab, 3, 1).await, "a fresh tracker knows nobody");
    eventually("the devices registered with the fresh tracker", || {
        listed(&client, &lab, 3, 1)
    })
    .await;

    // A content imported while the devices run is announced, and the origin publishes its
    // manifest.
    let late = lab.dir.path().join("late.bin");
    std::fs::write(&late, common::random_bytes(70_000, 99)).unwrap();
    let late_id = pcdn_net::Store::open(&lab.origin_store).unwrap().add(&late).unwrap();
    assert_eq!(
        pcdn_net::Store::open(&lab.edge_stores[0]).unwrap().add(&late).unwrap(),
        late_id
    );
    let edge0 = edges[0].id().to_owned();
    eventually("the late content is announced and its manifest published", || {
        let client = client.clone();
        let edge0 = edge0.clone();
        async move {
            let servers = client.servers(&late_id, 8).await.ok();
            let manifest = client.get_manifest(&late_id).await.ok().flatten();
            servers.is_some_and(|l| l.servers.len() == 1 && l.servers[0].id == edge0) && manifest.is_some()
        }
    })
    .await;

    // A clean shutdown deregisters at once, without waiting for the ttl.
    for server in edges.into_iter().chain([origin]) {
        server.shutdown().await.unwrap();
    }
    let lookup = client.servers(&lab.id, 8).await.unwrap();
    assert!(lookup.servers.is_empty() && lookup.origins.is_empty(), "{lookup:?}");
    tracker.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_return_at_the_heartbeat_rate_after_a_long_tracker_outage() {
    show_logs_on_failure();
    let lab = Lab::new(100_000, 1);
    let db = lab.dir.path().join("tracker.db");
    let (tracker, url, client) = start_tracker(StoreUrl::Sqlite(db.clone())).await;
    let tracker_addr = tracker.local_addr();
    let origin = serve(&lab.origin_store, true, &url).await;
    let edge = serve(&lab.edge_stores[0], false, &url).await;
    eventually("both devices are registered", || listed(&client, &lab, 1, 1)).await;

    // Down for 5 s: past the 3 s ttl, so the restarted tracker has expired both devices, and
    // long enough that an uncapped doubling backoff (0.5, 1, 2, 4 s...) would wait 4 s more
    // and then 8 s after the "register again" answer.
    tracker.stop().await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let tracker = pcdn_tracker::bind(tracker_config(tracker_addr, StoreUrl::Sqlite(db)))
        .await
        .unwrap();
    let back = std::time::Instant::now();
    eventually("both devices are listed again", || listed(&client, &lab, 1, 1)).await;
    // Retries at the 1 s heartbeat rate, then at once after the "register again" answer.
    let took = back.elapsed();
    assert!(
        took < Duration::from_secs(6),
        "the devices came back {took:?} after the restart"
    );
    for server in [edge, origin] {
        server.shutdown().await.unwrap();
    }
    tracker.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_keeps_serving_while_its_tracker_is_unreachable() {
    // A tracker address nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let lab = Lab::new(300_000, 0);
    let origin = serve(&lab.origin_store, true, &url).await;
    let out_dir = lab.out_dir();
    let output = out_dir.join("x");
    let config = lab.fetch_config(&output, &[], &[&origin]);
    let report = fetch(config).await.unwrap();
    assert!(std::fs::read(&output).unwrap() == lab.data);
    assert_eq!(report.cdn_share, 1.0);
    origin.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_lookups_never_open_more_paths_than_the_cap() {
    show_logs_on_failure();
    // A slow origin keeps the fetch going through several re-lookups (about 16 s).
    let lab = Lab::new(2_000_000, 0);
    let (tracker, url, client) = start_tracker(StoreUrl::SqliteMemory).await;
    let mut config = ServerConfig::new(&lab.origin_store, "127.0.0.1:0".parse().unwrap());
    config.origin = true;
    config.upload_limit_bps = Some(1_000_000);
    config.tracker = Some(TrackerSettings {
        url: url.clone(),
        identity: enroll(true),
    });
    let origin = spawn_server(config).await.unwrap();
    eventually("the origin is registered and its manifest published", || {
        listed(&client, &lab, 0, 1)
    })
    .await;

    // Devices churn: a new edge every 300 ms, each with more capacity than the last (so each
    // lookup ranks the newest first), at a UDP address nothing answers on.
    let churn = {
        let (url, id) = (url.clone(), lab.id);
        tokio::spawn(async move {
            for i in 0u64.. {
                let identity = enroll(false);
                let device_id = identity.id().to_owned();
                let dead = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
                let edge = TrackerClient::new(&url, Some(identity)).unwrap();
                let registration = pcdn_net::tracker_client::Registration {
                    id: device_id.clone(),
                    addr: dead.to_string(),
                    origin: false,
                    upload_capacity_bps: 1_000_000_000 + i * 1000,
                    public_key: None,
                };
                edge.register(&registration).await.unwrap();
                edge.announce(&device_id, &[id]).await.unwrap();
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };
    eventually("the first edges are listed", || {
        let client = client.clone();
        let id = lab.id;
        async move { client.servers(&id, 8).await.is_ok_and(|l| l.servers.len() >= 4) }
    })
    .await;

    let out_dir = lab.out_dir();
    let output = out_dir.join("capped.bin");
    let mut config = FetchConfig::new(lab.id, &output);
    config.tracker = Some(url.clone());
    config.max_servers = 4;
    // A dead edge fails after one unanswered HELLO (1 s), and failures bring a re-lookup (one
    // per 5 s) naming four new edges: 20 paths in 16 s without the cap. The paths: 4 edges and
    // the origin; 4 more from the re-lookup at 1 s; the failures of those, 1 s later, bring
    // one at about 6 s, where the cap stops the fetch at 11.
    config.handshake_attempts = 1;
    config.max_paths = 11;
    let report = fetch(config).await.unwrap();
    churn.abort();
    assert!(std::fs::read(&output).unwrap() == lab.data, "the output differs");
    let names: Vec<&str> = report.paths.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names.len(), 11, "the cap is reached, never passed: {names:?}");
    assert_eq!(report.paths.iter().filter(|p| p.origin).count(), 1, "{names:?}");
    origin.shutdown().await.unwrap();
    tracker.stop().await.unwrap();
}

/// A device whose record at the tracker is replaced without it (another process registered
/// with its credential and another address) sees the new generation in its next heartbeat
/// answer and registers again, and a device whose record is removed sees the 404: either way it
/// is listed again with its own address and contents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_whose_record_changed_without_it_registers_again() {
    show_logs_on_failure();
    let lab = Lab::new(100_000, 1);
    let (tracker, url, client) = start_tracker(StoreUrl::Sqlite(lab.dir.path().join("tracker.db"))).await;
    let identity = enroll(false);
    let id = identity.id().to_owned();
    let mut config = ServerConfig::new(&lab.edge_stores[0], "127.0.0.1:0".parse().unwrap());
    config.tracker = Some(TrackerSettings {
        url: url.clone(),
        identity: identity.clone(),
    });
    let edge = spawn_server(config).await.unwrap();
    let own = edge.advertise().to_string();
    let listed_at = |addr: String| {
        let client = client.clone();
        let id = id.clone();
        let content = lab.id;
        async move {
            client
                .servers(&content, 8)
                .await
                .is_ok_and(|l| l.servers.iter().any(|s| s.id == id && s.addr == addr))
        }
    };
    eventually("the edge is listed at its address", || listed_at(own.clone())).await;

    let impostor = TrackerClient::new(&url, Some(identity)).unwrap();
    let elsewhere = pcdn_net::tracker_client::Registration {
        id: id.clone(),
        addr: "127.0.0.1:9".to_owned(),
        origin: false,
        upload_capacity_bps: 1,
        public_key: None,
    };
    let replaced = impostor.register(&elsewhere).await.unwrap();
    impostor.announce(&id, &[lab.id]).await.unwrap();
    assert!(replaced.generation >= 2, "{replaced:?}");
    eventually("the edge registers again over the replacement", || {
        listed_at(own.clone())
    })
    .await;
    let ours = impostor
        .heartbeat(
            &id,
            &pcdn_net::tracker_client::Heartbeat {
                sessions: 0,
                upload_bps: 0,
                healthy: true,
                cache_bytes: None,
                free_bytes: None,
            },
        )
        .await
        .unwrap();
    assert!(ours.generation > replaced.generation, "{ours:?} after {replaced:?}");

    impostor.deregister(&id).await.unwrap();
    eventually("the edge registers again after its removal", || listed_at(own.clone())).await;
    edge.shutdown().await.unwrap();
    tracker.stop().await.unwrap();
}
