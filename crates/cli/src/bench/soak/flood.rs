//! The floods of `pcdn bench soak`: what issue 40's hostile user sends at the edges (UDP) and
//! at the tracker (HTTP), each a task that runs at its own rate until told to stop, counting
//! what it sent.

use pcdn_core::wire::{self, ContentId, SeqRange};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpStream, UdpSocket};

/// Rates and sizes of the floods. Each is issue 40's figure for the attack where it gives one.
#[derive(Clone, Debug)]
pub struct FloodConfig {
    /// Connection ids one source opens on each server (the server's default cap is 1,024).
    pub sessions: u64,
    /// REQUESTs per second keeping those sessions alive (issue 40: ~250 datagrams/s).
    pub keepalive_per_s: u64,
    /// CANCELs per second, each for 1,000 packets (issue 40: ~185/s held a core).
    pub cancels_per_s: u64,
    /// Datagrams of 7-18 bytes per second (issue 40: the sizes answered with a 19-byte reject).
    pub short_per_s: u64,
    /// HELLOs for contents nobody holds, per second (issue 40: 10,000 HELLOs).
    pub hellos_per_s: u64,
    /// Idle TCP connections held open to the tracker (issue 40: ~1,020 exhausted 1,024 fds).
    pub idle_connections: usize,
    /// Requests with made-up HTTP methods per second (issue 40: 50,000 grew memory 9 → 113 MB).
    pub methods_per_s: u64,
    /// Manifest PUTs per second, each `manifest_bytes` long (issue 40: up to 16 MiB kept).
    pub manifests_per_s: u64,
    pub manifest_bytes: usize,
    /// Lookups per second of the content the bench registered many holders of (issue 40: 45
    /// lookups/s of a 100,000-holder content held the tracker).
    pub holder_lookups_per_s: u64,
}

impl Default for FloodConfig {
    fn default() -> FloodConfig {
        FloodConfig {
            sessions: 2048,
            keepalive_per_s: 250,
            cancels_per_s: 200,
            short_per_s: 500,
            hellos_per_s: 500,
            idle_connections: 1000,
            methods_per_s: 200,
            manifests_per_s: 1,
            manifest_bytes: 8 << 20,
            holder_lookups_per_s: 400,
        }
    }
}

