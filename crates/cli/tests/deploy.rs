//! The deployment of docs/deploy.md, run for real in Linux network namespaces this test
//! creates: an "internet" namespace with the tracker (HTTPS, its own CA) and the origin; two
//! homes, each an edge behind its own NAT router (nftables masquerade, a home router's stateful
//! firewall), the second one's upload limited with `tc tbf`; a viewer behind a third NAT. The viewer's
//! `pcdn fetch --json` must be byte-identical and both edges must have served bytes. Then an
//! edge behind a NAT that maps each destination to a new port (`masquerade fully-random`) is
//! reported unreachable, and the fetch still completes from the rest.
//!
//! Every command a machine runs is one of the `*_COMMANDS` lines below, and each appears
//! verbatim in docs/deploy.md (checked first), so the document and the test cannot drift.
//! Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN), `ip` (iproute2), `tc` and `nft`
//! (nftables): without them it fails saying so. Everything it creates is in namespaces named
//! after the process id, deleted on the way out whatever happens; nothing is routed outside.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{ONE_STACK_AT_A_TIME, Proc};

const DEPLOY_MD: &str = include_str!("../../../docs/deploy.md");

/// The server's public address (tracker and origin), as in docs/deploy.md.
const SERVER_IP: &str = "198.51.100.10";
/// Every home's LAN: each home is its own namespace, so they can all be 192.168.1.0/24 as
/// real homes are.
const HOME_IP: &str = "192.168.1.2";

/// On the server, once: a CA and the tracker's certificate for its address (copy `ca.crt` to
/// every edge and viewer).
const PKI_COMMANDS: &[&str] = &[
    "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 -subj /CN=pcdn-ca -keyout ca.key -out ca.crt",
    "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=tracker -addext subjectAltName=IP:198.51.100.10 -keyout tracker.key -out tracker.csr",
    "openssl x509 -req -in tracker.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -copy_extensions copy -out tracker.crt",
];

/// On the server: the tracker, then the origin (each line of a block runs in order; a line
/// starting `pcdn serve` or `pcdn tracker` stays running).
const SERVER_COMMANDS: &[&str] = &[
    "pcdn tracker --listen 198.51.100.10:7800 --store sqlite:tracker.db --operator-key operator.pub --tls-cert tracker.crt --tls-key tracker.key",
    "pcdn add sample.bin --store origin/",
    "pcdn serve --store origin/ --listen 198.51.100.10:7802 --tracker https://198.51.100.10:7800 --tracker-ca ca.crt --credential origin-1.cred --upload-limit 8mbit",
];

/// On each edge at home (`edge.cred` is its credential, enrolled as edge-1, edge-2, ...).
const EDGE_COMMANDS: &[&str] = &[
    "pcdn add sample.bin --store edge/",
    "pcdn serve --store edge/ --listen 192.168.1.2:7801 --tracker https://198.51.100.10:7800 --tracker-ca ca.crt --credential edge.cred",
];

/// On the viewer (`CONTENT` is the id `pcdn add` printed).
const VIEWER_COMMANDS: &[&str] = &[
    "pcdn fetch CONTENT --tracker https://198.51.100.10:7800 --tracker-ca ca.crt -o sample.bin --json --timeout 300s",
];

const SAMPLE_LEN: usize = 6 << 20;

