//! NAT traversal for devices and clients (docs/protocol.md §11): a device binds its serving
//! socket to the tracker's two UDP ports and keeps the mapping open, answers the tracker's
//! probes and punches towards clients on request; a client learns its own mapping, looks up
//! with its token and punches before its HELLOs (UDP hole punching, RFC 5128 §3.3).

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use pcdn_core::wire::rendezvous::{self as rdv, BindStatus, Rendezvous as Msg};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::{mpsc, watch};

use crate::socket::{RecvBatch, SendBatch, Socket};
use crate::tracker_client::{RendezvousGrant, TrackerClient};

/// Timing of a device's and a client's rendezvous, each with its reason.
#[derive(Clone, Debug)]
pub struct Timings {
    /// Between two keepalive BINDs. RFC 4787 REQ-5 asks NATs to keep an idle UDP mapping for at
    /// least 2 minutes, but home routers commonly drop it after 30 s (Linux conntrack's
    /// unreplied UDP timeout is 30 s too): 20 s keeps it with a loss to spare.
    pub keepalive: Duration,
    /// Between BINDs until both ports answered: a few round trips on a loaded host.
    pub retry: Duration,
    /// Client BIND attempts before it goes on without hole punching.
    pub client_attempts: u32,
    /// Longest a client waits for the PUNCH of every NATed server before its HELLOs; a HELLO
    /// sent too early is lost at the server's NAT and retransmitted after the initial RTO (1 s,
    /// RFC 6298), so waiting longer than that gains nothing.
    pub punch_wait: Duration,
    /// Between a client's repeated PUNCHes while it waits.
    pub punch_repeat: Duration,
}

impl Default for Timings {
    fn default() -> Timings {
        Timings {
            keepalive: Duration::from_secs(20),
            retry: Duration::from_millis(500),
            client_attempts: 4,
            punch_wait: Duration::from_secs(1),
            punch_repeat: Duration::from_millis(200),
        }
    }
}

/// How long a punch request lets the device answer that client's first PUNCH: the client
/// punches within its wait (1 s) of the lookup.
const ASKED_FOR: Duration = Duration::from_secs(5);
/// Most clients remembered for that; beyond it, requests still punch but are not remembered.
const MAX_ASKED: usize = 4096;

/// Datagrams between the server's UDP loop and the device's rendezvous task.
pub type Datagram = (SocketAddr, Vec<u8>);

/// The UDP loop's side of the pipe: rendezvous datagrams in, datagrams to send out.
pub struct LoopSide {
    pub to_task: mpsc::Sender<Datagram>,
    pub from_task: mpsc::Receiver<Datagram>,
}

/// The rendezvous task's side of the pipe.
pub struct TaskSide {
    from_loop: mpsc::Receiver<Datagram>,
    to_loop: mpsc::Sender<Datagram>,
}

/// A pipe between the UDP loop and the rendezvous task.
pub fn pipe() -> (LoopSide, TaskSide) {
    let (to_task, from_loop) = mpsc::channel(256);
    let (to_loop, from_task) = mpsc::channel(256);
    (LoopSide { to_task, from_task }, TaskSide { from_loop, to_loop })
}

/// What the device's rendezvous needs from a registration: the tracker's URL and the grant.
pub type GrantUpdate = Option<(String, RendezvousGrant)>;

fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the OS has no randomness");
    u64::from_be_bytes(bytes)
}

fn encode(message: &Msg<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    rdv::encode(&mut out, message).expect("rendezvous messages the runtime builds encode");
    out
}

