//! The simulated world: one client `Download` and its servers' `ServerSession`s — the real
//! protocol core — joined by the link model, in virtual time.
//!
//! One thread, one event loop, one seed: the network's links, the servers' token keys and the
//! client's connection ids all derive from it, so the same seed gives the same run.

use crate::link::{LinkConfig, LinkError, Packet};
use crate::network::{Network, RouteId};
use pcdn_core::ReorderConfig;
use pcdn_core::cc;
use pcdn_core::player::PlayerConfig;
use pcdn_core::scheduler::{self, WeaveConfig};
use pcdn_core::server::{ContentInfo, ContentSource, ServerConfig, ServerSession};
use pcdn_core::stats::Stats;
use pcdn_core::time::{Duration, Instant};
use pcdn_core::wire;
use pcdn_core::{Download, DownloadConfig, PathId, ServerInfo, Transport};
use std::net::{Ipv4Addr, SocketAddr};

/// One server of the world.
#[derive(Clone, Debug)]
pub struct ServerSpec {
    pub name: String,
    /// The CDN origin (its bytes count toward the CDN share).
    pub origin: bool,
    /// Server → client (data direction).
    pub link: LinkConfig,
    /// Client → server (requests).
    pub uplink: LinkConfig,
    /// The server stops answering at this time (its queued requests are lost).
    pub fail_at: Option<Duration>,
    /// The server comes back at this time, as a fresh process (new sessions, new key).
    pub recover_at: Option<Duration>,
    /// The device's upload cap in bit/s (datagram bytes).
    pub upload_limit: Option<u64>,
}

/// A link that several servers' data share, after their own links.
#[derive(Clone, Debug)]
pub struct BottleneckSpec {
    pub link: LinkConfig,
    /// Indices into [`WorldSpec::servers`].
    pub servers: Vec<usize>,
}

/// Everything one simulation run needs besides the scheduler, the congestion control and the seed.
#[derive(Clone, Debug)]
pub struct WorldSpec {
    /// Content length in bytes.
    pub content_length: u64,
    /// Payload bytes per packet.
    pub packet_size: u32,
    /// Ordered tasks of this many bytes; `None`: the video's segments when a video plays
    /// ([`World::with_video`]), else the whole content at once.
    pub task_size: Option<u64>,
    /// Bytes the client may request beyond its in-order cursor.
    pub reorder_buffer: u64,
    pub servers: Vec<ServerSpec>,
    pub bottlenecks: Vec<BottleneckSpec>,
    /// Virtual-time limit of the run.
    pub duration: Duration,
    /// weave's switches and constants, when weave is the scheduler (`[client] weave`).
    pub weave: WeaveConfig,
    /// The client's reordering window (`[client] reordering`, RFC 8985 §6.2).
    pub reordering: ReorderConfig,
    /// The client's tail loss probes (`[client] tail_probes`, RFC 8985 §7).
    pub tail_probes: bool,
}

/// What one run measured.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub stats: Stats,
    /// Aggregate capacity in bit/s as the metrics define it (see [`WorldSpec::capacity_bps`]).
    pub capacity_bps: f64,
    /// The download finished within the duration.
    pub completed: bool,
    /// Virtual time when the run stopped.
    pub end: Instant,
    /// DATA datagrams the servers sent.
    pub data_packets: u64,
}

/// Why a world could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    #[error("unknown scheduler {0:?} (see `pcdn sim --list`)")]
    UnknownScheduler(String),
    #[error("unknown congestion control {0:?} (see `pcdn sim --list`)")]
    UnknownCc(String),
    #[error("unknown transport {0:?} (pull, subflow or subflow-or)")]
    UnknownTransport(String),
    #[error("server {server:?}: {source}")]
    Link { server: String, source: LinkError },
    #[error("bottleneck {index}: {source}")]
    Bottleneck { index: usize, source: LinkError },
    #[error("bottleneck {index} names server index {server}, which does not exist")]
    BottleneckServer { index: usize, server: usize },
    #[error("the download cannot be set up: {0}")]
    Download(String),
    #[error("a world needs at least one server")]
    NoServers,
}

