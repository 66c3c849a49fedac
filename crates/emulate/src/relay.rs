//! One relay: a listen socket, an upstream socket per client, and the two links ("down":
//! server → client, the data; "up": client → server, the requests) shared by all its clients.
//!
//! Tasks: the listen task receives clients' datagrams (opening a client's upstream socket on
//! its first datagram, closing it after `idle_timeout` of silence both ways, or when
//! `max_clients` are mapped and it is the longest silent, as a NAT's table does) and offers them to
//! the up link; one task per client receives the server's answers and offers them to the down
//! link; one pump per link sleeps until the link's `next_due`, takes every packet that has left
//! it, and sends them. A link sits behind a mutex held only to enqueue or dequeue.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use pcdn_core::log_limit::LogLimiter;
use pcdn_core::time::Instant;
use pcdn_sim::scenario::UNLIMITED_RATE_BPS;
use pcdn_sim::{Jitter, Link, LinkConfig, LinkError, Loss, Packet, QueueLimit, Rate, link_seed};
use tokio::net::UdpSocket;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use crate::clock::Clock;
use crate::describe::describe_link;

/// How long a client may stay silent both ways before its upstream socket is closed.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Datagrams taken from a socket per wake-up and offered to a link under one lock.
const BATCH: usize = 64;
/// The largest UDP payload.
const MAX_DATAGRAM: usize = 65_535;
/// Socket buffers asked for (the kernel may cap them): loopback bursts at hundreds of Mbit/s
/// overflow the default ~200 kB before a busy task gets to read.
const SOCKET_BUFFER_BYTES: usize = 4 << 20;
/// Clients one relay maps at once by default: each costs a socket and a task. A lab fetch
/// uses one mapping per relay, and 128 keeps seven relays under a 1,024-descriptor limit.
pub const DEFAULT_MAX_CLIENTS: usize = 128;
/// A relay's warnings (an upstream socket it cannot open) are logged at most once a minute per
/// cause, with the count of those not logged: a flood of new source ports cannot fill the log.
const WARN_INTERVAL: Duration = Duration::from_secs(60);
/// A pump yields instead of sleeping when the next exit is nearer than this: tokio's timer
/// rounds every sleep up to a whole millisecond, which would delay a packet whose exit is
/// microseconds away (an unshaped or very fast link) by up to 1 ms.
const SPIN_BELOW: Duration = Duration::from_micros(50);

/// One relay: where it listens, where it forwards, and its two links.
#[derive(Clone, Debug)]
pub struct RelayConfig {
    /// Where clients send (port 0 picks a free port; see [`RelayHandle::local_addr`]).
    pub listen: SocketAddr,
    /// The server every client's datagrams go to.
    pub to: SocketAddr,
    /// Server → client, the data direction. Time zero of its blackouts and changes is the
    /// relay's start.
    pub down: LinkConfig,
    /// Client → server, the requests.
    pub up: LinkConfig,
    /// All the links' randomness (loss, jitter) derives from it.
    pub seed: u64,
    /// A client silent both ways this long loses its upstream socket (its next datagram opens
    /// a new one, so the server sees a new address).
    pub idle_timeout: Duration,
    /// Most clients mapped at once; a new one then takes the place of the longest silent.
    pub max_clients: usize,
}

impl RelayConfig {
    /// A relay with `down` as its data link, the default up link ([`default_up_link`]), seed 0
    /// and the default idle timeout.
    pub fn new(listen: SocketAddr, to: SocketAddr, down: LinkConfig) -> RelayConfig {
        RelayConfig {
            listen,
            to,
            up: default_up_link(&down),
            down,
            seed: 0,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_clients: DEFAULT_MAX_CLIENTS,
        }
    }

    /// One line for logs: `127.0.0.1:7901 -> 127.0.0.1:7801: down 4 Mbit/s, 40 ms, ...; up ...`.
    pub fn summary(&self) -> String {
        format!(
            "{} -> {}: down {}; up {}",
            self.listen,
            self.to,
            describe_link(&self.down),
            describe_link(&self.up)
        )
    }
}

/// The request direction a scenario file gives a server without an `uplink`: the data link's
/// delay, no rate limit, no jitter, no loss, no queue limit.
pub fn default_up_link(down: &LinkConfig) -> LinkConfig {
    LinkConfig {
        rate: Rate::Fixed(UNLIMITED_RATE_BPS),
        delay: down.delay,
        jitter: Jitter::default(),
        loss: Loss::None,
        queue: QueueLimit::UNLIMITED,
        blackouts: Vec::new(),
        changes: Vec::new(),
    }
}

