//! The delivery stack end to end with real processes on loopback, run exactly as the README's
//! command lines: `pcdn tracker`, `pcdn add`, `pcdn emulate --config`, `pcdn serve`,
//! `pcdn fetch`. An origin and four edges sit behind emulated links, one of them at 10% loss.

mod common;

use std::io::Write;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{Link, ONE_STACK_AT_A_TIME, http_get, pcdn, start_tracker};

/// Deterministic, incompressible test data.
fn sample(len: usize, seed: u8) -> Vec<u8> {
    let mut out = vec![0u8; len];
    blake3::Hasher::new_keyed(&[seed; 32])
        .update(b"stack test")
        .finalize_xof()
        .fill(&mut out);
    out
}

/// An origin and four edges, one at 10% loss; about 65 Mbit/s of loss-adjusted capacity.
const LINKS: [Link; 5] = [
    Link {
        name: "origin",
        origin: true,
        down: r#"{ rate = "20mbit", delay = "10ms" }"#,
    },
    Link {
        name: "edge-1",
        origin: false,
        down: r#"{ rate = "12mbit", delay = "15ms" }"#,
    },
    Link {
        name: "edge-2",
        origin: false,
        down: r#"{ rate = "12mbit", delay = "20ms" }"#,
    },
    Link {
        name: "edge-3",
        origin: false,
        down: r#"{ rate = "12mbit", delay = "25ms" }"#,
    },
    Link {
        name: "edge-4",
        origin: false,
        down: r#"{ rate = "12mbit", delay = "15ms", loss = 0.1 }"#,
    },
];

/// The shared stack holding one file of incompressible bytes.
struct Stack {
    stack: common::Stack,
    data: Vec<u8>,
}

impl Deref for Stack {
    type Target = common::Stack;

    fn deref(&self) -> &common::Stack {
        &self.stack
    }
}

impl DerefMut for Stack {
    fn deref_mut(&mut self) -> &mut common::Stack {
        &mut self.stack
    }
}

impl Stack {
    fn start(size: usize) -> Stack {
        let dir = tempfile::tempdir().unwrap();
        let data = sample(size, 7);
        let file = dir.path().join("sample.bin");
        std::fs::write(&file, &data).unwrap();
        let stack = common::Stack::start(dir, &LINKS, |store| common::add(&[file.as_os_str()], store));
        Stack { stack, data }
    }

    fn fetch(&self, out: &Path, scheduler: &str) -> Child {
        self.fetch_with(out, scheduler, &[])
    }

    fn fetch_with(&self, out: &Path, scheduler: &str, extra: &[&str]) -> Child {
        pcdn()
            .arg("fetch")
            .arg(&self.content)
            .args(["--tracker", &format!("http://{}", self.tracker_addr)])
            .arg("-o")
            .arg(out)
            .args(["--scheduler", scheduler, "--json"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Waits for a fetch; returns its JSON report after checking the file byte for byte.
    fn finish(&self, child: Child, out: &Path) -> serde_json::Value {
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "pcdn fetch failed: {stderr}");
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "--json output is one object ({e}): {}",
                String::from_utf8_lossy(&output.stdout)
            )
        });
        let fetched = std::fs::read(out).unwrap();
        assert!(fetched == self.data, "{} differs from the original", out.display());
        let leftovers: Vec<PathBuf> = std::fs::read_dir(out.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains("partial"))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
        report
    }

    fn path_report<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
        report["paths"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no path {name} in {report}"))
    }
}

#[test]
fn twenty_megabytes_through_the_emulator_with_a_lossy_edge_arrive_byte_identical() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stack = Stack::start(20_000_000);
    let out = stack.dir.path().join("out.bin");
    let report = stack.finish(stack.fetch(&out, "default"), &out);
    assert_eq!(report["bytes"], 20_000_000);
    // Every server took part, the lossy one included, and nothing was corrupt.
    for link in &LINKS {
        let path = Stack::path_report(&report, link.name);
        assert!(
            path["bytes"].as_u64().unwrap() > 0,
            "{} sent nothing: {path}",
            link.name
        );
        assert_eq!(path["banned"], false);
    }
    assert!(Stack::path_report(&report, "edge-4")["losses"].as_u64().unwrap() > 0);
    assert_eq!(report["blocks_rejected"], 0);
}

