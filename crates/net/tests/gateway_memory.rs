//! `pcdn play`'s gateway gives back what a reader held when the reader leaves: 40 readers ask
//! for a whole 8 MB content over real TCP, read the head and stop reading (a paused player),
//! then disconnect. The gateway's own count of bodies and queued bytes (`/status`) returns to
//! zero, and its anonymous memory (`RssAnon` of this process, from /proc) neither grows by the
//! readers' queued chunks nor stays up after they left.
//!
//! Alone in its test binary, so no other test allocates in the process while it measures.

use pcdn_core::wire::ContentId;
use pcdn_net::play::{ContentBuffer, router};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const ID: ContentId = ContentId([0xcd; 32]);
const READERS: usize = 40;

/// This process's anonymous resident memory, bytes (`RssAnon`, proc(5)): heap and stacks, not
/// file pages.
fn rss_anon() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .expect("RssAnon in /proc/self/status");
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

async fn status(base: &str) -> serde_json::Value {
    reqwest::get(format!("{base}/status"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Waits up to 30 s for `/status` to satisfy `done`.
async fn status_until(base: &str, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = status(base).await;
        if done(&now) || Instant::now() > deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_that_stop_reading_and_leave_give_their_memory_back() {
    let mut data = vec![0u8; 8_000_000];
    blake3::Hasher::new().update(b"memory").finalize_xof().fill(&mut data);
    let (mut buffer, content) = ContentBuffer::new(ID, data.len() as u64, None).unwrap();
    buffer.append(&data).unwrap();
    drop(data);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router(content)).await.unwrap() });
    let base = format!("http://{addr}");
    // Warm up: one reader served to the end, so the runtime's own buffers exist already.
    let whole = reqwest::get(format!("{base}/content/{}", hex::encode(ID.0)))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(whole.len(), 8_000_000);
    drop(whole);
    let before = rss_anon();

    let mut readers = Vec::new();
    for _ in 0..READERS {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET /content/{} HTTP/1.1\r\nHost: x\r\n\r\n", hex::encode(ID.0));
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut head = [0u8; 64];
        stream.read_exact(&mut head).await.unwrap();
        readers.push(stream);
    }
    let stalled = status_until(&base, |s| s["readers"] == READERS).await;
    assert_eq!(stalled["readers"], READERS, "{stalled}");
    // Let the sockets fill and the gateway queue what it will.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stalled = status(&base).await;
    let queued = stalled["reader_buffered_bytes"].as_u64().unwrap();
    let during = rss_anon();
    drop(readers);
    let left = status_until(&base, |s| s["readers"] == 0 && s["reader_buffered_bytes"] == 0).await;
    let after = rss_anon();
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    eprintln!(
        "{READERS} stalled readers: {:.1} MiB queued in chunks; RssAnon {:.1} MiB before, {:.1} while stalled, {:.1} after they left",
        mib(queued),
        mib(before),
        mib(during),
        mib(after)
    );
    assert_eq!(left["readers"], 0, "bodies still alive after every reader left: {left}");
    assert_eq!(left["reader_buffered_bytes"], 0, "{left}");
    // Queued chunks are mappings of the buffer file, not heap: 40 readers with ~0.5 MB each in
    // heap chunks grew RssAnon by ~20 MiB and it stayed there; the margin is a quarter of that.
    let margin = 5 << 20;
    assert!(
        during.saturating_sub(before) < margin,
        "stalled readers grew anonymous memory by {:.1} MiB",
        mib(during - before)
    );
    assert!(
        after.saturating_sub(before) < margin,
        "{:.1} MiB of anonymous memory stayed after the readers left",
        mib(after - before)
    );
}
