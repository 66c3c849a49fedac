//! The fleet's event loop: viewers arrive, look their video up, download it from edges and the
//! origin while they watch, and leave; servers answer them through shared links.
//!
//! Links: each server has one link towards the viewers (its upload, which all the viewers it
//! serves share) and one from them; each viewer has its access line in both directions, which
//! all its servers share. A viewer–server pair is two routes over those links.

use super::draw::{self, Arrival};
use super::placement::Demand;
use super::{BILLING_WINDOW, FleetError, FleetOutcome, FleetSpec, SAMPLE_WINDOW, Sample, ViewerRecord};
use crate::link::{LinkConfig, Packet};
use crate::network::{LinkId, Network, RouteId};
use crate::world::{Datagram, download_config, link_rate_bps};
use pcdn_core::cc::ControllerFactory;
use pcdn_core::player::PlayerConfig;
use pcdn_core::server::{ContentInfo, ContentSource, ServerConfig, ServerSession};
use pcdn_core::time::{Duration, Instant};
use pcdn_core::{Download, PathId, ServerInfo, cc, scheduler, wire};
use pcdn_placement::{Assignment, Policy};
use std::cmp::Reverse;
use std::collections::BTreeSet;
use std::collections::BinaryHeap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

mod control;

/// Runs the fleet of `spec` on congestion control `cc`, seeded with `seed`. With one scheduler
/// every viewer uses it; with several, each viewer is put in one of them at random (an A/B
/// test on one fleet; [`ViewerRecord::group`] says which). Devices fill with the first.
pub fn run(spec: &FleetSpec, schedulers: &[&str], cc: &str, seed: u64) -> Result<FleetOutcome, FleetError> {
    FleetWorld::new(spec, schedulers, cc, seed)?.run()
}

/// `run`, telling `observe` the simulated seconds and the viewers gone so far at the end of
/// every timeline window (a progress line for a run of minutes).
pub fn run_observed(
    spec: &FleetSpec,
    schedulers: &[&str],
    cc: &str,
    seed: u64,
    observe: &mut dyn FnMut(f64, usize),
) -> Result<FleetOutcome, FleetError> {
    FleetWorld::new(spec, schedulers, cc, seed)?.run_observed(observe)
}

/// Synthetic videos (all zeros) on one server's disk.
#[derive(Clone)]
struct Shelf {
    lengths: Vec<u64>,
    held: Vec<bool>,
}

impl ContentSource for Shelf {
    fn info(&self, id: &wire::ContentId) -> Option<ContentInfo> {
        let video = video_of(id)?;
        self.held.get(video).copied().filter(|&held| held).map(|_| ContentInfo {
            length: self.lengths[video],
        })
    }
    fn read(&self, id: &wire::ContentId, offset: u64, buf: &mut [u8]) -> bool {
        // The server zero-fills the payload before asking; nothing to do but check.
        self.info(id)
            .is_some_and(|info| offset + buf.len() as u64 <= info.length)
    }
}

/// Tags the content ids of the fleet's videos, so that no other id reads as one.
const VIDEO_ID_TAG: [u8; 8] = *b"pcdnflt1";

pub(super) fn content_id(video: usize) -> wire::ContentId {
    let mut id = [0u8; 32];
    id[..8].copy_from_slice(&VIDEO_ID_TAG);
    id[8..16].copy_from_slice(&(video as u64).to_be_bytes());
    wire::ContentId(id)
}

pub(super) fn video_of(id: &wire::ContentId) -> Option<usize> {
    (id.0[..8] == VIDEO_ID_TAG && id.0[16..].iter().all(|&b| b == 0))
        .then(|| usize::try_from(u64::from_be_bytes(id.0[8..16].try_into().expect("8 bytes"))).ok())
        .flatten()
}

/// The videos on a shelf.
fn held_videos(shelf: &Shelf) -> BTreeSet<usize> {
    (0..shelf.held.len()).filter(|&v| shelf.held[v]).collect()
}

