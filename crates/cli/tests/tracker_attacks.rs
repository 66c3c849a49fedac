//! Attacks on a real `pcdn tracker` process over real TCP connections (issue 40's tracker
//! points): idle connections beyond a 1,024 open-file limit, a slowloris connection (alone and
//! during SIGTERM), made-up HTTP methods against `/metrics`, and a flood of requests from one
//! source address while another is served.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Proc, free_tcp, http_get, pcdn};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// `pcdn tracker` on `addr` with an in-memory store and `extra` flags, under `prefix` (e.g.
/// `prlimit`); waits until `/health` answers.
fn start(dir: &Path, addr: SocketAddr, prefix: &[&str], extra: &[&str]) -> Proc {
    if !common::operator_dir(dir).join("operator.pub").exists() {
        common::operator_init(dir);
    }
    let mut command = match prefix.split_first() {
        Some((program, args)) => {
            let mut command = Command::new(program);
            command.args(args).arg(assert_cmd::cargo::cargo_bin("pcdn"));
            command
        }
        None => pcdn(),
    };
    command
        .arg("tracker")
        .args(["--listen", &addr.to_string(), "--store", "sqlite::memory:"])
        .arg("--operator-key")
        .arg(common::operator_dir(dir).join("operator.pub"))
        .args(extra)
        .env("RUST_LOG", "info");
    let proc = Proc::spawn("tracker", &mut command);
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_get(addr, "/health").is_none_or(|(status, _)| status != 200) {
        assert!(
            Instant::now() < deadline,
            "tracker on {addr} not healthy after 30 s: {}",
            proc.stderr_tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    proc
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// One answer read from a keep-alive HTTP/1.1 connection.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// Sends one request on `stream` and reads its answer (bodies have a content-length).
async fn request(stream: &mut TcpStream, method: &str, path: &str, body: &str) -> std::io::Result<Answer> {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: tracker\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    let mut raw = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..split]).into_owned();
            let length: usize = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())
                        .flatten()
                })
                .unwrap_or(0);
            while raw.len() < split + 4 + length {
                let n = stream.read(&mut chunk).await?;
                if n == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                raw.extend_from_slice(&chunk[..n]);
            }
            let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
            let body = String::from_utf8_lossy(&raw[split + 4..split + 4 + length]).into_owned();
            return Ok(Answer { status, head, body });
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        raw.extend_from_slice(&chunk[..n]);
    }
}

/// A connection to `addr` from the loopback address `from`.
async fn connect_from(from: &str, addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(addr).await.unwrap()
}

/// The resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

#[test]
fn idle_connections_beyond_a_1024_fd_limit_leave_health_answering() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_tcp();
    // Soft and hard limit 1,024: raising the soft limit cannot help, the connection cap must.
    let mut tracker = start(dir.path(), addr, &["prlimit", "--nofile=1024:1024", "--"], &[]);
    let started = Instant::now();
    let mut idle = Vec::new();
    for _ in 0..1100 {
        idle.push(std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connect"));
    }
    let opened = started.elapsed();
    let asked = Instant::now();
    let health = http_get(addr, "/health");
    let answered = asked.elapsed();
    eprintln!("1,100 idle connections opened in {opened:?}; /health answered in {answered:?}: {health:?}");
    assert!(
        health.as_ref().is_some_and(|(status, _)| *status == 200),
        "/health did not answer beside 1,100 idle connections: {health:?}\n{}",
        tracker.stderr_tail()
    );
    let metrics = http_get(addr, "/metrics").expect("/metrics answers").1;
    let evicted = metrics
        .lines()
        .find_map(|line| line.strip_prefix("pcdn_tracker_connections_evicted_total "))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .expect("the eviction counter");
    assert!(evicted >= 100, "only {evicted} connections were evicted");
    drop(idle);
    tracker.terminate();
}

/// Sends `GET /health HTTP/1.1\r\n...` one byte a second until the tracker closes the
/// connection or `limit` passes; returns how long the connection stayed open.
fn slowloris(addr: SocketAddr, limit: Duration) -> Option<Duration> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(1000))).unwrap();
    let start = Instant::now();
    let header = b"GET /health HTTP/1.1\r\nhost: tracker\r\nx-padding: "
        .iter()
        .chain(std::iter::repeat(&b'a'));
    for &byte in header {
        if start.elapsed() > limit {
            return None;
        }
        if stream.write_all(&[byte]).is_err() {
            return Some(start.elapsed());
        }
        let mut answer = [0u8; 256];
        match stream.read(&mut answer) {
            Ok(_) => return Some(start.elapsed()), // closed (0) or an error answer (408)
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(start.elapsed()),
        }
    }
    unreachable!("the header is endless")
}

#[test]
fn a_slowloris_connection_is_closed_after_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_tcp();
    let mut tracker = start(dir.path(), addr, &[], &["--header-timeout", "3"]);
    let open_for = slowloris(addr, Duration::from_secs(40));
    eprintln!("slowloris connection open for {open_for:?} (header timeout 3 s)");
    let open_for = open_for.expect("the tracker kept a slowloris connection open for 40 s");
    assert!(open_for >= Duration::from_secs(2), "closed too early: {open_for:?}");
    tracker.terminate();
}

#[test]
fn sigterm_ends_the_tracker_within_the_deadline_despite_a_slowloris_connection() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_tcp();
    // A header timeout far beyond the test, so only the shutdown deadline can end it.
    let mut tracker = start(
        dir.path(),
        addr,
        &[],
        &["--header-timeout", "600", "--shutdown-deadline", "2"],
    );
    let loris = std::thread::spawn(move || slowloris(addr, Duration::from_secs(60)));
    std::thread::sleep(Duration::from_secs(2));
    let pid = tracker.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let asked = Instant::now();
    let status = loop {
        if let Some(status) = tracker.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(30),
            "the tracker did not exit within 30 s of SIGTERM with a slowloris connection open"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = asked.elapsed();
    eprintln!("tracker exited {took:?} after SIGTERM (deadline 2 s): {status}");
    assert!(status.success(), "{status}: {}", tracker.stderr_tail());
    assert!(
        loris.join().unwrap().is_some(),
        "the slowloris connection outlived the tracker"
    );
}

