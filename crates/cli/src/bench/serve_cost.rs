//! `pcdn bench serve-cost`: one `pcdn serve` serving N concurrent `pcdn fetch` processes on
//! loopback beside nginx serving the same file to N parallel curl clients, in one run;
//! aggregate goodput and each server's CPU seconds per GB (utime + stime from /proc).

use super::procs::{StopOnDrop, free_addr};
use anyhow::{Context, bail, ensure};
use clap::Args;
use pcdn_net::store::{Store, content_id_hex};
use serde::Serialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct ServeCostArgs {
    /// Concurrent clients of each round, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,10,50")]
    clients: Vec<u32>,
    /// Size of the file every client downloads.
    #[arg(long, default_value = "20MB", value_parser = pcdn_sim::parse_size)]
    size: u64,
    /// Bytes each round moves at least: with fewer clients, each downloads the file again
    /// (one after the other) until the round has moved this much, so that every round's CPU
    /// time is well above the kernel's 10 ms accounting tick.
    #[arg(long, default_value = "1GB", value_parser = pcdn_sim::parse_size)]
    min_bytes: u64,
    /// The nginx binary (found in PATH, then /usr/sbin).
    #[arg(long, default_value = "nginx")]
    nginx: PathBuf,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

/// One server's round.
#[derive(Serialize, Clone, Debug)]
pub struct Row {
    server: &'static str,
    clients: u32,
    /// Downloads per client, one after the other.
    repeats: u64,
    bytes: u64,
    wall_s: f64,
    goodput_gbit_s: f64,
    server_cpu_s: f64,
    cpu_s_per_gb: f64,
}

#[derive(Serialize)]
pub struct ServeCostResult {
    size: u64,
    nproc: usize,
    cpu_model: String,
    rows: Vec<Row>,
    /// (clients, pcdn's CPU s per GB ÷ nginx's).
    cpu_ratio: Vec<(u32, f64)>,
}

/// Kernel clock ticks per second of /proc/PID/stat's times (`getconf CLK_TCK`; 100 on Linux).
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// (parent pid, utime + stime in ticks) of a process, from /proc/PID/stat (proc(5)).
fn stat(pid: u32) -> Option<(u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    let fields: Vec<&str> = text.get(text.rfind(')')? + 2..)?.split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((ppid, utime + stime))
}

/// CPU ticks of `pid` and of its children (nginx's workers).
fn tree_ticks(pid: u32) -> u64 {
    let mut total = stat(pid).map_or(0, |s| s.1);
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(child) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if let Some((ppid, ticks)) = stat(child)
                && ppid == pid
            {
                total += ticks;
            }
        }
    }
    total
}