/// Viewer `index`'s address: one per viewer, so each is its own source to the servers.
fn viewer_addr(index: usize) -> SocketAddr {
    let n = index as u32;
    SocketAddr::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | (n & 0x00ff_ffff))), 9000)
}

fn viewer_of(addr: SocketAddr) -> usize {
    match addr.ip() {
        IpAddr::V4(ip) => (u32::from(ip) & 0x00ff_ffff) as usize,
        IpAddr::V6(_) => usize::MAX,
    }
}

fn token_key(seed: u64, server: usize, generation: u64) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key("pcdn-sim 2026 fleet server token key");
    h.update(&seed.to_le_bytes());
    h.update(&(server as u64).to_le_bytes());
    h.update(&generation.to_le_bytes());
    *h.finalize().as_bytes()
}

/// A server: the origin (index 0) or an edge device.
struct ServerNode {
    info: ServerInfo,
    /// Absent while the device is down.
    session: Option<ServerSession<Shelf>>,
    config: ServerConfig,
    /// Its disk while it is down: a restart keeps the cache.
    stored: Option<Shelf>,
    /// Incarnations, so a restarted device gets a new token key.
    generation: u64,
    down_since: Option<Instant>,
    downtime: Duration,
    /// Towards the viewers (its upload) and from them.
    up: LinkId,
    down: LinkId,
    upload_bps: f64,
    timer: Option<Instant>,
    dirty: bool,
    /// Payload bytes of DATA sent.
    bytes_sent: u64,
    /// Sum of the bitrates of the viewers sent to it and still watching: the load a tracker
    /// ranks devices by.
    load_bps: u64,
}

/// One of a viewer's servers.
struct ViewerPath {
    path: PathId,
    server: usize,
    down: RouteId,
    up: RouteId,
}

/// Who a client node is.
#[derive(Clone, Copy, Debug)]
enum Client {
    /// A viewer who watches this much of its video, then leaves; its scheduler is the
    /// group's.
    Viewer { watch: Duration, group: usize },
    /// A device (server index) filling its cache.
    Fill { device: usize },
}

/// A client while it downloads: a viewer watching, or a device filling its cache.
struct ViewerNode {
    video: usize,
    arrived: Instant,
    client: Client,
    bitrate: u64,
    download: Download,
    paths: Vec<ViewerPath>,
    timer: Option<Instant>,
    dirty: bool,
    /// When it leaves, once its download is complete.
    leave_at: Option<Instant>,
}

/// A node whose timer is in [`FleetWorld::timers`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Timer {
    Viewer(usize),
    Server(usize),
    /// The device goes down.
    Failure(usize),
    /// The device comes back.
    Recovery(usize),
    /// The next placement round.
    Placement,
    /// The end of a timeline window.
    Sample,
}

/// Where a route ends.
#[derive(Clone, Copy)]
enum Endpoint {
    Viewer { viewer: usize, path: PathId },
    Server { server: usize, viewer: usize },
}

/// The simulation state of one fleet run.
pub struct FleetWorld {
    spec: FleetSpec,
    /// The viewers' schedulers, by group; devices fill with the first.
    schedulers: Vec<String>,
    cc: Box<dyn ControllerFactory>,
    seed: u64,
    arrivals: Vec<Arrival>,
    next_arrival: usize,
    servers: Vec<ServerNode>,
    /// Indexed by arrival order; `None` before arrival and after leaving.
    viewers: Vec<Option<ViewerNode>>,
    active: Vec<usize>,
    /// Nodes that had an input since the last flush, so a flush visits only them.
    dirty_viewers: Vec<usize>,
    dirty_servers: Vec<usize>,
    /// Every node's next timer, earliest first; an entry whose node has another timer now is
    /// stale and skipped (a node's timer is the one in its node, `None` once popped).
    timers: BinaryHeap<Reverse<(Instant, Timer)>>,
    records: Vec<ViewerRecord>,
    /// The placement engine's policy, when rounds run.
    engine: Option<Box<dyn Policy>>,
    demand: Demand,
    assignment: Assignment,
    /// Videos each device (by device index) is filling now.
    filling: Vec<BTreeSet<usize>>,
    /// Payload bytes the devices received to fill their caches.
    fill_bytes: u64,
    network: Network<Datagram>,
    endpoints: Vec<Endpoint>,
    origin_windows: Vec<u64>,
    timeline: Vec<Sample>,
    /// Payload bytes the origin and the devices sent since the last sample.
    window_origin_bytes: u64,
    window_edge_bytes: u64,
    now: Instant,
    deadline: Instant,
    buf: Vec<u8>,
    rx: Vec<u8>,
    spares: Vec<Vec<u8>>,
}