/// Why a relay could not start.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("{direction} link: {source}")]
    Link {
        direction: &'static str,
        #[source]
        source: LinkError,
    },
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
}

/// Counters of one direction since the relay started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectionStats {
    /// Datagrams received and offered to the link (UDP payload bytes, as the link counts).
    pub in_packets: u64,
    pub in_bytes: u64,
    /// Datagrams sent on after the link.
    pub out_packets: u64,
    pub out_bytes: u64,
    /// Refused by the link's full queue (drop-tail).
    pub dropped_packets: u64,
    pub dropped_bytes: u64,
    /// Lost on the link (the loss model or a blackout).
    pub lost_packets: u64,
    pub lost_bytes: u64,
    /// Inside the link now: queued or propagating.
    pub in_link_packets: u64,
    /// Sends the operating system refused.
    pub send_errors: u64,
    /// Datagrams never offered to the link: from a source other than the server (down), or
    /// from a new client when no upstream socket could be opened for it (up).
    pub ignored_packets: u64,
}

/// A snapshot of a relay's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RelayStats {
    /// Server → client.
    pub down: DirectionStats,
    /// Client → server.
    pub up: DirectionStats,
    /// Clients with an upstream socket now.
    pub clients: u64,
    /// Upstream sockets opened since the start.
    pub clients_total: u64,
    /// Mappings closed to make room for a new client (`max_clients`).
    pub clients_evicted: u64,
}

/// A running relay. Dropping it stops the relay too; [`RelayHandle::shutdown`] also waits.
pub struct RelayHandle {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl RelayHandle {
    /// The address clients send to (the listen address with its port resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The server the relay forwards to.
    pub fn server_addr(&self) -> SocketAddr {
        self.shared.to
    }

    pub fn stats(&self) -> RelayStats {
        RelayStats {
            down: self.shared.down.stats(),
            up: self.shared.up.stats(),
            clients: self.shared.clients.load(Relaxed),
            clients_total: self.shared.clients_total.load(Relaxed),
            clients_evicted: self.shared.clients_evicted.load(Relaxed),
        }
    }