#[test]
fn made_up_methods_leave_metrics_small_and_memory_flat() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_tcp();
    let mut tracker = start(dir.path(), addr, &[], &[]);
    let pid = tracker.child.id();
    runtime().block_on(async {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        for i in 0..500 {
            request(&mut stream, &format!("WARM{i}"), "/health", "").await.unwrap();
        }
        let before = rss_kib(pid);
        let mut statuses = std::collections::BTreeMap::new();
        for i in 0..5000 {
            let answer = request(&mut stream, &format!("M{i:05}X"), "/health", "").await.unwrap();
            *statuses.entry(answer.status).or_insert(0) += 1;
        }
        let after = rss_kib(pid);
        let metrics = request(&mut stream, "GET", "/metrics", "").await.unwrap();
        let lines = metrics.body.lines().count();
        eprintln!(
            "5,000 made-up methods: answers {statuses:?}; RSS {before} -> {after} KiB; /metrics {lines} lines, {} bytes",
            metrics.body.len()
        );
        assert_eq!(statuses.get(&405), Some(&5000), "{statuses:?}");
        assert!(metrics.body.contains(r#"method="other",status="405""#), "{}", metrics.body);
        assert!(lines < 100, "/metrics has {lines} lines after 5,000 made-up methods");
        assert!(
            after < before + 4096,
            "the tracker's memory grew from {before} to {after} KiB"
        );
    });
    tracker.terminate();
}

#[test]
fn a_flood_from_one_source_gets_429s_while_another_source_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_tcp();
    // The default limits.
    let mut tracker = start(dir.path(), addr, &[], &[]);
    let lookup = format!("/v1/contents/{}/servers", "ab".repeat(32));
    runtime().block_on(async {
        // Quiet: the other source's lookup latency alone.
        let mut other = connect_from("127.0.0.2", addr).await;
        let mut quiet = Vec::new();
        for _ in 0..50 {
            let asked = Instant::now();
            let answer = request(&mut other, "GET", &lookup, "").await.unwrap();
            quiet.push(asked.elapsed());
            assert_eq!(answer.status, 200, "{}", answer.body);
        }

        // Flood from 127.0.0.1 on four connections until many refusals were seen.
        let started = Instant::now();
        let mut flooders = Vec::new();
        for _ in 0..4 {
            let lookup = lookup.clone();
            flooders.push(tokio::spawn(async move {
                let mut stream = connect_from("127.0.0.1", addr).await;
                let (mut ok, mut refused, mut retry_after) = (0u32, 0u32, None);
                while refused < 500 && started.elapsed() < Duration::from_secs(60) {
                    let answer = request(&mut stream, "GET", &lookup, "").await.unwrap();
                    match answer.status {
                        200 => ok += 1,
                        429 => {
                            refused += 1;
                            assert!(answer.body.contains(r#""error":"rate_limited""#), "{}", answer.body);
                            retry_after = answer
                                .head
                                .lines()
                                .find_map(|l| l.strip_prefix("retry-after: "))
                                .map(str::to_owned);
                        }
                        other => panic!("flood answer {other}: {}", answer.body),
                    }
                }
                (ok, refused, retry_after)
            }));
        }
        // Meanwhile the other source is served, reads and writes alike.
        let mut flooded = Vec::new();
        for _ in 0..50 {
            let asked = Instant::now();
            let answer = request(&mut other, "GET", &lookup, "").await.unwrap();
            flooded.push(asked.elapsed());
            assert_eq!(answer.status, 200, "the other source was refused: {}", answer.body);
        }
        let mut totals = (0, 0);
        for flooder in flooders {
            let (ok, refused, retry_after) = flooder.await.unwrap();
            totals.0 += ok;
            totals.1 += refused;
            if refused > 0 {
                assert!(retry_after.is_some_and(|s| s.parse::<u64>().is_ok_and(|s| s >= 1)));
            }
        }
        quiet.sort();
        flooded.sort();
        eprintln!(
            "flood from 127.0.0.1: {} served, {} refused with 429 in {:?}; 127.0.0.2's lookups: median {:?} quiet, {:?} flooded",
            totals.0,
            totals.1,
            started.elapsed(),
            quiet[quiet.len() / 2],
            flooded[flooded.len() / 2]
        );
        assert!(totals.1 >= 500, "the flood was refused only {} times", totals.1);

        // Writes have their own bucket: a flood of device requests is refused too...
        let mut writer = connect_from("127.0.0.1", addr).await;
        let mut write_refusals = 0;
        for _ in 0..2000 {
            let answer = request(&mut writer, "POST", "/v1/devices", "{}").await.unwrap();
            if answer.status == 429 {
                write_refusals += 1;
            }
        }
        assert!(write_refusals > 0, "2,000 device requests from one source were never refused");
        // ...while the other source's device requests reach the API (401: no credentials).
        let answer = request(&mut other, "POST", "/v1/devices", "{}").await.unwrap();
        assert_ne!(answer.status, 429, "{}", answer.body);
        let metrics = request(&mut other, "GET", "/metrics", "").await.unwrap();
        assert!(
            metrics.body.contains(r#"pcdn_tracker_rate_limited_total{class="lookup"}"#),
            "{}",
            metrics.body
        );
    });
    tracker.terminate();
}