/// The tracker's UDP address for `port`, of the family of `local`.
async fn tracker_udp(url: &str, port: u16, local: SocketAddr) -> anyhow::Result<SocketAddr> {
    let parsed = reqwest::Url::parse(url)?;
    let host = parsed
        .host_str()
        .ok_or_else(|| anyhow::anyhow!("tracker URL {url} has no host"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4() == local.is_ipv4() || local.ip().is_unspecified() && local.is_ipv6())
        .copied()
        .ok_or_else(|| anyhow::anyhow!("tracker host {host} has no address of the serving socket's family ({local})"))
}

/// The device's rendezvous task: binds after each registration, keeps the mapping open,
/// answers probes and punch requests, and logs every change of the tracker's verdict.
pub async fn run_device(
    mut pipe: TaskSide,
    local: SocketAddr,
    mut grants: watch::Receiver<GrantUpdate>,
    reregister: Arc<AtomicBool>,
    mut stop: watch::Receiver<bool>,
    timings: Timings,
) {
    let mut grant: Option<Granted> = None;
    let mut next_bind = tokio::time::Instant::now();
    loop {
        let wait = grant.as_ref().map(|_| next_bind);
        let mut new_grant = false;
        tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
            }
            changed = grants.changed() => {
                if changed.is_err() {
                    return;
                }
                new_grant = true;
            }
            received = pipe.from_loop.recv() => {
                let Some((from, datagram)) = received else { return };
                if let Some(g) = grant.as_mut() {
                    g.handle(from, &datagram, &pipe.to_loop);
                    if g.status == Some(BindStatus::UnknownToken) {
                        // The tracker restarted (its rendezvous state is in memory) or forgot
                        // the device: only a new registration brings a new token.
                        reregister.store(true, Ordering::Relaxed);
                        grant = None;
                    }
                }
            }
            () = sleep_until(wait) => {
                if let Some(g) = grant.as_mut() {
                    g.send_binds(&pipe.to_loop);
                    let every = if g.bound() { timings.keepalive } else { timings.retry };
                    next_bind = tokio::time::Instant::now() + every;
                }
            }
        }
        if new_grant {
            let update = grants.borrow_and_update().clone();
            grant = match update {
                Some((url, g)) => match Granted::resolve(&url, g, local).await {
                    Ok(granted) => Some(granted),
                    Err(e) => {
                        tracing::warn!(error = %e, "NAT traversal off: cannot reach the tracker's UDP rendezvous");
                        None
                    }
                },
                None => None,
            };
            next_bind = tokio::time::Instant::now();
        }
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// A device's binding with one registration's token.
struct Granted {
    token: Vec<u8>,
    primary: SocketAddr,
    alt: SocketAddr,
    local: SocketAddr,
    txn: (u64, u64),
    mapped: Option<SocketAddr>,
    mapped_alt: Option<SocketAddr>,
    status: Option<BindStatus>,
    warned_ports: Option<(SocketAddr, SocketAddr)>,
    /// Clients the tracker asked this device to punch towards, and when: the first PUNCH from
    /// one is answered once, in case the device's own PUNCH reached the client's NAT before the
    /// client had opened it.
    asked: HashMap<SocketAddr, std::time::Instant>,
}

impl Granted {
    async fn resolve(url: &str, grant: RendezvousGrant, local: SocketAddr) -> anyhow::Result<Granted> {
        let token = hex::decode(&grant.token)
            .map_err(|e| anyhow::anyhow!("the tracker's rendezvous token {:?} is not hex: {e}", grant.token))?;
        Ok(Granted {
            token,
            primary: tracker_udp(url, grant.udp_port, local).await?,
            alt: tracker_udp(url, grant.alt_port, local).await?,
            local,
            txn: (0, 0),
            mapped: None,
            mapped_alt: None,
            status: None,
            warned_ports: None,
            asked: HashMap::new(),
        })
    }

    fn bound(&self) -> bool {
        self.mapped.is_some() && self.mapped_alt.is_some()
    }

    fn send_binds(&mut self, out: &mpsc::Sender<Datagram>) {
        self.txn = (random_u64(), random_u64());
        for (to, txn) in [(self.primary, self.txn.0), (self.alt, self.txn.1)] {
            let _ = out.try_send((
                to,
                encode(&Msg::Bind {
                    txn,
                    token: &self.token,
                }),
            ));
        }
    }

    fn handle(&mut self, from: SocketAddr, datagram: &[u8], out: &mpsc::Sender<Datagram>) {
        let Ok(message) = rdv::decode(datagram) else { return };
        match message {
            Msg::Bound {
                txn, status, mapped, ..
            } => {
                if from == self.primary && (txn == self.txn.0 || txn == 0) {
                    self.mapped = Some(mapped);
                    self.verdict(status);
                } else if from == self.alt && txn == self.txn.1 {
                    self.mapped_alt = Some(mapped);
                }
                self.compare_ports();
            }
            // Answered whatever the source: an advertised address may be a relay or a port
            // forward. The answer is under 3× the PROBE and does not reveal the token.
            Msg::Probe { nonce } => {
                let proof = rdv::probe_proof(&self.token, nonce);
                let _ = out.try_send((from, encode(&Msg::ProbeAck { nonce, proof: &proof })));
            }
            Msg::PunchRequest { token, peer } if from == self.primary && token == self.token.as_slice() => {
                tracing::debug!(%peer, "punching towards a client");
                let punch = encode(&Msg::Punch { nonce: random_u64() });
                let _ = out.try_send((peer, punch));
                let now = std::time::Instant::now();
                self.asked.retain(|_, at| now.duration_since(*at) < ASKED_FOR);
                if self.asked.len() < MAX_ASKED {
                    self.asked.insert(peer, now);
                }
            }
            // Only a client the tracker named, once: never a reflector.
            Msg::Punch { .. } if self.asked.remove(&from).is_some_and(|at| at.elapsed() < ASKED_FOR) => {
                let _ = out.try_send((from, encode(&Msg::Punch { nonce: random_u64() })));
            }
            _ => {}
        }
    }

    /// Says once per pair of mappings that they differ, and what to do.
    fn compare_ports(&mut self) {
        let (Some(a), Some(b)) = (self.mapped, self.mapped_alt) else {
            return;
        };
        if a != b && self.warned_ports != Some((a, b)) {
            self.warned_ports = Some((a, b));
            tracing::warn!(
                "this device's NAT maps each destination to a new port (the tracker's two ports saw {a} and {b}): \
                 viewers cannot reach it by hole punching. Forward a UDP port of the router to {} and run with \
                 --advertise PUBLIC_IP:PORT",
                self.local
            );
        }
    }

    fn verdict(&mut self, status: BindStatus) {
        if self.status == Some(status) {
            return;
        }
        self.status = Some(status);
        let mapped = self.mapped.map_or_else(String::new, |m| m.to_string());
        match status {
            BindStatus::Bound => {}
            BindStatus::ReachableDirect => {
                tracing::info!("reachable: the tracker's probe of the advertised address was answered")
            }
            BindStatus::ReachablePunch => tracing::info!(
                %mapped,
                "behind a NAT: viewers reach this device at its public mapping {mapped} by hole punching"
            ),
            BindStatus::UnreachableSymmetric => tracing::warn!(
                "unreachable: the tracker reports a NAT that maps each destination to a new port, so viewers \
                 cannot reach this device; forward a UDP port to {} and run with --advertise PUBLIC_IP:PORT",
                self.local
            ),
            BindStatus::UnreachableNoAnswer => tracing::warn!(
                "unreachable: the tracker's probes of the advertised address and of {mapped} got no answer; \
                 check that a firewall lets UDP in to {}, or forward a port and use --advertise",
                self.local
            ),
            BindStatus::UnknownToken => {
                tracing::info!("the tracker no longer knows this device's rendezvous token; registering again")
            }
        }
    }
}

/// The address a client binds before it knows its servers: IPv6 when the tracker's host is an
/// IPv6 literal, else IPv4.
pub fn client_socket_addr(tracker_url: &str) -> SocketAddr {
    let v6 = reqwest::Url::parse(tracker_url)
        .ok()
        .is_some_and(|u| u.host_str().is_some_and(|h| h.starts_with('[')));
    if v6 {
        SocketAddr::from(([0u16; 8], 0))
    } else {
        SocketAddr::from(([0u8; 4], 0))
    }
}

/// A client's binding: its public mapping and the token to look up with.
#[derive(Clone, Copy, Debug)]
pub struct ClientBinding {
    pub mapped: SocketAddr,
    pub token: [u8; 8],
}

/// Learns the client's mapping from the tracker's first UDP port, from `socket` (the one the
/// download will use). `None` (logged) when the tracker has no rendezvous or does not answer:
/// the fetch then goes on without hole punching.
pub async fn client_bind(socket: &Socket, tracker: &TrackerClient, timings: &Timings) -> Option<ClientBinding> {
    let ports = match tracker.rendezvous_ports().await {
        Ok(Some(ports)) => ports,
        Ok(None) => return None,
        Err(e) => {
            tracing::warn!(error = %e, "no hole punching: the tracker's rendezvous ports are unknown");
            return None;
        }
    };
    let local = socket.local_addr().ok()?;
    let to = match tracker_udp(tracker.url(), ports.0, local).await {
        Ok(to) => to,
        Err(e) => {
            tracing::warn!(error = %e, "no hole punching");
            return None;
        }
    };
    let mut recv = RecvBatch::new(socket);
    for _ in 0..timings.client_attempts {
        let txn = random_u64();
        let mut send = SendBatch::new();
        send.push(to, &encode(&Msg::Bind { txn, token: &[] }), 1);
        socket.send(&mut send).await;
        let deadline = tokio::time::Instant::now() + timings.retry;
        while let Ok(Ok(())) = tokio::time::timeout_at(deadline, socket.recv(&mut recv)).await {
            for (from, datagram) in recv.datagrams() {
                if from != to {
                    continue;
                }
                if let Ok(Msg::Bound {
                    txn: t, mapped, token, ..
                }) = rdv::decode(datagram)
                    && t == txn
                    && let Ok(token) = <[u8; 8]>::try_from(token)
                {
                    tracing::debug!(%mapped, "client mapping");
                    return Some(ClientBinding { mapped, token });
                }
            }
        }
    }
    tracing::warn!(tracker = %to, "no hole punching: the tracker's UDP rendezvous did not answer");
    None
}

/// Sends a PUNCH to every server, then waits (repeating them) until each server in `punch`
/// has punched back or `timings.punch_wait` has passed; logs those that did not.
pub async fn punch(socket: &Socket, servers: &[(String, SocketAddr)], punch: &HashSet<SocketAddr>, timings: &Timings) {
    let mut heard: HashSet<SocketAddr> = HashSet::new();
    let deadline = tokio::time::Instant::now() + timings.punch_wait;
    let mut recv = RecvBatch::new(socket);
    let mut first = true;
    while heard.len() < punch.len() || first {
        let mut send = SendBatch::new();
        for (_, addr) in servers {
            if first || (punch.contains(addr) && !heard.contains(addr)) {
                send.push(*addr, &encode(&Msg::Punch { nonce: random_u64() }), 1);
            }
        }
        socket.send(&mut send).await;
        first = false;
        if punch.is_empty() {
            return;
        }
        let until = (tokio::time::Instant::now() + timings.punch_repeat).min(deadline);
        while let Ok(Ok(())) = tokio::time::timeout_at(until, socket.recv(&mut recv)).await {
            for (from, datagram) in recv.datagrams() {
                if punch.contains(&from) && matches!(rdv::decode(datagram), Ok(Msg::Punch { .. })) {
                    heard.insert(from);
                }
            }
            if heard.len() == punch.len() {
                break;
            }
        }
        if tokio::time::Instant::now() >= deadline {
            break;
        }
    }
    for (name, addr) in servers {
        if punch.contains(addr) && !heard.contains(addr) {
            tracing::info!(
                server = %name,
                %addr,
                "no hole-punch answer within {:?}; trying it anyway",
                timings.punch_wait
            );
        }
    }
}
