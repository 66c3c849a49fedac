//! `pcdn emulate`: the flags of one relay (or a links file of several), run until SIGINT or
//! SIGTERM, with a line per relay at start and stats through `tracing`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use pcdn_sim::scenario::UNLIMITED_RATE_BPS;
use pcdn_sim::{Jitter, LinkConfig, Loss, QueueLimit, Rate, parse_duration, parse_rate, parse_size};
use tracing::info;

use pcdn_emulate::{RelayConfig, RelayHandle, RelayStats, default_up_link, load_config, resolve_address, spawn_relay};

/// Seed when neither `--seed` nor a links file gives one.
const DEFAULT_SEED: u64 = 1;

/// Relay UDP between clients and a server through emulated links (the simulator's link model,
/// in real time): clients send to --listen, the server at --to sees one address per client.
///
/// "down" is server -> client (the data), "up" is client -> server (the requests). Both links
/// are shared by all the relay's clients, like one edge device's access link.
#[derive(clap::Args, Debug, Clone)]
pub struct EmulateArgs {
    /// Address clients send to, e.g. 127.0.0.1:7901.
    #[arg(long, value_name = "ADDR", value_parser = parse_address, required_unless_present = "config")]
    pub listen: Option<SocketAddr>,
    /// The server's address, e.g. 127.0.0.1:7801.
    #[arg(long, value_name = "ADDR", value_parser = parse_address, required_unless_present = "config")]
    pub to: Option<SocketAddr>,
    /// Data-direction (down) rate: "4mbit", "4Mbit/s", "500kbit", or bit/s [default: unlimited].
    #[arg(long, value_name = "RATE", value_parser = parse_rate_arg, conflicts_with = "trace")]
    pub rate: Option<u64>,
    /// Data-direction rate from a Mahimahi trace (one ms timestamp per 1500-byte opportunity).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Request-direction (up) rate [default: unlimited].
    #[arg(long, value_name = "RATE", value_parser = parse_rate_arg)]
    pub rate_up: Option<u64>,
    /// One-way propagation delay of each direction (RTT = 2 × delay, as mm-delay).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg, default_value = "0ms")]
    pub delay: Duration,
    /// Uniform jitter ±DURATION on the data direction, keeping packet order.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg)]
    pub jitter: Option<Duration>,
    /// Bernoulli loss of the data direction: "0.1" or "10%".
    #[arg(long, value_name = "P", value_parser = parse_probability)]
    pub loss: Option<f64>,
    /// Bernoulli loss of the request direction.
    #[arg(long, value_name = "P", value_parser = parse_probability)]
    pub loss_up: Option<f64>,
    /// Drop-tail queue of the data direction (and of a rate-limited up direction): "100"
    /// packets, "150kB" bytes, or "unlimited" [default: 100 packets].
    #[arg(long, value_name = "QUEUE", value_parser = parse_queue)]
    pub queue: Option<QueueLimit>,
    /// A client silent both ways this long loses its upstream socket.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg, default_value = "60s")]
    pub idle_timeout: Duration,
    /// Most clients mapped at once; a new one then takes the place of the longest silent.
    #[arg(long, value_name = "N", default_value_t = pcdn_emulate::DEFAULT_MAX_CLIENTS, value_parser = parse_max_clients)]
    pub max_clients: usize,
    /// Several relays from a links file (`[[relay]]` tables; see docs/emulator.md) instead of
    /// the link flags.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["listen", "to", "rate", "trace", "rate_up", "delay", "jitter", "loss", "loss_up", "queue", "idle_timeout", "max_clients"]
    )]
    pub config: Option<PathBuf>,
    /// Seed of the links' loss and jitter (replaces a links file's top-level seed) [default: 1].
    #[arg(long)]
    pub seed: Option<u64>,
    /// How often to log the counters of each relay that saw traffic ("0s": only at exit).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg, default_value = "10s")]
    pub stats_interval: Duration,
}

