//! The client's download session: one content fetched from many servers at once.
//!
//! A [`Download`] is a state machine in the style of quinn-proto's `Connection`: it never
//! touches a socket or a clock. Its methods come in three groups:
//!
//! - inputs: [`Download::add_path`], [`Download::remove_path`], [`Download::handle_datagram`],
//!   [`Download::handle_timeout`];
//! - outputs: [`Download::poll_transmit`] (call it until it returns `None` after every input),
//!   [`Download::poll_timeout`], [`Download::poll_event`], [`Download::read`];
//! - getters: [`Download::stats`], [`Download::is_done`], [`Download::path_ids`].
//!
//! The content is cut into packets of `packet_size` bytes; sequence number `k` covers bytes
//! `[k·packet_size, (k+1)·packet_size)`. It is fetched as an ordered list of tasks (byte
//! ranges, e.g. 10-second video segments); a task starts when the one before it is complete,
//! as in Douyin's PCDN (Pscheduler §II). All paths draw from one global pending queue; the
//! scheduler decides which sequence number each request asks for and on which path.
//! Under [`Transport::Subflow`] a path is an in-order stream instead, whose losses are
//! retransmitted on it alone (the `subflow` submodule).
//!
//! With a manifest (`DownloadConfig::verify`) every block is checked against its BLAKE3 hash
//! before its packets are delivered, and servers that send corrupt data are banned (the
//! `verify` submodule).

use crate::cc::Controller;
use crate::manifest::{Manifest, ManifestError};
use crate::path::{Path, PathId, PathState, PathStats, ReorderConfig, ServerInfo};
use crate::player::{Player, PlayerConfig, SpecError};
use crate::scheduler::Holes;
use crate::scheduler::{InFlightLookup, PathView, Pending, Pick, SchedEvent, Scheduler, View};
use crate::stats::{Stats, TaskStats};
use crate::time::{Duration, Instant};
use pcdn_wire as wire;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

mod subflow;
mod verify;

pub use subflow::Transport;

/// How a download is set up.
#[derive(Clone, Debug)]
pub struct DownloadConfig {
    pub content: wire::ContentId,
    /// Content length in bytes.
    pub content_length: u64,
    /// Payload bytes per DATA packet; every server must announce the same.
    pub packet_size: u32,
    /// Byte ranges fetched one after the other; empty: the whole content as one task.
    /// Ranges must be ascending and must not overlap.
    pub tasks: Vec<Range<u64>>,
    /// Bytes that may be requested beyond the in-order cursor (the reorder buffer).
    pub reorder_buffer: u64,
    /// A request unanswered after this many later requests on its path were answered is lost.
    pub reorder_threshold: u64,
    /// The time threshold's reordering window, adapting to the reordering each path shows
    /// (RFC 8985 §6.2).
    pub reordering: ReorderConfig,
    /// A path with this many retransmission timeouts in a row, no data between, has failed.
    pub max_consecutive_timeouts: u32,
    /// A path whose requests have gone unanswered for two smoothed RTTs asks again for the
    /// oldest still missing (a tail loss probe, RFC 8985 §7), so that a lost tail is found by
    /// the time threshold rather than by the retransmission timeout. Pull transport only.
    pub tail_probes: bool,
    /// HELLO attempts before a path that never answers has failed.
    pub handshake_attempts: u32,
    /// Lower bound of the retransmission timeout.
    pub min_rto: Duration,
    /// How late the driver may wake for a paced request: a paced path makes up this much lost
    /// time with back-to-back requests, so the pacing rate holds on average. Tokio's timers
    /// fire in 1 ms slots, and with strict spacing a path paced at microsecond gaps sent one
    /// request per wake-up (a loopback fetch under `weft` fell from 8 to 1 Gbit/s). 1 ms by
    /// default, as much as Linux TCP sends in one burst at its pacing rate (TSO autosizing,
    /// `sk_pacing_shift` 10); the simulator, whose timers fire on time, uses zero.
    pub pacing_slack: Duration,
    /// Keep received payload for [`Download::read`]; the simulator turns it off to save copies.
    pub keep_data: bool,
    /// Seeds connection ids (and nothing else: schedulers get their own seed).
    pub seed: u64,
    /// Check every block against this manifest before delivering it, and ban servers proven
    /// to send corrupt data. Needs `keep_data`, the manifest's length and packet size, and
    /// tasks on block boundaries. `None`: packets are delivered as they come.
    pub verify: Option<Arc<Manifest>>,
    /// With `verify`: a path that was the only source of this many failed blocks, none of
    /// them verified since, is banned.
    pub max_unresolved_strikes: u32,
    /// A video player fed the in-order bytes (the video is the content from byte 0): its play
    /// deadlines and buffer are shown to the scheduler, its QoE lands in `Stats::player`, and
    /// with `jump_to_cdn` a segment it gives up on is fetched from origin paths only. The
    /// viewer presses play when the first path is added.
    pub video: Option<PlayerConfig>,
    /// Whether a lost request goes back to the pending queue (pcdn's pull protocol) or is
    /// retransmitted on its own path, which delivers in order (the `subflow` module).
    pub transport: Transport,
}

impl DownloadConfig {
    /// This configuration with the reordering window's settings `reordering`.
    pub fn with_reordering(mut self, reordering: ReorderConfig) -> Self {
        self.reordering = reordering;
        self
    }

    /// This configuration with tail loss probes on or off (`tail_probes`).
    pub fn with_tail_probes(mut self, tail_probes: bool) -> Self {
        self.tail_probes = tail_probes;
        self
    }

    /// Defaults for fetching the whole content: a 4 MB reorder buffer, threshold 3.
    pub fn new(content: wire::ContentId, content_length: u64, packet_size: u32) -> Self {
        DownloadConfig {
            content,
            content_length,
            packet_size,
            tasks: Vec::new(),
            reorder_buffer: 4_000_000,
            reorder_threshold: crate::path::PACKET_THRESHOLD,
            reordering: ReorderConfig::default(),
            max_consecutive_timeouts: 6,
            tail_probes: true,
            handshake_attempts: 5,
            min_rto: Duration::from_millis(200),
            pacing_slack: Duration::from_millis(1),
            keep_data: true,
            seed: 0,
            verify: None,
            max_unresolved_strikes: 4,
            video: None,
            transport: Transport::Pull,
        }
    }
}

/// Why a download could not be set up.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("packet size {0} is outside 1..={max}", max = wire::MAX_PAYLOAD)]
    PacketSize(u32),
    #[error(
        "task {index} ({start}..{end}) is empty, reversed, past the content length {length}, or overlaps the task before it"
    )]
    Task {
        index: usize,
        start: u64,
        end: u64,
        length: u64,
    },
    #[error("verify needs keep_data: a block's packets are held until the whole block is hashed")]
    VerifyWithoutData,
    #[error("the manifest's {field} is {manifest}, the download's is {config}")]
    ManifestMismatch {
        field: &'static str,
        manifest: u64,
        config: u64,
    },
    #[error("invalid manifest: {0}")]
    Manifest(#[from] ManifestError),
    #[error(
        "task {index} ({start}..{end}) is not on the manifest's {block_size}-byte block boundaries: it must start on one and end on one or at the content's end"
    )]
    UnalignedTask {
        index: usize,
        start: u64,
        end: u64,
        block_size: u32,
    },
    #[error(
        "reorder_buffer of {reorder_buffer} bytes is smaller than one {block_size}-byte block: no block could ever be complete"
    )]
    ReorderBufferBelowBlock { reorder_buffer: u64, block_size: u32 },
    #[error("max_unresolved_strikes is 0: it must be at least 1")]
    NoStrikes,
    #[error("{0}")]
    Video(#[from] SpecError),
    #[error("the video is {video_bytes} bytes, longer than the content's {content_length}")]
    VideoTooLong { video_bytes: u64, content_length: u64 },
}