/// Synthetic content: all zeros, so serving a packet costs no copy beyond the datagram.
#[derive(Clone, Copy, Debug)]
struct ZeroContent {
    id: wire::ContentId,
    length: u64,
}

impl ContentSource for ZeroContent {
    fn info(&self, id: &wire::ContentId) -> Option<ContentInfo> {
        (*id == self.id).then_some(ContentInfo { length: self.length })
    }
    fn read(&self, id: &wire::ContentId, offset: u64, buf: &mut [u8]) -> bool {
        // The server zero-fills the payload before asking; nothing to do but check.
        *id == self.id && offset + buf.len() as u64 <= self.length
    }
}

impl WorldSpec {
    /// Aggregate capacity in bit/s: each server's data-direction bottleneck rate (its link, its
    /// upload cap, a shared bottleneck) × (1 − loss), summed; where servers share a bottleneck,
    /// their sum is capped by the bottleneck's rate × (1 − its loss).
    pub fn capacity_bps(&self) -> f64 {
        let own: Vec<f64> = self
            .servers
            .iter()
            .map(|s| {
                let mut rate = link_rate_bps(&s.link);
                if let Some(cap) = s.upload_limit {
                    rate = rate.min(cap as f64);
                }
                rate * (1.0 - s.link.loss.mean_loss())
            })
            .collect();
        // Losses on the servers' own links come before the bottleneck and do not use it.
        self.through_bottlenecks(&own, |b| link_rate_bps(&b.link) * (1.0 - b.link.loss.mean_loss()))
    }

    /// The servers' usable rates `own` (bit/s, by server) summed, each bottleneck's members
    /// capped together at `capacity(bottleneck)`.
    pub(crate) fn through_bottlenecks(&self, own: &[f64], capacity: impl Fn(&BottleneckSpec) -> f64) -> f64 {
        let mut shared = vec![false; own.len()];
        let mut total = 0.0;
        for b in &self.bottlenecks {
            let members: f64 = b.servers.iter().filter_map(|&i| own.get(i)).sum();
            total += members.min(capacity(b));
            for &i in &b.servers {
                if let Some(s) = shared.get_mut(i) {
                    *s = true;
                }
            }
        }
        total
            + own
                .iter()
                .zip(&shared)
                .filter(|(_, s)| !**s)
                .map(|(c, _)| c)
                .sum::<f64>()
    }

    fn download_config(&self, content: wire::ContentId, seed: u64, video: Option<&PlayerConfig>) -> DownloadConfig {
        download_config(
            content,
            self.content_length,
            self.packet_size,
            self.task_size,
            self.reorder_buffer,
            seed,
            video,
        )
        .with_reordering(self.reordering.clone())
        .with_tail_probes(self.tail_probes)
    }
}

/// A simulated client's download of `content_length` bytes: tasks of `task_size`, or the
/// video's segments when a video plays, or the whole content at once.
pub(crate) fn download_config(
    content: wire::ContentId,
    content_length: u64,
    packet_size: u32,
    task_size: Option<u64>,
    reorder_buffer: u64,
    seed: u64,
    video: Option<&PlayerConfig>,
) -> DownloadConfig {
    let mut config = DownloadConfig::new(content, content_length, packet_size);
    config.reorder_buffer = reorder_buffer;
    config.keep_data = false;
    config.seed = seed;
    // The simulated clock wakes every node exactly when it asked: no late timer to make up.
    config.pacing_slack = Duration::ZERO;
    if let Some(size) = task_size.filter(|&s| s > 0 && s < content_length) {
        config.tasks = (0..content_length.div_ceil(size))
            .map(|i| i * size..((i + 1) * size).min(content_length))
            .collect();
    } else if let Some(video) = video.filter(|_| task_size.is_none()) {
        // Douyin's PCDN fetches one segment per task (Pscheduler §III-A); bytes after the
        // video, if any, are the last task.
        let spec = &video.spec;
        config.tasks = (0..spec.segments()).map(|i| spec.segment_bytes(i)).collect();
        let end = spec.total_bytes();
        if end < content_length {
            config.tasks.push(end..content_length);
        }
        config.tasks.retain(|t| !t.is_empty());
    }
    config.video = video.cloned();
    config
}