/// Runs a setup command; panics with its output if it fails.
fn run(program: &str, args: &[&str]) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e} (install iproute2 and nftables: scripts/test.sh does)"));
    assert!(
        output.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The namespaces of one run; dropping it deletes them, and with them every veth, address,
/// route, nftables table and qdisc inside.
struct Net {
    namespaces: Vec<String>,
}

impl Net {
    fn ns(&mut self, role: &str) -> String {
        let name = format!("pcdn{}-{role}", std::process::id());
        run("ip", &["netns", "add", &name]);
        self.namespaces.push(name.clone());
        run("ip", &["-n", &name, "link", "set", "lo", "up"]);
        name
    }

    /// Runs `args` inside `ns`.
    fn exec(ns: &str, args: &[&str]) {
        let mut all = vec!["netns", "exec", ns];
        all.extend_from_slice(args);
        run("ip", &all);
    }

    /// A veth pair `a_name` in `a` and `b_name` in `b`, with addresses, up.
    fn link(a: &str, a_name: &str, a_addr: &str, b: &str, b_name: &str, b_addr: &str) {
        run(
            "ip",
            &[
                "-n", a, "link", "add", a_name, "type", "veth", "peer", "name", b_name, "netns", b,
            ],
        );
        for (ns, name, addr) in [(a, a_name, a_addr), (b, b_name, b_addr)] {
            run("ip", &["-n", ns, "addr", "add", addr, "dev", name]);
            run("ip", &["-n", ns, "link", "set", name, "up"]);
        }
    }

    /// Home `n` behind a NAT router: returns (router namespace, home namespace). The router's
    /// WAN is 203.0.113.(4n+2)/30, the internet side .(4n+1). `masquerade` is the nftables
    /// statement (`masquerade` or `masquerade fully-random`).
    fn home(&mut self, internet: &str, n: u8, masquerade: &str) -> (String, String) {
        let router = self.ns(&format!("nat{n}"));
        let home = self.ns(&format!("home{n}"));
        let inside = format!("203.0.113.{}", 4 * n + 1);
        let wan = format!("203.0.113.{}", 4 * n + 2);
        Net::link(
            internet,
            &format!("home{n}"),
            &format!("{inside}/30"),
            &router,
            "wan",
            &format!("{wan}/30"),
        );
        Net::link(
            &router,
            "lan",
            "192.168.1.1/24",
            &home,
            "eth0",
            &format!("{HOME_IP}/24"),
        );
        run("ip", &["-n", &router, "route", "add", "default", "via", &inside]);
        run("ip", &["-n", &home, "route", "add", "default", "via", "192.168.1.1"]);
        Net::exec(&router, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
        // A home router: source NAT on the way out, and a stateful firewall that drops what
        // nobody inside asked for. Dropping unsolicited input before conntrack confirms it
        // matters for hole punching: a confirmed entry for a punch that arrived first would
        // make the NAT pick a new port for the device's own punch.
        let rules = format!(
            "table ip nat {{
               chain post {{
                 type nat hook postrouting priority srcnat; policy accept;
                 oifname \"wan\" {masquerade}
               }}
             }}
             table inet filter {{
               chain input {{
                 type filter hook input priority filter; policy drop;
                 ct state established,related accept
                 iifname {{ \"lo\", \"lan\" }} accept
               }}
               chain forward {{
                 type filter hook forward priority filter; policy drop;
                 ct state established,related accept
                 iifname \"lan\" oifname \"wan\" accept
               }}
             }}
"
        );
        let file = std::env::temp_dir().join(format!("pcdn-deploy-{}-nat{n}.nft", std::process::id()));
        std::fs::write(&file, rules).unwrap();
        Net::exec(&router, &["nft", "-f", file.to_str().unwrap()]);
        let _ = std::fs::remove_file(&file);
        (router, home)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.namespaces.drain(..).rev() {
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
        }
    }
}

/// Fails with what is missing when the test cannot build namespaces.
fn require_privileges() {
    for (program, package) in [("ip", "iproute2"), ("tc", "iproute2"), ("nft", "nftables")] {
        let found = Command::new(program)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        assert!(
            found,
            "the deployment test needs `{program}` (Debian package {package}; scripts/test.sh installs it)"
        );
    }
    let probe = format!("pcdn{}-probe", std::process::id());
    let output = Command::new("ip").args(["netns", "add", &probe]).output().unwrap();
    let _ = Command::new("ip").args(["netns", "del", &probe]).status();
    assert!(
        output.status.success(),
        "the deployment test needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network namespaces: \
         `ip netns add` said: {}",
        String::from_utf8_lossy(&output.stderr).trim()
    );
}

/// A machine: a namespace and a working directory its commands run in.
struct Machine {
    ns: String,
    dir: PathBuf,
}

impl Machine {
    fn new(ns: &str, root: &Path, name: &str) -> Machine {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        Machine { ns: ns.to_owned(), dir }
    }

    /// The command of a docs/deploy.md line, `vars` substituted, run in this machine.
    fn command(&self, line: &str, vars: &[(&str, &str)]) -> Command {
        let mut line = line.to_owned();
        for (name, value) in vars {
            line = line.replace(name, value);
        }
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), Some("pcdn"), "{line}");
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.ns])
            .arg(assert_cmd::cargo::cargo_bin("pcdn"))
            .args(words)
            .current_dir(&self.dir)
            .env("RUST_LOG", "info");
        command
    }

    /// Runs a one-shot line to its end; returns its stdout.
    fn once(&self, line: &str, vars: &[(&str, &str)]) -> (String, String) {
        let output = self.command(line, vars).output().unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        );
        assert!(output.status.success(), "{line} on {}: {stderr}", self.ns);
        (stdout, stderr)
    }

    fn spawn(&self, name: &str, line: &str, vars: &[(&str, &str)]) -> Proc {
        Proc::spawn(name, &mut self.command(line, vars))
    }
}

