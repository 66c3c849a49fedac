//! Attacks on a real server (`spawn_server`, UDP on 127.0.0.x) beside a legitimate fetch from
//! another address: the fetch completes byte-identical, and its time under each flood is
//! printed beside its quiet time (`--nocapture`; docs/testing.md, "Attacks tried").

mod common;

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use common::Lab;
use pcdn_core::wire::{self, ContentId, Message, SeqRange};
use pcdn_net::{ServerConfig, ServerHandle, Store, fetch, spawn_server};
use tokio::net::UdpSocket;

const CONTENT: usize = 2_000_000;

async fn serve(store: &std::path::Path, edit: impl FnOnce(&mut ServerConfig)) -> ServerHandle {
    let mut config = ServerConfig::new(store, "127.0.0.1:0".parse().unwrap());
    edit(&mut config);
    spawn_server(config).await.unwrap()
}

/// Fetches the lab's content from `server` (from 127.0.0.1) and checks it; returns the time.
async fn timed_fetch(lab: &Lab, server: &ServerHandle, name: &str) -> Duration {
    let output = lab.out_dir().join(name);
    let mut config = lab.fetch_config(&output, &[server], &[]);
    config.timeout = Some(Duration::from_secs(60));
    let start = Instant::now();
    let result = fetch(config).await;
    let took = start.elapsed();
    let report = result.unwrap_or_else(|e| panic!("{name}: the legitimate fetch failed after {took:?}: {e}"));
    assert_eq!(report.bytes, lab.data.len() as u64);
    assert!(
        std::fs::read(&output).unwrap() == lab.data,
        "{name}: the output differs"
    );
    took
}

fn hello(conn_id: u64, content: ContentId) -> Vec<u8> {
    let mut out = Vec::new();
    wire::encode_hello(&mut out, &wire::Hello { conn_id, content });
    out
}

fn request(conn_id: u64, token: &[u8], request_id: u64, ranges: &[SeqRange]) -> Vec<u8> {
    let mut out = Vec::new();
    wire::encode_request(&mut out, conn_id, token, request_id, ranges).unwrap();
    out
}

/// Sends a HELLO from `socket` and returns the WELCOME's token, skipping other datagrams.
async fn handshake(socket: &UdpSocket, server: SocketAddr, conn_id: u64, content: ContentId) -> Option<Vec<u8>> {
    socket.send_to(&hello(conn_id, content), server).await.unwrap();
    let mut buf = vec![0u8; 2048];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while let Ok(Ok((n, _))) = tokio::time::timeout_at(deadline, socket.recv_from(&mut buf)).await {
        if let Ok(Message::Welcome(w)) = wire::decode(&buf[..n]) {
            if w.conn_id == conn_id {
                return Some(w.token.to_vec());
            }
        }
    }
    None
}

/// Reads and drops whatever waits on `socket`.
fn discard(socket: &UdpSocket) {
    let mut buf = [0u8; 2048];
    while socket.try_recv_from(&mut buf).is_ok() {}
}

/// A session flood: from `ips` (four ports each), at `rate` datagrams per second, opens
/// sessions (HELLO, then a one-packet REQUEST) and keeps every one alive with a REQUEST every
/// 2 s, until `stop`. Counts the sessions it asked for in `asked`.
async fn session_flood(
    server: SocketAddr,
    content: ContentId,
    ips: Vec<IpAddr>,
    rate: f64,
    stop: Arc<AtomicBool>,
    asked: Arc<AtomicU64>,
) {
    let mut sockets = Vec::new();
    for ip in &ips {
        for _ in 0..4 {
            sockets.push(UdpSocket::bind(SocketAddr::new(*ip, 0)).await.unwrap());
        }
    }
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    let mut sessions: VecDeque<(usize, u64, Vec<u8>, Instant)> = VecDeque::new();
    let one = [SeqRange { start: 0, len: 1 }];
    let mut conn_id = 0u64;
    while !stop.load(Relaxed) {
        tick.tick().await;
        if sessions.front().is_some_and(|s| s.3.elapsed() > Duration::from_secs(2)) {
            let (i, id, token, _) = sessions.pop_front().unwrap();
            sockets[i].send_to(&request(id, &token, 1, &one), server).await.unwrap();
            sessions.push_back((i, id, token, Instant::now()));
        } else {
            // Spread over every address and port.
            let i = conn_id as usize % sockets.len();
            conn_id += 1;
            discard(&sockets[i]);
            let Some(token) = handshake(&sockets[i], server, conn_id, content).await else {
                continue;
            };
            tick.tick().await;
            sockets[i]
                .send_to(&request(conn_id, &token, 1, &one), server)
                .await
                .unwrap();
            sessions.push_back((i, conn_id, token, Instant::now()));
            asked.fetch_add(1, Relaxed);
        }
        if conn_id % 16 == 0 {
            sockets.iter().for_each(discard);
        }
    }
}