/// The relay the link flags describe. Down: `--rate` or `--trace` (else unlimited), `--delay`,
/// `--jitter` (uniform, order kept), `--loss`, `--queue` (else the simulator's 100 packets).
/// Up: the simulator's default uplink (same delay, unlimited rate, no queue limit), with
/// `--rate-up` (which brings `--queue` with it) and `--loss-up`.
pub fn relay_from_flags(args: &EmulateArgs) -> anyhow::Result<RelayConfig> {
    let listen = args.listen.context("--listen is required without --config")?;
    let to = args.to.context("--to is required without --config")?;
    let rate = match (&args.trace, args.rate) {
        (Some(path), _) => Rate::TraceFile(path.clone())
            .resolve(Path::new(""))
            .with_context(|| format!("--trace {}", path.display()))?,
        (None, Some(bps)) => Rate::Fixed(bps),
        (None, None) => Rate::Fixed(UNLIMITED_RATE_BPS),
    };
    let queue = args.queue.unwrap_or(LinkConfig::default().queue);
    let down = LinkConfig {
        rate,
        delay: args.delay,
        jitter: args
            .jitter
            .map_or(Jitter::default(), |spread| Jitter::uniform(spread, false)),
        loss: args.loss.map_or(Loss::None, Loss::Bernoulli),
        queue,
        ..LinkConfig::default()
    };
    let mut up = default_up_link(&down);
    if let Some(bps) = args.rate_up {
        up.rate = Rate::Fixed(bps);
        up.queue = queue;
    }
    up.loss = args.loss_up.map_or(Loss::None, Loss::Bernoulli);
    Ok(RelayConfig {
        listen,
        to,
        down,
        up,
        seed: args.seed.unwrap_or(DEFAULT_SEED),
        idle_timeout: args.idle_timeout,
        max_clients: args.max_clients,
    })
}

/// `--max-clients`: a whole number of at least 1.
fn parse_max_clients(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("expected a whole number of at least 1, got \"{text}\"")),
    }
}

/// Runs `pcdn emulate` until SIGINT or SIGTERM.
pub fn run(args: EmulateArgs) -> anyhow::Result<()> {
    init_tracing();
    let relays = match &args.config {
        Some(path) => load_config(path, args.seed)?,
        None => vec![relay_from_flags(&args)?],
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    runtime.block_on(run_relays(relays, args.stats_interval))
}

async fn run_relays(configs: Vec<RelayConfig>, stats_interval: Duration) -> anyhow::Result<()> {
    let mut handles: Vec<RelayHandle> = Vec::with_capacity(configs.len());
    for (i, config) in configs.into_iter().enumerate() {
        let handle = spawn_relay(config.clone())
            .await
            .with_context(|| format!("relay {i} ({} -> {})", config.listen, config.to))?;
        let shown = RelayConfig {
            listen: handle.local_addr(),
            ..config
        };
        println!("{}", shown.summary());
        handles.push(handle);
    }
    let mut ticker = (!stats_interval.is_zero()).then(|| {
        let mut t = tokio::time::interval_at(tokio::time::Instant::now() + stats_interval, stats_interval);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    });
    let mut logged = vec![RelayStats::default(); handles.len()];
    let signal = shutdown_signal();
    tokio::pin!(signal);
    loop {
        tokio::select! {
            r = &mut signal => {
                r.context("cannot listen for SIGINT/SIGTERM")?;
                break;
            }
            _ = async { ticker.as_mut().expect("guarded").tick().await }, if ticker.is_some() => {
                // Only relays whose counters moved: an idle lab stays quiet.
                for (h, last) in handles.iter().zip(&mut logged) {
                    let stats = h.stats();
                    if stats != *last {
                        info!("{}: {}", h.local_addr(), format_stats(&stats));
                        *last = stats;
                    }
                }
            }
        }
    }
    for h in handles {
        info!("{} final: {}", h.local_addr(), format_stats(&h.stats()));
        h.shutdown().await;
    }
    Ok(())
}

async fn shutdown_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}

