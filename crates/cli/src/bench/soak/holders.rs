//! The soak's many-holders flood: enrolled devices registered in bulk with signed requests, each
//! announcing one content, and a stream of lookups of that content (issue 40: a content with
//! 100,000 holders cut every other lookup from 60,000/s to 66/s).

use super::flood::Counts;
use pcdn_core::wire::ContentId;
use pcdn_identity::{OperatorKey, Role};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

/// Devices registered from one source address: register + announce each, under the tracker's
/// default write burst (500) so that the bulk load is not refused.
const DEVICES_PER_SOURCE: u64 = 200;
/// Registrars working at once, each over its own keep-alive connection.
const REGISTRARS: u64 = 8;
/// Sources the lookups come from, each under the tracker's default lookup rate (200/s).
const LOOKUP_SOURCES: u8 = 4;

/// The content every flood device holds (nobody serves it).
pub fn content() -> ContentId {
    ContentId([0x77; 32])
}

/// The `i`-th source address on loopback (127.1.0.0/16 and up), so that every source gets its
/// own rate-limit bucket at the tracker, as devices of many homes would.
fn source(i: u64) -> Ipv4Addr {
    let i = i + 1;
    Ipv4Addr::new(127, 1 + (i >> 16) as u8, (i >> 8) as u8, i as u8)
}

/// A keep-alive HTTP/1.1 connection from a chosen source address.
struct Connection {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Connection {
    async fn open(from: Ipv4Addr, tracker: SocketAddr) -> std::io::Result<Connection> {
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(from.into(), 0))?;
        let stream = tokio::time::timeout(Duration::from_secs(10), socket.connect(tracker))
            .await
            .map_err(|_| std::io::Error::other("connect timed out"))??;
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            buf: Vec::with_capacity(4096),
        })
    }

    /// Sends one request and reads its answer; the status.
    async fn request(&mut self, head: &str, body: &[u8]) -> std::io::Result<u16> {
        let exchange = async {
            // One write: a head and a body in two would wait out Nagle and a delayed ACK.
            let mut request = Vec::with_capacity(head.len() + body.len());
            request.extend_from_slice(head.as_bytes());
            request.extend_from_slice(body);
            self.stream.write_all(&request).await?;
            self.buf.clear();
            let mut chunk = [0u8; 4096];
            let end = loop {
                if let Some(at) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break at + 4;
                }
                let n = self.stream.read(&mut chunk).await?;
                if n == 0 {
                    return Err(std::io::Error::other("closed"));
                }
                self.buf.extend_from_slice(&chunk[..n]);
            };
            let head = String::from_utf8_lossy(&self.buf[..end]).to_ascii_lowercase();
            let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while self.buf.len() < end + length {
                let n = self.stream.read(&mut chunk).await?;
                if n == 0 {
                    return Err(std::io::Error::other("closed"));
                }
                self.buf.extend_from_slice(&chunk[..n]);
            }
            Ok(status)
        };
        tokio::time::timeout(Duration::from_secs(30), exchange)
            .await
            .map_err(|_| std::io::Error::other("timed out"))?
    }
}

/// One signed device request's head.
fn signed_head(identity: &pcdn_identity::DeviceIdentity, method: &str, path: &str, body: &[u8]) -> String {
    let nonce = pcdn_identity::request::random_nonce().unwrap_or([7; 16]);
    let authorization =
        pcdn_identity::request::device_authorization(identity, method, path, body, pcdn_identity::unix_millis(), nonce);
    format!(
        "{method} {path} HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\nContent-Length: {}\r\nAuthorization: {authorization}\r\n\r\n",
        body.len()
    )
}