/// Something the application should know.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The server answered HELLO; requests can flow.
    PathEstablished(PathId),
    /// The path is no longer used; its requests went back to the pending queue.
    PathFailed { path: PathId, reason: PathError },
    /// Task `index` is complete (all its bytes delivered in order).
    TaskComplete { index: usize },
    /// Block `block` did not match the manifest; its packets, from `paths`, will be fetched
    /// again.
    BlockRejected { block: u64, paths: Vec<PathId> },
    /// Every task is complete.
    Done,
}

/// Why a path failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathError {
    /// The server refused with this reason.
    Rejected(wire::Reason),
    /// No answer to HELLO, or too many retransmission timeouts in a row.
    Timeout,
    /// The server's WELCOME disagrees with the content's length or packet size.
    Mismatch,
    /// The server sent data that failed verification: proven by a packet that differs from
    /// the block's verified bytes, or as the only source of failed blocks. The path is banned.
    Corrupt,
}

/// One datagram to send, written into the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub path: PathId,
    /// Bytes written at the start of the buffer.
    pub len: usize,
}

/// Per-sequence-number state, for numbers between the ring base and the highest requested.
/// Small: the ring holds a reorder buffer's worth of them, and every packet walks it.
#[derive(Clone, Copy, Debug)]
struct Slot {
    received: bool,
    /// Paths this number is in flight on.
    copies: u8,
    /// One of them (`NO_PATH` if none is noted here), with the pn of its request: the arrival
    /// finds it where it looks anyway, where a per-path map would cost a cache miss. The other
    /// copies are in their path's `in_flight_spill`.
    holder: u32,
    pn: u64,
    arrival: Instant,
}

/// No path holds the slot's number in flight.
const NO_PATH: u32 = u32::MAX;

impl Default for Slot {
    fn default() -> Self {
        Slot {
            received: false,
            copies: 0,
            holder: NO_PATH,
            pn: 0,
            arrival: Instant::ZERO,
        }
    }
}

/// A task in sequence numbers as well as bytes.
#[derive(Clone, Copy, Debug)]
struct Task {
    start_byte: u64,
    end_byte: u64,
    start_seq: u64,
    end_seq: u64,
}

/// Most requests one `poll_transmit` call hands out; bounds the work of one call.
const MAX_PICKS_PER_POLL: usize = 4096;

/// A client download session. See the module documentation for the call order.
pub struct Download {
    config: DownloadConfig,
    packet_size: u64,
    total_seqs: u64,
    scheduler: Box<dyn Scheduler>,
    paths: Vec<Path>,
    next_path_id: u32,
    rng: ChaCha8Rng,
    /// `slots[i]` is sequence number `ring_base + i`.
    slots: VecDeque<Slot>,
    /// With `keep_data`, `payloads[i]` is the payload of `slots[i]` (empty until received);
    /// without, it stays empty.
    payloads: VecDeque<Vec<u8>>,
    ring_base: u64,
    /// First sequence number not yet delivered in order.
    cursor: u64,
    /// First sequence number never requested.
    next_new: u64,
    /// Pending numbers below `next_new`: lost requests and numbers skipped by a pick ahead.
    holes: Holes,
    tasks: Vec<Task>,
    /// Task being downloaded (== tasks.len() when all are complete).
    task: usize,
    /// Task and byte offset `read` continues from.
    read_task: usize,
    read_pos: u64,
    /// Bytes received and not yet deliverable in order.
    ofo_bytes: u64,
    events: VecDeque<Event>,
    /// Control datagrams (BYE) waiting to be sent.
    control: VecDeque<(PathId, Vec<u8>)>,
    stats: Stats,
    /// The scheduler's views of the established paths, in path order; `view_index[i]` is the
    /// index in `paths` of the path `view_paths[i]` shows. Kept between polls, and rebuilt
    /// only when `views_valid` was cleared because paths came, went, or changed state.
    view_paths: Vec<PathView>,
    view_index: Vec<usize>,
    views_valid: bool,
    lost_scratch: Vec<u64>,
    /// The ranges of the REQUEST being written, kept to save an allocation per request.
    range_scratch: Vec<wire::SeqRange>,
    pool: Vec<Vec<u8>>,
    emit_next: usize,
    /// Paths with picks in their outbox, so a poll after the last REQUEST went out looks at no
    /// path.
    outboxes: usize,
    /// The reorder buffer in packets (at least one).
    reorder_window: u64,
    done: bool,
    /// The latest `now` any input or poll brought.
    now: Instant,
    /// Some path may be handshaking (cleared when a poll finds none).
    maybe_connecting: bool,
    /// Block verification and the ban bookkeeping, with a manifest.
    verify: Option<Box<verify::Verifier>>,
    /// The cursor does not pass this sequence number: the end of the verified blocks from the
    /// cursor on, or `u64::MAX` without a manifest.
    deliver_limit: u64,
    /// The player, from the first `add_path` on (with `DownloadConfig::video`).
    player: Option<Player>,
    /// Sequence numbers that only origin paths may be asked for: the rest of each segment the
    /// player jumped to the CDN. Ranges wholly behind the cursor are dropped.
    origin_only: Vec<Range<u64>>,
    /// The paths' streams under `Transport::Subflow`.
    subflows: Option<Box<subflow::Subflows>>,
}

impl std::fmt::Debug for Download {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Download")
            .field("scheduler", &self.scheduler.name())
            .field("paths", &self.paths.len())
            .field("cursor", &self.cursor)
            .field("next_new", &self.next_new)
            .field("task", &self.task)
            .field("done", &self.done)
            .finish()
    }
}