    /// Stops every task and closes every socket; packets still inside the links are dropped.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}

impl Drop for RelayHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Starts a relay: builds both links (reading trace files still named in them, relative to
/// the working directory), binds the listen socket and spawns the tasks on the current tokio
/// runtime. Time zero of the links is now.
pub async fn spawn_relay(config: RelayConfig) -> Result<RelayHandle, RelayError> {
    let link = |direction, cfg: &LinkConfig, index| {
        Link::new(cfg, link_seed(config.seed, index)).map_err(|source| RelayError::Link { direction, source })
    };
    let down = link("down", &config.down, 0)?;
    let up = link("up", &config.up, 1)?;
    let listen = bind_udp(config.listen).map_err(|source| RelayError::Listen {
        addr: config.listen,
        source,
    })?;
    let local_addr = listen.local_addr().map_err(|source| RelayError::Listen {
        addr: config.listen,
        source,
    })?;
    let shared = Arc::new(Shared {
        clock: Clock::start(),
        listen: Arc::new(listen),
        to: config.to,
        idle_timeout: config.idle_timeout,
        max_clients: config.max_clients.max(1),
        down: Direction::new(down),
        up: Direction::new(up),
        clients: AtomicU64::new(0),
        clients_total: AtomicU64::new(0),
        clients_evicted: AtomicU64::new(0),
        warnings: LogLimiter::new(WARN_INTERVAL),
    });
    let cancel = CancellationToken::new();
    let tasks = TaskTracker::new();
    tasks.spawn(listen_task(shared.clone(), cancel.clone(), tasks.clone()));
    tasks.spawn(pump(shared.clone(), Which::Down, cancel.clone()));
    tasks.spawn(pump(shared.clone(), Which::Up, cancel.clone()));
    debug!("relay {local_addr} -> {} started", config.to);
    Ok(RelayHandle {
        shared,
        local_addr,
        cancel,
        tasks,
    })
}

/// What every task of a relay shares.
struct Shared {
    clock: Clock,
    listen: Arc<UdpSocket>,
    to: SocketAddr,
    idle_timeout: Duration,
    max_clients: usize,
    down: Direction,
    up: Direction,
    clients: AtomicU64,
    clients_total: AtomicU64,
    clients_evicted: AtomicU64,
    warnings: LogLimiter,
}

#[derive(Clone, Copy)]
enum Which {
    Down,
    Up,
}

impl Shared {
    fn direction(&self, which: Which) -> &Direction {
        match which {
            Which::Down => &self.down,
            Which::Up => &self.up,
        }
    }
}

/// A datagram inside a link, and how it leaves: from `socket` to `dest`.
struct Outgoing {
    socket: Arc<UdpSocket>,
    dest: SocketAddr,
    bytes: Vec<u8>,
}

/// One link and its pump's bookkeeping.
struct Direction {
    state: Mutex<LinkState>,
    /// Wakes the pump when a packet is due before its planned wake-up.
    wake: Notify,
    sent_packets: AtomicU64,
    sent_bytes: AtomicU64,
    send_errors: AtomicU64,
    ignored_packets: AtomicU64,
}

struct LinkState {
    link: Link<Outgoing>,
    /// When the pump will next look at the link (ns of link time; `u64::MAX`: only when woken).
    planned_wake: u64,
}

impl Direction {
    fn new(link: Link<Outgoing>) -> Direction {
        Direction {
            state: Mutex::new(LinkState {
                link,
                planned_wake: u64::MAX,
            }),
            wake: Notify::new(),
            sent_packets: AtomicU64::new(0),
            sent_bytes: AtomicU64::new(0),
            send_errors: AtomicU64::new(0),
            ignored_packets: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LinkState> {
        // The link holds no invariant a panicking sender could break halfway.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Offers received datagrams to the link (the full queue drops some), waking the pump if
    /// one of them is due before it planned to look.
    fn offer(&self, clock: &Clock, batch: &mut Vec<Packet<Outgoing>>) {
        if batch.is_empty() {
            return;
        }
        let mut state = self.lock();
        // Read under the lock: tasks offering at once must not hand the link times out of order.
        let now = clock.now();
        for packet in batch.drain(..) {
            state.link.enqueue(now, packet);
        }
        let due = state.link.next_due().map_or(u64::MAX, Instant::as_nanos);
        let wake = due < state.planned_wake;
        if wake {
            state.planned_wake = due;
        }
        drop(state);
        if wake {
            self.wake.notify_one();
        }
    }

    /// Moves every packet that has left the link into `out`; returns when the next one will.
    fn take_due(&self, clock: &Clock, out: &mut Vec<Packet<Outgoing>>) -> Option<Instant> {
        let mut state = self.lock();
        let now = clock.now();
        while let Some((_, packet)) = state.link.dequeue(now) {
            out.push(packet);
        }
        let next = state.link.next_due();
        state.planned_wake = next.map_or(u64::MAX, Instant::as_nanos);
        next
    }

    async fn send(&self, packet: Packet<Outgoing>) {
        let Outgoing { socket, dest, bytes } = packet.payload;
        match socket.send_to(&bytes, dest).await {
            Ok(_) => {
                self.sent_packets.fetch_add(1, Relaxed);
                self.sent_bytes.fetch_add(bytes.len() as u64, Relaxed);
            }
            Err(e) => {
                self.send_errors.fetch_add(1, Relaxed);
                debug!("send to {dest} failed: {e}");
            }
        }
    }

    fn stats(&self) -> DirectionStats {
        let state = self.lock();
        let l = *state.link.stats();
        let in_link = state.link.queued_packets() + state.link.propagating_packets();
        drop(state);
        DirectionStats {
            in_packets: l.enqueued_packets + l.dropped_packets,
            in_bytes: l.enqueued_bytes + l.dropped_bytes,
            out_packets: self.sent_packets.load(Relaxed),
            out_bytes: self.sent_bytes.load(Relaxed),
            dropped_packets: l.dropped_packets,
            dropped_bytes: l.dropped_bytes,
            lost_packets: l.lost_packets,
            lost_bytes: l.lost_bytes,
            in_link_packets: in_link as u64,
            send_errors: self.send_errors.load(Relaxed),
            ignored_packets: self.ignored_packets.load(Relaxed),
        }
    }
}

/// Sends what leaves one link, sleeping until its next exit.
async fn pump(shared: Arc<Shared>, which: Which, cancel: CancellationToken) {
    let dir = shared.direction(which);
    let mut out = Vec::with_capacity(BATCH);
    loop {
        let next = dir.take_due(&shared.clock, &mut out);
        for packet in out.drain(..) {
            dir.send(packet).await;
        }
        match next {
            Some(due) if due.saturating_duration_since(shared.clock.now()) < SPIN_BELOW => {
                tokio::task::yield_now().await;
                if cancel.is_cancelled() {
                    return;
                }
            }
            Some(due) => tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep_until(shared.clock.deadline(due)) => {}
                _ = dir.wake.notified() => {}
            },
            None => tokio::select! {
                _ = cancel.cancelled() => return,
                _ = dir.wake.notified() => {}
            },
        }
    }
}

/// A client's mapping: its own upstream socket towards the server.
struct Client {
    upstream: Arc<UdpSocket>,
    /// Link time (ns) of the last datagram either way.
    last_active: AtomicU64,
    cancel: CancellationToken,
}

/// Receives clients' datagrams, keeps the client table, and offers the datagrams to the up link.
async fn listen_task(shared: Arc<Shared>, cancel: CancellationToken, tasks: TaskTracker) {
    let mut clients: HashMap<SocketAddr, Arc<Client>> = HashMap::new();
    let mut sweep = tokio::time::interval(sweep_period(shared.idle_timeout));
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = sweep.tick() => {
                expire_idle(&shared, &mut clients);
                continue;
            }
            ready = shared.listen.readable() => if let Err(e) = ready {
                warn!("relay {}: listen socket failed: {e}", shared.to);
                break;
            }
        }
        let now = shared.clock.now().as_nanos();
        while batch.len() < BATCH {
            let (n, from) = match shared.listen.try_recv_from(&mut buf) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    debug!("receive on the listen socket failed: {e}");
                    break;
                }
            };
            let client = match clients.get(&from) {
                Some(c) => c.clone(),
                None => match open_client(&shared, &cancel, &tasks, from, now, &mut clients) {
                    Some(c) => {
                        clients.insert(from, c.clone());
                        c
                    }
                    None => {
                        shared.up.ignored_packets.fetch_add(1, Relaxed);
                        continue;
                    }
                },
            };
            client.last_active.store(now, Relaxed);
            let outgoing = Outgoing {
                socket: client.upstream.clone(),
                dest: shared.to,
                bytes: buf[..n].to_vec(),
            };
            batch.push(Packet::new(n as u32, outgoing));
        }
        shared.up.offer(&shared.clock, &mut batch);
    }
    for client in clients.values() {
        client.cancel.cancel();
    }
}

/// Opens a new client's upstream socket and starts its receive task, first closing the
/// longest silent client's if `max_clients` are mapped (a scan, paid only by a new client
/// at the cap).
fn open_client(
    shared: &Arc<Shared>,
    cancel: &CancellationToken,
    tasks: &TaskTracker,
    addr: SocketAddr,
    now: u64,
    clients: &mut HashMap<SocketAddr, Arc<Client>>,
) -> Option<Arc<Client>> {
    if clients.len() >= shared.max_clients {
        let stalest = clients
            .iter()
            .min_by_key(|(_, c)| c.last_active.load(Relaxed))
            .map(|(a, _)| *a);
        if let Some(old) = stalest.and_then(|a| clients.remove(&a)) {
            debug!(
                "relay -> {}: {} clients, mapping of the longest silent closed",
                shared.to, shared.max_clients
            );
            old.cancel.cancel();
            shared.clients.fetch_sub(1, Relaxed);
            shared.clients_evicted.fetch_add(1, Relaxed);
        }
    }
    let bind = upstream_bind_addr(shared.to);
    let upstream = match bind_udp(bind) {
        Ok(s) => s,
        Err(e) => {
            if let Some(suppressed) = shared.warnings.allow(&format!("bind {:?}", e.kind())) {
                warn!(
                    suppressed,
                    "relay -> {}: cannot open an upstream socket on {bind} for {addr}: {e}", shared.to
                );
            }
            return None;
        }
    };
    if let Ok(local) = upstream.local_addr() {
        debug!("client {addr} reaches {} from {local}", shared.to);
    }
    let client = Arc::new(Client {
        upstream: Arc::new(upstream),
        last_active: AtomicU64::new(now),
        cancel: cancel.child_token(),
    });
    shared.clients.fetch_add(1, Relaxed);
    shared.clients_total.fetch_add(1, Relaxed);
    tasks.spawn(upstream_task(shared.clone(), client.clone(), addr));
    Some(client)
}

/// Receives the server's datagrams for one client and offers them to the down link.
async fn upstream_task(shared: Arc<Shared>, client: Arc<Client>, client_addr: SocketAddr) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        tokio::select! {
            _ = client.cancel.cancelled() => return,
            ready = client.upstream.readable() => if let Err(e) = ready {
                warn!("upstream socket of {client_addr} failed: {e}");
                return;
            }
        }
        while batch.len() < BATCH {
            let (n, from) = match client.upstream.try_recv_from(&mut buf) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    debug!("receive on the upstream socket of {client_addr} failed: {e}");
                    break;
                }
            };
            if from != shared.to {
                // Only the server may speak to a client through its mapping.
                shared.down.ignored_packets.fetch_add(1, Relaxed);
                continue;
            }
            let outgoing = Outgoing {
                socket: shared.listen.clone(),
                dest: client_addr,
                bytes: buf[..n].to_vec(),
            };
            batch.push(Packet::new(n as u32, outgoing));
        }
        if !batch.is_empty() {
            client.last_active.store(shared.clock.now().as_nanos(), Relaxed);
            shared.down.offer(&shared.clock, &mut batch);
        }
    }
}

