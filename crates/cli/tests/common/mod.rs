//! Real-process stacks on loopback for the CLI's end-to-end tests: `pcdn tracker`, `pcdn add`,
//! `pcdn emulate --config` and one `pcdn serve` per emulated link, run as the README says.

#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Stacks run one at a time: each is several processes on a two-core machine.
pub static ONE_STACK_AT_A_TIME: Mutex<()> = Mutex::new(());

pub fn pcdn() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("pcdn"))
}

/// A child process killed when the test ends, whatever happens.
pub struct Proc {
    pub name: String,
    pub child: Child,
    /// What the process wrote to stderr (an unnamed temporary file), for failure messages.
    stderr: Option<File>,
}

impl Proc {
    pub fn spawn(name: &str, command: &mut Command) -> Proc {
        let log = tempfile::tempfile().expect("a temporary file for stderr");
        let child = command
            .stdout(Stdio::null())
            .stderr(log.try_clone().expect("a second handle on the stderr file"))
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        let mut proc = Proc::adopt(name, child);
        proc.stderr = Some(log);
        proc
    }

    /// Takes charge of a child started with other pipes.
    pub fn adopt(name: &str, child: Child) -> Proc {
        Proc {
            name: name.to_owned(),
            child,
            stderr: None,
        }
    }

    /// The last lines the process wrote to stderr, when spawned by [`Proc::spawn`].
    pub fn stderr_tail(&self) -> String {
        let Some(mut file) = self.stderr.as_ref() else {
            return String::new();
        };
        let mut text = String::new();
        let _ = file.seek(SeekFrom::Start(0));
        let _ = file.read_to_string(&mut text);
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }

    /// Everything the process wrote to stderr so far, when spawned by [`Proc::spawn`].
    pub fn stderr_all(&self) -> String {
        let Some(mut file) = self.stderr.as_ref() else {
            return String::new();
        };
        let mut text = String::new();
        let _ = file.seek(SeekFrom::Start(0));
        let _ = file.read_to_string(&mut text);
        text
    }

    /// SIGKILL: the process gets no chance to say goodbye (a crashed device).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait: a clean shutdown.
    pub fn terminate(&mut self) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -TERM {}", self.name);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(status.success(), "{} exited with {status} after SIGTERM", self.name);
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{} did not stop within 10 s of SIGTERM", self.name);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nothing listens on, below Linux's ephemeral range (32768–60999 by
/// default), each handed out once per test process. A port the kernel picked for a socket
/// bound to port 0 and then released goes back to that range, where any process's next
/// ephemeral socket may get it before the server meant for it binds it (a stack then waited
/// 60 s for an edge that had failed to start). The walk starts at an offset from the process
/// id, so test processes running side by side start apart.
/// `width` ports in a row are handed out at once (a tracker's UDP rendezvous takes its HTTP
/// port's number and the next), and `port + width` stays below 32768.
fn free_port(width: u32, bindable: impl Fn(u16) -> bool) -> u16 {
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(997) % SPAN;
    loop {
        let n = NEXT.fetch_add(width, Ordering::Relaxed);
        assert!(n < SPAN, "no free loopback port left below the ephemeral range");
        let port = u16::try_from(LOW + (start + n) % (SPAN - width)).expect("below 32768");
        if bindable(port) {
            return port;
        }
    }
}

pub fn free_udp() -> SocketAddr {
    let port = free_port(1, |p| UdpSocket::bind((Ipv4Addr::LOCALHOST, p)).is_ok());
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// A loopback port for a tracker: free for TCP, and for UDP together with the next one (its
/// rendezvous ports by default).
pub fn free_tcp() -> SocketAddr {
    let port = free_port(2, |p| {
        TcpListener::bind((Ipv4Addr::LOCALHOST, p)).is_ok()
            && UdpSocket::bind((Ipv4Addr::LOCALHOST, p)).is_ok()
            && UdpSocket::bind((Ipv4Addr::LOCALHOST, p + 1)).is_ok()
    });
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// A plain HTTP/1.0 GET, enough to watch the tracker without an HTTP client dependency.
pub fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    // Manifests are binary: only the head must be text.
    let response = String::from_utf8_lossy(&raw);
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((status, body))
}

/// A JSON POST over HTTP/1.0 from the loopback address `source` (127.0.0.x: another client to
/// the tracker, which tells clients apart by source address): the status and the body.
pub fn http_post_from(source: std::net::Ipv4Addr, addr: SocketAddr, path: &str, body: &str) -> (u16, String) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::from((source, 0))).unwrap();
        let mut stream = socket.connect(addr).await.unwrap();
        let request = format!(
            "POST {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut raw))
            .await
            .expect("the tracker answers within 30 s")
            .unwrap();
        let response = String::from_utf8_lossy(&raw).into_owned();
        let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap();
        let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
        (status, body)
    })
}