fn find_nginx(given: &Path) -> anyhow::Result<PathBuf> {
    if given.components().count() > 1 {
        return Ok(given.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|dir| dir.join(given))
        .find(|p| p.is_file())
        .with_context(|| {
            format!(
                "--nginx {}: not found in PATH nor /usr/sbin (install it: apt-get install nginx-light)",
                given.display()
            )
        })
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

pub fn run(args: ServeCostArgs) -> anyhow::Result<()> {
    ensure!(
        !args.clients.is_empty() && args.clients.iter().all(|&n| n > 0),
        "--clients: expected positive counts, e.g. 1,10,50"
    );
    ensure!(args.size > 0, "--size: expected a positive size");
    let nginx = find_nginx(&args.nginx)?;
    let result = serve_cost(&args, &nginx)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print!("{}", result.to_text());
    }
    Ok(())
}

fn serve_cost(args: &ServeCostArgs, nginx: &Path) -> anyhow::Result<ServeCostResult> {
    let temp = tempfile::Builder::new().prefix("pcdn-serve-cost-").tempdir()?;
    let dir = temp.path();
    // nginx's workers run as an unprivileged user when started by root: they must read the file.
    set_mode(dir, 0o755)?;
    let www = dir.join("www");
    std::fs::create_dir(&www)?;
    set_mode(&www, 0o755)?;
    let sample = www.join("sample.bin");
    let mut data = vec![0u8; usize::try_from(args.size).context("--size")?];
    blake3::Hasher::new()
        .update(b"pcdn serve-cost")
        .finalize_xof()
        .fill(&mut data);
    std::fs::write(&sample, &data).with_context(|| format!("writing {}", sample.display()))?;
    drop(data);
    set_mode(&sample, 0o644)?;
    let store = dir.join("store");
    let id = content_id_hex(&Store::open(&store)?.add(&sample)?);
    let manifest = store.join("contents").join(&id).join("manifest");
    let exe = std::env::current_exe().context("the pcdn binary's path")?;
    let most = args.clients.iter().copied().max().unwrap_or(1);

    // A port found free may be taken by another program before the server binds it: a server
    // that exits at once is started again on another port.
    let (pcdn_addr, pcdn) = on_a_free_port("pcdn serve", dir, "serve.log", |addr| {
        Command::new(&exe)
            .arg("serve")
            .arg("--store")
            .arg(&store)
            .args(["--listen", &addr.to_string(), "--origin"])
            // Every client comes from 127.0.0.1: one source, one session each.
            .args(["--max-sessions-per-source", &most.max(16).to_string()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("serve.log"))?)
            .spawn()
            .context("starting pcdn serve")
    })?;
    let (nginx_addr, nginx_server) =
        on_a_free_port("nginx", dir, "nginx.log", |addr| start_nginx(nginx, dir, &www, addr))?;

    let pcdn_client = |out: &Path| {
        let mut c = Command::new(&exe);
        c.arg("fetch")
            .arg(&id)
            .arg("--manifest")
            .arg(&manifest)
            .args(["--origin-server", &pcdn_addr.to_string(), "--json", "-o"])
            .arg(out);
        c
    };
    let url = format!("http://{nginx_addr}/sample.bin");
    let curl_client = |out: &Path| {
        let mut c = Command::new("curl");
        c.args(["--silent", "--show-error", "--fail", "--output"])
            .arg(out)
            .arg(&url);
        c
    };
    // Warm-up: both servers answer, and the file is in the page cache for both.
    for (name, client) in [
        ("pcdn", &pcdn_client as &(dyn Fn(&Path) -> Command + Sync)),
        ("nginx", &curl_client),
    ] {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if round_of(dir, client, 1, 1, args.size).is_ok() {
                break;
            }
            ensure!(
                Instant::now() < deadline,
                "{name} did not serve the file within 60 s (logs in {})",
                dir.display()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    let ticks = clock_ticks();
    let mut rows = Vec::new();
    for &n in &args.clients {
        let repeats = args.min_bytes.div_ceil(args.size * u64::from(n)).max(1);
        for (server, pid, client) in [
            (
                "pcdn serve",
                pcdn.id(),
                &pcdn_client as &(dyn Fn(&Path) -> Command + Sync),
            ),
            ("nginx", nginx_server.id(), &curl_client),
        ] {
            eprintln!("serve-cost: {server}, {n} clients × {repeats} downloads ...");
            let before = tree_ticks(pid);
            let (bytes, wall) = round_of(dir, client, n, repeats, args.size)
                .with_context(|| format!("{server} with {n} clients (logs in {})", dir.display()))?;
            let cpu = tree_ticks(pid).saturating_sub(before) as f64 / ticks;
            rows.push(Row {
                server: if server == "nginx" { "nginx" } else { "pcdn serve" },
                clients: n,
                repeats,
                bytes,
                wall_s: wall,
                goodput_gbit_s: bytes as f64 * 8.0 / wall / 1e9,
                server_cpu_s: cpu,
                cpu_s_per_gb: cpu / (bytes as f64 / 1e9),
            });
        }
    }
    drop(pcdn);
    drop(nginx_server);
    let cpu_ratio = args
        .clients
        .iter()
        .filter_map(|&n| {
            let of = |s: &str| rows.iter().find(|r| r.server == s && r.clients == n);
            Some((n, of("pcdn serve")?.cpu_s_per_gb / of("nginx")?.cpu_s_per_gb))
        })
        .collect();
    Ok(ServeCostResult {
        size: args.size,
        nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_model: cpu_model(),
        rows,
        cpu_ratio,
    })
}

/// Starts a server with `start` on a free loopback port; when it exits within 3 s (the port was
/// taken meanwhile: nginx retries its bind for 2.5 s first), again on another, up to 5 times. Its log file is `log` in `dir`.
fn on_a_free_port(
    name: &str,
    dir: &Path,
    log: &str,
    start: impl Fn(SocketAddr) -> anyhow::Result<Child>,
) -> anyhow::Result<(SocketAddr, StopOnDrop)> {
    for _ in 0..5 {
        let addr = free_addr()?;
        let mut server = StopOnDrop::new(start(addr)?);
        std::thread::sleep(Duration::from_secs(3));
        if server.try_wait()?.is_none() {
            return Ok((addr, server));
        }
    }
    let text = std::fs::read_to_string(dir.join(log)).unwrap_or_default();
    bail!("{name} exited at start five times; its last log: {}", text.trim())
}

fn set_mode(path: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {mode:o} {}", path.display()))
}

/// nginx as a file server is deployed: sendfile, no access log, a worker per core.
fn start_nginx(nginx: &Path, dir: &Path, www: &Path, addr: SocketAddr) -> anyhow::Result<Child> {
    let conf = dir.join("nginx.conf");
    let d = dir.display();
    std::fs::write(
        &conf,
        format!(
            "daemon off;\nmaster_process on;\nworker_processes auto;\npid {d}/nginx.pid;\n\
             error_log {d}/nginx-error.log warn;\nevents {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  sendfile on;\n  tcp_nopush on;\n\
               default_type application/octet-stream;\n\
               client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
               fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
               server {{ listen {addr}; root {}; }}\n}}\n",
            www.display()
        ),
    )?;
    Command::new(nginx)
        .arg("-p")
        .arg(dir)
        .arg("-e")
        .arg(dir.join("nginx-error.log"))
        .arg("-c")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("nginx.log"))?)
        .spawn()
        .with_context(|| format!("starting {}", nginx.display()))
}

