//! The relay on real loopback sockets: mapping, rate, delay, loss, traces, idle expiry, load.
//!
//! Timing bounds are wide on purpose (the machine is shared and noisy): these check that the
//! link model is applied, not how precisely.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::*;
use pcdn_emulate::{RelayConfig, default_up_link, spawn_relay};
use pcdn_sim::scenario::UNLIMITED_RATE_BPS;
use pcdn_sim::{LinkConfig, Loss, QueueLimit, Rate};

const MS: Duration = Duration::from_millis(1);

fn unshaped(delay: Duration) -> LinkConfig {
    LinkConfig::fixed(UNLIMITED_RATE_BPS, delay).with_queue(QueueLimit::UNLIMITED)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datagrams_pass_both_ways_to_the_right_client() {
    let echo = Echo::start().await;
    let down = unshaped(5 * MS);
    let relay = relay(echo.addr, down.clone(), default_up_link(&down), 1).await;
    let (a, b) = (udp().await, udp().await);
    let n = 200;
    let to = relay.local_addr();
    let quiet = Duration::from_secs(1);
    let ((), (), got_a, got_b) = tokio::join!(
        send_paced(&a, to, n, |i| format!("a{i}").into_bytes()),
        send_paced(&b, to, n, |i| format!("b{i}").into_bytes()),
        receive_until_quiet(&a, quiet, Duration::from_secs(10)),
        receive_until_quiet(&b, quiet, Duration::from_secs(10)),
    );
    let names = |got: &[(Instant, Vec<u8>)]| -> Vec<String> {
        got.iter().map(|(_, d)| String::from_utf8(d.clone()).unwrap()).collect()
    };
    // Every echo reaches its own client, in order, and nothing else does.
    let want = |c: char| (0..n).map(|i| format!("{c}{i}")).collect::<Vec<_>>();
    assert_eq!(names(&got_a), want('a'));
    assert_eq!(names(&got_b), want('b'));

    // The server saw one relay-side address per client, none of them a client's own.
    let sources: HashSet<_> = echo.sources().into_iter().collect();
    assert_eq!(sources.len(), 2, "{sources:?}");
    for s in &sources {
        assert!(s.ip().is_loopback());
        assert!(*s != a.local_addr().unwrap() && *s != b.local_addr().unwrap() && *s != to);
    }
    let stats = relay.stats();
    assert_eq!((stats.clients, stats.clients_total), (2, 2));
    let n = n as u64 * 2;
    assert_eq!((stats.up.in_packets, stats.up.out_packets), (n, n));
    assert_eq!((stats.down.in_packets, stats.down.out_packets), (n, n));
    assert_eq!(
        stats.down.dropped_packets + stats.down.lost_packets + stats.down.ignored_packets,
        0
    );
    relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4_mbit_relay_delivers_4_mbit() {
    // The server offers twice the link's rate for 2 s; the 100-packet queue drops the excess.
    let (server, blasting) = blast_server(8_000_000, 1000, Duration::from_secs(2)).await;
    let down = LinkConfig::fixed(4_000_000, 10 * MS);
    let relay = relay(server, down.clone(), default_up_link(&down), 1).await;
    let client = udp().await;
    client.send_to(b"blast", relay.local_addr()).await.unwrap();
    let got = receive_until_quiet(&client, 500 * MS, Duration::from_secs(15)).await;
    let offered = blasting.await.unwrap();
    let rate = receive_rate_bps(&got);
    eprintln!("4 Mbit/s link: received {rate:.0} bit/s in {} datagrams", got.len());
    assert!(
        (3.4e6..=4.6e6).contains(&rate),
        "received {rate} bit/s through a 4 Mbit/s link"
    );
    let stats = relay.stats();
    assert!(
        stats.down.dropped_packets > 0,
        "offering 2x the rate must overflow the queue: {stats:?}"
    );
    assert_eq!(stats.down.in_bytes, offered);
    assert_eq!(stats.down.out_packets, got.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_round_trip_takes_twice_the_delay() {
    let echo = Echo::start().await;
    let delay = 50 * MS;
    let down = unshaped(delay);
    let relay = relay(echo.addr, down.clone(), default_up_link(&down), 1).await;
    let client = udp().await;
    let mut buf = [0u8; 64];
    let mut rtts = Vec::new();
    for i in 0..8u8 {
        let sent = Instant::now();
        client.send_to(&[i], relay.local_addr()).await.unwrap();
        let (n, _) = tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        rtts.push(sent.elapsed());
        assert_eq!(&buf[..n], &[i]);
    }
    rtts.sort();
    let (min, median) = (rtts[0], rtts[rtts.len() / 2]);
    eprintln!("2 × {delay:?}: RTTs {rtts:?}");
    // Never early; late only by timer ticks and scheduling (the median, so that one ping
    // held up by a busy machine does not decide).
    assert!(min >= 2 * delay, "RTT {min:?} is below 2 × {delay:?}");
    assert!(
        median < 2 * delay + 200 * MS,
        "median RTT {median:?} is far above 2 × {delay:?}"
    );
}

/// Sends `n` datagrams through a relay with `down_loss` and `up_loss`; returns how many the
/// server got and how many echoes came back.
async fn through_lossy_relay(n: usize, down_loss: f64, up_loss: f64) -> (u64, u64) {
    let echo = Echo::start().await;
    let down = unshaped(MS).with_loss(Loss::Bernoulli(down_loss));
    let up = default_up_link(&down).with_loss(Loss::Bernoulli(up_loss));
    let relay = relay(echo.addr, down, up, 42).await;
    let client = udp().await;
    // Receive while sending: the client's socket buffer holds only a few hundred datagrams.
    let ((), got) = tokio::join!(
        send_paced(&client, relay.local_addr(), n, |i| (i as u32).to_be_bytes().to_vec()),
        receive_until_quiet(&client, Duration::from_secs(1), Duration::from_secs(20)),
    );
    let stats = relay.stats();
    // Every datagram lost was lost by the link, and counted there.
    assert_eq!(stats.up.in_packets, n as u64);
    assert_eq!(stats.up.lost_packets + echo.total(), n as u64, "{stats:?}");
    assert_eq!(stats.down.lost_packets + got.len() as u64, echo.total(), "{stats:?}");
    (echo.total(), got.len() as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loss_drops_about_the_asked_fraction_each_way() {
    let n = 2000;
    let (lo, hi) = binomial_bounds(n, 0.3);

    let (at_server, back) = through_lossy_relay(n as usize, 0.3, 0.0).await;
    assert_eq!(at_server, n, "the request direction is lossless");
    let lost = (n - back) as f64;
    assert!(
        (lo..=hi).contains(&lost),
        "data direction lost {lost} of {n}, expected {lo:.0}..{hi:.0}"
    );

    let (at_server, back) = through_lossy_relay(n as usize, 0.0, 0.3).await;
    assert_eq!(back, at_server, "the data direction is lossless");
    let lost = (n - at_server) as f64;
    assert!(
        (lo..=hi).contains(&lost),
        "request direction lost {lost} of {n}, expected {lo:.0}..{hi:.0}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_file_is_honoured() {
    // On for 100 ms (one 1500-byte opportunity per ms, 12 Mbit/s), off for the next 100 ms:
    // 101 opportunities per 200 ms, a mean of 6.06 Mbit/s with 100 ms gaps.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("onoff.trace");
    let mut text: String = (1..=100).map(|ms| format!("{ms}\n")).collect();
    text.push_str("200\n");
    std::fs::write(&path, text).unwrap();
    let mean_bps = 101.0 * 1500.0 * 8.0 / 0.2;

    let (server, _blasting) = blast_server(12_000_000, 1000, Duration::from_secs(2)).await;
    let down = LinkConfig::default()
        .with_rate(Rate::TraceFile(path))
        .with_delay(5 * MS);
    let relay = relay(server, down.clone(), default_up_link(&down), 1).await;
    let client = udp().await;
    client.send_to(b"blast", relay.local_addr()).await.unwrap();
    let got = receive_until_quiet(&client, 500 * MS, Duration::from_secs(15)).await;
    let rate = receive_rate_bps(&got);
    let gaps = got.windows(2).filter(|w| w[1].0 - w[0].0 >= 60 * MS).count();
    eprintln!("trace of mean {mean_bps} bit/s: received {rate:.0} bit/s, {gaps} gaps");
    assert!(
        (mean_bps * 0.85..=mean_bps * 1.15).contains(&rate),
        "received {rate} bit/s through a trace of mean {mean_bps} bit/s"
    );
    // A fixed rate would spread arrivals out; the trace's off periods leave gaps.
    assert!(gaps >= 5, "only {gaps} gaps of 60 ms or more in {} arrivals", got.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_clients_get_a_new_mapping() {
    let echo = Echo::start().await;
    let down = unshaped(Duration::ZERO);
    let mut config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), echo.addr, down);
    config.idle_timeout = 200 * MS;
    let relay = spawn_relay(config).await.unwrap();
    let client = udp().await;
    let mut buf = [0u8; 16];
    let mut ping = async |byte: u8| {
        client.send_to(&[byte], relay.local_addr()).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
    };
    ping(1).await;
    ping(2).await;
    assert_eq!(echo.sources().len(), 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(relay.stats().clients, 0, "the silent client's mapping expired");
    ping(3).await;
    assert_eq!(echo.sources().len(), 2, "a new upstream socket after expiry");
    let stats = relay.stats();
    assert_eq!((stats.clients, stats.clients_total), (1, 2));
}

/// Sockets this process has open (every file descriptor).
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_source_ports_keeps_the_mappings_bounded() {
    // 2,000 source ports, one datagram each, beside a client that keeps talking: the relay
    // holds at most its default max_clients upstream sockets, the flood's stalest give way,
    // and the talking client keeps its mapping (the server sees one address for it).
    let echo = Echo::start().await;
    let config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), echo.addr, unshaped(Duration::ZERO));
    let max = config.max_clients;
    assert_eq!(max, pcdn_emulate::DEFAULT_MAX_CLIENTS);
    let relay = spawn_relay(config).await.unwrap();
    let fds_before = open_fds();
    let client = udp().await;
    let mut buf = [0u8; 16];
    let mut most_clients = 0;
    // Kept open, so that no port is handed out twice.
    let mut ports = Vec::new();
    for i in 0..2000u32 {
        if i % 50 == 0 {
            client.send_to(b"ping", relay.local_addr()).await.unwrap();
            tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
                .await
                .expect("the talking client is answered")
                .unwrap();
            most_clients = most_clients.max(relay.stats().clients);
        }
        let port = udp().await;
        port.send_to(&i.to_be_bytes(), relay.local_addr()).await.unwrap();
        ports.push(port);
    }
    let start = Instant::now();
    while relay.stats().up.in_packets < 2000 + 40 && start.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(10 * MS).await;
    }
    let stats = relay.stats();
    most_clients = most_clients.max(stats.clients);
    assert!(
        most_clients <= max as u64,
        "{most_clients} clients mapped at once, cap {max}"
    );
    assert_eq!(stats.clients_total, 2001, "every source was mapped when it spoke");
    assert_eq!(stats.clients_evicted, 2001 - max as u64);
    let fds_grew = open_fds().saturating_sub(fds_before + ports.len() + 1);
    // Other tests of this binary open a few sockets meanwhile: a wide margin.
    assert!(
        fds_grew <= max + 100,
        "{fds_grew} more descriptors than before the flood"
    );
    let client_addr = client.local_addr().unwrap();
    let seen = echo.seen.lock().unwrap().clone();
    let talking: Vec<_> = seen.values().filter(|&&n| n >= 40).collect();
    assert_eq!(talking.len(), 1, "the talking client kept one mapping ({client_addr})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unshaped_relay_carries_a_heavy_load() {
    // 30 MB (240 Mbit) both ways with 64 datagrams in flight: every one must come back. How
    // fast is measured by the bench (benches/relay.rs), not here.
    let echo = Echo::start().await;
    let down = unshaped(Duration::ZERO);
    let relay = relay(echo.addr, down.clone(), default_up_link(&down), 1).await;
    let client = udp().await;
    let to = relay.local_addr();
    let (n, window, size) = (25_000u32, 64u32, 1200);
    let mut payload = vec![0u8; size];
    let mut buf = vec![0u8; 2048];
    let mut next = 0u32;
    let mut received = 0u32;
    while received < n {
        while next < n && next - received < window {
            payload[..4].copy_from_slice(&next.to_be_bytes());
            client.send_to(&payload, to).await.unwrap();
            next += 1;
        }
        let (len, _) = tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("stalled after {received} of {n} echoes"))
            .unwrap();
        assert_eq!(len, size);
        assert_eq!(u32::from_be_bytes(buf[..4].try_into().unwrap()), received, "order kept");
        received += 1;
    }
    // A direction counts a datagram once its send returns, which can be after the echo of it
    // came back through the other direction: the counters catch up within moments.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    let mut stats = relay.stats();
    while (stats.up.out_packets, stats.down.out_packets) != (u64::from(n), u64::from(n))
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
        stats = relay.stats();
    }
    assert_eq!(stats.up.out_packets, u64::from(n));
    assert_eq!(stats.down.out_packets, u64::from(n));
}