/// Mean rate of a link's configured rate in bit/s.
pub(crate) fn link_rate_bps(link: &LinkConfig) -> f64 {
    match &link.rate {
        crate::link::Rate::Fixed(bps) => *bps as f64,
        crate::link::Rate::Trace(t) => t.mean_rate_bps(),
        crate::link::Rate::TraceFile(_) => 0.0,
    }
}

/// A datagram in flight, kept small: a simulation holds thousands in its queues and moves each
/// one several times per link, so every byte of it is copied over and over. The synthetic
/// content is all zeros, so a DATA travels as its header and payload length and is rebuilt,
/// byte for byte, when it arrives; anything else (REQUEST, HELLO, WELCOME, ...) travels in a
/// buffer that goes back to the world's spares when it is delivered.
pub(crate) enum Datagram {
    ZeroData {
        header: [u8; wire::DATA_HEADER_LEN],
        payload: u16,
    },
    Bytes(Vec<u8>),
}

impl Datagram {
    /// `bytes` in compact form; a buffer is taken from `spares` when one is needed.
    pub(crate) fn compact(bytes: &[u8], spares: &mut Vec<Vec<u8>>) -> Datagram {
        let header = wire::DATA_HEADER_LEN;
        if bytes.len() >= header && bytes[1] == wire::kind::DATA {
            debug_assert!(
                bytes[header..].iter().all(|&b| b == 0),
                "simulated content is all zeros"
            );
            let mut h = [0u8; wire::DATA_HEADER_LEN];
            h.copy_from_slice(&bytes[..header]);
            return Datagram::ZeroData {
                header: h,
                payload: (bytes.len() - header) as u16,
            };
        }
        let mut buf = spares.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(bytes);
        Datagram::Bytes(buf)
    }

    /// The datagram's bytes; a compact DATA is rebuilt in `rx` (zeroed past the header, at
    /// least [`wire::MAX_DATAGRAM`] bytes long).
    pub(crate) fn bytes<'a>(&'a self, rx: &'a mut [u8]) -> &'a [u8] {
        match self {
            Datagram::ZeroData { header, payload } => {
                rx[..wire::DATA_HEADER_LEN].copy_from_slice(header);
                &rx[..wire::DATA_HEADER_LEN + usize::from(*payload)]
            }
            Datagram::Bytes(v) => v,
        }
    }
}

/// A server node: its session (absent while failed) and its routes.
struct ServerNode {
    session: Option<ServerSession<ZeroContent>>,
    config: ServerConfig,
    down: RouteId,
    up: RouteId,
    path: PathId,
    info: ServerInfo,
    fail_at: Option<Instant>,
    recover_at: Option<Instant>,
    /// Incarnation count, so a recovered server gets a new token key.
    generation: u64,
    /// Had an input since its last flush (and is listed in `World::dirty_servers`).
    dirty: bool,
    /// Its session's next timer, as of its last flush.
    timer: Option<Instant>,
}

/// Where a route ends.
#[derive(Clone, Copy)]
enum Endpoint {
    Client { server: usize },
    Server(usize),
}

const CLIENT_ADDR: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 9000);

fn token_key(seed: u64, server: usize, generation: u64) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key("pcdn-sim 2025 server token key");
    h.update(&seed.to_le_bytes());
    h.update(&(server as u64).to_le_bytes());
    h.update(&generation.to_le_bytes());
    *h.finalize().as_bytes()
}

/// Runs one download of `spec` with `scheduler` and `cc`, seeded with `seed`.
pub fn run(spec: &WorldSpec, scheduler: &str, cc: &str, seed: u64) -> Result<Outcome, WorldError> {
    World::new(spec, scheduler, cc, seed)?.run()
}