/// `GET url` over HTTPS trusting `ca` from inside `ns` (python3's urllib: the test's own
/// process stays outside).
fn http_get_in(ns: &str, url: &str, ca: &Path) -> Option<serde_json::Value> {
    let script = "import sys, ssl, urllib.request; \
        c = ssl.create_default_context(cafile=sys.argv[2]); \
        print(urllib.request.urlopen(sys.argv[1], timeout=5, context=c).read().decode())";
    let output = Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-c", script, url])
        .arg(ca)
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    serde_json::from_slice(&output.stdout).ok()
}

/// Polls the tracker's lookup from the internet namespace until `done` holds (90 s: devices
/// bind and are probed for seconds each on a loaded machine).
fn lookup_until(
    ns: &str,
    ca: &Path,
    content: &str,
    what: &str,
    procs: &[&Proc],
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let url = format!("https://{SERVER_IP}:7800/v1/contents/{content}/servers");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let lookup = http_get_in(ns, &url, ca);
        if let Some(l) = &lookup
            && done(l)
        {
            return l.clone();
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = procs
                .iter()
                .map(|p| format!("{}: {}", p.name, p.stderr_tail()))
                .collect();
            panic!("{what}: not after 90 s; last lookup {lookup:?}\n{}", logs.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn ids(lookup: &serde_json::Value, list: &str) -> Vec<String> {
    lookup[list]
        .as_array()
        .map(|a| a.iter().filter_map(|d| d["id"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

fn sample() -> Vec<u8> {
    let mut out = Vec::with_capacity(SAMPLE_LEN + 32);
    let mut counter = 0u64;
    while out.len() < SAMPLE_LEN {
        out.extend_from_slice(blake3::hash(&counter.to_le_bytes()).as_bytes());
        counter += 1;
    }
    out.truncate(SAMPLE_LEN);
    out
}

#[test]
fn every_command_of_the_test_is_in_docs_deploy_md() {
    for line in PKI_COMMANDS
        .iter()
        .chain(SERVER_COMMANDS)
        .chain(EDGE_COMMANDS)
        .chain(VIEWER_COMMANDS)
    {
        assert!(
            DEPLOY_MD.contains(line),
            "docs/deploy.md lacks the command the test runs:\n{line}"
        );
    }
}

#[test]
fn two_natted_edges_serve_a_viewer_behind_a_third_nat_and_a_symmetric_nat_is_left_out() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_privileges();
    let tmp = tempfile::tempdir().unwrap();
    let mut net = Net { namespaces: Vec::new() };
    let internet = net.ns("inet");
    Net::exec(&internet, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    run(
        "ip",
        &["-n", &internet, "addr", "add", &format!("{SERVER_IP}/32"), "dev", "lo"],
    );
    let (_, home1) = net.home(&internet, 1, "masquerade");
    let (nat2, home2) = net.home(&internet, 2, "masquerade");
    let (_, home3) = net.home(&internet, 3, "masquerade");
    // The second edge's uplink: 4 Mbit/s, as a home's upload might be.
    Net::exec(
        &nat2,
        &[
            "tc", "qdisc", "add", "dev", "wan", "root", "tbf", "rate", "4mbit", "burst", "32kb", "latency", "200ms",
        ],
    );

    let server = Machine::new(&internet, tmp.path(), "server");
    let edge1 = Machine::new(&home1, tmp.path(), "edge-1");
    let edge2 = Machine::new(&home2, tmp.path(), "edge-2");
    let viewer = Machine::new(&home3, tmp.path(), "viewer");
    let data = sample();
    // The operator, on its own machine: the key pair, the tracker gets operator.pub, each
    // device its credential.
    let operator = tmp.path().join("operator");
    common::pcdn_ok(&["operator".as_ref(), "init".as_ref(), operator.as_os_str()]);
    std::fs::copy(operator.join("operator.pub"), server.dir.join("operator.pub")).unwrap();
    let enroll = |id: &str, role: &str, file: &std::path::Path| common::enroll_into(&operator, id, role, file);
    enroll("origin-1", "origin", &server.dir.join("origin-1.cred"));
    enroll("edge-1", "edge", &edge1.dir.join("edge.cred"));
    enroll("edge-2", "edge", &edge2.dir.join("edge.cred"));
    for m in [&server, &edge1, &edge2] {
        std::fs::write(m.dir.join("sample.bin"), &data).unwrap();
    }

    for line in PKI_COMMANDS {
        let mut words = line.split_whitespace();
        let program = words.next().unwrap();
        let output = Command::new(program)
            .args(words)
            .current_dir(&server.dir)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let ca = server.dir.join("ca.crt");
    for m in [&edge1, &edge2, &viewer] {
        std::fs::copy(&ca, m.dir.join("ca.crt")).unwrap();
    }
    let tracker = server.spawn("tracker", SERVER_COMMANDS[0], &[]);
    let (stdout, _) = server.once(SERVER_COMMANDS[1], &[]);
    let content = stdout.lines().last().unwrap().trim().to_owned();
    let origin = server.spawn("origin-1", SERVER_COMMANDS[2], &[]);
    let mut edges = Vec::new();
    for (machine, id) in [(&edge1, "edge-1"), (&edge2, "edge-2")] {
        let (stdout, _) = machine.once(EDGE_COMMANDS[0], &[]);
        assert_eq!(stdout.lines().last().unwrap().trim(), content);
        edges.push(machine.spawn(id, EDGE_COMMANDS[1], &[("ID", id)]));
    }
    let procs: Vec<&Proc> = [&tracker, &origin].into_iter().chain(&edges).collect();
    let lookup = lookup_until(
        &internet,
        &ca,
        &content,
        "both edges listed for punching",
        &procs,
        |l| ids(l, "servers").len() == 2 && ids(l, "origins") == ["origin-1"],
    );
    for edge in lookup["servers"].as_array().unwrap() {
        // Each edge is given at its NAT's public mapping, not its private address.
        assert_eq!(edge["punch"], true, "{edge}");
        assert!(edge["addr"].as_str().unwrap().starts_with("203.0.113."), "{edge}");
    }

    let fetch = |what: &str| -> (serde_json::Value, String) {
        let out = viewer.dir.join("sample.bin");
        let _ = std::fs::remove_file(&out);
        let output = viewer
            .command(VIEWER_COMMANDS[0], &[("CONTENT", &content)])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{what}: the viewer's fetch failed:\n{stderr}");
        assert!(std::fs::read(&out).unwrap() == data, "{what}: the fetched file differs");
        (serde_json::from_slice(&output.stdout).unwrap(), stderr)
    };
    let (report, _) = fetch("behind three NATs");
    let served = |report: &serde_json::Value, id: &str| {
        report["paths"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == id)
            .map(|p| p["bytes"].as_u64().unwrap())
    };
    for id in ["edge-1", "edge-2"] {
        let bytes = served(&report, id).unwrap_or_else(|| panic!("no path to {id}: {report}"));
        assert!(bytes > 0, "{id} served nothing through its NAT: {report}");
    }
    println!(
        "paths: {}",
        report["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| format!("{}={}", p["name"], p["bytes"]))
            .collect::<Vec<_>>()
            .join(" ")
    );

    // An edge behind a NAT that maps each destination to a new port.
    let (_, home4) = net.home(&internet, 4, "masquerade fully-random");
    let edge4 = Machine::new(&home4, tmp.path(), "edge-4");
    std::fs::write(edge4.dir.join("sample.bin"), &data).unwrap();
    std::fs::copy(&ca, edge4.dir.join("ca.crt")).unwrap();
    enroll("edge-4", "edge", &edge4.dir.join("edge.cred"));
    edge4.once(EDGE_COMMANDS[0], &[]);
    let symmetric = edge4.spawn("edge-4", EDGE_COMMANDS[1], &[("ID", "edge-4")]);
    let procs: Vec<&Proc> = [&tracker, &origin, &symmetric].into_iter().chain(&edges).collect();
    let lookup = lookup_until(&internet, &ca, &content, "edge-4 reported unreachable", &procs, |l| {
        l["unreachable"].as_array().is_some_and(|u| {
            u.iter()
                .any(|d| d["id"] == "edge-4" && d["reason"].as_str().is_some_and(|r| r.contains("new port")))
        })
    });
    assert!(!ids(&lookup, "servers").contains(&"edge-4".to_owned()), "{lookup}");
    let (report, stderr) = fetch("with a symmetric NAT among the edges");
    assert!(served(&report, "edge-4").is_none(), "{report}");
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("edge-4") && l.contains("unreachable") && l.contains("new port")),
        "the viewer does not say edge-4 is unreachable and why:\n{stderr}"
    );
    // The device itself says why and what to do.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !symmetric.stderr_all().contains("maps each destination to a new port") {
        assert!(
            Instant::now() < deadline,
            "edge-4 never logged why it is unreachable:\n{}",
            symmetric.stderr_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(symmetric.stderr_all().contains("--advertise"));
    drop(procs);
    drop(symmetric);
    drop(edges);
    drop(origin);
    drop(tracker);
    drop(net);
}
