//! Edges with `--cache-size` against a real in-process tracker and origin on loopback: a fill
//! of an assigned content (announced, then served byte for byte), the disk budget and its
//! eviction order, a restart keeping the cache, an interrupted fill never served and resumed,
//! and the fill rate cap. The assignment is set by hand (`Cache::assign`), as a tracker's
//! placement would.

mod common;

use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::random_bytes;
use pcdn_core::wire::ContentId;
use pcdn_identity::{DeviceIdentity, OperatorKey, Role, unix_millis};
use pcdn_net::cache::CacheConfig;
use pcdn_net::{
    FetchConfig, FetchError, ServerConfig, ServerHandle, Store, TrackerClient, TrackerSettings, fetch, spawn_server,
};
use pcdn_tracker::{StoreUrl, TrackerConfig};

fn operator() -> OperatorKey {
    OperatorKey::from_secret([42; 32])
}

fn show_logs_on_failure() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("pcdn_net=info")
        .try_init();
}

/// Polls `check` until it holds; panics with `what` after 60 s (a loaded 2-core machine).
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn enroll(origin: bool) -> DeviceIdentity {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    let role = if origin { Role::Origin } else { Role::Edge };
    let id = format!("{role}-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let now = unix_millis();
    operator().enroll(&id, role, now, now / 1000 + 3600).unwrap()
}

/// A tracker, an origin holding `sizes.len()` contents of those sizes, and the contents' ids
/// and bytes.
struct World {
    dir: tempfile::TempDir,
    tracker: pcdn_tracker::RunningTracker,
    url: String,
    client: TrackerClient,
    origin: ServerHandle,
    contents: Vec<(ContentId, Vec<u8>)>,
}

impl World {
    async fn new(sizes: &[usize]) -> World {
        let dir = tempfile::tempdir().unwrap();
        let mut config = TrackerConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            StoreUrl::Sqlite(dir.path().join("tracker.db")),
            operator().public(),
        );
        config.ttl = Duration::from_secs(5);
        config.heartbeat = Duration::from_secs(1);
        let tracker = pcdn_tracker::bind(config).await.unwrap();
        let url = format!("http://{}", tracker.local_addr());
        let client = TrackerClient::new(&url, None).unwrap();
        let origin_store = Store::open(dir.path().join("origin")).unwrap();
        let mut contents = Vec::new();
        for (n, &size) in sizes.iter().enumerate() {
            let bytes = random_bytes(size, 1000 + n as u64);
            let file = dir.path().join(format!("content{n}.bin"));
            std::fs::write(&file, &bytes).unwrap();
            contents.push((origin_store.add(&file).unwrap(), bytes));
        }
        let mut origin_config = ServerConfig::new(dir.path().join("origin"), "127.0.0.1:0".parse().unwrap());
        origin_config.origin = true;
        origin_config.tracker = Some(TrackerSettings {
            url: url.clone(),
            identity: enroll(true),
        });
        let origin = spawn_server(origin_config).await.unwrap();
        let world = World {
            dir,
            tracker,
            url,
            client,
            origin,
            contents,
        };
        for (id, _) in &world.contents {
            let client = &world.client;
            eventually("the origin published its manifests", || async move {
                client.get_manifest(id).await.ok().flatten().is_some()
            })
            .await;
        }
        world
    }

    fn id(&self, n: usize) -> ContentId {
        self.contents[n].0
    }

    /// An edge caching into `store` with this budget and fill rate.
    async fn edge(&self, store: &Path, cache_bytes: u64, fill_rate_bps: u64, identity: DeviceIdentity) -> ServerHandle {
        let mut config = ServerConfig::new(store, "127.0.0.1:0".parse().unwrap());
        config.tracker = Some(TrackerSettings {
            url: self.url.clone(),
            identity,
        });
        config.cache = Some(CacheConfig {
            fill_rate_bps,
            ..CacheConfig::new(cache_bytes)
        });
        spawn_server(config).await.unwrap()
    }

    /// Fetches content `n` from `edge` alone (no origin, no tracker).
    async fn fetch_from(&self, edge: &ServerHandle, n: usize, out: &str) -> Result<Vec<u8>, FetchError> {
        let output = self.dir.path().join(out);
        let mut config = FetchConfig::new(self.id(n), &output);
        config.manifest = Some(
            Store::open(self.dir.path().join("origin"))
                .unwrap()
                .manifest_bytes(&self.id(n))
                .unwrap(),
        );
        config.origin_key = Some(self.origin.public_key());
        config.edges = Some(vec![edge.local_addr()]);
        config.handshake_attempts = 2;
        fetch(config).await?;
        Ok(std::fs::read(&output).unwrap())
    }

    async fn stop(self) {
        self.origin.shutdown().await.unwrap();
        self.tracker.stop().await.unwrap();
    }
}

