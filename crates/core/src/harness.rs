//! An in-memory test bed in the style of quinn's `Pair`: one client `Download`, N
//! `ServerSession`s, fixed per-path delay, rate and loss, and a clock that jumps straight to
//! the next wake-up. Tests and benches drive the real core through it, with no I/O.
//!
//! The network here is deliberately simple (a FIFO serialiser per direction plus Bernoulli
//! loss); the simulator crate has the full link model.

use crate::cc::ControllerFactory;
use crate::download::{Download, DownloadConfig};
use crate::manifest::Manifest;
use crate::path::{PathId, ServerInfo};
use crate::server::{ContentInfo, ContentSource, ServerConfig, ServerSession};
use crate::time::{Duration, Instant};
use pcdn_wire as wire;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};

/// Content whose bytes are a function of their offset, so any server can serve it and the
/// client can check every byte without a copy of the file.
#[derive(Clone, Copy, Debug)]
pub struct PatternContent {
    pub id: wire::ContentId,
    pub length: u64,
}

impl PatternContent {
    pub fn new(length: u64) -> Self {
        let mut id = [0u8; 32];
        id[..8].copy_from_slice(&length.to_be_bytes());
        PatternContent {
            id: wire::ContentId(id),
            length,
        }
    }

    /// One 64 KiB block of pseudo-random bytes; the content repeats it, each repetition
    /// XORed with its block number so that no two blocks are alike.
    fn table() -> &'static [u8; Self::BLOCK] {
        static TABLE: std::sync::OnceLock<Box<[u8; PatternContent::BLOCK]>> = std::sync::OnceLock::new();
        TABLE.get_or_init(|| {
            let mut t = Box::new([0u8; Self::BLOCK]);
            let mut z = 0x9e37_79b9_7f4a_7c15u64;
            for chunk in t.chunks_exact_mut(8) {
                // splitmix64
                z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut x = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                chunk.copy_from_slice(&(x ^ (x >> 31)).to_le_bytes());
            }
            t
        })
    }

    const BLOCK: usize = 1 << 16;

    fn block_tweak(block: u64) -> u8 {
        (block ^ (block >> 8) ^ (block >> 16) ^ (block >> 24)) as u8 | 1
    }

    /// The byte at `offset`.
    pub fn byte(offset: u64) -> u8 {
        let block = offset / Self::BLOCK as u64;
        Self::table()[(offset % Self::BLOCK as u64) as usize] ^ Self::block_tweak(block)
    }

    /// Fills `buf` with the bytes from `offset`.
    pub fn fill(offset: u64, buf: &mut [u8]) {
        let table = Self::table();
        let mut pos = offset;
        let mut rest = buf;
        while !rest.is_empty() {
            let within = (pos % Self::BLOCK as u64) as usize;
            let n = rest.len().min(Self::BLOCK - within);
            let tweak = Self::block_tweak(pos / Self::BLOCK as u64);
            let (head, tail) = rest.split_at_mut(n);
            for (out, &t) in head.iter_mut().zip(&table[within..within + n]) {
                *out = t ^ tweak;
            }
            rest = tail;
            pos += n as u64;
        }
    }
}

impl PatternContent {
    /// The content's manifest, hashed as it streams past (no copy of the whole content).
    pub fn manifest(&self, packet_size: u32, block_size: u32) -> Manifest {
        let mut builder = Manifest::builder(packet_size, block_size).expect("valid sizes");
        let mut chunk = vec![0u8; Self::BLOCK];
        let mut offset = 0;
        while offset < self.length {
            let n = (self.length - offset).min(Self::BLOCK as u64) as usize;
            Self::fill(offset, &mut chunk[..n]);
            builder.update(&chunk[..n]);
            offset += n as u64;
        }
        builder.finish()
    }
}

/// Which bytes a misbehaving server corrupts: within the chosen blocks of `block_size` bytes
/// (all blocks when `blocks` is `None`), it flips the byte at offset `at` of the block, or the
/// first byte of every packet it reads there when `at` is `None`.
#[derive(Clone, Debug, Default)]
pub struct Corruption {
    pub block_size: u64,
    pub blocks: Option<Vec<u64>>,
    pub at: Option<u64>,
}