/// `RUST_LOG`-filtered logs on stderr (info by default), unless the program set up its own.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// "down in 1200 pkts/1.6 MB, out 1080, dropped 20, lost 100; up ...; clients 2 (3 total)".
fn format_stats(s: &RelayStats) -> String {
    let dir = |d: &pcdn_emulate::DirectionStats| {
        let mut line = format!(
            "in {} pkts/{} B, out {} pkts/{} B, dropped {}, lost {}, in link {}",
            d.in_packets, d.in_bytes, d.out_packets, d.out_bytes, d.dropped_packets, d.lost_packets, d.in_link_packets
        );
        if d.send_errors > 0 {
            line.push_str(&format!(", send errors {}", d.send_errors));
        }
        if d.ignored_packets > 0 {
            line.push_str(&format!(", ignored {}", d.ignored_packets));
        }
        line
    };
    format!(
        "down {}; up {}; clients {} ({} total)",
        dir(&s.down),
        dir(&s.up),
        s.clients,
        s.clients_total
    )
}

fn parse_address(s: &str) -> Result<SocketAddr, String> {
    resolve_address(s)
}

fn parse_rate_arg(s: &str) -> Result<u64, String> {
    parse_rate(s).map_err(|e| e.to_string())
}

fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// A probability: "0.1" or "10%", in [0, 1].
pub fn parse_probability(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (t, 1.0),
    };
    let expected = || format!("expected a probability such as \"0.1\" or \"10%\", got \"{s}\"");
    let p = number.parse::<f64>().map_err(|_| expected())? / scale;
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!("{}: not in [0, 1]", expected()))
    }
}