/// Registers `holders` devices announcing [`content`]; how many the tracker took.
pub async fn register_all(holders: u64, operator: Arc<OperatorKey>, tracker: SocketAddr) -> u64 {
    let counts = Arc::new(Counts::new(&["tracker_holders_registered"]));
    let stop = Arc::new(AtomicBool::new(false));
    let sources = holders.div_ceil(DEVICES_PER_SOURCE);
    let registrars: Vec<_> = (0..REGISTRARS)
        .map(|r| {
            let (operator, counts, stop) = (operator.clone(), counts.clone(), stop.clone());
            tokio::spawn(async move {
                let mut s = r;
                while s < sources {
                    let first = s * DEVICES_PER_SOURCE;
                    let last = (first + DEVICES_PER_SOURCE).min(holders);
                    register(first..last, source(s), &operator, tracker, &counts, &stop).await;
                    s += REGISTRARS;
                }
            })
        })
        .collect();
    for r in registrars {
        let _ = r.await;
    }
    counts.snapshot().first().map_or(0, |c| c.1)
}

/// Looks [`content`] up `per_s` times a second, from a few source addresses, until stopped.
pub async fn lookups(per_s: u64, tracker: SocketAddr, counts: Arc<Counts>, stop: Arc<AtomicBool>) {
    let cid = pcdn_net::store::content_id_hex(&content());
    let tasks: Vec<_> = (0..LOOKUP_SOURCES)
        .map(|k| {
            let (counts, stop) = (counts.clone(), stop.clone());
            let head = format!("GET /v1/contents/{cid}/servers?n=8 HTTP/1.1\r\nHost: soak\r\n\r\n");
            let per_source = (per_s / u64::from(LOOKUP_SOURCES)).max(1);
            tokio::spawn(async move {
                let from = Ipv4Addr::new(127, 0, 2, 1 + k);
                let mut connection = None;
                let mut tick = tokio::time::interval(Duration::from_secs_f64(10.0 / per_source as f64));
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    for _ in 0..10 {
                        if connection.is_none() {
                            connection = Connection::open(from, tracker).await.ok();
                        }
                        let Some(c) = connection.as_mut() else { break };
                        match c.request(&head, &[]).await {
                            Ok(_) => counts.add("http_many_holders_lookups", 1),
                            Err(_) => connection = None,
                        }
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
}

/// Registers devices `range` from one source, each announcing [`content`].
async fn register(
    range: std::ops::Range<u64>,
    from: Ipv4Addr,
    operator: &OperatorKey,
    tracker: SocketAddr,
    counts: &Counts,
    stop: &AtomicBool,
) {
    let mut connection: Option<Connection> = None;
    let announce = serde_json::json!({ "contents": [pcdn_net::store::content_id_hex(&content())] }).to_string();
    for i in range {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let id = format!("holder-{i}");
        let now_ms = pcdn_identity::unix_millis();
        let Ok(identity) = operator.enroll(&id, Role::Edge, now_ms, now_ms / 1000 + 86_400) else {
            return;
        };
        let registration = serde_json::json!({
            "id": id,
            "addr": format!("10.{}.{}.{}:7801", (i >> 16) as u8, (i >> 8) as u8, 1 + i % 250),
            "origin": false,
            "upload_capacity_bps": 1_000_000 * (1 + i % 97),
        })
        .to_string();
        let contents_path = format!("/v1/devices/{id}/contents");
        let requests = [
            ("POST", "/v1/devices", registration.as_bytes()),
            ("PUT", contents_path.as_str(), announce.as_bytes()),
        ];
        for (method, path, body) in requests {
            // One retry on a fresh connection: the tracker closes idle or capped ones.
            for _ in 0..2 {
                if connection.is_none() {
                    connection = Connection::open(from, tracker).await.ok();
                }
                let Some(c) = connection.as_mut() else { continue };
                match c.request(&signed_head(&identity, method, path, body), body).await {
                    Ok(status) if status < 300 => {
                        if method == "PUT" {
                            counts.add("tracker_holders_registered", 1);
                        }
                        break;
                    }
                    Ok(_) => break,
                    Err(_) => connection = None,
                }
            }
        }
    }
}
