//! An interrupted `pcdn fetch` (SIGTERM, then SIGINT) keeps only `OUT.pcdn-partial`, and the
//! same command resumes from its verified blocks: real processes (`pcdn add`, `pcdn serve`
//! with an upload cap so the fetch takes seconds, `pcdn fetch`) on loopback.

mod common;

use common::{Proc, free_udp, pcdn};
use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BLOCK: usize = 64 << 10;

/// Blocks of the partial file holding a byte other than zero: written by the fetch (the
/// sample has no all-zero 64 KiB block).
fn blocks_written(partial: &Path) -> usize {
    std::fs::read(partial)
        .map(|bytes| bytes.chunks(BLOCK).filter(|b| b.iter().any(|&x| x != 0)).count())
        .unwrap_or(0)
}

fn fetch_command(dir: &Path, id: &str, server: &str) -> Command {
    let mut command = pcdn();
    command
        .current_dir(dir)
        .args(["fetch", id, "--manifest"])
        .arg(dir.join("store/contents").join(id).join("manifest"))
        .args(["--origin-server", server, "-o", "out.bin", "--json"]);
    command
}

/// Starts a fetch, waits until the partial file holds `blocks` more blocks than `before`,
/// sends `signal` and checks the fetch exits as killed by it, keeping only the partial file.
fn interrupt(dir: &Path, id: &str, server: &str, before: usize, blocks: usize, signal: &str, code: i32) -> usize {
    let partial = dir.join("out.bin.pcdn-partial");
    let child = fetch_command(dir, id, server)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut fetch = Proc::adopt("fetch", child);
    let deadline = Instant::now() + Duration::from_secs(120);
    while blocks_written(&partial) < before + blocks {
        assert!(Instant::now() < deadline, "the fetch wrote no {blocks} blocks in 120 s");
        assert!(fetch.child.try_wait().unwrap().is_none(), "the fetch ended early");
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = Command::new("kill")
        .args([signal, &fetch.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = fetch.child.wait().unwrap();
    let mut stderr = String::new();
    fetch.child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(exit.code(), Some(code), "exit after {signal}: {stderr}");
    assert!(
        stderr.contains("interrupted by") && stderr.contains("out.bin.pcdn-partial"),
        "{stderr}"
    );
    // Nothing but the input, the store and the one partial file: no output, no stray names.
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["out.bin.pcdn-partial", "sample.bin", "store"]);
    blocks_written(&partial)
}

#[test]
fn an_interrupted_fetch_resumes_from_its_verified_blocks() {
    let _one = common::ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    // 10 MB that no 64 KiB block of zeros could be mistaken for.
    let mut sample = vec![0u8; 10_000_000];
    blake3::Hasher::new().update(b"resume").finalize_xof().fill(&mut sample);
    std::fs::write(dir.join("sample.bin"), &sample).unwrap();
    let id = common::add(&[dir.join("sample.bin").as_os_str()], &dir.join("store"));
    let server = free_udp().to_string();
    // 8 Mbit/s: the whole sample takes 10 s, so each run is interrupted midway.
    let _serve = Proc::spawn(
        "serve",
        pcdn().arg("serve").arg("--store").arg(dir.join("store")).args([
            "--listen",
            &server,
            "--origin",
            "--upload-limit",
            "8mbit",
        ]),
    );

    let after_term = interrupt(dir, &id, &server, 0, 16, "-TERM", 143);
    let after_int = interrupt(dir, &id, &server, after_term, 16, "-INT", 130);
    assert!(after_int >= after_term + 16, "{after_term} then {after_int} blocks");

    let out = fetch_command(dir, &id, &server)
        .timeout_output(Duration::from_secs(180))
        .expect("the last run finishes");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let resumed = report["resumed_bytes"].as_u64().unwrap();
    let fetched = report["bytes"].as_u64().unwrap();
    let received: u64 = report["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["bytes"].as_u64().unwrap())
        .sum();
    eprintln!("resumed {resumed} bytes, fetched {fetched}, received {received} payload bytes");
    assert!(resumed >= (after_int * BLOCK) as u64, "{resumed} < {after_int} blocks");
    assert_eq!(resumed + fetched, sample.len() as u64);
    assert!(
        received < sample.len() as u64 - resumed / 2,
        "the rerun received {received} bytes, as if from zero"
    );
    assert_eq!(std::fs::read(dir.join("out.bin")).unwrap(), sample);
    assert!(!dir.join("out.bin.pcdn-partial").exists());
}

/// `Command::output` with a deadline: the child is killed if it runs longer.
trait TimeoutOutput {
    fn timeout_output(&mut self, limit: Duration) -> Option<std::process::Output>;
}

impl TimeoutOutput for Command {
    fn timeout_output(&mut self, limit: Duration) -> Option<std::process::Output> {
        let mut child = self.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().ok()?;
        let deadline = Instant::now() + limit;
        while child.try_wait().ok()?.is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        child.wait_with_output().ok()
    }
}