/// [`run`], with `video` (if any) played from the content's first byte while it downloads.
pub fn run_with_video(
    spec: &WorldSpec,
    video: Option<&PlayerConfig>,
    scheduler: &str,
    cc: &str,
    seed: u64,
) -> Result<Outcome, WorldError> {
    World::with_video(spec, video, scheduler, cc, seed)?.run()
}

/// [`run_with_video`] on `transport`, a name of `pcdn_core::Transport::NAMES`.
pub fn run_on(
    spec: &WorldSpec,
    video: Option<&PlayerConfig>,
    scheduler: &str,
    cc: &str,
    transport: &str,
    seed: u64,
) -> Result<Outcome, WorldError> {
    let transport = Transport::by_name(transport).ok_or_else(|| WorldError::UnknownTransport(transport.into()))?;
    let sched = scheduler::by_name_with(scheduler, seed, &spec.weave)
        .ok_or_else(|| WorldError::UnknownScheduler(scheduler.into()))?;
    World::with_transport(spec, video, sched, cc, transport, seed)?.run()
}

/// The simulation state of one run.
pub struct World {
    client: Download,
    servers: Vec<ServerNode>,
    network: Network<Datagram>,
    endpoints: Vec<Endpoint>,
    cc: Box<dyn cc::ControllerFactory>,
    packet_size: u32,
    capacity_bps: f64,
    deadline: Instant,
    now: Instant,
    buf: Vec<u8>,
    /// Where compact DATA datagrams are rebuilt on delivery: a header, then zeros.
    rx: Vec<u8>,
    /// Buffers of delivered non-DATA datagrams, for the next ones (those lost in the network
    /// are simply freed).
    spares: Vec<Vec<u8>>,
    data_packets: u64,
    content: ZeroContent,
    seed: u64,
    client_dirty: bool,
    client_timer: Option<Instant>,
    /// The servers that had an input since the last flush, so a flush visits only them.
    dirty_servers: Vec<usize>,
    /// The servers' earliest timer or failure event, while `servers_event_stale` is false:
    /// server timers seldom change, and the loop asks for the earliest event at every step.
    servers_event: Option<Instant>,
    servers_event_stale: bool,
}

impl World {
    /// Builds the world of `spec`; nothing has happened yet.
    pub fn new(spec: &WorldSpec, scheduler: &str, cc_name: &str, seed: u64) -> Result<World, WorldError> {
        World::with_video(spec, None, scheduler, cc_name, seed)
    }

    /// [`World::new`], with `video` (if any) played from the content's first byte: its QoE
    /// lands in `Stats::player`, and without a `task_size` the tasks are its segments.
    pub fn with_video(
        spec: &WorldSpec,
        video: Option<&PlayerConfig>,
        scheduler: &str,
        cc_name: &str,
        seed: u64,
    ) -> Result<World, WorldError> {
        if spec.servers.is_empty() {
            return Err(WorldError::NoServers);
        }
        let sched = scheduler::by_name_with(scheduler, seed, &spec.weave)
            .ok_or_else(|| WorldError::UnknownScheduler(scheduler.into()))?;
        World::with_scheduler(spec, video, sched, cc_name, seed)
    }

    /// [`World::with_video`] with a scheduler object instead of a registered name, so a test's
    /// own scheduler, or one built with other settings, runs in this same event loop.
    pub fn with_scheduler(
        spec: &WorldSpec,
        video: Option<&PlayerConfig>,
        sched: Box<dyn scheduler::Scheduler>,
        cc_name: &str,
        seed: u64,
    ) -> Result<World, WorldError> {
        World::with_transport(spec, video, sched, cc_name, Transport::Pull, seed)
    }