impl FleetWorld {
    /// Builds the fleet of `spec`: servers up, no viewer yet.
    pub fn new(spec: &FleetSpec, schedulers: &[&str], cc_name: &str, seed: u64) -> Result<FleetWorld, FleetError> {
        if schedulers.is_empty() {
            return Err(FleetError::UnknownScheduler(String::new()));
        }
        for name in schedulers {
            scheduler::by_name(name, seed).ok_or_else(|| FleetError::UnknownScheduler((*name).into()))?;
        }
        let cc = cc::by_name(cc_name).ok_or_else(|| FleetError::UnknownCc(cc_name.into()))?;
        if spec.videos.is_empty() {
            return Err(FleetError::NoVideos);
        }
        for (index, video) in spec.videos.iter().enumerate() {
            video.validate().map_err(|e| FleetError::Video {
                index,
                reason: e.to_string(),
            })?;
        }
        let profile = &spec.viewers.load_profile;
        if profile.iter().any(|w| !(w.is_finite() && *w >= 0.0))
            || (!profile.is_empty() && profile.iter().all(|&w| w == 0.0))
        {
            return Err(FleetError::LoadProfile);
        }
        let (lo, hi) = spec.viewers.watch;
        if !(lo > 0.0 && lo <= hi && hi <= 1.0) {
            return Err(FleetError::Watch(spec.viewers.watch));
        }
        let lengths: Vec<u64> = spec.videos.iter().map(|v| v.total_bytes()).collect();
        let mut network = Network::new(seed);
        let mut add_link = |what: &str, config: &LinkConfig| {
            network.add_link(config).map_err(|source| FleetError::Link {
                what: what.to_owned(),
                source,
            })
        };
        let mut servers = Vec::with_capacity(spec.devices.len() + 1);
        let origin_up = add_link("origin", &spec.origin_uplink)?;
        let origin_down = add_link("origin", &spec.origin_downlink)?;
        servers.push((
            ServerInfo {
                name: "origin".into(),
                origin: true,
            },
            vec![true; lengths.len()],
            origin_up,
            origin_down,
            &spec.origin_uplink,
            &[][..],
        ));
        for device in &spec.devices {
            let mut held = vec![false; lengths.len()];
            for &video in &device.holds {
                *held.get_mut(video).ok_or_else(|| FleetError::UnknownVideo {
                    device: device.name.clone(),
                    video,
                    videos: lengths.len(),
                })? = true;
            }
            let what = format!("device {:?}", device.name);
            let up = add_link(&what, &device.uplink)?;
            let down = add_link(&what, &device.downlink)?;
            servers.push((
                ServerInfo {
                    name: device.name.clone(),
                    origin: false,
                },
                held,
                up,
                down,
                &device.uplink,
                device.outages.as_slice(),
            ));
        }
        for device in &spec.devices {
            let ordered = device
                .outages
                .windows(2)
                .all(|w| w[0].back.is_some_and(|b| b <= w[1].at));
            let each = device.outages.iter().all(|o| o.back.is_none_or(|b| b > o.at));
            if !(ordered && each) {
                return Err(FleetError::Outages(device.name.clone()));
            }
        }
        let mut timers = BinaryHeap::new();
        let servers: Vec<ServerNode> = servers
            .into_iter()
            .enumerate()
            .map(|(i, (info, held, up, down, uplink, outages))| {
                let config = ServerConfig {
                    packet_size: spec.packet_size as u16,
                    token_key: token_key(seed, i, 0),
                    ..ServerConfig::default()
                };
                for o in outages {
                    let at = Instant::ZERO + o.at;
                    timers.push(Reverse((at, Timer::Failure(i))));
                    if let Some(back) = o.back {
                        timers.push(Reverse((Instant::ZERO + back, Timer::Recovery(i))));
                    }
                }
                let shelf = Shelf {
                    lengths: lengths.clone(),
                    held,
                };
                ServerNode {
                    info,
                    session: Some(ServerSession::new(config.clone(), shelf)),
                    config,
                    stored: None,
                    generation: 0,
                    down_since: None,
                    downtime: Duration::ZERO,
                    up,
                    down,
                    upload_bps: link_rate_bps(uplink),
                    timer: None,
                    dirty: false,
                    bytes_sent: 0,
                    load_bps: 0,
                }
            })
            .collect();
        let arrivals = draw::arrivals(&spec.viewers, spec.videos.len(), schedulers.len(), seed);
        let engine = spec.placement.engine().map_err(FleetError::Placement)?;
        if engine.is_some() {
            timers.push(Reverse((Instant::ZERO + spec.placement.interval, Timer::Placement)));
        }
        timers.push(Reverse((Instant::ZERO + SAMPLE_WINDOW, Timer::Sample)));
        Ok(FleetWorld {
            spec: spec.clone(),
            schedulers: schedulers.iter().map(|s| (*s).to_owned()).collect(),
            cc,
            seed,
            viewers: (0..arrivals.len()).map(|_| None).collect(),
            arrivals,
            next_arrival: 0,
            servers,
            active: Vec::new(),
            dirty_viewers: Vec::new(),
            dirty_servers: Vec::new(),
            timers,
            records: Vec::new(),
            engine,
            demand: Demand::new(spec.videos.len(), spec.placement.half_life),
            assignment: Assignment::new(),
            filling: vec![BTreeSet::new(); spec.devices.len()],
            fill_bytes: 0,
            network,
            endpoints: Vec::new(),
            origin_windows: Vec::new(),
            timeline: Vec::new(),
            window_origin_bytes: 0,
            window_edge_bytes: 0,
            now: Instant::ZERO,
            deadline: Instant::ZERO + spec.duration,
            buf: Vec::with_capacity(wire::MAX_DATAGRAM),
            rx: vec![0; wire::MAX_DATAGRAM],
            spares: Vec::new(),
        })
    }