#[test]
fn an_edge_killed_mid_download_does_not_stop_it() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut stack = Stack::start(30_000_000);
    let out = stack.dir.path().join("out.bin");
    // Three timeouts in a row (about 1.5 s of silence) fail a server, so the dead edge is
    // declared failed well before the other four finish.
    let child = stack.fetch_with(&out, "default", &["--max-timeouts", "3"]);
    std::thread::sleep(Duration::from_millis(1000));
    stack.servers[1].kill();
    let report = stack.finish(child, &out);
    let killed = Stack::path_report(&report, "edge-1");
    assert_ne!(killed["outcome"], "ok", "the killed edge's path failed: {killed}");
}

#[test]
fn an_edge_serving_corrupt_data_is_banned_and_the_file_is_still_right() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stack = Stack::start(8_000_000);
    // A bad disk: flip bytes all over edge-2's copy, under the running server.
    let data_file = stack
        .dir
        .path()
        .join("edge-2/contents")
        .join(&stack.content)
        .join("data");
    let mut bytes = std::fs::read(&data_file).unwrap();
    for i in (1000..bytes.len()).step_by(40_000) {
        bytes[i] ^= 0x5a;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(&data_file)
        .unwrap()
        .write_all(&bytes)
        .unwrap();
    let out = stack.dir.path().join("out.bin");
    let report = stack.finish(stack.fetch(&out, "default"), &out);
    assert!(report["blocks_rejected"].as_u64().unwrap() > 0, "{report}");
    let bad = Stack::path_report(&report, "edge-2");
    assert_eq!(bad["banned"], true, "{bad}");
    for good in ["origin", "edge-1", "edge-3", "edge-4"] {
        assert_eq!(
            Stack::path_report(&report, good)["banned"],
            false,
            "{good} banned: {report}"
        );
    }

    // pcdn fetch reported edge-2 to the tracker (smart ban): two more clients, from other
    // loopback addresses, make the three distinct reporters that quarantine it.
    let body = format!(
        r#"{{"device":"edge-2","content":"{}","reason":"corrupt"}}"#,
        stack.content
    );
    let (status, second) = common::http_post_from([127, 0, 0, 2].into(), stack.tracker_addr, "/v1/reports", &body);
    assert_eq!(status, 200, "{second}");
    assert!(
        second.contains(r#""reporters":2"#),
        "the fetch's report counts: {second}"
    );
    let (_, third) = common::http_post_from([127, 0, 0, 3].into(), stack.tracker_addr, "/v1/reports", &body);
    assert!(third.contains(r#""quarantined":true"#), "{third}");
    let (_, servers) =
        common::http_get(stack.tracker_addr, &format!("/v1/contents/{}/servers", stack.content)).unwrap();
    assert!(!servers.contains("edge-2") && servers.contains("edge-1"), "{servers}");
}

#[test]
fn the_tracker_restarted_mid_download_does_not_disturb_it() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut stack = Stack::start(20_000_000);
    let out = stack.dir.path().join("out.bin");
    let child = stack.fetch(&out, "default");
    std::thread::sleep(Duration::from_millis(1000));
    stack.tracker.terminate();
    std::thread::sleep(Duration::from_millis(500));
    stack.tracker = start_tracker(stack.dir.path(), stack.tracker_addr);
    let report = stack.finish(child, &out);
    for link in &LINKS {
        assert_eq!(Stack::path_report(&report, link.name)["outcome"], "ok", "{report}");
    }
    // The restarted tracker still knows every device (its SQLite store kept them).
    stack.wait_for_registry();
    // SIGTERM: a server exits 0 and deregisters, so lookups stop naming it at once.
    stack.servers[3].terminate();
    let (status, body) = http_get(stack.tracker_addr, &format!("/v1/contents/{}/servers", stack.content)).unwrap();
    assert_eq!(status, 200);
    let lookup: serde_json::Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = lookup["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(!names.contains(&LINKS[3].name), "{names:?}");
}
