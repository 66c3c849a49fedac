//! The delivery stack end to end with real processes on loopback, run exactly as the README's
//! command lines: `pcdn tracker`, `pcdn add`, `pcdn emulate --config`, `pcdn serve`,
//! `pcdn fetch`. An origin and four edges sit behind emulated links, one of them at 10% loss.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Stacks run one at a time: each is eleven processes on a two-core machine.
static ONE_STACK_AT_A_TIME: Mutex<()> = Mutex::new(());

fn pcdn() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("pcdn"))
}

/// A child process killed when the test ends, whatever happens.
struct Proc {
    name: String,
    child: Child,
}

impl Proc {
    fn spawn(name: &str, command: &mut Command) -> Proc {
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Proc {
            name: name.to_owned(),
            child,
        }
    }

    /// SIGKILL: the process gets no chance to say goodbye (a crashed device).
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait: a clean shutdown.
    fn terminate(&mut self) {
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

fn free_udp() -> SocketAddr {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

fn free_tcp() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// A plain HTTP/1.0 GET, enough to watch the tracker without an HTTP client dependency.
fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
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

/// Deterministic, incompressible test data.
fn sample(len: usize, seed: u8) -> Vec<u8> {
    let mut out = vec![0u8; len];
    blake3::Hasher::new_keyed(&[seed; 32])
        .update(b"stack test")
        .finalize_xof()
        .fill(&mut out);
    out
}

/// One emulated server: its data-direction link as a links-file table.
struct Link {
    name: &'static str,
    origin: bool,
    down: &'static str,
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

struct Stack {
    dir: tempfile::TempDir,
    tracker_addr: SocketAddr,
    tracker: Proc,
    /// Index i is LINKS[i]'s server.
    servers: Vec<Proc>,
    _emulator: Proc,
    content: String,
    data: Vec<u8>,
}

impl Stack {
    fn start(size: usize) -> Stack {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("SECRET");
        std::fs::write(&secret, "stack-test-secret\n").unwrap();
        let tracker_addr = free_tcp();
        let tracker = start_tracker(dir.path(), tracker_addr);

        let data = sample(size, 7);
        let file = dir.path().join("sample.bin");
        std::fs::write(&file, &data).unwrap();

        let mut links = String::from("seed = 3\n");
        let mut servers = Vec::new();
        let mut content = None;
        let mut plan = Vec::new();
        for link in &LINKS {
            let store = dir.path().join(link.name);
            let id = add(&file, &store);
            assert!(
                content.as_ref().is_none_or(|c| *c == id),
                "one file, one id in every store"
            );
            content = Some(id);
            let (listen, relay) = (free_udp(), free_udp());
            links.push_str(&format!(
                "[[relay]]\nlisten = \"{relay}\"\nto = \"{listen}\"\ndown = {}\n",
                link.down
            ));
            plan.push((link, store, listen, relay));
        }
        let links_file = dir.path().join("links.toml");
        std::fs::write(&links_file, links).unwrap();
        let emulator = Proc::spawn("emulator", pcdn().arg("emulate").arg("--config").arg(&links_file));
        for (link, store, listen, relay) in plan {
            let mut command = pcdn();
            command
                .arg("serve")
                .arg("--store")
                .arg(&store)
                .args(["--listen", &listen.to_string()])
                .args(["--tracker", &format!("http://{tracker_addr}")])
                .arg("--secret-file")
                .arg(&secret)
                .args(["--advertise", &relay.to_string()])
                .args(["--id", link.name]);
            if link.origin {
                command.arg("--origin");
            }
            servers.push(Proc::spawn(link.name, &mut command));
        }
        let stack = Stack {
            dir,
            tracker_addr,
            tracker,
            servers,
            _emulator: emulator,
            content: content.unwrap(),
            data,
        };
        stack.wait_for_registry();
        stack
    }

    /// Until the tracker lists the four edges, the origin and the origin's manifest.
    fn wait_for_registry(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let servers = http_get(self.tracker_addr, &format!("/v1/contents/{}/servers", self.content));
            let manifest = http_get(self.tracker_addr, &format!("/v1/contents/{}/manifest", self.content));
            if let (Some((200, body)), Some((200, _))) = (&servers, &manifest) {
                let lookup: serde_json::Value = serde_json::from_str(body).unwrap();
                if lookup["servers"].as_array().unwrap().len() == 4 && lookup["origins"].as_array().unwrap().len() == 1
                {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "devices not registered after 60 s: servers {servers:?}, manifest {:?}",
                manifest.map(|m| m.0)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn fetch(&self, out: &Path, scheduler: &str) -> Child {
        pcdn()
            .arg("fetch")
            .arg(&self.content)
            .args(["--tracker", &format!("http://{}", self.tracker_addr)])
            .arg("-o")
            .arg(out)
            .args(["--scheduler", scheduler, "--json"])
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

fn start_tracker(dir: &Path, addr: SocketAddr) -> Proc {
    let proc = Proc::spawn(
        "tracker",
        pcdn()
            .arg("tracker")
            .args(["--listen", &addr.to_string()])
            .arg("--store")
            .arg(format!("sqlite:{}", dir.join("t.db").display()))
            .arg("--secret-file")
            .arg(dir.join("SECRET")),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while http_get(addr, "/health").is_none_or(|(status, _)| status != 200) {
        assert!(Instant::now() < deadline, "tracker on {addr} not healthy after 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    proc
}

/// `pcdn add FILE --store DIR`; the content id is the last line of stdout.
fn add(file: &Path, store: &Path) -> String {
    let output = pcdn().arg("add").arg(file).arg("--store").arg(store).output().unwrap();
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
    let mut stack = Stack::start(20_000_000);
    let out = stack.dir.path().join("out.bin");
    let child = stack.fetch(&out, "default");
    std::thread::sleep(Duration::from_millis(1200));
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