    /// Runs until every viewer has left or the duration ends.
    pub fn run(self) -> Result<FleetOutcome, FleetError> {
        self.run_observed(&mut |_, _| {})
    }

    /// `run`, telling `observe` the simulated seconds and the viewers gone so far at the end
    /// of every timeline window.
    pub fn run_observed(mut self, observe: &mut dyn FnMut(f64, usize)) -> Result<FleetOutcome, FleetError> {
        loop {
            self.flush()?;
            if self.next_arrival == self.arrivals.len() && self.active.is_empty() {
                break;
            }
            let event = self.next_event();
            let limit = event.map_or(self.deadline, |t| t.min(self.deadline));
            match self.network.next_delivery(limit) {
                Some(t) => {
                    self.now = self.now.max(t);
                    while let Some((route, packet)) = self.network.poll_delivered(self.now) {
                        self.deliver(route, packet.payload);
                    }
                }
                None if event.is_some_and(|t| t <= self.deadline) => self.now = self.now.max(limit),
                None => {
                    self.now = self.deadline;
                    break;
                }
            }
            if event.is_some_and(|t| t <= self.now) {
                let windows = self.timeline.len();
                self.handle_events()?;
                if self.timeline.len() > windows {
                    observe((self.now - Instant::ZERO).as_secs_f64(), self.records.len());
                }
            }
            if self.now >= self.deadline {
                break;
            }
        }
        // The last, partial window.
        self.sample();
        for viewer in std::mem::take(&mut self.active) {
            self.leave(viewer, false);
        }
        self.records.sort_by_key(|r| r.index);
        let end_s = (self.now - Instant::ZERO).as_secs_f64();
        let now = self.now;
        let alive_s = |s: &ServerNode| {
            let down = s.downtime + s.down_since.map_or(Duration::ZERO, |t| now - t);
            (now - Instant::ZERO).saturating_sub(down)
        };
        let (used, capacity) = self.servers[1..].iter().fold((0.0, 0.0), |(u, c), s| {
            (
                u + s.bytes_sent as f64 * 8.0,
                c + s.upload_bps * alive_s(s).as_secs_f64(),
            )
        });
        Ok(FleetOutcome {
            viewers: self.records,
            device_bytes: self.servers[1..].iter().map(|s| s.bytes_sent).collect(),
            origin_window_bytes: self.origin_windows,
            timeline: self.timeline,
            edge_utilization: if capacity > 0.0 { used / capacity } else { 0.0 },
            fill_bytes: self.fill_bytes,
            end_s,
        })
    }

