//! What `pcdn fetch` says when servers are missing, with real processes (tracker, emulator,
//! servers, fetch): each case's message says what is wrong and what to do (issue #41).

mod common;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use common::{Link, ONE_STACK_AT_A_TIME, Stack, http_get, pcdn};

const LINKS: [Link; 2] = [
    Link {
        name: "origin",
        origin: true,
        down: r#"{ rate = "50mbit", delay = "5ms" }"#,
    },
    Link {
        name: "edge-1",
        origin: false,
        down: r#"{ rate = "50mbit", delay = "5ms" }"#,
    },
];

/// A file of `len` bytes that differs with `seed`.
fn sample(dir: &Path, name: &str, len: usize, seed: u8) -> std::path::PathBuf {
    let mut data = vec![0u8; len];
    blake3::Hasher::new_keyed(&[seed; 32])
        .update(b"fetch errors")
        .finalize_xof()
        .fill(&mut data);
    let file = dir.join(name);
    std::fs::write(&file, data).unwrap();
    file
}

/// The origin and edge-1 hold one 1 MB file.
fn start() -> Stack {
    let dir = tempfile::tempdir().unwrap();
    let file = sample(dir.path(), "a.bin", 1_000_000, 1);
    Stack::start(dir, &LINKS, |store| common::add(&[file.as_os_str()], store))
}

fn fetch(stack: &Stack, content: &str, out: &str, extra: &[&str]) -> Output {
    pcdn()
        .arg("fetch")
        .arg(content)
        .args(["--tracker", &stack.tracker_url()])
        .arg("-o")
        .arg(stack.dir.path().join(out))
        .args(extra)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap()
}

fn failed(output: &Output) -> String {
    assert!(!output.status.success(), "the fetch succeeded");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn succeeded(output: &Output) -> String {
    assert!(
        output.status.success(),
        "the fetch failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn a_content_no_live_server_holds_is_reported_as_such_with_what_to_do() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut stack = start();
    // Both stop (and deregister); the tracker keeps the origin's manifest.
    stack.servers[1].terminate();
    stack.servers[0].terminate();
    let e = failed(&fetch(&stack, &stack.content, "out.bin", &[]));
    for needle in [
        format!("no live server holds {}", stack.content),
        "no live edge announced it".to_owned(),
        "the origin that published it".to_owned(),
        "is not live".to_owned(),
        "pcdn serve --store DIR".to_owned(),
    ] {
        assert!(e.contains(&needle), "{needle:?} missing from:\n{e}");
    }
    assert!(
        !e.contains("not a trusted origin key") && !e.contains("pass --origin-key"),
        "{e}"
    );
}

#[test]
fn a_content_only_an_edge_holds_says_that_the_origin_must_publish_it() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stack = start();
    let file = sample(stack.dir.path(), "b.bin", 200_000, 2);
    let only_edge = common::add(&[file.as_os_str()], &stack.dir.path().join("edge-1"));
    // The running edge finds it in its store and announces it.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !http_get(stack.tracker_addr, &format!("/v1/contents/{only_edge}/servers"))
        .is_some_and(|(status, body)| status == 200 && body.contains("\"edge-1\""))
    {
        assert!(Instant::now() < deadline, "edge-1 did not announce {only_edge} in 60 s");
        std::thread::sleep(Duration::from_millis(200));
    }
    let e = failed(&fetch(&stack, &only_edge, "out.bin", &[]));
    for needle in [
        format!("has no manifest for {only_edge}"),
        "edge-1 holds it".to_owned(),
        "only an origin publishes manifests".to_owned(),
        "live origins: origin".to_owned(),
        "pcdn add FILE --store ORIGIN_DIR".to_owned(),
    ] {
        assert!(e.contains(&needle), "{needle:?} missing from:\n{e}");
    }
}

#[test]
fn a_dead_server_is_reported_as_no_answer_and_only_dead_servers_fail_naming_them() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut stack = start();
    // SIGKILL: edge-1 stays registered (until its ttl) and listed, but answers nothing.
    stack.servers[1].kill();
    let text = succeeded(&fetch(&stack, &stack.content, "text.bin", &[]));
    let edge_row = text
        .lines()
        .find(|l| l.starts_with("edge-1 "))
        .unwrap_or_else(|| panic!("no edge-1 row in:\n{text}"));
    assert!(edge_row.ends_with("no answer"), "{edge_row}");
    assert!(text.contains("never answered"), "{text}");
    let json = succeeded(&fetch(&stack, &stack.content, "json.bin", &["--json"]));
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let paths = report["paths"].as_array().unwrap();
    let edge = paths.iter().find(|p| p["name"] == "edge-1").unwrap();
    assert_eq!(
        (&edge["outcome"], &edge["answered"]),
        (&"no answer".into(), &false.into()),
        "{edge}"
    );
    let origin = paths.iter().find(|p| p["name"] == "origin").unwrap();
    assert_eq!(
        (&origin["outcome"], &origin["answered"]),
        (&"ok".into(), &true.into()),
        "{origin}"
    );

    // With every listed server dead: a line while waiting, then an error naming each.
    stack.servers[0].kill();
    let e = failed(&fetch(&stack, &stack.content, "none.bin", &[]));
    for needle in [
        "edge-1 (127.0.0.1:",
        "origin (127.0.0.1:",
        "has not answered for 3 s",
        "no answer to 4 HELLOs in 15 s",
        "check that `pcdn serve` runs at 127.0.0.1:",
    ] {
        assert!(e.contains(needle), "{needle:?} missing from:\n{e}");
    }
}