async fn filled(edge: &ServerHandle, id: &ContentId) {
    let cache = edge.cache().unwrap().clone();
    eventually("the edge filled its content", || {
        let cache = cache.clone();
        async move { cache.entries().contains_key(id) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_edge_fills_its_assignment_at_the_fill_rate_announces_it_and_serves_it() {
    show_logs_on_failure();
    let world = World::new(&[3_000_000, 1_000_000]).await;
    let store = world.dir.path().join("edge");
    let edge = world.edge(&store, 100_000_000, 8_000_000, enroll(false)).await;
    let started = Instant::now();
    edge.cache().unwrap().assign(Some(vec![world.id(0)]));
    filled(&edge, &world.id(0)).await;
    let took = started.elapsed();
    // 3 MB at 8 Mbit/s take 3 s; loopback unshaped takes well under 0.3 s. Only a lower bound:
    // a loaded machine makes fills slower, never faster.
    assert!(
        took >= Duration::from_millis(2_100),
        "3 MB filled in {took:?}, faster than the 8 Mbit/s fill rate"
    );

    let client = &world.client;
    let edge_id = edge.id().to_owned();
    let id = world.id(0);
    eventually("the tracker lists the edge for the filled content", || {
        let edge_id = edge_id.clone();
        async move {
            client
                .servers(&id, 8)
                .await
                .is_ok_and(|l| l.servers.iter().any(|s| s.id == edge_id))
        }
    })
    .await;
    let bytes = world.fetch_from(&edge, 0, "out0").await.unwrap();
    assert!(
        bytes == world.contents[0].1,
        "the edge served other bytes than the origin's"
    );
    // Not assigned, not filled.
    assert!(!Store::open(&store).unwrap().list().unwrap().contains(&world.id(1)));
    let (budget, free) = edge.cache().unwrap().disk();
    assert_eq!(budget, 100_000_000);
    assert_eq!(free, 100_000_000 - 3_000_000);
    edge.shutdown().await.unwrap();
    world.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_holds_the_least_recently_served_is_evicted_and_pinned_content_stays() {
    show_logs_on_failure();
    let world = World::new(&[1_000_000, 1_000_000, 1_000_000]).await;
    let store = world.dir.path().join("edge");
    // Pinned: added by hand.
    let pinned_file = world.dir.path().join("pinned.bin");
    std::fs::write(&pinned_file, random_bytes(1_500_000, 7)).unwrap();
    let pinned = Store::open(&store).unwrap().add(&pinned_file).unwrap();
    // Room for the pinned content and two of the three.
    let budget = 1_500_000 + 2_000_000 + 500_000;
    let edge = world.edge(&store, budget, 400_000_000, enroll(false)).await;
    let cache = edge.cache().unwrap().clone();
    assert_eq!(cache.pinned().unwrap(), vec![pinned]);

    cache.assign(Some(vec![world.id(0), world.id(1)]));
    filled(&edge, &world.id(0)).await;
    filled(&edge, &world.id(1)).await;
    // Content 0 served after both were filled: content 1 is the least recently served.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(world.fetch_from(&edge, 0, "out0").await.unwrap() == world.contents[0].1);

    cache.assign(Some(vec![world.id(2)]));
    filled(&edge, &world.id(2)).await;
    let held = Store::open(&store).unwrap().list().unwrap();
    assert!(held.contains(&pinned), "the pinned content was evicted");
    assert!(held.contains(&world.id(0)), "the recently served content was evicted");
    assert!(
        !held.contains(&world.id(1)),
        "the least recently served content was kept"
    );
    assert!(held.contains(&world.id(2)));
    assert!(
        cache.used_bytes() <= budget,
        "{} bytes used of a {budget}-byte budget",
        cache.used_bytes()
    );
    // An evicted content is no longer served.
    assert!(world.fetch_from(&edge, 1, "out1").await.is_err());

    // Nothing unassigned is small enough to make room for a content larger than the budget
    // allows beside the pinned one: the fill is refused, nothing is evicted.
    cache.assign(Some(vec![world.id(0), world.id(1), world.id(2)]));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held_after = Store::open(&store).unwrap().list().unwrap();
    assert_eq!(
        held_after, held,
        "assigned contents were evicted for one that cannot fit"
    );
    edge.shutdown().await.unwrap();
    world.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_the_cache_and_an_interrupted_fill_is_never_served_and_resumes() {
    show_logs_on_failure();
    let world = World::new(&[1_000_000, 8_000_000]).await;
    let store = world.dir.path().join("edge");
    let identity = enroll(false);
    let edge = world.edge(&store, 100_000_000, 400_000_000, identity.clone()).await;
    edge.cache().unwrap().assign(Some(vec![world.id(0)]));
    filled(&edge, &world.id(0)).await;
    edge.shutdown().await.unwrap();

    // Content 1 at 8 Mbit/s: about 8 s, stopped once the origin sent half of it.
    let edge = world.edge(&store, 100_000_000, 8_000_000, identity.clone()).await;
    assert!(
        edge.cache().unwrap().entries().contains_key(&world.id(0)),
        "the index was not reloaded"
    );
    let sent_before = world.origin.stats().bytes_out;
    edge.cache().unwrap().assign(Some(vec![world.id(0), world.id(1)]));
    let origin = &world.origin;
    eventually("the origin sent half of content 1", || async move {
        origin.stats().bytes_out - sent_before >= 4_000_000
    })
    .await;
    // Content 0 is held already: no fill of it.
    assert!(
        !Store::open(&store).unwrap().fill_dir(&world.id(0)).exists(),
        "content 0 was fetched again"
    );
    // Half filled: not served.
    let refused = world.fetch_from(&edge, 1, "out1-early").await;
    assert!(refused.is_err(), "a half-filled content was served");
    edge.shutdown().await.unwrap();
    let fill_dir = Store::open(&store).unwrap().fill_dir(&world.id(1));
    assert!(
        fill_dir.join("data.pcdn-partial").is_file(),
        "the partial fill was not kept"
    );

    // Restarted: content 0 served at once, content 1 resumed.
    let edge = world.edge(&store, 100_000_000, 400_000_000, identity).await;
    assert!(world.fetch_from(&edge, 0, "out0").await.unwrap() == world.contents[0].1);
    let sent_before = world.origin.stats().bytes_out;
    edge.cache().unwrap().assign(Some(vec![world.id(0), world.id(1)]));
    filled(&edge, &world.id(1)).await;
    let resent = world.origin.stats().bytes_out - sent_before;
    assert!(
        resent < 7_000_000,
        "the resumed fill fetched {resent} bytes of 8,000,000 again"
    );
    assert!(world.fetch_from(&edge, 1, "out1").await.unwrap() == world.contents[1].1);
    assert!(!fill_dir.exists());
    edge.shutdown().await.unwrap();
    world.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_needs_a_tracker_and_an_edge() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::new(dir.path().join("store"), "127.0.0.1:0".parse().unwrap());
    config.cache = Some(CacheConfig::new(1_000_000));
    let e = spawn_server(config.clone()).await.unwrap_err().to_string();
    assert!(e.contains("--cache-size needs --tracker"), "{e}");
    config.tracker = Some(TrackerSettings {
        url: "http://127.0.0.1:9".to_owned(),
        identity: enroll(true),
    });
    let e = spawn_server(config.clone()).await.unwrap_err().to_string();
    assert!(e.contains("--cache-size is for edges"), "{e}");
    // A damaged index is an error naming the file, not a silently emptied cache.
    config.tracker = Some(TrackerSettings {
        url: "http://127.0.0.1:9".to_owned(),
        identity: enroll(false),
    });
    Store::open(dir.path().join("store")).unwrap();
    std::fs::write(dir.path().join("store").join("cache.json"), "{not json").unwrap();
    let e = format!("{:#}", spawn_server(config).await.unwrap_err());
    assert!(e.contains("cache.json"), "{e}");
}