    /// [`World::with_scheduler`] on `transport` (the others run pcdn's `pull`).
    pub fn with_transport(
        spec: &WorldSpec,
        video: Option<&PlayerConfig>,
        sched: Box<dyn scheduler::Scheduler>,
        cc_name: &str,
        transport: Transport,
        seed: u64,
    ) -> Result<World, WorldError> {
        if spec.servers.is_empty() {
            return Err(WorldError::NoServers);
        }
        let cc = cc::by_name(cc_name).ok_or_else(|| WorldError::UnknownCc(cc_name.into()))?;
        let mut id = [0u8; 32];
        id[..8].copy_from_slice(&spec.content_length.to_be_bytes());
        let content_id = wire::ContentId(id);
        let content = ZeroContent {
            id: content_id,
            length: spec.content_length,
        };
        let config = DownloadConfig {
            transport,
            ..spec.download_config(content_id, seed, video)
        };
        let mut client = Download::new(config, sched).map_err(|e| WorldError::Download(e.to_string()))?;
        let mut network = Network::new(seed);
        // Bottleneck links first, so that a server's route can end in its bottleneck.
        let mut bottleneck_of = vec![None; spec.servers.len()];
        let mut bottleneck_links = Vec::new();
        for (index, b) in spec.bottlenecks.iter().enumerate() {
            let link = network
                .add_link(&b.link)
                .map_err(|source| WorldError::Bottleneck { index, source })?;
            bottleneck_links.push(link);
            for &s in &b.servers {
                *bottleneck_of
                    .get_mut(s)
                    .ok_or(WorldError::BottleneckServer { index, server: s })? = Some(link);
            }
        }
        let mut servers = Vec::new();
        let mut endpoints = Vec::new();
        for (i, s) in spec.servers.iter().enumerate() {
            let err = |source| WorldError::Link {
                server: s.name.clone(),
                source,
            };
            let own = network.add_link(&s.link).map_err(err)?;
            let uplink = network.add_link(&s.uplink).map_err(err)?;
            let down = match bottleneck_of[i] {
                Some(b) => network.add_route(&[own, b]),
                None => network.add_route(&[own]),
            };
            let up = network.add_route(&[uplink]);
            endpoints.resize(
                endpoints.len().max(down.0 as usize + 1).max(up.0 as usize + 1),
                Endpoint::Server(i),
            );
            endpoints[down.0 as usize] = Endpoint::Client { server: i };
            endpoints[up.0 as usize] = Endpoint::Server(i);
            let info = ServerInfo {
                name: s.name.clone(),
                origin: s.origin,
            };
            let path = client.add_path(
                Instant::ZERO,
                info.clone(),
                cc.build(Instant::ZERO, u64::from(spec.packet_size)),
            );
            let config = ServerConfig {
                packet_size: spec.packet_size as u16,
                token_key: token_key(seed, i, 0),
                upload_rate: s.upload_limit.map(|bps| bps / 8),
                // An edge device's burst: a few packets, so the cap holds on short time scales.
                upload_burst: 4 * (u64::from(spec.packet_size) + wire::DATA_HEADER_LEN as u64),
                ..ServerConfig::default()
            };
            servers.push(ServerNode {
                session: Some(ServerSession::new(config.clone(), content)),
                config,
                down,
                up,
                path,
                info,
                fail_at: s.fail_at.map(|d| Instant::ZERO + d),
                recover_at: s.recover_at.map(|d| Instant::ZERO + d),
                generation: 0,
                dirty: true,
                timer: None,
            });
        }
        Ok(World {
            client,
            servers,
            network,
            endpoints,
            cc,
            packet_size: spec.packet_size,
            capacity_bps: spec.capacity_bps(),
            deadline: Instant::ZERO + spec.duration,
            now: Instant::ZERO,
            buf: Vec::with_capacity(wire::MAX_DATAGRAM),
            rx: vec![0; wire::MAX_DATAGRAM],
            spares: Vec::new(),
            data_packets: 0,
            content,
            seed,
            client_dirty: true,
            client_timer: None,
            dirty_servers: (0..spec.servers.len()).collect(),
            servers_event: None,
            servers_event_stale: true,
        })
    }

    /// The datagram just written into `self.buf`, in its compact form.
    fn datagram(&mut self) -> Datagram {
        Datagram::compact(&self.buf, &mut self.spares)
    }