/// `n` clients at once, each downloading the file `repeats` times in a row: (bytes, wall s).
fn round_of(
    dir: &Path,
    client: &(dyn Fn(&Path) -> Command + Sync),
    n: u32,
    repeats: u64,
    size: u64,
) -> anyhow::Result<(u64, f64)> {
    let start = Instant::now();
    let results: Vec<anyhow::Result<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                scope.spawn(move || -> anyhow::Result<u64> {
                    let out = dir.join(format!("client-{i}.bin"));
                    let mut bytes = 0;
                    for _ in 0..repeats {
                        let output = client(&out)
                            .stdout(Stdio::null())
                            .stderr(Stdio::piped())
                            .output()
                            .context("starting a client")?;
                        if !output.status.success() {
                            bail!(
                                "client {i}: {}: {}",
                                output.status,
                                String::from_utf8_lossy(&output.stderr).trim()
                            );
                        }
                        let got = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
                        ensure!(got == size, "client {i} wrote {got} bytes of {size}");
                        std::fs::remove_file(&out)?;
                        bytes += got;
                    }
                    Ok(bytes)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a client thread panicked")))
            })
            .collect()
    });
    let wall = start.elapsed().as_secs_f64();
    let mut total = 0;
    for r in results {
        total += r?;
    }
    Ok((total, wall))
}

impl ServeCostResult {
    fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "serve-cost: {} B file, {} × {}",
            self.size, self.nproc, self.cpu_model
        );
        let _ = writeln!(
            out,
            "{:<11} {:>7} {:>7} {:>14} {:>8} {:>9} {:>10} {:>11}",
            "server", "clients", "repeats", "bytes", "wall s", "Gbit/s", "server CPU s", "CPU s per GB"
        );
        for r in &self.rows {
            let _ = writeln!(
                out,
                "{:<11} {:>7} {:>7} {:>14} {:>8.2} {:>9.2} {:>10.2} {:>11.3}",
                r.server, r.clients, r.repeats, r.bytes, r.wall_s, r.goodput_gbit_s, r.server_cpu_s, r.cpu_s_per_gb
            );
        }
        for (n, ratio) in &self.cpu_ratio {
            let _ = writeln!(out, "{n} clients: pcdn serve's CPU s per GB = {ratio:.2} × nginx's");
        }
        out
    }
}
