//! Ten viewers at one edge with an upload cap each get a tenth of it (issue 36, item 4): real
//! `pcdn serve --upload-limit` and ten `pcdn fetch` processes on loopback; each viewer's
//! verified bytes are counted in its partial file over a common window in the middle of the
//! run.

mod common;

use common::{Proc, free_udp, pcdn};
use std::path::Path;
use std::time::{Duration, Instant};

const BLOCK: usize = 64 << 10;
const VIEWERS: usize = 10;
/// The edge's upload cap, bit/s: 10 viewers at 4 Mbit/s each.
const CAP_BPS: f64 = 40e6;

/// Verified blocks of a viewer: the blocks of its partial file holding a byte other than zero
/// (the sample has no all-zero 64 KiB block); all of them once the file is complete.
fn blocks(dir: &Path, sample_len: usize) -> usize {
    if dir.join("out.bin").exists() {
        return sample_len.div_ceil(BLOCK);
    }
    std::fs::read(dir.join("out.bin.pcdn-partial"))
        .map(|bytes| bytes.chunks(BLOCK).filter(|b| b.iter().any(|&x| x != 0)).count())
        .unwrap_or(0)
}

#[test]
fn ten_viewers_at_one_capped_edge_each_get_a_tenth_of_its_cap() {
    let _one = common::ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    // 30 MB: at a fair 4 Mbit/s a viewer needs 60 s, so the window ends long before any does.
    let mut sample = vec![0u8; 30_000_000];
    blake3::Hasher::new()
        .update(b"fair share")
        .finalize_xof()
        .fill(&mut sample);
    std::fs::write(dir.join("sample.bin"), &sample).unwrap();
    let id = common::add(&[dir.join("sample.bin").as_os_str()], &dir.join("store"));
    let server = free_udp().to_string();
    let _serve = Proc::spawn(
        "serve",
        pcdn().arg("serve").arg("--store").arg(dir.join("store")).args([
            "--listen",
            &server,
            "--origin",
            "--upload-limit",
            "40mbit",
        ]),
    );
    let manifest = dir.join("store/contents").join(&id).join("manifest");
    let viewers: Vec<(std::path::PathBuf, Proc)> = (0..VIEWERS)
        .map(|i| {
            let home = dir.join(format!("viewer-{i}"));
            std::fs::create_dir(&home).unwrap();
            let proc = Proc::spawn(
                &format!("viewer-{i}"),
                pcdn()
                    .current_dir(&home)
                    .args(["fetch", &id, "--manifest"])
                    .arg(&manifest)
                    .args(["--origin-server", &server, "-o", "out.bin", "--json"]),
            );
            (home, proc)
        })
        .collect();

    // Every viewer under way, then 10 s for the viewers' congestion controls to settle.
    let deadline = Instant::now() + Duration::from_secs(120);
    while viewers.iter().any(|(home, _)| blocks(home, sample.len()) == 0) {
        assert!(Instant::now() < deadline, "not every viewer got a block in 120 s");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(10));
    let window = Duration::from_secs(30);
    let sample_all = || -> (Vec<usize>, Instant) {
        // One viewer's file at a time, the instant taken mid-way: the reads take milliseconds.
        let start = Instant::now();
        let counts = viewers.iter().map(|(home, _)| blocks(home, sample.len())).collect();
        (counts, start + start.elapsed() / 2)
    };
    let (before, t0) = sample_all();
    std::thread::sleep(window);
    let (after, t1) = sample_all();
    let seconds = (t1 - t0).as_secs_f64();
    let cap_bytes = CAP_BPS / 8.0 * seconds;
    let shares: Vec<f64> = before
        .iter()
        .zip(&after)
        .map(|(b, a)| ((a - b) * BLOCK) as f64 / cap_bytes)
        .collect();
    eprintln!(
        "shares of the cap over {seconds:.1} s: {:?}; total {:.3}",
        shares.iter().map(|s| format!("{:.3}", s)).collect::<Vec<_>>(),
        shares.iter().sum::<f64>()
    );
    for (i, share) in shares.iter().enumerate() {
        assert!(
            (0.07..=0.13).contains(share),
            "viewer {i} got {:.1} % of the cap (expected 10 % ± 3 %); all: {shares:?}",
            share * 100.0
        );
    }

    // And every viewer ends with the sample, byte for byte.
    for (i, (home, mut proc)) in viewers.into_iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(300);
        let status = loop {
            if let Some(status) = proc.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "viewer {i} did not finish in 300 s");
            std::thread::sleep(Duration::from_millis(200));
        };
        assert!(status.success(), "viewer {i}: {}", proc.stderr_tail());
        assert!(
            std::fs::read(home.join("out.bin")).unwrap() == sample,
            "viewer {i}'s file differs"
        );
    }
}