    /// Puts everything the nodes that had an input want to send on the network, and notes
    /// their next timers. Untouched nodes have nothing new to say.
    fn flush(&mut self) {
        let now = self.now;
        if self.client_dirty {
            while let Some(t) = self.client.poll_transmit(now, &mut self.buf) {
                self.buf.truncate(t.len);
                let Some(server) = self.servers.iter().position(|s| s.path == t.path) else {
                    continue;
                };
                let route = self.servers[server].up;
                let datagram = self.datagram();
                self.network.send(now, route, Packet::new(t.len as u32, datagram));
            }
            self.client_timer = self.client.poll_timeout();
            self.client_dirty = false;
        }
        if self.dirty_servers.is_empty() {
            return;
        }
        let mut dirty = std::mem::take(&mut self.dirty_servers);
        // In server order, as when every server was visited: their sends may share a link.
        dirty.sort_unstable();
        for &i in &dirty {
            while let Some(len) = self.poll_server(i) {
                self.buf.truncate(len);
                if self.buf.get(1) == Some(&wire::kind::DATA) {
                    self.data_packets += 1;
                }
                let route = self.servers[i].down;
                let datagram = self.datagram();
                self.network.send(now, route, Packet::new(len as u32, datagram));
            }
            let node = &mut self.servers[i];
            let timer = node.session.as_ref().and_then(|s| s.poll_timeout());
            if timer != node.timer {
                node.timer = timer;
                self.servers_event_stale = true;
            }
            node.dirty = false;
        }
        dirty.clear();
        self.dirty_servers = dirty;
    }

    /// Server `i` had an input: its next flush polls it.
    fn mark_dirty(&mut self, i: usize) {
        let node = &mut self.servers[i];
        if !node.dirty {
            node.dirty = true;
            self.dirty_servers.push(i);
        }
    }

    /// The next datagram server `i` sends, written into `self.buf`.
    fn poll_server(&mut self, i: usize) -> Option<usize> {
        let session = self.servers[i].session.as_mut()?;
        session.poll_transmit(self.now, &mut self.buf).map(|t| t.len)
    }

