//! Relay throughput on loopback: datagrams echoed through an unshaped relay (the link model
//! still runs: a 100 Gbit/s rate, a queue and the pumps), 64 in flight, both ways.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pcdn_emulate::{RelayConfig, RelayHandle, default_up_link, spawn_relay};
use pcdn_sim::scenario::UNLIMITED_RATE_BPS;
use pcdn_sim::{LinkConfig, QueueLimit};
use tokio::net::UdpSocket;

const DATAGRAMS: u32 = 2_000;
const WINDOW: u32 = 64;

async fn echo_server() -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65_535];
        while let Ok((n, from)) = socket.recv_from(&mut buf).await {
            let _ = socket.send_to(&buf[..n], from).await;
        }
    });
    addr
}

async fn unshaped_relay(to: SocketAddr) -> RelayHandle {
    let link = LinkConfig::fixed(UNLIMITED_RATE_BPS, Duration::ZERO).with_queue(QueueLimit::UNLIMITED);
    let mut config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), to, link.clone());
    config.up = default_up_link(&link);
    spawn_relay(config).await.unwrap()
}

/// Echoes `DATAGRAMS` datagrams of `size` bytes with `WINDOW` in flight; returns the time taken.
async fn echo_through(client: &UdpSocket, to: SocketAddr, size: usize) -> Duration {
    let start = Instant::now();
    let payload = vec![7u8; size];
    let mut buf = vec![0u8; 65_535];
    let (mut sent, mut received) = (0u32, 0u32);
    while received < DATAGRAMS {
        while sent < DATAGRAMS && sent - received < WINDOW {
            client.send_to(&payload, to).await.unwrap();
            sent += 1;
        }
        tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
            .await
            .expect("the relay stalled")
            .unwrap();
        received += 1;
    }
    start.elapsed()
}

fn relay_throughput(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (relay, client) = runtime.block_on(async {
        let server = echo_server().await;
        (
            unshaped_relay(server).await,
            UdpSocket::bind("127.0.0.1:0").await.unwrap(),
        )
    });
    let to = relay.local_addr();
    let mut group = c.benchmark_group("relay");
    group.sample_size(20);
    for size in [1200usize, 1400] {
        group.throughput(Throughput::Bytes(u64::from(DATAGRAMS) * size as u64));
        group.bench_function(format!("echo_{size}B_window_{WINDOW}"), |b| {
            b.to_async(&runtime).iter_custom(|iters| {
                let client = &client;
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += echo_through(client, to, size).await;
                    }
                    total
                }
            });
        });
    }
    group.finish();
    drop(relay);
}

criterion_group!(benches, relay_throughput);
criterion_main!(benches);