impl Corruption {
    /// Every packet of every block.
    pub fn everything(block_size: u64) -> Corruption {
        Corruption {
            block_size,
            blocks: None,
            at: None,
        }
    }

    /// One byte (offset `at` in the block) of each of `blocks`.
    pub fn byte_in(block_size: u64, blocks: &[u64], at: u64) -> Corruption {
        Corruption {
            block_size,
            blocks: Some(blocks.to_vec()),
            at: Some(at),
        }
    }

    fn chosen(&self, block: u64) -> bool {
        self.blocks.as_ref().is_none_or(|b| b.contains(&block))
    }

    /// Flips the corrupted bytes of `buf`, which holds the content from `offset`.
    fn apply(&self, offset: u64, buf: &mut [u8]) {
        let end = offset + buf.len() as u64;
        let first_block = offset / self.block_size;
        let last_block = end.saturating_sub(1) / self.block_size;
        for block in first_block..=last_block {
            if buf.is_empty() || !self.chosen(block) {
                continue;
            }
            let target = match self.at {
                Some(at) => block * self.block_size + at,
                None => offset.max(block * self.block_size),
            };
            if (offset..end).contains(&target) {
                buf[(target - offset) as usize] ^= 0x5a;
            }
        }
    }
}

/// The harness servers' content: the pattern, with the bytes `corruption` names flipped.
#[derive(Clone, Debug)]
pub struct HarnessContent {
    pub pattern: PatternContent,
    pub corruption: Option<Corruption>,
}

impl ContentSource for HarnessContent {
    fn info(&self, id: &wire::ContentId) -> Option<ContentInfo> {
        self.pattern.info(id)
    }
    fn read(&self, id: &wire::ContentId, offset: u64, buf: &mut [u8]) -> bool {
        if !self.pattern.read(id, offset, buf) {
            return false;
        }
        if let Some(c) = &self.corruption {
            c.apply(offset, buf);
        }
        true
    }
}

impl ContentSource for PatternContent {
    fn info(&self, id: &wire::ContentId) -> Option<ContentInfo> {
        (*id == self.id).then_some(ContentInfo { length: self.length })
    }
    fn read(&self, id: &wire::ContentId, offset: u64, buf: &mut [u8]) -> bool {
        if *id != self.id || offset + buf.len() as u64 > self.length {
            return false;
        }
        Self::fill(offset, buf);
        true
    }
}

/// One path: the server→client (data) direction's rate, delay and loss, and the
/// client→server direction's delay and loss.
#[derive(Clone, Copy, Debug)]
pub struct PathSpec {
    /// Data-direction bottleneck rate in bit/s.
    pub rate_bps: u64,
    /// One-way propagation delay, the same both ways.
    pub delay: Duration,
    /// Probability that a data-direction datagram is lost.
    pub loss: f64,
    /// Probability that a client→server datagram is lost.
    pub uplink_loss: f64,
    /// Drop-tail limit of the data-direction queue, in datagrams.
    pub queue_packets: usize,
    /// The server behind this path is the origin.
    pub origin: bool,
}

impl PathSpec {
    pub fn new(rate_bps: u64, delay: Duration, loss: f64) -> Self {
        PathSpec {
            rate_bps,
            delay,
            loss,
            uplink_loss: 0.0,
            queue_packets: 256,
            origin: false,
        }
    }
    /// Capacity as the metrics define it: rate × (1 − loss), in bit/s.
    pub fn capacity_bps(&self) -> f64 {
        self.rate_bps as f64 * (1.0 - self.loss)
    }
}

/// A FIFO serialiser with a drop-tail queue.
#[derive(Debug, Default)]
struct Serializer {
    /// Departure times of datagrams queued or being sent.
    departures: VecDeque<Instant>,
}