/// Closes the mappings of clients silent both ways for the idle timeout.
fn expire_idle(shared: &Shared, clients: &mut HashMap<SocketAddr, Arc<Client>>) {
    let now = shared.clock.now().as_nanos();
    let idle = u64::try_from(shared.idle_timeout.as_nanos()).unwrap_or(u64::MAX);
    clients.retain(|addr, client| {
        let keep = now.saturating_sub(client.last_active.load(Relaxed)) < idle;
        if !keep {
            debug!("client {addr} idle, mapping closed");
            client.cancel.cancel();
            shared.clients.fetch_sub(1, Relaxed);
        }
        keep
    });
}

/// How often idle mappings are looked for: a quarter of the timeout, within [10 ms, 1 s].
fn sweep_period(idle: Duration) -> Duration {
    (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// Where a client's upstream socket binds: loopback for a loopback server (the server then
/// sees 127.0.0.1 or ::1), else the unspecified address of the server's family.
fn upstream_bind_addr(to: SocketAddr) -> SocketAddr {
    let ip = match to.ip() {
        IpAddr::V4(ip) if ip.is_loopback() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(ip) if ip.is_loopback() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    SocketAddr::new(ip, 0)
}

/// A non-blocking tokio UDP socket bound to `addr`, with large buffers where the kernel allows.
fn bind_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Best effort: the kernel caps both at its configured maximum.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER_BYTES);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER_BYTES);
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    UdpSocket::from_std(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_sockets_bind_like_the_server() {
        let at = |s: &str| upstream_bind_addr(s.parse().unwrap()).to_string();
        assert_eq!(at("127.0.0.1:7801"), "127.0.0.1:0");
        assert_eq!(at("127.0.0.2:7801"), "127.0.0.1:0");
        assert_eq!(at("192.0.2.7:7801"), "0.0.0.0:0");
        assert_eq!(at("[::1]:7801"), "[::1]:0");
        assert_eq!(at("[2001:db8::1]:7801"), "[::]:0");
    }

    #[test]
    fn sweep_period_is_bounded() {
        assert_eq!(sweep_period(Duration::from_secs(60)), Duration::from_secs(1));
        assert_eq!(sweep_period(Duration::from_millis(400)), Duration::from_millis(100));
        assert_eq!(sweep_period(Duration::ZERO), Duration::from_millis(10));
    }

    #[test]
    fn default_up_link_follows_the_data_link_delay_only() {
        let down = LinkConfig::fixed(4_000_000, Duration::from_millis(40)).with_loss(Loss::Bernoulli(0.1));
        let up = default_up_link(&down);
        assert_eq!(up.delay, Duration::from_millis(40));
        assert_eq!(up.rate, Rate::Fixed(UNLIMITED_RATE_BPS));
        assert_eq!(up.loss, Loss::None);
        assert_eq!(up.queue, QueueLimit::UNLIMITED);
    }
}