/// A drop-tail limit: "100" or "100packets" (packets), a size such as "150kB" or "64KiB"
/// (bytes), or "unlimited".
pub fn parse_queue(s: &str) -> Result<QueueLimit, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("unlimited") || t.eq_ignore_ascii_case("none") {
        return Ok(QueueLimit::UNLIMITED);
    }
    let expected =
        || format!("expected a queue limit such as \"100\" (packets), \"150kB\" or \"unlimited\", got \"{s}\"");
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits_end);
    let limit = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "p" | "pkt" | "pkts" | "packet" | "packets" => {
            QueueLimit::packets(number.parse().map_err(|_| expected())?)
        }
        _ => QueueLimit::bytes(parse_size(t).map_err(|e| format!("{}: {e}", expected()))?),
    };
    if limit.packets == Some(0) || limit.bytes == Some(0) {
        return Err(format!("{}: a zero queue drops every packet", expected()));
    }
    Ok(limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: EmulateArgs,
    }

    fn args(line: &str) -> Result<EmulateArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("emulate").chain(line.split_whitespace())).map(|c| c.args)
    }

    #[test]
    fn flags_map_onto_link_configs() {
        let a = args(
            "--listen 127.0.0.1:7901 --to 127.0.0.1:7801 --rate 4Mbit/s --delay 40ms --loss 10% \
             --jitter 5ms --loss-up 0.02 --queue 64kB --seed 9",
        )
        .unwrap();
        let r = relay_from_flags(&a).unwrap();
        assert_eq!(r.listen, "127.0.0.1:7901".parse().unwrap());
        assert_eq!(r.down.rate, Rate::Fixed(4_000_000));
        assert_eq!(r.down.delay, Duration::from_millis(40));
        assert_eq!(r.down.loss, Loss::Bernoulli(0.1));
        assert_eq!(r.down.jitter, Jitter::uniform(Duration::from_millis(5), false));
        assert_eq!(r.down.queue, QueueLimit::bytes(64_000));
        assert_eq!(r.up.rate, Rate::Fixed(UNLIMITED_RATE_BPS));
        assert_eq!(r.up.delay, Duration::from_millis(40));
        assert_eq!(r.up.loss, Loss::Bernoulli(0.02));
        assert_eq!(r.up.queue, QueueLimit::UNLIMITED);
        assert_eq!(r.up.jitter, Jitter::default());
        assert_eq!(r.seed, 9);
        assert_eq!(
            r.summary(),
            "127.0.0.1:7901 -> 127.0.0.1:7801: down 4 Mbit/s, 40 ms, ±5 ms jitter, 10% loss, queue 64000 bytes; \
             up unlimited, 40 ms, 2% loss, no queue limit"
        );

        let r = relay_from_flags(&args("--listen 127.0.0.1:0 --to localhost:7801 --rate-up 1mbit").unwrap()).unwrap();
        assert_eq!(r.down.rate, Rate::Fixed(UNLIMITED_RATE_BPS));
        assert_eq!(r.down.delay, Duration::ZERO);
        assert_eq!(r.down.queue, QueueLimit::packets(100));
        assert_eq!(
            (r.up.rate.clone(), r.up.queue),
            (Rate::Fixed(1_000_000), QueueLimit::packets(100))
        );
        assert_eq!((r.seed, r.idle_timeout), (DEFAULT_SEED, Duration::from_secs(60)));
        assert!(r.to.ip().is_loopback());
    }

    #[test]
    fn bad_flags_say_what_was_expected() {
        let base = "--listen 127.0.0.1:7901 --to 127.0.0.1:7801";
        let err = |extra: &str| args(&format!("{base} {extra}")).expect_err("refused").to_string();
        assert!(err("--rate 10mbps").contains("ambiguous"), "{}", err("--rate 10mbps"));
        assert!(err("--rate fast").contains("expected a rate"));
        assert!(err("--delay 40").contains("missing unit"));
        assert!(err("--loss 1.5").contains("not in [0, 1]"));
        assert!(err("--queue 0").contains("zero queue"));
        assert!(err("--queue 10furlongs").contains("expected a queue limit"));
        assert!(err("--rate 4mbit --trace x.trace").contains("cannot be used with"));
        assert!(err("--config links.toml").contains("cannot be used with"));
        assert!(args("--to 127.0.0.1:1").err().unwrap().to_string().contains("--listen"));
        let a = args(&format!("{base} --trace /no/such/file.trace")).unwrap();
        let e = format!("{:#}", relay_from_flags(&a).unwrap_err());
        assert!(
            e.contains("--trace /no/such/file.trace") && e.contains("cannot read trace"),
            "{e}"
        );
        assert!(args("--config links.toml --seed 3").is_ok());
    }

    #[test]
    fn probabilities_and_queues() {
        assert_eq!(parse_probability("0.25"), Ok(0.25));
        assert_eq!(parse_probability("30%"), Ok(0.3));
        assert!(parse_probability("-0.1").is_err());
        assert!(
            parse_probability("lots")
                .unwrap_err()
                .contains("expected a probability")
        );
        assert_eq!(parse_queue("100"), Ok(QueueLimit::packets(100)));
        assert_eq!(parse_queue("50 packets"), Ok(QueueLimit::packets(50)));
        assert_eq!(parse_queue("150kB"), Ok(QueueLimit::bytes(150_000)));
        assert_eq!(parse_queue("64KiB"), Ok(QueueLimit::bytes(65_536)));
        assert_eq!(parse_queue("unlimited"), Ok(QueueLimit::UNLIMITED));
    }

    #[test]
    fn stats_line() {
        let mut s = RelayStats::default();
        s.down.in_packets = 10;
        s.down.ignored_packets = 1;
        s.clients = 2;
        s.clients_total = 3;
        let line = format_stats(&s);
        assert!(line.starts_with("down in 10 pkts/0 B, out 0 pkts/0 B, dropped 0, lost 0, in link 0, ignored 1; up"));
        assert!(line.ends_with("clients 2 (3 total)"), "{line}");
    }
}