    /// The earliest arrival, node timer, departure or failure.
    fn next_event(&mut self) -> Option<Instant> {
        while let Some(&Reverse((t, timer))) = self.timers.peek() {
            if self.is_current(t, timer) {
                break;
            }
            self.timers.pop();
        }
        let timer = self.timers.peek().map(|Reverse((t, _))| *t);
        let arrival = self.arrivals.get(self.next_arrival).map(|a| a.at);
        match (timer, arrival) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether a heap entry is its node's timer now.
    fn is_current(&self, t: Instant, timer: Timer) -> bool {
        match timer {
            Timer::Viewer(v) => self.viewers[v].as_ref().is_some_and(|n| n.timer == Some(t)),
            Timer::Server(i) => self.servers[i].timer == Some(t),
            Timer::Failure(i) => self.servers[i].session.is_some(),
            Timer::Recovery(i) => self.servers[i].session.is_none(),
            Timer::Placement | Timer::Sample => true,
        }
    }

    fn handle_events(&mut self) -> Result<(), FleetError> {
        let now = self.now;
        while self.arrivals.get(self.next_arrival).is_some_and(|a| a.at <= now) {
            self.arrive(self.next_arrival)?;
            self.next_arrival += 1;
        }
        while let Some(&Reverse((t, timer))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            if !self.is_current(t, timer) {
                continue;
            }
            match timer {
                Timer::Viewer(v) => {
                    let viewer = self.viewers[v].as_mut().expect("current");
                    // Consumed: the flush sets the next one.
                    viewer.timer = None;
                    viewer.download.handle_timeout(now);
                    self.mark_viewer(v);
                }
                Timer::Server(i) => {
                    let server = &mut self.servers[i];
                    server.timer = None;
                    if let Some(session) = server.session.as_mut() {
                        session.handle_timeout(now);
                    }
                    self.mark_server(i);
                }
                Timer::Failure(i) => {
                    let server = &mut self.servers[i];
                    server.stored = server.session.take().map(|s| s.source().clone());
                    server.timer = None;
                    server.down_since = Some(now);
                }
                Timer::Recovery(i) => {
                    let server = &mut self.servers[i];
                    server.generation += 1;
                    server.config.token_key = token_key(self.seed, i, server.generation);
                    let shelf = server.stored.take().expect("a device down keeps its disk");
                    server.session = Some(ServerSession::new(server.config.clone(), shelf));
                    server.downtime += server.down_since.take().map_or(Duration::ZERO, |t| now - t);
                    self.mark_server(i);
                }
                Timer::Placement => self.place()?,
                Timer::Sample => {
                    self.sample();
                    self.timers.push(Reverse((now + SAMPLE_WINDOW, Timer::Sample)));
                }
            }
        }
        Ok(())
    }

    fn mark_viewer(&mut self, v: usize) {
        if let Some(viewer) = self.viewers[v].as_mut()
            && !viewer.dirty
        {
            viewer.dirty = true;
            self.dirty_viewers.push(v);
        }
    }

    fn mark_server(&mut self, i: usize) {
        let server = &mut self.servers[i];
        if !server.dirty {
            server.dirty = true;
            self.dirty_servers.push(i);
        }
    }

    /// Viewer `index` arrives: it looks its video up and opens a path to each server listed.
    fn arrive(&mut self, index: usize) -> Result<(), FleetError> {
        let arrival = self.arrivals[index];
        self.demand.record(arrival.video, self.now);
        let link_error = |source| FleetError::Link {
            what: format!("viewer {index}"),
            source,
        };
        let access_down = self
            .network
            .add_link(&self.spec.viewers.access_down)
            .map_err(link_error)?;
        let access_up = self
            .network
            .add_link(&self.spec.viewers.access_up)
            .map_err(link_error)?;
        let sources = self.lookup(arrival.video, None);
        let watch = self.spec.videos[arrival.video].duration.mul_f64(arrival.watch);
        self.connect(
            index,
            arrival.video,
            sources,
            access_down,
            &[access_up],
            Client::Viewer {
                watch,
                group: arrival.group,
            },
        )
    }

    /// Opens client `index`'s download of `video` with a path to each of `sources`: data
    /// through `access_down`, requests through `access_up` (when the client has such a link).
    fn connect(
        &mut self,
        index: usize,
        video: usize,
        sources: Vec<usize>,
        access_down: LinkId,
        access_up: &[LinkId],
        client: Client,
    ) -> Result<(), FleetError> {
        let now = self.now;
        let spec = &self.spec.videos[video];
        let bitrate = spec.bitrate_bps;
        let player = matches!(client, Client::Viewer { .. }).then(|| PlayerConfig {
            spec: spec.clone(),
            jump_to_cdn: self.spec.viewers.jump_to_cdn,
        });
        let seed = draw::stream_seed(self.seed, &format!("client {index}"));
        let config = download_config(
            content_id(video),
            spec.total_bytes(),
            self.spec.packet_size,
            None,
            self.spec.reorder_buffer,
            seed,
            player.as_ref(),
        );
        let group = match client {
            Client::Viewer { group, .. } => group,
            Client::Fill { .. } => 0,
        };
        let sched = scheduler::by_name_with(&self.schedulers[group], seed, &self.spec.weave)
            .expect("checked in FleetWorld::new");
        let mut download = Download::new(config, sched).map_err(|e| FleetError::Download {
            index,
            reason: e.to_string(),
        })?;
        let mut paths = Vec::new();
        for server in sources {
            let node = &mut self.servers[server];
            if matches!(client, Client::Viewer { .. }) {
                node.load_bps += bitrate;
            }
            let cc = self.cc.build(now, u64::from(self.spec.packet_size));
            let path = download.add_path(now, node.info.clone(), cc);
            let down = self.network.add_route(&[node.up, access_down]);
            let up_links: Vec<LinkId> = access_up.iter().copied().chain([node.down]).collect();
            let up = self.network.add_route(&up_links);
            self.endpoints.resize(
                self.endpoints.len().max(down.0.max(up.0) as usize + 1),
                Endpoint::Server { server, viewer: index },
            );
            self.endpoints[down.0 as usize] = Endpoint::Viewer { viewer: index, path };
            self.endpoints[up.0 as usize] = Endpoint::Server { server, viewer: index };
            paths.push(ViewerPath { path, server, down, up });
        }
        self.viewers[index] = Some(ViewerNode {
            video,
            arrived: now,
            client,
            bitrate,
            download,
            paths,
            timer: None,
            dirty: false,
            leave_at: None,
        });
        self.active.push(index);
        self.mark_viewer(index);
        Ok(())
    }

    /// The servers a lookup of `video` lists: up to `edges_per_viewer` live edges that hold it,
    /// most free upload first (as the tracker ranks them; ties by position), then the origin;
    /// a device asking for itself is left out.
    fn lookup(&self, video: usize, asking: Option<usize>) -> Vec<usize> {
        let mut edges: Vec<usize> = (1..self.servers.len())
            .filter(|&i| Some(i) != asking && self.servers[i].session.as_ref().is_some_and(|s| s.source().held[video]))
            .collect();
        let free = |i: usize| self.servers[i].upload_bps - self.servers[i].load_bps as f64;
        edges.sort_by(|&a, &b| free(b).total_cmp(&free(a)).then(a.cmp(&b)));
        edges.truncate(self.spec.viewers.edges_per_viewer);
        edges.push(0);
        edges
    }

    /// Viewer `index` leaves: its download stops and what it saw is recorded.
    fn leave(&mut self, index: usize, finished: bool) {
        let Some(mut viewer) = self.viewers[index].take() else {
            return;
        };
        self.active.retain(|&v| v != index);
        let stats = viewer.download.stats();
        if let Client::Fill { device } = viewer.client {
            self.fill_bytes += stats.bytes_received;
            self.filling[device - 1].remove(&viewer.video);
            // Complete and verified: the device announces it, and lookups list it from now on.
            if finished && let Some(session) = self.servers[device].session.as_mut() {
                session.source_mut().held[viewer.video] = true;
            }
            return;
        }
        viewer.download.advance_player(self.now);
        for p in &viewer.paths {
            let node = &mut self.servers[p.server];
            node.load_bps = node.load_bps.saturating_sub(viewer.bitrate);
        }
        let stats = viewer.download.stats();
        let player = stats.player.clone().unwrap_or_default();
        let origin_bytes = stats.paths.iter().filter(|p| p.origin).map(|p| p.bytes).sum();
        let edge_bytes = stats.paths.iter().filter(|p| !p.origin).map(|p| p.bytes).sum();
        let Client::Viewer { group, .. } = viewer.client else {
            unreachable!("fills returned above")
        };
        let active_s = stats.elapsed().map_or(0.0, |t| t.as_secs_f64());
        let per_second = |bytes: u64| {
            if active_s > 0.0 {
                bytes as f64 * 8.0 / active_s
            } else {
                0.0
            }
        };
        self.records.push(ViewerRecord {
            index,
            group,
            video: viewer.video,
            arrived_s: (viewer.arrived - Instant::ZERO).as_secs_f64(),
            first_frame_s: player.first_frame_latency.map(|d| d.as_secs_f64()),
            rebuffer_ratio: player.rebuffer_ratio,
            rebuffers: player.rebuffer_count,
            jump_to_cdn_rate: player.jump_to_cdn_rate,
            origin_bytes,
            edge_bytes,
            duplicate_packets: stats.duplicates,
            received_packets: stats.packets_received,
            ofo_mean_bytes: stats.ofo_mean_bytes(),
            wait_mean_ms: stats.wait_mean().as_secs_f64() * 1e3,
            goodput_bps: per_second(stats.bytes_delivered),
            download_speed_bps: per_second(stats.bytes_received),
            // Against what it delivered, not the whole video: a viewer leaves part-way.
            request_waste: stats.requests_sent.saturating_sub(stats.packets_delivered) as f64
                / stats.packets_delivered.max(1) as f64,
            finished,
        });
    }

    /// Whether viewer `index` has watched what it came for; notes when it will, once its
    /// download is complete.
    fn watched_enough(&mut self, index: usize) -> bool {
        let now = self.now;
        let Some(viewer) = self.viewers[index].as_mut() else {
            return false;
        };
        let Client::Viewer { watch, .. } = viewer.client else {
            return viewer.download.is_done();
        };
        viewer.download.advance_player(now);
        let Some(player) = viewer.download.player() else {
            return viewer.download.is_done();
        };
        let position = player.position(now);
        if position >= watch {
            return true;
        }
        if viewer.download.is_done() && viewer.leave_at.is_none() {
            viewer.leave_at = Some(now + (watch - position));
        }
        false
    }

    /// Puts on the network everything the nodes that had an input want to send, and notes
    /// their next timers; viewers that watched enough leave first.
    fn flush(&mut self) -> Result<(), FleetError> {
        let now = self.now;
        let mut dirty = std::mem::take(&mut self.dirty_viewers);
        dirty.sort_unstable();
        for &v in &dirty {
            if let Some(viewer) = self.viewers[v].as_mut() {
                viewer.dirty = false;
            }
            if self.watched_enough(v) {
                self.leave(v, true);
                continue;
            }
            let Some(viewer) = self.viewers[v].as_mut() else {
                continue;
            };
            while let Some(t) = viewer.download.poll_transmit(now, &mut self.buf) {
                self.buf.truncate(t.len);
                let Some(p) = viewer.paths.iter().find(|p| p.path == t.path) else {
                    continue;
                };
                let datagram = Datagram::compact(&self.buf, &mut self.spares);
                self.network.send(now, p.up, Packet::new(t.len as u32, datagram));
            }
            let timer = match (viewer.download.poll_timeout(), viewer.leave_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if timer != viewer.timer {
                viewer.timer = timer;
                if let Some(t) = timer {
                    self.timers.push(Reverse((t, Timer::Viewer(v))));
                }
            }
        }
        dirty.clear();
        self.dirty_viewers = dirty;
        let mut dirty = std::mem::take(&mut self.dirty_servers);
        // In server order: their sends may share a viewer's access line.
        dirty.sort_unstable();
        for &i in &dirty {
            let server = &mut self.servers[i];
            server.dirty = false;
            let Some(session) = server.session.as_mut() else {
                continue;
            };
            while let Some(t) = session.poll_transmit(now, &mut self.buf) {
                self.buf.truncate(t.len);
                let viewer = viewer_of(t.to);
                let Some(route) = self
                    .viewers
                    .get(viewer)
                    .and_then(Option::as_ref)
                    .and_then(|v| v.paths.iter().find(|p| p.server == i))
                    .map(|p| p.down)
                else {
                    // The viewer left: what it would have received goes nowhere.
                    continue;
                };
                if self.buf.get(1) == Some(&wire::kind::DATA) {
                    let payload = (t.len - wire::DATA_HEADER_LEN) as u64;
                    server.bytes_sent += payload;
                    if server.info.origin {
                        self.window_origin_bytes += payload;
                    } else {
                        self.window_edge_bytes += payload;
                    }
                    if server.info.origin {
                        let window = ((now - Instant::ZERO).as_nanos() / BILLING_WINDOW.as_nanos()) as usize;
                        if self.origin_windows.len() <= window {
                            self.origin_windows.resize(window + 1, 0);
                        }
                        self.origin_windows[window] += payload;
                    }
                }
                let datagram = Datagram::compact(&self.buf, &mut self.spares);
                self.network.send(now, route, Packet::new(t.len as u32, datagram));
            }
            let timer = session.poll_timeout();
            if timer != server.timer {
                server.timer = timer;
                if let Some(t) = timer {
                    self.timers.push(Reverse((t, Timer::Server(i))));
                }
            }
        }
        dirty.clear();
        self.dirty_servers = dirty;
        Ok(())
    }

    fn deliver(&mut self, route: RouteId, datagram: Datagram) {
        let bytes = datagram.bytes(&mut self.rx);
        let endpoint = self.endpoints[route.0 as usize];
        match endpoint {
            Endpoint::Viewer { viewer, path } => {
                // Nothing reaches a viewer that left.
                if let Some(node) = self.viewers[viewer].as_mut() {
                    node.download.handle_datagram(self.now, path, bytes);
                }
            }
            Endpoint::Server { server, viewer } => {
                if let Some(session) = self.servers[server].session.as_mut() {
                    session.handle_datagram(self.now, viewer_addr(viewer), bytes);
                }
            }
        }
        if let Datagram::Bytes(v) = datagram {
            self.spares.push(v);
        }
        match endpoint {
            Endpoint::Viewer { viewer, .. } => self.mark_viewer(viewer),
            Endpoint::Server { server, .. } => self.mark_server(server),
        }
    }
}