impl Download {
    /// A new download. Nothing is sent until paths are added.
    pub fn new(config: DownloadConfig, scheduler: Box<dyn Scheduler>) -> Result<Download, ConfigError> {
        if config.packet_size == 0 || config.packet_size as usize > wire::MAX_PAYLOAD {
            return Err(ConfigError::PacketSize(config.packet_size));
        }
        let packet_size = u64::from(config.packet_size);
        let length = config.content_length;
        let ranges = if config.tasks.is_empty() {
            std::iter::once(0..length).collect()
        } else {
            config.tasks.clone()
        };
        let mut tasks = Vec::with_capacity(ranges.len());
        let mut previous_end = 0;
        for (index, r) in ranges.iter().enumerate() {
            let bad = r.end > length || (r.start >= r.end && length > 0) || (index > 0 && r.start < previous_end);
            if bad {
                return Err(ConfigError::Task {
                    index,
                    start: r.start,
                    end: r.end,
                    length,
                });
            }
            previous_end = r.end;
            tasks.push(Task {
                start_byte: r.start,
                end_byte: r.end,
                start_seq: r.start / packet_size,
                end_seq: r.end.div_ceil(packet_size),
            });
        }
        if let Some(manifest) = &config.verify {
            verify::check_config(&config, manifest)?;
        }
        if let Some(video) = &config.video {
            video.spec.validate()?;
            let video_bytes = video.spec.total_bytes();
            if video_bytes > length {
                return Err(ConfigError::VideoTooLong {
                    video_bytes,
                    content_length: length,
                });
            }
        }
        let mut needed = 0;
        let mut counted_to = 0;
        for t in &tasks {
            let start = t.start_seq.max(counted_to);
            needed += t.end_seq.saturating_sub(start);
            counted_to = counted_to.max(t.end_seq);
        }
        let stats = Stats {
            packets_needed: needed,
            tasks: tasks
                .iter()
                .map(|t| TaskStats {
                    start_byte: t.start_byte,
                    end_byte: t.end_byte,
                    ..TaskStats::default()
                })
                .collect(),
            ..Stats::default()
        };
        let first = tasks[0];
        let reorder_window = (config.reorder_buffer / packet_size).max(1);
        let verifier = config.verify.as_ref().map(|m| {
            Box::new(verify::Verifier::new(
                m.clone(),
                config.max_unresolved_strikes,
                first.start_seq,
            ))
        });
        let deliver_limit = if verifier.is_some() { first.start_seq } else { u64::MAX };
        let config_transport = config.transport;
        let mut download = Download {
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            total_seqs: length.div_ceil(packet_size),
            packet_size,
            config,
            scheduler,
            paths: Vec::new(),
            next_path_id: 0,
            slots: VecDeque::new(),
            payloads: VecDeque::new(),
            ring_base: first.start_seq,
            cursor: first.start_seq,
            next_new: first.start_seq,
            holes: Holes::new(),
            tasks,
            task: 0,
            read_task: 0,
            read_pos: first.start_byte,
            ofo_bytes: 0,
            events: VecDeque::new(),
            control: VecDeque::new(),
            stats,
            view_paths: Vec::new(),
            view_index: Vec::new(),
            views_valid: false,
            lost_scratch: Vec::new(),
            range_scratch: Vec::new(),
            pool: Vec::new(),
            emit_next: 0,
            outboxes: 0,
            reorder_window,
            done: false,
            now: Instant::ZERO,
            maybe_connecting: false,
            verify: verifier,
            deliver_limit,
            player: None,
            origin_only: Vec::new(),
            subflows: subflow::Subflows::new(config_transport),
        };
        download.start_task(Instant::ZERO, 0);
        // An empty content (or empty first tasks) is complete before anything is sent.
        download.deliver(Instant::ZERO);
        Ok(download)
    }

    /// Opens a path to a server; HELLO goes out on the next [`Download::poll_transmit`].
    pub fn add_path(&mut self, now: Instant, server: ServerInfo, cc: Box<dyn Controller>) -> PathId {
        let id = PathId(self.next_path_id);
        self.next_path_id += 1;
        self.maybe_connecting = true;
        if self.player.is_none()
            && let Some(video) = &self.config.video
        {
            let player = Player::new(video.spec.clone(), now).expect("validated in Download::new");
            self.player = Some(match video.jump_to_cdn {
                Some(rule) => player.with_jump_to_cdn(rule),
                None => player,
            });
            self.sync_player(now);
        }
        self.views_valid = false;
        let conn_id = self.rng.random::<u64>();
        self.stats.paths.push(PathStats {
            name: server.name.clone(),
            origin: server.origin,
            ..PathStats::default()
        });
        let mut path = Path::new(id, server, conn_id, cc, now, self.config.min_rto, self.packet_size)
            .with_loss_detection(self.config.reorder_threshold, self.config.reordering.clone());
        path.pacing_slack = self.config.pacing_slack;
        // Subflows retransmit on their own path, as TCP does; their timeouts do the rest.
        path.tail_probes = self.config.tail_probes && self.subflows.is_none();
        self.paths.push(path);
        if let Some(flows) = self.subflows.as_deref_mut() {
            flows.add_path(id);
        }
        id
    }

    /// Stops using a path: its requests go back to the pending queue and a BYE is sent.
    pub fn remove_path(&mut self, now: Instant, id: PathId) {
        let Some(index) = self.path_index(id) else { return };
        self.abandon(now, index);
        if self.verify.is_some() {
            self.release_parole(id);
        }
        let path = self.paths.remove(index);
        self.views_valid = false;
        if let Some(token) = path.token() {
            let mut buf = Vec::new();
            if wire::encode_bye(
                &mut buf,
                &wire::Bye {
                    conn_id: path.conn_id,
                    token,
                },
            )
            .is_ok()
            {
                self.control.push_back((id, buf));
            }
        }
        self.scheduler.on_event(now, &SchedEvent::PathRemoved(id));
    }