impl Serializer {
    /// Departure time of a datagram of `len` bytes offered at `now`, or `None` if dropped.
    fn offer(&mut self, now: Instant, len: usize, rate_bps: u64, limit: usize) -> Option<Instant> {
        while self.departures.front().is_some_and(|&d| d <= now) {
            self.departures.pop_front();
        }
        if self.departures.len() >= limit {
            return None;
        }
        let start = self.departures.back().copied().unwrap_or(now).max(now);
        let departure = start + Duration::from_nanos(len as u64 * 8 * 1_000_000_000 / rate_bps.max(1));
        self.departures.push_back(departure);
        Some(departure)
    }
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InTransit {
    at: Instant,
    order: u64,
    path: usize,
    to_client: bool,
    slot: usize,
}

/// One client and N servers wired by in-memory paths.
pub struct Harness {
    pub now: Instant,
    pub client: Download,
    pub servers: Vec<ServerSession<HarnessContent>>,
    pub specs: Vec<PathSpec>,
    pub path_ids: Vec<PathId>,
    /// Servers that silently drop everything (failed devices).
    pub failed: Vec<bool>,
    pub content: PatternContent,
    links: Vec<Serializer>,
    heap: BinaryHeap<Reverse<InTransit>>,
    datagrams: Vec<Vec<u8>>,
    free: Vec<usize>,
    order: u64,
    rng: ChaCha8Rng,
    buf: Vec<u8>,
    client_addr: SocketAddr,
    /// Bytes read from the client (the tasks' ranges in order) and checked against the content.
    pub verified: u64,
    read_buf: Vec<u8>,
    expected_buf: Vec<u8>,
    tasks: Vec<std::ops::Range<u64>>,
}

impl Harness {
    /// A download of `config` over `specs`, one server per path, with scheduler `scheduler`
    /// and congestion control `cc`. `seed` drives every random loss.
    pub fn new(
        config: DownloadConfig,
        scheduler: Box<dyn crate::scheduler::Scheduler>,
        cc: &dyn ControllerFactory,
        specs: &[PathSpec],
        seed: u64,
    ) -> Harness {
        let content = PatternContent::new(config.content_length);
        let config = DownloadConfig {
            content: content.id,
            ..config
        };
        let tasks = if config.tasks.is_empty() {
            std::iter::once(0..config.content_length).collect()
        } else {
            config.tasks.clone()
        };
        let packet_size = config.packet_size;
        let mut client = Download::new(config, scheduler).expect("valid download config");
        let mut path_ids = Vec::new();
        let mut servers = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let name = if spec.origin {
                format!("origin{i}")
            } else {
                format!("edge{i}")
            };
            path_ids.push(client.add_path(
                Instant::ZERO,
                ServerInfo {
                    name,
                    origin: spec.origin,
                },
                cc.build(Instant::ZERO, u64::from(packet_size)),
            ));
            let mut key = [0u8; 32];
            key[..8].copy_from_slice(&(seed ^ i as u64).to_le_bytes());
            let server_config = ServerConfig {
                packet_size: packet_size as u16,
                token_key: key,
                ..ServerConfig::default()
            };
            let source = HarnessContent {
                pattern: content,
                corruption: None,
            };
            servers.push(ServerSession::new(server_config, source));
        }
        Harness {
            now: Instant::ZERO,
            client,
            servers,
            specs: specs.to_vec(),
            path_ids,
            failed: vec![false; specs.len()],
            content,
            links: specs.iter().map(|_| Serializer::default()).collect(),
            heap: BinaryHeap::new(),
            datagrams: Vec::new(),
            free: Vec::new(),
            order: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            buf: Vec::with_capacity(wire::MAX_DATAGRAM),
            client_addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 9000)),
            verified: 0,
            read_buf: vec![0; 64 * 1024],
            expected_buf: vec![0; 64 * 1024],
            tasks,
        }
    }

    /// Sum of the paths' capacities in bit/s.
    pub fn capacity_bps(&self) -> f64 {
        self.specs.iter().map(PathSpec::capacity_bps).sum()
    }

    fn launch(&mut self, at: Instant, path: usize, to_client: bool, len: usize) {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.datagrams.push(Vec::with_capacity(wire::MAX_DATAGRAM));
                self.datagrams.len() - 1
            }
        };
        let d = &mut self.datagrams[slot];
        d.clear();
        d.extend_from_slice(&self.buf[..len]);
        self.order += 1;
        self.heap.push(Reverse(InTransit {
            at,
            order: self.order,
            path,
            to_client,
            slot,
        }));
    }

    /// Moves every datagram the endpoints want to send onto the paths.
    fn flush(&mut self) {
        let now = self.now;
        while let Some(t) = self.client.poll_transmit(now, &mut self.buf) {
            let Some(path) = self.path_ids.iter().position(|&p| p == t.path) else {
                continue;
            };
            let spec = self.specs[path];
            if spec.uplink_loss > 0.0 && self.rng.random_bool(spec.uplink_loss) {
                continue;
            }
            self.launch(now + spec.delay, path, false, t.len);
        }
        for i in 0..self.servers.len() {
            while let Some(t) = self.servers[i].poll_transmit(now, &mut self.buf) {
                debug_assert_eq!(t.to, self.client_addr);
                let spec = self.specs[i];
                let Some(departure) = self.links[i].offer(now, t.len, spec.rate_bps, spec.queue_packets) else {
                    continue;
                };
                if spec.loss > 0.0 && self.rng.random_bool(spec.loss) {
                    continue;
                }
                self.launch(departure + spec.delay, i, true, t.len);
            }
        }
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let mut next = self.heap.peek().map(|Reverse(t)| t.at);
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n: Instant| n.min(t)));
            }
        };
        consider(self.client.poll_timeout());
        for s in &self.servers {
            consider(s.poll_timeout());
        }
        next
    }

    /// Reads and checks whatever the client can deliver.
    fn drain_reads(&mut self) {
        loop {
            let n = self.client.read(&mut self.read_buf);
            if n == 0 {
                return;
            }
            // Bytes arrive as the tasks' ranges one after the other.
            let mut done = 0;
            while done < n {
                let (offset, room) = self.stream_offset(self.verified);
                let take = (n - done).min(room as usize);
                let expected = &mut self.expected_buf[..take];
                PatternContent::fill(offset, expected);
                assert!(
                    self.read_buf[done..done + take] == *expected,
                    "content differs within bytes {offset}..{}",
                    offset + take as u64
                );
                done += take;
                self.verified += take as u64;
            }
        }
    }

    /// Content offset of byte `position` of the stream of task ranges, and how many bytes
    /// follow it in the same task.
    fn stream_offset(&self, position: u64) -> (u64, u64) {
        let mut skipped = 0;
        for t in &self.tasks {
            let len = t.end - t.start;
            if position < skipped + len {
                let within = position - skipped;
                return (t.start + within, len - within);
            }
            skipped += len;
        }
        panic!("read past the end of the tasks");
    }

    /// One step: advance to the next wake-up and handle everything due then. Returns false
    /// when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        self.flush();
        let Some(next) = self.next_wakeup() else { return false };
        self.now = self.now.max(next);
        let now = self.now;
        while self.heap.peek().is_some_and(|Reverse(t)| t.at <= now) {
            let Reverse(t) = self.heap.pop().expect("peeked");
            let datagram = std::mem::take(&mut self.datagrams[t.slot]);
            if t.to_client {
                self.client.handle_datagram(now, self.path_ids[t.path], &datagram);
            } else if !self.failed[t.path] {
                self.servers[t.path].handle_datagram(now, self.client_addr, &datagram);
            }
            self.datagrams[t.slot] = datagram;
            self.free.push(t.slot);
            self.flush();
        }
        if self.client.poll_timeout().is_some_and(|t| t <= now) {
            self.client.handle_timeout(now);
        }
        for s in &mut self.servers {
            if s.poll_timeout().is_some_and(|t| t <= now) {
                s.handle_timeout(now);
            }
        }
        true
    }

    /// Runs until the download is done or virtual time passes `limit`; reads and verifies
    /// every delivered byte when the client keeps data. Returns whether it completed.
    pub fn run(&mut self, limit: Duration) -> bool {
        let deadline = Instant::ZERO + limit;
        while !self.client.is_done() && self.now <= deadline {
            if !self.step() {
                break;
            }
            self.drain_reads();
        }
        self.drain_reads();
        self.flush();
        self.client.is_done()
    }

    /// Runs until virtual time `at` (or completion).
    pub fn run_until(&mut self, at: Instant) {
        while !self.client.is_done() && self.next_wakeup().is_some_and(|t| t <= at) {
            self.step();
            self.drain_reads();
        }
        self.now = self.now.max(at);
    }

    /// Server `i` stops answering (a failed device).
    pub fn fail_server(&mut self, i: usize) {
        self.failed[i] = true;
    }

    /// Server `i` serves corrupt bytes from now on (a broken or malicious device).
    pub fn corrupt_server(&mut self, i: usize, corruption: Corruption) {
        self.servers[i].source_mut().corruption = Some(corruption);
    }
}