    /// The earliest node timer or failure event.
    fn next_node_event(&mut self) -> Option<Instant> {
        if self.servers_event_stale {
            self.servers_event = self
                .servers
                .iter()
                .flat_map(|s| {
                    [
                        s.timer,
                        s.fail_at.filter(|_| s.session.is_some()),
                        s.recover_at.filter(|_| s.session.is_none()),
                    ]
                })
                .flatten()
                .min();
            self.servers_event_stale = false;
        }
        match (self.client_timer, self.servers_event) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn handle_node_events(&mut self) {
        let now = self.now;
        self.servers_event_stale = true;
        if self.client_timer.is_some_and(|t| t <= now) {
            self.client.handle_timeout(now);
            self.client_dirty = true;
        }
        for i in 0..self.servers.len() {
            let node = &mut self.servers[i];
            if node.session.is_some() && node.fail_at.is_some_and(|t| t <= now) {
                node.session = None;
                node.fail_at = None;
                self.mark_dirty(i);
            } else if node.session.is_none() && node.recover_at.is_some_and(|t| t <= now) {
                node.recover_at = None;
                node.generation += 1;
                let mut config = node.config.clone();
                config.token_key = token_key(self.seed, i, node.generation);
                node.session = Some(ServerSession::new(config, self.content));
                self.mark_dirty(i);
                self.reconnect(i);
            } else if node.timer.is_some_and(|t| t <= now) {
                if let Some(session) = node.session.as_mut() {
                    session.handle_timeout(now);
                }
                self.mark_dirty(i);
            }
        }
    }

    /// A recovered server is found again (as the tracker would list it): if the client gave
    /// up on its path, it opens a new one.
    fn reconnect(&mut self, i: usize) {
        let failed = self.client.is_path_failed(self.servers[i].path);
        if failed {
            self.client.remove_path(self.now, self.servers[i].path);
            let cc = self.cc.build(self.now, u64::from(self.packet_size));
            self.servers[i].path = self.client.add_path(self.now, self.servers[i].info.clone(), cc);
            self.client_dirty = true;
        }
    }

    /// Runs until the download completes or the duration ends.
    pub fn run(self) -> Result<Outcome, WorldError> {
        self.run_observing(|_, _| {})
    }

    /// [`run`](Self::run), calling `progress(now, in_order_bytes)` each time the bytes delivered
    /// in order grow: the timeline a player model replays frame by frame.
    pub fn run_observing(mut self, mut progress: impl FnMut(Instant, u64)) -> Result<Outcome, WorldError> {
        let mut in_order = 0;
        loop {
            self.flush();
            if self.client.is_done() {
                break;
            }
            let node_event = self.next_node_event();
            let limit = node_event.map_or(self.deadline, |t| t.min(self.deadline));
            match self.network.next_delivery(limit) {
                Some(t) => {
                    self.now = self.now.max(t);
                    while let Some((route, packet)) = self.network.poll_delivered(self.now) {
                        self.deliver(route, packet.payload);
                    }
                    let delivered = self.client.stats().bytes_delivered;
                    if delivered > in_order {
                        in_order = delivered;
                        progress(self.now, in_order);
                    }
                }
                None if node_event.is_some_and(|t| t <= self.deadline) => {
                    self.now = self.now.max(limit);
                }
                None => {
                    self.now = self.deadline;
                    break;
                }
            }
            // Deliveries only push node timers later or hand work to `flush`, so the timer
            // computed before them still tells whether one is due.
            if node_event.is_some_and(|t| t <= self.now) {
                self.handle_node_events();
            }
            if self.now >= self.deadline && !self.client.is_done() {
                self.flush();
                break;
            }
        }
        if self.client.is_done()
            && let Some(duration) = self.client.player().map(|p| p.spec().duration)
        {
            // Everything is in: the viewer watches the rest, without stalling (the run ends
            // when the download does, so the player's clock runs on alone).
            self.client.advance_player(self.now + duration);
        }
        Ok(Outcome {
            stats: self.client.stats().clone(),
            capacity_bps: self.capacity_bps,
            completed: self.client.is_done(),
            end: self.now,
            data_packets: self.data_packets,
        })
    }

    fn deliver(&mut self, route: RouteId, datagram: Datagram) {
        let bytes = datagram.bytes(&mut self.rx);
        match self.endpoints[route.0 as usize] {
            Endpoint::Client { server } => {
                let path = self.servers[server].path;
                self.client.handle_datagram(self.now, path, bytes);
                self.client_dirty = true;
            }
            Endpoint::Server(i) => {
                if let Some(session) = self.servers[i].session.as_mut() {
                    session.handle_datagram(self.now, CLIENT_ADDR, bytes);
                    self.mark_dirty(i);
                }
            }
        }
        if let Datagram::Bytes(v) = datagram {
            self.spares.push(v);
        }
    }
}

/// The MPRD high-rate world (Srinivasan and Aryafar, ICDCS 2025, §V, Fig. 7(d)): a 500 Mbit/s CDN origin and edges of
/// 350, 350, 200 and 200 Mbit/s (one-way delays 5 to 25 ms, which the paper does not give),
/// a 200 MB download. The simulator's speed benchmark runs it.
pub fn mprd_high_rate() -> WorldSpec {
    let rates = [500u64, 350, 350, 200, 200];
    let servers = rates
        .iter()
        .enumerate()
        .map(|(i, &mbit)| {
            let delay = Duration::from_millis(5 + 5 * i as u64);
            ServerSpec {
                name: if i == 0 { "cdn".into() } else { format!("edge{i}") },
                origin: i == 0,
                link: LinkConfig::fixed(mbit * 1_000_000, delay).with_queue(crate::link::QueueLimit::packets(1000)),
                uplink: LinkConfig::fixed(100_000_000_000, delay).with_queue(crate::link::QueueLimit::UNLIMITED),
                fail_at: None,
                recover_at: None,
                upload_limit: None,
            }
        })
        .collect();
    WorldSpec {
        weave: Default::default(),
        reordering: Default::default(),
        tail_probes: true,
        content_length: 200_000_000,
        packet_size: 1400,
        task_size: None,
        reorder_buffer: 16_000_000,
        servers,
        bottlenecks: Vec::new(),
        duration: Duration::from_secs(120),
    }
}