    /// Ids of the paths in use (failed ones included until removed).
    pub fn path_ids(&self) -> impl Iterator<Item = PathId> + '_ {
        self.paths.iter().map(|p| p.id)
    }

    /// The path has failed (it stays listed until removed).
    pub fn is_path_failed(&self, id: PathId) -> bool {
        self.path_index(id)
            .is_some_and(|i| self.paths[i].state == PathState::Failed)
    }

    /// The download's metrics so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Every task is complete.
    #[inline]
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Name of the scheduler deciding the requests.
    pub fn scheduler_name(&self) -> &'static str {
        self.scheduler.name()
    }

    /// The player (with `DownloadConfig::video`), once the first path was added.
    pub fn player(&self) -> Option<&Player> {
        self.player.as_ref()
    }

    /// Moves the player's clock to `now` with no other input, e.g. to play out what is
    /// buffered once the download is complete; `Stats::player` follows.
    pub fn advance_player(&mut self, now: Instant) {
        self.sync_player(now);
    }

    /// Advances the player to `now`, applies its jump-to-CDN decision and refreshes
    /// `Stats::player`.
    fn sync_player(&mut self, now: Instant) {
        let origin_up = self.origin_established();
        let Some(player) = self.player.as_mut() else { return };
        player.advance(now);
        // A jump needs an origin to jump to: without one the rule waits, and records nothing.
        let jump = if origin_up && !self.done {
            player.should_jump(now)
        } else {
            None
        };
        if let Some(segment) = jump {
            self.jump_to_origin(segment);
        }
        let cursor = self.cursor;
        self.origin_only.retain(|r| r.end > cursor);
        self.stats.player = self.player.as_ref().map(Player::stats);
    }

    /// The rest of `segment`, from the cursor on, may only be asked of origin paths from now
    /// on. Its requests in flight on edges alone go back to the queue for the origin: the
    /// player is about to stall, and an edge that made it jump may be slow to answer or to
    /// have its losses detected.
    fn jump_to_origin(&mut self, segment: u64) {
        let Some(player) = self.player.as_ref() else { return };
        let bytes = player.spec().segment_bytes(segment);
        let start = self.cursor.max(bytes.start / self.packet_size);
        let end = bytes.end.div_ceil(self.packet_size).min(self.total_seqs);
        if start >= end {
            return;
        }
        self.origin_only.push(start..end);
        for seq in start..end.min(self.next_new) {
            let Some(i) = self.slot_index(seq) else { continue };
            let slot = self.slots[i];
            if slot.received || slot.copies == 0 {
                continue;
            }
            let on_origin =
                (0..self.paths.len()).any(|index| self.paths[index].info.origin && self.in_flight_on(index, seq));
            if !on_origin {
                self.holes.insert(seq);
            }
        }
    }

    /// Some origin path can take requests.
    fn origin_established(&self) -> bool {
        self.paths.iter().any(|p| p.info.origin && p.is_established())
    }

    /// Jumped segments are held to origin paths only while one is established: without, the
    /// edges fetch them rather than nobody.
    fn origin_only_enforced(&self) -> bool {
        !self.origin_only.is_empty() && self.origin_established()
    }

    /// `seq` may only be asked of an origin path.
    fn is_origin_only(&self, seq: u64) -> bool {
        self.origin_only_enforced() && self.origin_only.iter().any(|r| r.contains(&seq))
    }

    /// When the player's jump-to-CDN rule may next fire with nothing else happening: when the
    /// buffer drains below its threshold, else just after the buffer runs dry.
    fn player_wakeup(&self) -> Option<Instant> {
        let player = self.player.as_ref()?;
        let rule = player.jump_rule()?;
        if self.done {
            return None;
        }
        let dry = player.runs_dry_at()?;
        let below = dry - rule.buffer_below;
        // A stall is only seen strictly after the buffer runs dry.
        let t = if below > self.now {
            below
        } else {
            dry + Duration::from_nanos(1)
        };
        (t > self.now).then_some(t)
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn path_index(&self, id: PathId) -> Option<usize> {
        self.paths.iter().position(|p| p.id == id)
    }

    /// Length in bytes of packet `seq`.
    fn packet_len(&self, seq: u64) -> u64 {
        let start = seq * self.packet_size;
        self.config.content_length.saturating_sub(start).min(self.packet_size)
    }

    /// A datagram arrived on `path`.
    pub fn handle_datagram(&mut self, now: Instant, path: PathId, datagram: &[u8]) {
        self.now = self.now.max(now);
        let Some(index) = self.path_index(path) else { return };
        // Clients never answer a server's bad datagram: dropping it gives an attacker nothing.
        let Ok(message) = wire::decode(datagram) else {
            self.stats.invalid += 1;
            return;
        };
        match message {
            wire::Message::Data(data) if data.conn_id == self.paths[index].conn_id => self.on_data(now, index, &data),
            wire::Message::Welcome(w) if w.conn_id == self.paths[index].conn_id => self.on_welcome(now, index, &w),
            wire::Message::Reject(r) if r.conn_id == self.paths[index].conn_id => self.on_reject(now, index, &r),
            _ => self.stats.invalid += 1,
        }
    }

    fn on_welcome(&mut self, now: Instant, index: usize, welcome: &wire::Welcome<'_>) {
        let path = &mut self.paths[index];
        let first_hello = match path.state {
            PathState::Connecting {
                attempts, first_hello, ..
            } => (attempts == 1).then_some(first_hello),
            PathState::Established { .. } => {
                // A fresh token after a re-handshake; keep the path's state.
                path.state = PathState::Established {
                    token: welcome.token.to_vec(),
                };
                return;
            }
            PathState::Failed => return,
        };
        if welcome.content_length != self.config.content_length
            || u32::from(welcome.packet_size) != self.config.packet_size
        {
            self.fail(now, index, PathError::Mismatch);
            return;
        }
        // Karn's rule: only an unambiguous handshake gives an RTT sample.
        if let Some(sent) = first_hello {
            path.rtt.update(now - sent);
            path.invalidate_view();
        }
        path.state = PathState::Established {
            token: welcome.token.to_vec(),
        };
        self.views_valid = false;
        let id = path.id;
        self.events.push_back(Event::PathEstablished(id));
        self.scheduler.on_event(now, &SchedEvent::PathAdded(id));
    }

    fn on_reject(&mut self, now: Instant, index: usize, reject: &wire::Reject) {
        use wire::Reason;
        if self.stats.paths[self.paths[index].id.0 as usize].banned {
            // A banned path is never used again, not even to re-open its session.
            return;
        }
        match reject.reason {
            Reason::Overloaded if reject.request_id != 0 || self.paths[index].is_established() => {
                let ps = &mut self.stats.paths[self.paths[index].id.0 as usize];
                let mut lost = std::mem::take(&mut self.lost_scratch);
                self.paths[index].on_refused(ps, now, reject.request_id, &mut lost);
                self.requeue_lost(now, index, &mut lost);
                self.lost_scratch = lost;
            }
            Reason::BadToken | Reason::UnknownConnection => {
                // The server forgot us (restart, expiry): its queue is gone, so are our requests.
                self.abandon(now, index);
                self.maybe_connecting = true;
                let path = &mut self.paths[index];
                path.state = PathState::Connecting {
                    attempts: 0,
                    first_hello: now,
                    next_hello: now,
                };
                self.views_valid = false;
            }
            reason => self.fail(now, index, PathError::Rejected(reason)),
        }
    }

    fn on_data(&mut self, now: Instant, index: usize, data: &wire::Data<'_>) {
        // Two copies, so that a download without a manifest pays one test per packet.
        if self.verify.is_some() {
            self.on_data_checked::<true>(now, index, data);
        } else {
            self.on_data_checked::<false>(now, index, data);
        }
    }

    /// `on_data` with (`VERIFYING`) or without a manifest.
    #[inline(always)]
    fn on_data_checked<const VERIFYING: bool>(&mut self, now: Instant, index: usize, data: &wire::Data<'_>) {
        let seq = data.seq;
        let bytes = data.payload.len() as u64;
        if seq >= self.total_seqs || bytes != self.packet_len(seq) {
            self.stats.invalid += 1;
            return;
        }
        let path_id = self.paths[index].id;
        if VERIFYING && self.stats.paths[path_id.0 as usize].banned {
            self.stats.invalid += 1;
            return;
        }
        let pn = self.take_answered(index, seq, data.request_id);
        let ps = &mut self.stats.paths[path_id.0 as usize];
        let answered = self.paths[index].on_data(ps, now, seq, pn, bytes);
        self.stats.packets_received += 1;
        self.stats.bytes_received += bytes;
        let slot_index = self.slot_index(seq);
        if self.subflows.is_some() {
            return self.on_subflow_data::<VERIFYING>(now, index, seq, answered, data.payload);
        }
        if answered.is_some() {
            if let Some(i) = slot_index {
                let slot = &mut self.slots[i];
                slot.copies = slot.copies.saturating_sub(1);
            }
        }
        let duplicate = match slot_index {
            None => true,
            // Verification also refuses numbers behind the cursor that were never asked for
            // (between tasks), which would otherwise stay out of order for ever.
            Some(i) => self.slots[i].received || (VERIFYING && seq < self.cursor),
        };
        if duplicate {
            self.stats.duplicates += 1;
            self.stats.paths[path_id.0 as usize].duplicates += 1;
        } else {
            let i = slot_index.expect("not a duplicate");
            let payload = self.copy_payload(data.payload);
            self.accept(index, i, seq, now, bytes, payload);
            if !VERIFYING {
                self.deliver(now);
                self.stats.sample_ofo(self.ofo_bytes);
            }
        }
        self.scheduler.on_event(
            now,
            &SchedEvent::Arrived {
                path: path_id,
                seq,
                rtt: answered.and_then(|a| a.rtt).unwrap_or_default(),
                duplicate,
            },
        );
        if answered.is_some() {
            self.detect_losses_on(now, index);
        }
        if VERIFYING && !duplicate {
            // Last, so that a block failure or a ban happens after the path has seen its data.
            self.on_verified_arrival(now, seq, path_id);
        }
    }

    /// Loss detection on the path at `index` after it answered a request.
    fn detect_losses_on(&mut self, now: Instant, index: usize) {
        let ps = &mut self.stats.paths[self.paths[index].id.0 as usize];
        let mut lost = std::mem::take(&mut self.lost_scratch);
        self.paths[index].detect_losses(ps, now, &mut lost);
        self.requeue_lost(now, index, &mut lost);
        self.lost_scratch = lost;
    }

    /// `payload` in a pooled buffer, with `keep_data`.
    fn copy_payload(&mut self, payload: &[u8]) -> Option<Vec<u8>> {
        if !self.config.keep_data {
            return None;
        }
        let mut buffer = self.pool.pop().unwrap_or_default();
        buffer.clear();
        buffer.extend_from_slice(payload);
        Some(buffer)
    }

    /// Hands packet `seq` (slot `i`, `bytes` long), which arrived at `arrival` on the path at
    /// `index`, to reassembly; `data` is its payload with `keep_data`.
    #[inline(always)]
    fn accept(&mut self, index: usize, i: usize, seq: u64, arrival: Instant, bytes: u64, data: Option<Vec<u8>>) {
        self.paths[index].note_delivered();
        if let Some(data) = data {
            self.payloads[i] = data;
        }
        let slot = &mut self.slots[i];
        slot.received = true;
        slot.arrival = arrival;
        // A late answer to a request already declared lost still fills its hole.
        if seq < self.next_new && !self.holes.is_empty() {
            self.holes.remove(&seq);
        }
        self.ofo_bytes += bytes;
    }

    /// Moves the in-order cursor over received packets, completing tasks on the way.
    fn deliver(&mut self, now: Instant) {
        while self.task < self.tasks.len() {
            let task = self.tasks[self.task];
            let end = task.end_seq.min(self.deliver_limit);
            while self.cursor < end {
                let i = (self.cursor - self.ring_base) as usize;
                let Some(slot) = self.slots.get(i).filter(|s| s.received) else {
                    break;
                };
                let bytes = self.packet_len(self.cursor);
                // `(now - arrival).as_micros()`, in integers.
                let wait_us = now.as_nanos().saturating_sub(slot.arrival.as_nanos()) / 1000;
                self.stats.waits_us.push(u32::try_from(wait_us).unwrap_or(u32::MAX));
                self.ofo_bytes -= bytes;
                self.stats.packets_delivered += 1;
                self.stats.bytes_delivered += bytes;
                self.stats.last_delivery = Some(now);
                self.cursor += 1;
            }
            if self.cursor < task.end_seq {
                break;
            }
            self.stats.tasks[self.task].completed_ns = Some(now.as_nanos());
            self.events.push_back(Event::TaskComplete { index: self.task });
            self.task += 1;
            if self.task == self.tasks.len() {
                self.finish(now);
            } else {
                self.start_task(now, self.task);
            }
        }
        if !self.config.keep_data {
            self.release_below(self.cursor);
        }
        if let Some(player) = self.player.as_mut() {
            let in_order = (self.cursor * self.packet_size).min(self.config.content_length);
            player.on_delivered(now, in_order);
        }
    }

    fn start_task(&mut self, now: Instant, index: usize) {
        let task = self.tasks[index];
        // Contiguous tasks share their boundary packet, which may be received already.
        self.cursor = self.cursor.max(task.start_seq);
        self.next_new = self.next_new.max(task.start_seq);
        if self.verify.is_some() {
            self.advance_deliver_limit();
        }
        if !self.config.keep_data {
            self.release_below(self.cursor);
        }
        if index > 0 || self.stats.started.is_some() {
            self.stats.tasks[index].started_ns = Some(now.as_nanos());
        }
        self.scheduler.on_event(
            now,
            &SchedEvent::TaskStarted {
                index,
                start_seq: task.start_seq,
                end_seq: task.end_seq,
            },
        );
    }

    fn finish(&mut self, now: Instant) {
        self.done = true;
        self.stats.finished = Some(now);
        self.events.push_back(Event::Done);
        // BYE lets servers drop their state at once, and any redundant copies still queued.
        for path in &mut self.paths {
            if let Some(token) = path.token() {
                let mut buf = Vec::new();
                if wire::encode_bye(
                    &mut buf,
                    &wire::Bye {
                        conn_id: path.conn_id,
                        token,
                    },
                )
                .is_ok()
                {
                    self.control.push_back((path.id, buf));
                }
            }
        }
    }

    /// Frees the slots of sequence numbers below `seq`.
    fn release_below(&mut self, seq: u64) {
        while self.ring_base < seq {
            match self.slots.pop_front() {
                Some(slot) => {
                    if slot.holder != NO_PATH {
                        // Still in flight (a copy on another path): its path keeps the pn.
                        if let Some(i) = self.path_index(PathId(slot.holder)) {
                            self.paths[i].in_flight_spill.insert(self.ring_base, slot.pn);
                        }
                    }
                    if let Some(data) = self.payloads.pop_front().filter(|d| d.capacity() > 0) {
                        self.pool.push(data);
                    }
                }
                None => {
                    self.ring_base = seq;
                    return;
                }
            }
            self.ring_base += 1;
        }
    }

    /// Lost requests whose number is still missing and in flight nowhere become pending again.
    #[inline]
    fn requeue_lost(&mut self, now: Instant, index: usize, lost: &mut Vec<u64>) {
        // Most calls have nothing to requeue; keep them free of the loop's stack frame.
        if !lost.is_empty() {
            if self.subflows.is_some() {
                self.subflow_lost(now, index, lost);
            } else {
                self.requeue(now, index, lost);
            }
        }
    }

    fn requeue(&mut self, now: Instant, index: usize, lost: &mut Vec<u64>) {
        let path = self.paths[index].id;
        for seq in lost.drain(..) {
            self.take_in_flight(index, seq);
            self.stats.losses += 1;
            if let Some(i) = self.slot_index(seq) {
                let slot = &mut self.slots[i];
                slot.copies = slot.copies.saturating_sub(1);
                if !slot.received && slot.copies == 0 {
                    self.holes.insert(seq);
                }
            }
            self.scheduler.on_event(now, &SchedEvent::Lost { path, seq });
        }
    }

    /// Gives every request in flight on path `index` back to the pending queue.
    fn abandon(&mut self, now: Instant, index: usize) {
        let mut lost = std::mem::take(&mut self.lost_scratch);
        if !self.paths[index].outbox.is_empty() {
            self.outboxes -= 1;
        }
        let path = self.paths[index].id;
        if self.subflows.is_some() {
            self.subflow_abandon(now, index, &mut lost);
            self.lost_scratch = lost;
            return;
        }
        let ps = &mut self.stats.paths[path.0 as usize];
        self.paths[index].abandon_all(ps, now, &mut lost);
        // Abandoned requests are not losses of the network; requeue without counting them.
        let before = self.stats.losses;
        self.requeue_lost(now, index, &mut lost);
        self.stats.losses = before;
        self.lost_scratch = lost;
    }

    fn fail(&mut self, now: Instant, index: usize, reason: PathError) {
        if self.paths[index].state == PathState::Failed {
            return;
        }
        self.abandon(now, index);
        if self.verify.is_some() {
            self.release_parole(self.paths[index].id);
        }
        let path = &mut self.paths[index];
        path.state = PathState::Failed;
        self.views_valid = false;
        let id = path.id;
        self.events.push_back(Event::PathFailed { path: id, reason });
        self.scheduler.on_event(now, &SchedEvent::PathRemoved(id));
    }

    /// The earliest time [`Download::handle_timeout`] should be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        // A scheduler's wake-up already past was for a call that has not come (no path could
        // send since): it would fire at once, again and again.
        let mut earliest = self.scheduler.poll_timeout().filter(|&t| t > self.now);
        let mut consider = |t: Instant| earliest = Some(earliest.map_or(t, |e: Instant| e.min(t)));
        for path in &self.paths {
            match path.state {
                // A finished download sends no hello (`poll_hello`), so the retry time would
                // never move and would fire at once, again and again.
                PathState::Connecting { next_hello, .. } if !self.done => consider(next_hello),
                PathState::Connecting { .. } => {}
                PathState::Established { .. } => {
                    if let Some(t) = path.rto_deadline() {
                        consider(t);
                    }
                    if let Some(t) = path.loss_deadline() {
                        consider(t);
                    }
                    if let Some(t) = path.tail_probe_deadline() {
                        consider(t);
                    }
                    // A paced path with window room and work to do wakes when pacing allows.
                    let paced = path.next_send > self.now;
                    if paced && !self.done && path.in_flight_count() < path.cwnd_packets() && self.has_work() {
                        consider(path.next_send);
                    }
                }
                PathState::Failed => {}
            }
        }
        if let Some(t) = self.player_wakeup() {
            consider(t);
        }
        earliest
    }

    fn has_work(&self) -> bool {
        self.subflows.as_ref().is_some_and(|f| f.has_retransmissions())
            || !self.holes.is_empty()
            || self.next_new < self.new_end()
            || self.verify.as_ref().is_some_and(|v| v.has_parole())
    }

    /// Timers: handshake retries, the loss time threshold, retransmission timeouts, and path
    /// failure.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        if self.player.is_some() {
            self.sync_player(now);
        }
        for index in 0..self.paths.len() {
            match self.paths[index].state {
                PathState::Connecting {
                    attempts, next_hello, ..
                } if next_hello <= now && attempts >= self.config.handshake_attempts => {
                    self.fail(now, index, PathError::Timeout);
                }
                PathState::Established { .. } => {
                    let id = self.paths[index].id;
                    let ps = &mut self.stats.paths[id.0 as usize];
                    let mut lost = std::mem::take(&mut self.lost_scratch);
                    self.paths[index].detect_losses(ps, now, &mut lost);
                    // The probe goes first: it restarts the retransmission timer, which would
                    // otherwise fire at the same instant.
                    if self.paths[index].tail_probe_deadline().is_some_and(|t| t <= now) {
                        self.tail_probe(now, index);
                    }
                    let ps = &mut self.stats.paths[id.0 as usize];
                    let fired = self.paths[index].on_rto(ps, now, &mut lost);
                    self.requeue_lost(now, index, &mut lost);
                    self.lost_scratch = lost;
                    let path = &self.paths[index];
                    // In timeout recovery with nothing left in flight (the time threshold may
                    // have lost the rest), only a probe can show the path alive again.
                    let idle_in_recovery = path.consecutive_timeouts > 0 && path.in_flight_count() == 0;
                    if fired && path.consecutive_timeouts >= self.config.max_consecutive_timeouts {
                        self.fail(now, index, PathError::Timeout);
                    } else if fired || idle_in_recovery {
                        self.probe(now, index);
                    }
                }
                _ => {}
            }
        }
    }

    /// A path in timeout recovery with nothing in flight asks again for a packet it delivered
    /// (`Path::probe_seq`): an answer shows it alive, and a probe never holds a packet the
    /// download waits for, as a scheduler's request would for as long as the backed-off RTO.
    fn probe(&mut self, now: Instant, index: usize) {
        if self.done {
            return;
        }
        if self.subflows.is_some() && self.retransmit_on_timeout(now, index) {
            return;
        }
        let Some(seq) = self.paths[index].probe_seq() else {
            return;
        };
        self.send_probe(now, index, seq, Path::record_probe);
    }

    /// A tail loss probe on the path at `index` (`Path::tail_probe_seq`): it asks again for
    /// the oldest packet in flight there that the download still waits for. Its answer, to a
    /// request later than every one unanswered, lets the time threshold declare those lost.
    fn tail_probe(&mut self, now: Instant, index: usize) {
        if self.done {
            self.paths[index].defer_tail_probe(now);
            return;
        }
        let missing = |seq: u64| self.slot_index(seq).is_some_and(|i| !self.slots[i].received);
        let Some(seq) = self.paths[index].tail_probe_seq(missing) else {
            self.paths[index].defer_tail_probe(now);
            return;
        };
        self.send_probe(now, index, seq, Path::record_tail_probe);
    }

    /// Puts a probe for `seq` in the outbox of the path at `index`, recorded by `record`.
    fn send_probe(
        &mut self,
        now: Instant,
        index: usize,
        seq: u64,
        record: fn(&mut Path, &mut PathStats, Instant, u64, u64) -> u64,
    ) {
        let bytes = self.packet_len(seq);
        let ps = &mut self.stats.paths[self.paths[index].id.0 as usize];
        record(&mut self.paths[index], ps, now, seq, bytes);
        if self.paths[index].outbox.len() == 1 {
            self.outboxes += 1;
        }
        self.stats.requests_sent += 1;
    }

    /// End (exclusive) of the new sequence numbers the reorder buffer lets us request now.
    fn new_end(&self) -> u64 {
        let Some(task) = self.tasks.get(self.task) else {
            return self.next_new;
        };
        task.end_seq.min(self.cursor + self.reorder_window)
    }

    /// The next datagram to send, written into `buf` (cleared first). Call after every input
    /// until it returns `None`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.now = self.now.max(now);
        buf.clear();
        if self.player.is_some() {
            self.sync_player(now);
        }
        if let Some((path, datagram)) = self.control.pop_front() {
            buf.extend_from_slice(&datagram);
            return Some(Transmit { path, len: buf.len() });
        }
        if self.maybe_connecting {
            if let Some(t) = self.poll_hello(now, buf) {
                return Some(t);
            }
        }
        // Most polls find every window full and nothing picked: say so without entering the
        // scheduling or the REQUEST writing, whose stack frames cost more than the looks.
        if !self.done && self.paths.iter().any(|p| p.can_send(now)) {
            self.schedule(now);
        }
        if self.outboxes == 0 {
            debug_assert!(self.paths.iter().all(|p| p.outbox.is_empty()));
            return None;
        }
        self.emit_request(buf)
    }

    #[inline(never)]
    fn poll_hello(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let content = self.config.content;
        for path in &mut self.paths {
            if let PathState::Connecting {
                attempts,
                first_hello,
                next_hello,
            } = path.state
            {
                if next_hello > now || attempts >= self.config.handshake_attempts || self.done {
                    continue;
                }
                wire::encode_hello(
                    buf,
                    &wire::Hello {
                        conn_id: path.conn_id,
                        content,
                    },
                );
                // Until a sample exists the RTO is the RFC 6298 §2.1 one second, doubled per try.
                let wait = path.rtt.rto() * 2u32.saturating_pow(attempts);
                let first_hello = if attempts == 0 { now } else { first_hello };
                path.state = PathState::Connecting {
                    attempts: attempts + 1,
                    first_hello,
                    next_hello: now + wait,
                };
                return Some(Transmit {
                    path: path.id,
                    len: buf.len(),
                });
            }
        }
        self.maybe_connecting = self
            .paths
            .iter()
            .any(|p| matches!(p.state, PathState::Connecting { .. }));
        None
    }

    /// Asks the scheduler for requests while some path can take one (some path can).
    #[inline(never)]
    fn schedule(&mut self, now: Instant) {
        if self.subflows.as_ref().is_some_and(|f| f.has_retransmissions()) {
            self.serve_retransmissions(now);
        }
        let mut views = std::mem::take(&mut self.view_paths);
        if self.views_valid {
            // Each path brings its own view up to date, at the cost of a look or two if
            // nothing happened to it.
            for (view, &index) in views.iter_mut().zip(&self.view_index) {
                self.paths[index].write_view(now, view, false);
            }
        } else {
            views.clear();
            self.view_index.clear();
            for (index, path) in self.paths.iter_mut().enumerate() {
                if path.is_established() {
                    views.push(path.view(now));
                    self.view_index.push(index);
                }
            }
            self.views_valid = true;
        }
        if self.verify.as_ref().is_some_and(|v| v.has_parole()) {
            self.apply_parole(now, &mut views);
        }
        if self.origin_only_enforced() && self.origin_only.iter().any(|r| r.start <= self.cursor) {
            // Jump to CDN (Pscheduler §III-A): the head of the queue may only come from the
            // origin, so the scheduler sees the origin paths alone (and every path again once
            // the jumped segment is behind the cursor: the views are rebuilt then).
            let mut keep = views.iter().map(|v| v.origin);
            self.view_index.retain(|_| keep.next().expect("one flag per view"));
            views.retain(|v| v.origin);
            self.views_valid = false;
        }
        // Between the picks of this poll only the picked path's view is written again.
        let mut only_changed = None;
        for _ in 0..MAX_PICKS_PER_POLL {
            if !views.iter().any(|v| v.can_send) {
                break;
            }
            let new_end = self.new_end();
            if self.holes.is_empty() && self.next_new >= new_end && !self.any_in_flight() {
                break;
            }
            let lookup = Lookup {
                paths: &self.paths,
                slots: &self.slots,
                ring_base: self.ring_base,
                from: self.cursor,
                to: self.next_new,
            };
            let view = View {
                now,
                paths: &views,
                pending: Pending {
                    holes: &self.holes,
                    next_new: self.next_new,
                    new_end,
                },
                cursor: self.cursor,
                task_end: self.tasks.get(self.task).map_or(self.cursor, |t| t.end_seq),
                in_flight: &lookup,
                packet_size: self.packet_size,
                reorder_limit: new_end,
                player_buffer: self.player.as_ref().map(|p| p.buffer_level(now)),
                player: self.player.as_ref(),
                only_changed,
            };
            let Some(pick) = self.scheduler.next(&view) else { break };
            // Only established paths have views, and only they can take a pick.
            let Some(slot) = views.iter().position(|v| v.id == pick.path) else {
                break;
            };
            let index = self.view_index[slot];
            if !self.apply(now, index, pick, new_end) {
                break;
            }
            self.paths[index].write_view(now, &mut views[slot], false);
            only_changed = Some(slot);
        }
        self.view_paths = views;
        if self.subflows.is_some() {
            self.reinject(now);
        }
    }

    fn any_in_flight(&self) -> bool {
        self.paths.iter().any(|p| p.in_flight_count() > 0)
    }

    /// The slot of `seq`, if the ring holds it.
    fn slot_index(&self, seq: u64) -> Option<usize> {
        seq.checked_sub(self.ring_base)
            .map(|i| i as usize)
            .filter(|&i| i < self.slots.len())
    }

    /// `seq` is in flight on the path at `index`.
    #[inline(always)]
    fn in_flight_on(&self, index: usize, seq: u64) -> bool {
        let path = &self.paths[index];
        self.slot_index(seq).is_some_and(|i| self.slots[i].holder == path.id.0)
            || path.in_flight_spill.contains_key(seq)
    }

    /// Takes the request an answer for `seq` carrying `request_id` answers off the requests in
    /// flight on the path at `index`; returns its pn. With a tail loss probe for `seq` in
    /// flight beside the request it asks again, the probe's REQUEST is the later one, so its
    /// id is the larger.
    fn take_answered(&mut self, index: usize, seq: u64, request_id: u64) -> Option<u64> {
        if self.paths[index].tail_probe_for(seq).is_some() {
            let holder = self.paths[index].id.0;
            let asked = self
                .slot_index(seq)
                .map(|i| self.slots[i])
                .filter(|s| s.holder == holder);
            if asked.is_none_or(|slot| request_id > slot.pn) {
                return self.paths[index].in_flight_spill.remove(seq);
            }
        }
        self.take_in_flight(index, seq)
    }

    /// Takes `seq` off the requests in flight on the path at `index`; returns its pn.
    fn take_in_flight(&mut self, index: usize, seq: u64) -> Option<u64> {
        let path = self.paths[index].id.0;
        if let Some(i) = self.slot_index(seq) {
            let slot = &mut self.slots[i];
            if slot.holder == path {
                slot.holder = NO_PATH;
                return Some(slot.pn);
            }
        }
        self.paths[index].in_flight_spill.remove(seq)
    }

    /// Checks and carries out a pick for the path at `index`; false if the pick is not allowed.
    #[inline(always)]
    fn apply(&mut self, now: Instant, index: usize, pick: Pick, new_end: u64) -> bool {
        let seq = pick.seq;
        if !self.paths[index].can_send(now) || seq < self.cursor || seq >= new_end.max(self.next_new) {
            return false;
        }
        if self.in_flight_on(index, seq) || self.subflows.as_ref().is_some_and(|f| f.holds(pick.path, seq)) {
            return false;
        }
        if !self.origin_only.is_empty() && !self.paths[index].info.origin && self.is_origin_only(seq) {
            return false;
        }
        if seq >= self.next_new {
            // A pick ahead of the queue (Pscheduler's offset) leaves the numbers it skipped pending.
            for skipped in self.next_new..seq {
                self.holes.insert(skipped);
            }
            self.next_new = seq + 1;
        } else if self.holes.is_empty() || !self.holes.remove(&seq) {
            // Not pending: allowed only as a redundant copy of a number in flight elsewhere.
            let i = (seq - self.ring_base) as usize;
            if self.slots.get(i).is_none_or(|s| s.received || s.copies == 0) {
                return false;
            }
        }
        let i = (seq - self.ring_base) as usize;
        while self.slots.len() <= i {
            self.slots.push_back(Slot::default());
            if self.config.keep_data {
                self.payloads.push_back(Vec::new());
            }
        }
        let slot = &mut self.slots[i];
        slot.copies = slot.copies.saturating_add(1);
        let bytes = self.packet_len(seq);
        let app_limited = self.holes.is_empty() && self.next_new >= new_end;
        let ps = &mut self.stats.paths[pick.path.0 as usize];
        let pn = self.paths[index].record_request(ps, now, seq, bytes, app_limited);
        let slot = &mut self.slots[i];
        if slot.holder == NO_PATH {
            slot.holder = pick.path.0;
            slot.pn = pn;
        } else {
            self.paths[index].in_flight_spill.insert(seq, pn);
        }
        if self.paths[index].outbox.len() == 1 {
            self.outboxes += 1;
        }
        if let Some(flows) = self.subflows.as_deref_mut() {
            flows.assign(pick.path, seq);
        }
        self.stats.requests_sent += 1;
        if self.stats.started.is_none() {
            self.stats.started = Some(now);
            self.stats.tasks[self.task].started_ns = Some(now.as_nanos());
        }
        self.scheduler.on_event(now, &SchedEvent::Sent { path: pick.path, seq });
        true
    }

    /// Writes one REQUEST from the next path (in turn) that has picks waiting.
    #[inline(never)]
    fn emit_request(&mut self, buf: &mut Vec<u8>) -> Option<Transmit> {
        let n = self.paths.len();
        for k in 0..n {
            let index = (self.emit_next + k) % n;
            let path = &mut self.paths[index];
            if path.outbox.is_empty() {
                continue;
            }
            let Some(token) = path.token() else {
                path.outbox.clear();
                self.outboxes -= 1;
                continue;
            };
            let ranges = &mut self.range_scratch;
            ranges.clear();
            let fixed = 2 + 8 + 1 + token.len() + 8 + 1;
            let max_ranges = ((wire::MAX_DATAGRAM - fixed) / wire::RANGE_LEN).min(255);
            let mut taken = 0;
            for &seq in &path.outbox {
                let extends = ranges
                    .last()
                    .is_some_and(|r| r.start + u64::from(r.len) == seq && r.len < u32::MAX);
                if extends {
                    ranges.last_mut().expect("checked").len += 1;
                } else if ranges.len() == max_ranges {
                    break;
                } else {
                    ranges.push(wire::SeqRange { start: seq, len: 1 });
                }
                taken += 1;
            }
            let request_id = path.outbox_first_pn;
            let encoded = wire::encode_request(buf, path.conn_id, token, request_id, ranges);
            debug_assert!(encoded.is_ok(), "request within limits");
            let id = path.id;
            path.mark_request(request_id);
            path.outbox.drain(..taken);
            path.outbox_first_pn += taken as u64;
            if path.outbox.is_empty() {
                self.outboxes -= 1;
            }
            self.emit_next = (index + 1) % n;
            return Some(Transmit {
                path: id,
                len: buf.len(),
            });
        }
        None
    }

    /// Copies in-order bytes of the tasks, in task order, into `buf`; returns how many.
    /// Returns 0 when nothing new is deliverable (or `keep_data` is off).
    pub fn read(&mut self, buf: &mut [u8]) -> usize {
        if !self.config.keep_data {
            return 0;
        }
        let mut written = 0;
        while written < buf.len() && self.read_task < self.tasks.len() {
            let task = self.tasks[self.read_task];
            let available_end = if self.read_task < self.task {
                task.end_byte
            } else {
                (self.cursor * self.packet_size).min(task.end_byte)
            };
            if self.read_pos >= task.end_byte {
                self.read_task += 1;
                if let Some(next) = self.tasks.get(self.read_task) {
                    self.read_pos = next.start_byte;
                }
                continue;
            }
            if self.read_pos >= available_end {
                break;
            }
            let seq = self.read_pos / self.packet_size;
            let offset = (self.read_pos % self.packet_size) as usize;
            let data = &self.payloads[(seq - self.ring_base) as usize];
            let in_packet = (available_end - self.read_pos).min(data.len() as u64 - offset as u64) as usize;
            let n = in_packet.min(buf.len() - written);
            buf[written..written + n].copy_from_slice(&data[offset..offset + n]);
            written += n;
            self.read_pos += n as u64;
        }
        // Keep the packet holding the next unread byte (a later task may start inside it).
        let keep_from = match self.tasks.get(self.read_task) {
            Some(t) if self.read_pos >= t.end_byte => self
                .tasks
                .get(self.read_task + 1)
                .map_or(self.read_pos, |n| n.start_byte),
            Some(_) => self.read_pos,
            None => self.read_pos,
        };
        self.release_below((keep_from / self.packet_size).min(self.cursor));
        written
    }
}

