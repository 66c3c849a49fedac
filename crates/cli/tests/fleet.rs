//! The fleet end to end, real processes on loopback (issue #36, "Done when"): a tracker with
//! `--placement popularity`, an origin holding 10 contents, 3 edges starting empty with
//! `--cache-size`, and 24 `pcdn fetch` viewers, three at a time, choosing contents by a Zipf
//! law. Every file is byte-identical; the edges fill themselves from the origin (no `pcdn add`
//! on them); an edge killed mid-run costs no viewer its file and keeps its cache when it
//! restarts; the CDN share of the last quarter of viewers is below 50 %. With `--placement
//! none` the edges stay empty and the CDN serves everything.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{
    ONE_STACK_AT_A_TIME, Proc, add, enroll, free_tcp, free_udp, http_get, operator_dir, operator_init, pcdn,
    random_bytes,
};

const CONTENTS: usize = 10;
const CONTENT_BYTES: usize = 400_000;
const VIEWERS: usize = 24;
const AT_ONCE: usize = 3;
const EDGES: usize = 3;

/// The contents the viewers choose, in order: Zipf with exponent 1 over `CONTENTS` (content 0
/// the most popular), from a fixed xorshift seed.
fn zipf_choices(n: usize) -> Vec<usize> {
    let weights: Vec<f64> = (1..=CONTENTS).map(|k| 1.0 / k as f64).collect();
    let total: f64 = weights.iter().sum();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut u = (state >> 11) as f64 / (1u64 << 53) as f64 * total;
            for (k, w) in weights.iter().enumerate() {
                if u < *w {
                    return k;
                }
                u -= w;
            }
            CONTENTS - 1
        })
        .collect()
}

struct Fleet {
    dir: tempfile::TempDir,
    tracker_addr: std::net::SocketAddr,
    _tracker: Proc,
    _origin: Proc,
    edges: Vec<Option<Proc>>,
    edge_listen: Vec<std::net::SocketAddr>,
    ids: Vec<String>,
    files: Vec<PathBuf>,
}