/// A client wired straight to its servers: every datagram is handed over at once, with no
/// link in between and the clock moving one microsecond per exchange. What it measures is
/// the CPU cost of the protocol core itself.
pub struct DirectPair {
    pub client: Download,
    pub servers: Vec<ServerSession<PatternContent>>,
    path_ids: Vec<PathId>,
    now: Instant,
    buf: Vec<u8>,
    read_buf: Vec<u8>,
    client_addr: SocketAddr,
}

impl DirectPair {
    /// `paths` servers of a content of `length` bytes, fetched with `scheduler` and `cc`.
    pub fn new(
        config: DownloadConfig,
        scheduler: Box<dyn crate::scheduler::Scheduler>,
        cc: &dyn ControllerFactory,
        paths: usize,
    ) -> DirectPair {
        let content = PatternContent::new(config.content_length);
        let config = DownloadConfig {
            content: content.id,
            ..config
        };
        let packet_size = config.packet_size;
        let mut client = Download::new(config, scheduler).expect("valid download config");
        let mut path_ids = Vec::new();
        let mut servers = Vec::new();
        for i in 0..paths {
            let info = ServerInfo {
                name: format!("server{i}"),
                origin: false,
            };
            path_ids.push(client.add_path(Instant::ZERO, info, cc.build(Instant::ZERO, u64::from(packet_size))));
            let config = ServerConfig {
                packet_size: packet_size as u16,
                request_budget: u64::MAX,
                ..ServerConfig::default()
            };
            servers.push(ServerSession::new(config, content));
        }
        DirectPair {
            client,
            servers,
            path_ids,
            now: Instant::ZERO,
            buf: Vec::with_capacity(wire::MAX_DATAGRAM),
            read_buf: vec![0; 256 * 1024],
            client_addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 9000)),
        }
    }

    /// Runs to completion; returns the bytes read from the client (0 unless it keeps data).
    pub fn run(&mut self) -> u64 {
        let mut read = 0u64;
        while !self.client.is_done() {
            self.now += Duration::from_micros(1);
            let now = self.now;
            while let Some(t) = self.client.poll_transmit(now, &mut self.buf) {
                let i = self.path_ids.iter().position(|&p| p == t.path).expect("known path");
                self.servers[i].handle_datagram(now, self.client_addr, &self.buf[..t.len]);
            }
            let mut answered = false;
            for (i, server) in self.servers.iter_mut().enumerate() {
                while let Some(t) = server.poll_transmit(now, &mut self.buf) {
                    self.client.handle_datagram(now, self.path_ids[i], &self.buf[..t.len]);
                    answered = true;
                }
            }
            loop {
                let n = self.client.read(&mut self.read_buf);
                if n == 0 {
                    break;
                }
                read += n as u64;
            }
            if !answered {
                if let Some(t) = self.client.poll_timeout() {
                    self.now = self.now.max(t);
                    self.client.handle_timeout(self.now);
                }
            }
        }
        read
    }
}