/// In-flight lookups for the scheduler's view.
struct Lookup<'a> {
    paths: &'a [Path],
    slots: &'a VecDeque<Slot>,
    ring_base: u64,
    from: u64,
    to: u64,
}

impl InFlightLookup for Lookup<'_> {
    fn paths_of(&self, seq: u64, f: &mut dyn FnMut(PathId)) {
        let holder = seq
            .checked_sub(self.ring_base)
            .and_then(|i| self.slots.get(i as usize))
            .map_or(NO_PATH, |s| s.holder);
        for p in self.paths {
            if p.id.0 == holder || p.in_flight_spill.contains_key(seq) {
                f(p.id);
            }
        }
    }
    fn scan(&self, f: &mut dyn FnMut(u64, usize) -> bool) {
        let start = self.from.max(self.ring_base);
        for seq in start..self.to {
            let Some(slot) = self.slots.get((seq - self.ring_base) as usize) else {
                return;
            };
            if !slot.received && slot.copies > 0 && !f(seq, usize::from(slot.copies)) {
                return;
            }
        }
    }
    fn awaited(&self, seq: u64) -> usize {
        if seq < self.from.max(self.ring_base) || seq >= self.to {
            return 0;
        }
        self.slots
            .get((seq - self.ring_base) as usize)
            .filter(|slot| !slot.received)
            .map_or(0, |slot| usize::from(slot.copies))
    }
}