/// What every flood sent, by name.
#[derive(Default)]
pub struct Counts(pub HashMap<&'static str, AtomicU64>);

impl Counts {
    pub fn new(names: &[&'static str]) -> Counts {
        Counts(names.iter().map(|n| (*n, AtomicU64::new(0))).collect())
    }
    pub fn add(&self, name: &'static str, n: u64) {
        if let Some(c) = self.0.get(name) {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }
    /// (name, count) sorted by name.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        let mut out: Vec<_> = self.0.iter().map(|(n, c)| (*n, c.load(Ordering::Relaxed))).collect();
        out.sort();
        out
    }
}

pub const FLOODS: [&str; 9] = [
    "udp_sessions",
    "udp_keepalive_requests",
    "udp_cancels",
    "udp_short_datagrams",
    "udp_unknown_hellos",
    "tcp_idle_connections",
    "http_made_up_methods",
    "http_large_manifest_puts",
    "http_many_holders_lookups",
];

/// The running floods; `stop` ends them.
pub struct Floods {
    pub counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Floods {
    pub async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Sleeps to hold `per_s` events a second in batches of `batch`.
fn batch_pause(per_s: u64, batch: u64) -> Duration {
    Duration::from_secs_f64(batch as f64 / per_s.max(1) as f64)
}

/// Starts every flood against `servers` (UDP) and `tracker` (HTTP).
pub fn start(config: &FloodConfig, servers: &[SocketAddr], tracker: SocketAddr, content: ContentId) -> Floods {
    let counts = Arc::new(Counts::new(&FLOODS));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for &server in servers {
        tasks.push(tokio::spawn(sessions(
            config.clone(),
            server,
            content,
            counts.clone(),
            stop.clone(),
        )));
        tasks.push(tokio::spawn(garbage(
            config.clone(),
            server,
            counts.clone(),
            stop.clone(),
        )));
    }
    tasks.push(tokio::spawn(idle_connections(
        config.idle_connections,
        tracker,
        counts.clone(),
        stop.clone(),
    )));
    tasks.push(tokio::spawn(methods(
        config.methods_per_s,
        tracker,
        counts.clone(),
        stop.clone(),
    )));
    tasks.push(tokio::spawn(manifests(
        config.clone(),
        tracker,
        counts.clone(),
        stop.clone(),
    )));
    tasks.push(tokio::spawn(super::holders::lookups(
        config.holder_lookups_per_s,
        tracker,
        counts.clone(),
        stop.clone(),
    )));
    Floods { counts, stop, tasks }
}

/// One source opens `sessions` connections for the real content, keeps them alive with one
/// REQUEST each in turn and CANCELs 1,000 packets on them, as a client that hogs a server.
async fn sessions(
    config: FloodConfig,
    server: SocketAddr,
    content: ContentId,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
) {
    let Ok(socket) = UdpSocket::bind("127.0.0.1:0").await else {
        return;
    };
    let mut tokens: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut out = Vec::with_capacity(wire::MAX_DATAGRAM);
    let mut buf = vec![0u8; 65536];
    let mut next_hello = 0u64;
    let mut turn = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    while !stop.load(Ordering::Relaxed) {
        tokio::select! {
            _ = tick.tick() => {
                // Open (or reopen) sessions, 64 per tick.
                for _ in 0..64 {
                    let conn_id = next_hello % config.sessions + 1;
                    next_hello += 1;
                    if tokens.contains_key(&conn_id) && next_hello % (config.sessions * 4) != 0 {
                        continue;
                    }
                    out.clear();
                    wire::encode_hello(&mut out, &wire::Hello { conn_id, content });
                    let _ = socket.send_to(&out, server).await;
                    counts.add("udp_sessions", 1);
                }
                let ids: Vec<u64> = tokens.keys().copied().collect();
                if ids.is_empty() {
                    continue;
                }
                let per_tick = |per_s: u64| (per_s / 50).max(1);
                for _ in 0..per_tick(config.keepalive_per_s) {
                    turn += 1;
                    let id = ids[(turn as usize) % ids.len()];
                    out.clear();
                    let range = [SeqRange { start: turn % 64, len: 1 }];
                    if wire::encode_request(&mut out, id, &tokens[&id], turn, &range).is_ok() {
                        let _ = socket.send_to(&out, server).await;
                        counts.add("udp_keepalive_requests", 1);
                    }
                }
                for _ in 0..per_tick(config.cancels_per_s) {
                    turn += 1;
                    let id = ids[(turn as usize) % ids.len()];
                    out.clear();
                    let ranges: Vec<SeqRange> = (0..100).map(|i| SeqRange { start: i * 10, len: 10 }).collect();
                    if wire::encode_cancel(&mut out, id, &tokens[&id], &ranges).is_ok() {
                        let _ = socket.send_to(&out, server).await;
                        counts.add("udp_cancels", 1);
                    }
                }
            }
            received = socket.recv_from(&mut buf) => {
                let Ok((n, _)) = received else { continue };
                if let Ok(wire::Message::Welcome(w)) = wire::decode(&buf[..n]) {
                    tokens.insert(w.conn_id, w.token.to_vec());
                }
            }
        }
    }
}

/// Short datagrams of 7-18 bytes and HELLOs for contents nobody holds.
async fn garbage(config: FloodConfig, server: SocketAddr, counts: Arc<Counts>, stop: Arc<AtomicBool>) {
    let Ok(socket) = UdpSocket::bind("127.0.0.1:0").await else {
        return;
    };
    let mut n = 0u64;
    let mut out = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..25 {
            n += 1;
            let len = 7 + (n % 12) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|i| (n as u8).wrapping_mul(31).wrapping_add(i as u8))
                .collect();
            let _ = socket.send_to(&bytes, server).await;
            counts.add("udp_short_datagrams", 1);
        }
        for _ in 0..25 * config.hellos_per_s / config.short_per_s.max(1) {
            n += 1;
            let mut id = [0u8; 32];
            id[..8].copy_from_slice(&n.to_le_bytes());
            out.clear();
            wire::encode_hello(
                &mut out,
                &wire::Hello {
                    conn_id: n,
                    content: ContentId(id),
                },
            );
            let _ = socket.send_to(&out, server).await;
            counts.add("udp_unknown_hellos", 1);
        }
        tokio::time::sleep(batch_pause(config.short_per_s, 25)).await;
    }
}

/// Idle TCP connections to the tracker, reopened when it closes them.
async fn idle_connections(target: usize, tracker: SocketAddr, counts: Arc<Counts>, stop: Arc<AtomicBool>) {
    let mut open: Vec<TcpStream> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        // Drop the ones the tracker closed (a read of 0 bytes or an error).
        let mut alive = Vec::with_capacity(open.len());
        for stream in open.drain(..) {
            let mut probe = [0u8; 1];
            match stream.try_read(&mut probe) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => alive.push(stream),
                _ => {}
            }
        }
        open = alive;
        while open.len() < target && !stop.load(Ordering::Relaxed) {
            match tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(tracker)).await {
                Ok(Ok(stream)) => {
                    counts.add("tcp_idle_connections", 1);
                    open.push(stream);
                }
                _ => break,
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One raw HTTP/1.1 request; the answer's status (0 when there is none).
async fn raw_request(tracker: SocketAddr, head: &str, body: &[u8]) -> u16 {
    let attempt = async {
        let mut stream = TcpStream::connect(tracker).await.ok()?;
        stream.write_all(head.as_bytes()).await.ok()?;
        stream.write_all(body).await.ok()?;
        let mut answer = vec![0u8; 64];
        let n = stream.read(&mut answer).await.ok()?;
        let text = String::from_utf8_lossy(&answer[..n]).into_owned();
        text.split(' ').nth(1)?.parse().ok()
    };
    tokio::time::timeout(Duration::from_secs(10), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or(0)
}

/// Requests with a made-up method each (`X1A2B3 /health`).
async fn methods(per_s: u64, tracker: SocketAddr, counts: Arc<Counts>, stop: Arc<AtomicBool>) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..10 {
            n += 1;
            let head = format!("X{n:X}M /health HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n");
            raw_request(tracker, &head, &[]).await;
            counts.add("http_made_up_methods", 1);
        }
        tokio::time::sleep(batch_pause(per_s, 10)).await;
    }
}

/// Large manifest PUTs for made-up contents, with no credentials.
async fn manifests(config: FloodConfig, tracker: SocketAddr, counts: Arc<Counts>, stop: Arc<AtomicBool>) {
    let body = vec![0x5au8; config.manifest_bytes];
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let head = format!(
            "PUT /v1/contents/{:064x}/manifest HTTP/1.1\r\nHost: soak\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            n,
            body.len()
        );
        raw_request(tracker, &head, &body).await;
        counts.add("http_large_manifest_puts", 1);
        tokio::time::sleep(batch_pause(config.manifests_per_s, 1)).await;
    }
}