/// Runs a session flood from `ips` against a server of at most `max_sessions`, waits until it
/// asked for `2 × max_sessions` sessions, and fetches beside it.
async fn fetch_beside_a_session_flood(ips: Vec<IpAddr>, label: &str) {
    let lab = Lab::new(CONTENT, 0);
    // 200 rather than the default 1,024: the flood fills it in seconds, not minutes.
    let max_sessions = 200;
    let server = serve(&lab.origin_store, |c| c.max_sessions = max_sessions).await;
    let quiet = timed_fetch(&lab, &server, "quiet.bin").await;

    let stop = Arc::new(AtomicBool::new(false));
    let asked = Arc::new(AtomicU64::new(0));
    let flood = tokio::spawn(session_flood(
        server.local_addr(),
        lab.id,
        ips,
        250.0,
        stop.clone(),
        asked.clone(),
    ));
    let start = Instant::now();
    while asked.load(Relaxed) < 2 * max_sessions as u64 {
        assert!(start.elapsed() < Duration::from_secs(60), "the flood got nowhere");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let attacker_sessions = server.stats().sessions;
    let flooded = timed_fetch(&lab, &server, "flooded.bin").await;
    stop.store(true, Relaxed);
    flood.await.unwrap();
    eprintln!(
        "{label}: {} sessions asked for in {:.1} s, {attacker_sessions} held; fetch of {CONTENT} bytes: quiet {:.2} s, flooded {:.2} s",
        asked.load(Relaxed),
        start.elapsed().as_secs_f64(),
        quiet.as_secs_f64(),
        flooded.as_secs_f64()
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_flood_from_one_address_leaves_room_for_a_fetch() {
    fetch_beside_a_session_flood(vec!["127.0.0.3".parse().unwrap()], "one address, 4 ports").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_flood_from_many_addresses_leaves_a_fair_share() {
    // 25 addresses x 16 sessions fill the 200-session table twice over.
    let ips = (1..=25).map(|i| format!("127.0.1.{i}").parse().unwrap()).collect();
    fetch_beside_a_session_flood(ips, "25 addresses").await;
}

/// Fills a session's request budget with `ranges` (4,096 numbers).
async fn fill(socket: &UdpSocket, server: SocketAddr, token: &[u8], ranges: &[SeqRange]) {
    for id in 0..4096 / ranges.len() as u64 {
        socket.send_to(&request(1, token, id, ranges), server).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_flood_does_not_slow_a_fetch() {
    // An upload cap keeps the attacker's queue full (its share drains at half the cap), which
    // is what makes a CANCEL walk expensive.
    let lab = Lab::new(CONTENT, 0);
    let server = serve(&lab.origin_store, |c| c.upload_limit_bps = Some(8_000_000)).await;
    let addr = server.local_addr();
    let quiet = timed_fetch(&lab, &server, "quiet.bin").await;

    let socket = UdpSocket::bind("127.0.0.3:0").await.unwrap();
    let token = handshake(&socket, addr, 1, lab.id).await.unwrap();
    // The whole budget as single numbers, 118 ranges per REQUEST (the most that fit).
    let singles: Vec<SeqRange> = (0..118).map(|i| SeqRange { start: 2 * i, len: 1 }).collect();
    fill(&socket, addr, &token, &singles).await;
    let with_queue = timed_fetch(&lab, &server, "beside-queue.bin").await;

    // The flood: 185 CANCELs a second of 119 numbers that are not queued (2 Mbit/s).
    fill(&socket, addr, &token, &singles).await;
    let missing: Vec<SeqRange> = (0..119)
        .map(|i| SeqRange {
            start: 2 * i + 1,
            len: 1,
        })
        .collect();
    let mut cancel = Vec::new();
    wire::encode_cancel(&mut cancel, 1, &token, &missing).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let flood = {
        let (stop, sent, cancel) = (stop.clone(), sent.clone(), cancel.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / 185.0));
            let mut n = 0u64;
            while !stop.load(Relaxed) {
                tick.tick().await;
                socket.send_to(&cancel, addr).await.unwrap();
                n += 1;
                if n % 20 == 0 {
                    // Keep the queue full: what was sent is asked for again.
                    socket.send_to(&request(1, &token, n, &singles), addr).await.unwrap();
                    discard(&socket);
                }
                sent.fetch_add(1, Relaxed);
            }
        })
    };
    let flooded = timed_fetch(&lab, &server, "flooded.bin").await;
    stop.store(true, Relaxed);
    flood.await.unwrap();
    eprintln!(
        "CANCEL flood ({} sent, {cancel_len} bytes each): fetch of {CONTENT} bytes at an 8 Mbit/s cap: quiet {:.2} s, beside a full queue {:.2} s, flooded {:.2} s",
        sent.load(Relaxed),
        quiet.as_secs_f64(),
        with_queue.as_secs_f64(),
        flooded.as_secs_f64(),
        cancel_len = cancel.len(),
    );
    // A generous margin: only a flood that costs the server real work moves the fetch this far.
    assert!(
        flooded.as_secs_f64() < 2.0 * with_queue.as_secs_f64() + 2.0,
        "flooded {flooded:?} against {with_queue:?} beside the same queue without CANCELs"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datagrams_shorter_than_a_reject_are_dropped() {
    // docs/protocol.md §7.7: a REJECT (19 bytes) answers only a datagram at least as long.
    let lab = Lab::new(10_000, 0);
    let server = serve(&lab.origin_store, |_| {}).await;
    let socket = UdpSocket::bind("127.0.0.3:0").await.unwrap();
    let prefix = hello(0x0102_0304_0506_0708, lab.id);
    let mut buf = [0u8; 2048];
    for len in 1..wire::REJECT_LEN {
        socket.send_to(&prefix[..len], server.local_addr()).await.unwrap();
    }
    // Past all of those, one datagram of 19 bytes: its answer is the first thing to arrive.
    socket
        .send_to(&prefix[..wire::REJECT_LEN], server.local_addr())
        .await
        .unwrap();
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), socket.recv_from(&mut buf))
        .await
        .expect("the 19-byte datagram is answered")
        .unwrap();
    let Ok(Message::Reject(reject)) = wire::decode(&buf[..n]) else {
        panic!("expected a REJECT, got {:?}", &buf[..n]);
    };
    assert_eq!(reject.reason, wire::Reason::Malformed);
    assert_eq!(reject.conn_id, 0x0102_0304_0506_0708, "the conn_id of the datagram");
    let late = tokio::time::timeout(Duration::from_millis(500), socket.recv_from(&mut buf)).await;
    assert!(late.is_err(), "a second answer: {late:?}");
    assert_eq!(server.stats().dropped, wire::REJECT_LEN as u64 - 1);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_file_truncated_under_the_server_is_refused_and_others_are_served() {
    let lab = Lab::new(CONTENT, 0);
    // A second content in the same store.
    let other_data = common::random_bytes(300_000, 7);
    let other_file = lab.dir.path().join("other.bin");
    std::fs::write(&other_file, &other_data).unwrap();
    let store = Store::open(&lab.origin_store).unwrap();
    let other = store.add(&other_file).unwrap();
    let server = serve(&lab.origin_store, |_| {}).await;
    let addr = server.local_addr();

    let socket = UdpSocket::bind("127.0.0.3:0").await.unwrap();
    let token = handshake(&socket, addr, 1, lab.id).await.unwrap();
    let mut buf = [0u8; 2048];
    socket
        .send_to(&request(1, &token, 1, &[SeqRange { start: 0, len: 1 }]), addr)
        .await
        .unwrap();
    let (n, _) = socket.recv_from(&mut buf).await.unwrap();
    assert!(matches!(wire::decode(&buf[..n]), Ok(Message::Data(_))), "served before");

    // Cut the file to half under the running server, then ask for a packet past the cut.
    let data = store.data_path(&lab.id);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&data)
        .unwrap()
        .set_len(CONTENT as u64 / 2)
        .unwrap();
    let last = (CONTENT as u64).div_ceil(1024) - 1;
    socket
        .send_to(&request(1, &token, 2, &[SeqRange { start: last, len: 1 }]), addr)
        .await
        .unwrap();
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), socket.recv_from(&mut buf))
        .await
        .expect("an answer")
        .unwrap();
    match wire::decode(&buf[..n]) {
        Ok(Message::Reject(r)) => assert_eq!((r.reason, r.request_id), (wire::Reason::UnknownContent, 2)),
        other => panic!("expected REJECT UnknownContent, got {other:?}"),
    }
    // A new HELLO for it is refused: the length no longer matches the manifest.
    socket.send_to(&hello(2, lab.id), addr).await.unwrap();
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), socket.recv_from(&mut buf))
        .await
        .expect("an answer")
        .unwrap();
    match wire::decode(&buf[..n]) {
        Ok(Message::Reject(r)) => assert_eq!(r.reason, wire::Reason::UnknownContent),
        other => panic!("expected REJECT UnknownContent, got {other:?}"),
    }

    // The server lives on and serves the other content whole.
    let output = lab.out_dir().join("other.bin");
    let mut config = pcdn_net::FetchConfig::new(other, &output);
    config.manifest = Some(store.manifest_bytes(&other).unwrap());
    config.origin_key = Some(store.public_key());
    config.edges = Some(Vec::new());
    config.origins = vec![addr];
    config.timeout = Some(Duration::from_secs(60));
    fetch(config).await.unwrap();
    assert!(std::fs::read(&output).unwrap() == other_data);
    server.shutdown().await.unwrap();
}
