//! Helpers for the relay tests: real UDP sockets on 127.0.0.1, an echo server, a pacing
//! sender and a receiver that stops when the line goes quiet.

#![allow(dead_code)] // each test file uses its own subset

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pcdn_emulate::{RelayConfig, RelayHandle, spawn_relay};
use pcdn_sim::LinkConfig;
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

/// A socket on 127.0.0.1 with 4 MiB buffers (as the kernel allows): a test task starved of
/// CPU by a busy machine must not lose datagrams in its own socket buffer.
pub async fn udp() -> UdpSocket {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
    let _ = socket.set_recv_buffer_size(4 << 20);
    let _ = socket.set_send_buffer_size(4 << 20);
    socket.set_nonblocking(true).unwrap();
    socket
        .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .expect("bind 127.0.0.1:0");
    UdpSocket::from_std(socket.into()).unwrap()
}

/// A relay on 127.0.0.1 (a free port) to `to` with these links.
pub async fn relay(to: SocketAddr, down: LinkConfig, up: LinkConfig, seed: u64) -> RelayHandle {
    let mut config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), to, down);
    config.up = up;
    config.seed = seed;
    spawn_relay(config).await.expect("relay starts")
}

/// Echoes every datagram to its source and counts datagrams per source.
pub struct Echo {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<HashMap<SocketAddr, u64>>>,
    task: JoinHandle<()>,
}

impl Echo {
    pub async fn start() -> Echo {
        let socket = udp().await;
        let addr = socket.local_addr().unwrap();
        let seen: Arc<Mutex<HashMap<SocketAddr, u64>>> = Arc::default();
        let counts = seen.clone();
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 65_535];
            loop {
                let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                    continue;
                };
                *counts.lock().unwrap().entry(from).or_default() += 1;
                let _ = socket.send_to(&buf[..n], from).await;
            }
        });
        Echo { addr, seen, task }
    }

    pub fn sources(&self) -> Vec<SocketAddr> {
        self.seen.lock().unwrap().keys().copied().collect()
    }

    pub fn total(&self) -> u64 {
        self.seen.lock().unwrap().values().sum()
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Sends `count` datagrams made by `payload(i)` to `to`, in bursts of 50 with a pause between,
/// so neither the relay's nor the peer's socket buffer overflows (loss must come from the link).
pub async fn send_paced(socket: &UdpSocket, to: SocketAddr, count: usize, payload: impl Fn(usize) -> Vec<u8>) {
    for i in 0..count {
        socket.send_to(&payload(i), to).await.unwrap();
        if i % 50 == 49 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// Receives datagrams until `quiet` passes with none (or `limit` in all), with their arrival times.
pub async fn receive_until_quiet(socket: &UdpSocket, quiet: Duration, limit: Duration) -> Vec<(Instant, Vec<u8>)> {
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65_535];
    while start.elapsed() < limit {
        match tokio::time::timeout(quiet, socket.recv_from(&mut buf)).await {
            Ok(Ok((n, _))) => got.push((Instant::now(), buf[..n].to_vec())),
            Ok(Err(e)) => panic!("receive failed: {e}"),
            Err(_) => break,
        }
    }
    got
}

/// Sends `size`-byte datagrams to `to` at `bps` (UDP payload bits) for `duration`, topping up
/// every millisecond.
pub async fn blast(socket: &UdpSocket, to: SocketAddr, bps: u64, size: usize, duration: Duration) -> u64 {
    let start = Instant::now();
    let payload = vec![0xA5u8; size];
    let mut sent_bytes = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    while start.elapsed() < duration {
        tick.tick().await;
        let due = (start.elapsed().as_secs_f64() * bps as f64 / 8.0) as u64;
        while sent_bytes < due {
            socket.send_to(&payload, to).await.unwrap();
            sent_bytes += size as u64;
        }
    }
    sent_bytes
}

/// A server that, on a datagram "blast", sends datagrams of `size` bytes back to its source at
/// `bps` for `duration`. Returns its address.
pub async fn blast_server(bps: u64, size: usize, duration: Duration) -> (SocketAddr, JoinHandle<u64>) {
    let socket = udp().await;
    let addr = socket.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut buf = vec![0u8; 2048];
        loop {
            let (n, from) = socket.recv_from(&mut buf).await.unwrap();
            if &buf[..n] == b"blast" {
                return blast(&socket, from, bps, size, duration).await;
            }
        }
    });
    (addr, task)
}

/// Receive rate in bit/s from the first arrival to the last (the first datagram's bytes
/// arrived at the start of the interval, so they do not count).
pub fn receive_rate_bps(arrivals: &[(Instant, Vec<u8>)]) -> f64 {
    assert!(arrivals.len() >= 2, "too few datagrams arrived: {}", arrivals.len());
    let bytes: usize = arrivals[1..].iter().map(|(_, b)| b.len()).sum();
    let span = arrivals.last().unwrap().0 - arrivals[0].0;
    bytes as f64 * 8.0 / span.as_secs_f64()
}

/// Bounds holding a Binomial(n, p) count with overwhelming probability (±5 standard deviations).
pub fn binomial_bounds(n: u64, p: f64) -> (f64, f64) {
    let mean = n as f64 * p;
    let sd = (n as f64 * p * (1.0 - p)).sqrt();
    (mean - 5.0 * sd, mean + 5.0 * sd)
}