/// A GET over HTTP/1.0 for binary bodies: the status, the head's lines and the body bytes.
pub fn http_get_bytes(addr: SocketAddr, path: &str, extra_headers: &str) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{extra_headers}\r\n").unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("GET {path}: no HTTP head in {} bytes", raw.len()));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap();
    (status, head, raw[split + 4..].to_vec())
}

/// Runs `pcdn ARGS...` to completion, asserting success; its stdout.
pub fn pcdn_ok(args: &[&std::ffi::OsStr]) -> String {
    let output = pcdn().args(args).output().unwrap();
    assert!(
        output.status.success(),
        "pcdn {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The operator directory of a test directory.
pub fn operator_dir(dir: &Path) -> PathBuf {
    dir.join("operator")
}

/// `pcdn operator init DIR/operator`.
pub fn operator_init(dir: &Path) {
    pcdn_ok(&["operator".as_ref(), "init".as_ref(), operator_dir(dir).as_os_str()]);
}

/// `pcdn operator enroll DIR/operator --id ID --role ROLE -o DIR/operator/ID.cred`; the file.
pub fn enroll(dir: &Path, id: &str, role: &str) -> PathBuf {
    let credential = operator_dir(dir).join(format!("{id}.cred"));
    enroll_into(&operator_dir(dir), id, role, &credential);
    credential
}

/// `pcdn operator enroll OPERATOR --id ID --role ROLE -o CREDENTIAL`.
pub fn enroll_into(operator: &Path, id: &str, role: &str, credential: &Path) {
    pcdn_ok(&[
        "operator".as_ref(),
        "enroll".as_ref(),
        operator.as_os_str(),
        "--id".as_ref(),
        id.as_ref(),
        "--role".as_ref(),
        role.as_ref(),
        "-o".as_ref(),
        credential.as_os_str(),
    ]);
}

/// `pcdn tracker` on `addr` with a SQLite store in `dir`, trusting the operator of
/// `operator_init(dir)`; returns once it is healthy.
pub fn start_tracker(dir: &Path, addr: SocketAddr) -> Proc {
    let proc = Proc::spawn(
        "tracker",
        pcdn()
            .arg("tracker")
            .args(["--listen", &addr.to_string()])
            .arg("--store")
            .arg(format!("sqlite:{}", dir.join("t.db").display()))
            .arg("--operator-key")
            .arg(operator_dir(dir).join("operator.pub")),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while http_get(addr, "/health").is_none_or(|(status, _)| status != 200) {
        assert!(Instant::now() < deadline, "tracker on {addr} not healthy after 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    proc
}

/// `pcdn add INPUT... --store DIR`; the content id is the last line of stdout.
pub fn add(input: &[&std::ffi::OsStr], store: &Path) -> String {
    let output = pcdn()
        .arg("add")
        .args(input)
        .arg("--store")
        .arg(store)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "pcdn add: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let id = stdout.lines().last().unwrap().trim().to_owned();
    assert_eq!(id.len(), 64, "a content id is 64 hex digits: {stdout:?}");
    id
}

/// One emulated server: its data-direction link as a links-file table.
pub struct Link {
    pub name: &'static str,
    pub origin: bool,
    pub down: &'static str,
}

/// A tracker, one server per link (each with its own store) and the emulator in front of them.
pub struct Stack {
    pub dir: tempfile::TempDir,
    pub tracker_addr: SocketAddr,
    pub tracker: Proc,
    /// Index i is the i-th link's server.
    pub servers: Vec<Proc>,
    pub emulator: Proc,
    pub content: String,
    edges: usize,
    origins: usize,
}

impl Stack {
    /// Starts the stack in `dir`; `import(store)` puts the content into each server's store
    /// (every store must get the same id) and returns its id.
    pub fn start(dir: tempfile::TempDir, links: &[Link], import: impl Fn(&Path) -> String) -> Stack {
        operator_init(dir.path());
        let tracker_addr = free_tcp();
        let tracker = start_tracker(dir.path(), tracker_addr);

        let mut config = String::from("seed = 3\n");
        let mut content = None;
        let mut plan = Vec::new();
        for link in links {
            let store = dir.path().join(link.name);
            let id = import(&store);
            assert!(
                content.as_ref().is_none_or(|c| *c == id),
                "one input, one id in every store"
            );
            content = Some(id);
            let (listen, relay) = (free_udp(), free_udp());
            config.push_str(&format!(
                "[[relay]]\nlisten = \"{relay}\"\nto = \"{listen}\"\ndown = {}\n",
                link.down
            ));
            plan.push((link, store, listen, relay));
        }
        let links_file = dir.path().join("links.toml");
        std::fs::write(&links_file, config).unwrap();
        let emulator = Proc::spawn("emulator", pcdn().arg("emulate").arg("--config").arg(&links_file));
        let mut servers = Vec::new();
        for (link, store, listen, relay) in plan {
            let credential = enroll(dir.path(), link.name, if link.origin { "origin" } else { "edge" });
            let mut command = pcdn();
            command
                .arg("serve")
                .arg("--store")
                .arg(&store)
                .args(["--listen", &listen.to_string()])
                .args(["--tracker", &format!("http://{tracker_addr}")])
                .arg("--credential")
                .arg(&credential)
                .args(["--advertise", &relay.to_string()]);
            servers.push(Proc::spawn(link.name, &mut command));
        }
        let origins = links.iter().filter(|l| l.origin).count();
        let stack = Stack {
            dir,
            tracker_addr,
            tracker,
            servers,
            emulator,
            content: content.expect("at least one link"),
            edges: links.len() - origins,
            origins,
        };
        stack.wait_for_registry();
        stack
    }

    pub fn tracker_url(&self) -> String {
        format!("http://{}", self.tracker_addr)
    }

    /// Until the tracker lists every edge, every origin and the origins' manifest.
    pub fn wait_for_registry(&self) {
        self.wait_for(&self.content);
    }

    /// Until the tracker lists every edge and origin for `content` (another content the
    /// stores hold), and its manifest.
    pub fn wait_for(&self, content: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let servers = http_get(self.tracker_addr, &format!("/v1/contents/{content}/servers"));
            let manifest = http_get(self.tracker_addr, &format!("/v1/contents/{content}/manifest"));
            if let (Some((200, body)), Some((200, _))) = (&servers, &manifest) {
                let lookup: serde_json::Value = serde_json::from_str(body).unwrap();
                if lookup["servers"].as_array().unwrap().len() == self.edges
                    && lookup["origins"].as_array().unwrap().len() == self.origins
                {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "devices not registered after 60 s: servers {servers:?}, manifest {:?}; the servers' stderr:\n{}",
                manifest.map(|m| m.0),
                self.servers
                    .iter()
                    .map(|p| format!("{}: {}", p.name, p.stderr_tail()))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Deterministic pseudo-random bytes (BLAKE3 in counter mode).
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 32);
    let mut counter = 0u64;
    while out.len() < len {
        let mut h = blake3::Hasher::new();
        h.update(&seed.to_le_bytes());
        h.update(&counter.to_le_bytes());
        out.extend_from_slice(h.finalize().as_bytes());
        counter += 1;
    }
    out.truncate(len);
    out
}