impl Fleet {
    fn start(placement: &str) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        operator_init(dir.path());
        let tracker_addr = free_tcp();
        let tracker = Proc::spawn(
            "tracker",
            pcdn()
                .arg("tracker")
                .args(["--listen", &tracker_addr.to_string()])
                .arg("--store")
                .arg(format!("sqlite:{}", dir.path().join("t.db").display()))
                .arg("--operator-key")
                .arg(operator_dir(dir.path()).join("operator.pub"))
                .args(["--ttl", "3", "--heartbeat", "1"])
                .args(["--placement", placement, "--placement-interval", "1"])
                .args(["--lookup-rate", "0"]),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while http_get(tracker_addr, "/health").is_none_or(|(status, _)| status != 200) {
            assert!(Instant::now() < deadline, "tracker not healthy after 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        let origin_store = dir.path().join("origin");
        let mut ids = Vec::new();
        let mut files = Vec::new();
        for n in 0..CONTENTS {
            let file = dir.path().join(format!("video{n}.bin"));
            std::fs::write(&file, random_bytes(CONTENT_BYTES, n as u64)).unwrap();
            ids.push(add(&[file.as_os_str()], &origin_store));
            files.push(file);
        }
        // The CDN is the expensive, capped source; edges have more upload between them.
        let credential = enroll(dir.path(), "origin-1", "origin");
        let origin = Proc::spawn(
            "origin",
            pcdn()
                .arg("serve")
                .arg("--store")
                .arg(&origin_store)
                .args(["--listen", &free_udp().to_string()])
                .args(["--tracker", &format!("http://{tracker_addr}")])
                .arg("--credential")
                .arg(&credential)
                .args(["--upload-limit", "8mbit"]),
        );
        let mut fleet = Fleet {
            dir,
            tracker_addr,
            _tracker: tracker,
            _origin: origin,
            edges: Vec::new(),
            edge_listen: Vec::new(),
            ids,
            files,
        };
        for n in 0..EDGES {
            enroll(fleet.dir.path(), &format!("edge-{n}"), "edge");
            fleet.edge_listen.push(free_udp());
            let edge = fleet.spawn_edge(n);
            fleet.edges.push(Some(edge));
        }
        fleet.wait_until("the tracker lists every manifest and edge", |f| {
            f.ids.iter().all(|id| {
                http_get(f.tracker_addr, &format!("/v1/contents/{id}/manifest")).is_some_and(|(s, _)| s == 200)
            }) && f.edges.iter().flatten().all(|e| e.stderr_all().contains("registered"))
        });
        fleet
    }

    fn edge_store(&self, n: usize) -> PathBuf {
        self.dir.path().join(format!("edge{n}"))
    }

    /// `pcdn serve` for edge `n`: an empty store (never `pcdn add`ed to) made a 2.4 MB cache.
    fn spawn_edge(&self, n: usize) -> Proc {
        Proc::spawn(
            &format!("edge-{n}"),
            pcdn()
                .arg("serve")
                .arg("--store")
                .arg(self.edge_store(n))
                .args(["--listen", &self.edge_listen[n].to_string()])
                .args(["--tracker", &format!("http://{}", self.tracker_addr)])
                .arg("--credential")
                .arg(operator_dir(self.dir.path()).join(format!("edge-{n}.cred")))
                .args(["--upload-limit", "40mbit"])
                .args(["--cache-size", "2.4MB", "--fill-rate", "100mbit"]),
        )
    }

    /// The contents edge `n`'s store holds.
    fn held(&self, n: usize) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.edge_store(n).join("contents")) else {
            return Vec::new();
        };
        let mut held: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.len() == 64)
            .collect();
        held.sort();
        held
    }

    fn wait_until(&self, what: &str, check: impl Fn(&Fleet) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while !check(self) {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn start_viewer(&self, viewer: usize, content: usize) -> (Child, PathBuf) {
        let out = self.dir.path().join(format!("viewer{viewer}.bin"));
        let child = pcdn()
            .arg("fetch")
            .arg(&self.ids[content])
            .args(["--tracker", &format!("http://{}", self.tracker_addr)])
            .arg("-o")
            .arg(&out)
            .args(["--json", "--timeout", "120s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        (child, out)
    }

    /// Waits for a viewer, checks its file byte for byte; its CDN share.
    fn finish_viewer(&self, viewer: usize, content: usize, child: Child, out: &Path) -> f64 {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "viewer {viewer} (content {content}) failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            std::fs::read(out).unwrap() == std::fs::read(&self.files[content]).unwrap(),
            "viewer {viewer} got other bytes than content {content}"
        );
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        report["cdn_share"].as_f64().unwrap()
    }

    /// Runs viewers `range`, `AT_ONCE` at a time; calls `mid_wave` once the first wave started.
    fn run_viewers(&self, range: std::ops::Range<usize>, choices: &[usize], mut mid_wave: impl FnMut()) -> Vec<f64> {
        let mut shares = Vec::new();
        let viewers: Vec<usize> = range.collect();
        for (wave, group) in viewers.chunks(AT_ONCE).enumerate() {
            let running: Vec<_> = group
                .iter()
                .map(|&v| (v, choices[v], self.start_viewer(v, choices[v])))
                .collect();
            if wave == 0 {
                mid_wave();
            }
            for (v, content, (child, out)) in running {
                shares.push(self.finish_viewer(v, content, child, &out));
            }
        }
        shares
    }
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

#[test]
fn popularity_placement_fills_empty_edges_and_takes_most_bytes_off_the_cdn() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut fleet = Fleet::start("popularity");
    let choices = zipf_choices(VIEWERS);
    let quarter = VIEWERS / 4;

    // The first quarter: empty edges, the lookups make popularity.
    let first = fleet.run_viewers(0..quarter, &choices, || {});
    // The two most watched contents reach the edges (the placement round, the heartbeat, the fill).
    let top: Vec<String> = vec![fleet.ids[0].clone(), fleet.ids[1].clone()];
    fleet.wait_until("the edges filled the most popular contents", |f| {
        top.iter().all(|id| (0..EDGES).any(|n| f.held(n).contains(id)))
    });

    // The second quarter: edge 0 killed while the first wave downloads.
    let killed_held = fleet.held(0);
    assert!(!killed_held.is_empty() || (1..EDGES).any(|n| !fleet.held(n).is_empty()));
    let mut killed = fleet.edges[0].take().unwrap();
    let second = fleet.run_viewers(quarter..2 * quarter, &choices, || killed.kill());
    drop(killed);

    // Restarted: what it held is still there, served without a refetch (the index owns it).
    let held_before_restart = fleet.held(0);
    assert!(
        killed_held.iter().all(|id| held_before_restart.contains(id)),
        "the killed edge lost cached contents"
    );
    fleet.edges[0] = Some(fleet.spawn_edge(0));
    let index = std::fs::read_to_string(fleet.edge_store(0).join("cache.json")).unwrap_or_default();
    assert!(
        held_before_restart.iter().all(|id| index.contains(id.as_str())),
        "the restarted edge's index does not own what it holds: {index}"
    );
    fleet.wait_until("the restarted edge announced its cache again", |f| {
        held_before_restart.iter().all(|id| {
            http_get(f.tracker_addr, &format!("/v1/contents/{id}/servers"))
                .is_some_and(|(s, body)| s == 200 && body.contains("\"edge-0\""))
        })
    });

    let rest = fleet.run_viewers(2 * quarter..VIEWERS, &choices, || {});
    let last_quarter = &rest[rest.len() - quarter..];
    let cdn_last = mean(last_quarter);
    eprintln!(
        "CDN share: first quarter {:.2}, second {:.2}, last {:.2}",
        mean(&first),
        mean(&second),
        cdn_last
    );
    assert!(
        cdn_last < 0.5,
        "CDN share of the last quarter {cdn_last:.2}, expected < 0.5"
    );
    assert!(
        cdn_last < mean(&first),
        "the CDN share did not fall: first quarter {:.2}, last {cdn_last:.2}",
        mean(&first)
    );
    // Everything the edges hold came from fills: the cache index owns it, nothing is pinned.
    for n in 0..EDGES {
        let index = std::fs::read_to_string(fleet.edge_store(n).join("cache.json")).unwrap_or_default();
        for id in fleet.held(n) {
            assert!(index.contains(&id), "edge-{n} holds {id} outside its cache");
        }
    }
    assert!((0..EDGES).map(|n| fleet.held(n).len()).sum::<usize>() >= 2);
}

#[test]
fn without_placement_empty_edges_stay_empty_and_the_cdn_serves_everything() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fleet = Fleet::start("none");
    let choices = zipf_choices(2 * AT_ONCE);
    let shares = fleet.run_viewers(0..2 * AT_ONCE, &choices, || {});
    // Two placement intervals and heartbeats later, still nothing assigned.
    std::thread::sleep(Duration::from_secs(3));
    let shares_after = fleet.run_viewers(0..AT_ONCE, &choices, || {});
    assert!(
        shares.iter().chain(&shares_after).all(|&s| s == 1.0),
        "{shares:?} {shares_after:?}"
    );
    for n in 0..EDGES {
        assert!(fleet.held(n).is_empty(), "edge-{n} filled without placement");
    }
}
