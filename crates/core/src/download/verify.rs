//! Block verification against a manifest, and libtorrent's "smart ban" of corrupting servers.
//!
//! A packet's payload is held until its whole block has arrived; the block is then hashed
//! (BLAKE3) and compared with the manifest. A verified block lets the in-order cursor pass it.
//! A failed block is forgotten and fetched again, but each of its packets leaves evidence: the
//! path that sent it and a 16-byte digest of what it sent. When the block later verifies, a
//! path whose remembered packet differs from the good bytes is proven to have sent corrupt
//! data and is banned at once (libtorrent's smart_ban plugin); the others are cleared.
//!
//! Two rules cover what a later verification cannot prove. A failed block is fetched again
//! from one path alone, the least suspected ("parole", as libtorrent's parole mode), so that
//! a failure of the retry has a single suspect. A path that was the only source of the same
//! block twice, or of `max_unresolved_strikes` failed blocks none of which verified since, is
//! banned as well: that ends a download where every server corrupts, and a server that
//! corrupts everything while no other can prove it.

use super::{ConfigError, Download, DownloadConfig, Event, NO_PATH, PathError};
use crate::manifest::Manifest;
use crate::path::{PathId, PathState};
use crate::scheduler::{PathView, Pick};
use crate::time::Instant;
use std::collections::VecDeque;
use std::sync::Arc;

/// Checks a verified download's settings against its manifest.
pub(super) fn check_config(config: &DownloadConfig, manifest: &Manifest) -> Result<(), ConfigError> {
    manifest.validate()?;
    if !config.keep_data {
        return Err(ConfigError::VerifyWithoutData);
    }
    if manifest.length != config.content_length {
        return Err(ConfigError::ManifestMismatch {
            field: "length",
            manifest: manifest.length,
            config: config.content_length,
        });
    }
    if manifest.packet_size != config.packet_size {
        return Err(ConfigError::ManifestMismatch {
            field: "packet_size",
            manifest: u64::from(manifest.packet_size),
            config: u64::from(config.packet_size),
        });
    }
    if config.reorder_buffer < u64::from(manifest.block_size) {
        return Err(ConfigError::ReorderBufferBelowBlock {
            reorder_buffer: config.reorder_buffer,
            block_size: manifest.block_size,
        });
    }
    if config.max_unresolved_strikes == 0 {
        return Err(ConfigError::NoStrikes);
    }
    let block = u64::from(manifest.block_size);
    for (index, task) in config.tasks.iter().enumerate() {
        let end_ok = task.end % block == 0 || task.end == config.content_length;
        if task.start % block != 0 || !end_ok {
            return Err(ConfigError::UnalignedTask {
                index,
                start: task.start,
                end: task.end,
                block_size: manifest.block_size,
            });
        }
    }
    Ok(())
}

/// What one block is waiting for.
#[derive(Debug, Default)]
struct BlockState {
    /// Packets of the block received (and not discarded since).
    received: u32,
    verified: bool,
    /// Evidence of the block's failures, until it verifies.
    record: Option<Box<FailureRecord>>,
}

/// The failures of one block so far.
#[derive(Debug, Default)]
struct FailureRecord {
    suspects: Vec<Suspect>,
    /// Every distinct (packet, path, digest) seen in a failed copy of the block.
    evidence: Vec<Evidence>,
}

/// A path that sent packets of a block that failed.
#[derive(Debug)]
struct Suspect {
    path: u32,
    /// Failures of the block it sent packets of.
    involved: u32,
    /// Failures of the block it was the only source of (each one a strike).
    sole: u32,
}

#[derive(Debug, PartialEq, Eq)]
struct Evidence {
    seq: u64,
    path: u32,
    digest: [u8; 16],
}

/// A packet's digest for evidence: BLAKE3 truncated to 16 bytes. To escape the comparison a
/// server would need a wrong payload whose digest equals the good one's, a 128-bit second
/// preimage.
fn digest(payload: &[u8]) -> [u8; 16] {
    blake3::hash(payload).as_bytes()[..16].try_into().expect("16 bytes")
}

/// The verification state of a download.
#[derive(Debug)]
pub(super) struct Verifier {
    manifest: Arc<Manifest>,
    packets_per_block: u64,
    max_strikes: u32,
    /// `blocks[i]` is block `block_base + i`; from the cursor's block to the highest block any
    /// packet arrived for.
    blocks: VecDeque<BlockState>,
    block_base: u64,
    /// `sources[i]` is the path that delivered sequence number
    /// `block_base · packets_per_block + i`, or `NO_PATH`: the slot ring's "who sent it", kept
    /// apart so that downloads without a manifest do not carry it.
    sources: VecDeque<u32>,
    /// Unresolved strikes per path id.
    strikes: Vec<u32>,
    /// Packets of failed blocks to fetch again from one path: (path id, sequence numbers).
    parole: Vec<(u32, VecDeque<u64>)>,
    /// One block's bytes gathered for hashing, kept to save an allocation per block.
    scratch: Vec<u8>,
}

impl Verifier {
    pub(super) fn new(manifest: Arc<Manifest>, max_strikes: u32, first_seq: u64) -> Verifier {
        let packets_per_block = u64::from(manifest.packets_per_block());
        Verifier {
            manifest,
            packets_per_block,
            max_strikes,
            blocks: VecDeque::new(),
            block_base: first_seq / packets_per_block,
            sources: VecDeque::new(),
            strikes: Vec::new(),
            parole: Vec::new(),
            scratch: Vec::new(),
        }
    }

    pub(super) fn has_parole(&self) -> bool {
        !self.parole.is_empty()
    }

    fn block(&self, block: u64) -> Option<&BlockState> {
        block
            .checked_sub(self.block_base)
            .and_then(|i| self.blocks.get(i as usize))
    }

    fn block_mut(&mut self, block: u64) -> Option<&mut BlockState> {
        block
            .checked_sub(self.block_base)
            .and_then(|i| self.blocks.get_mut(i as usize))
    }

    /// Index of `seq` in `sources`.
    fn source_index(&self, seq: u64) -> Option<usize> {
        seq.checked_sub(self.block_base * self.packets_per_block)
            .map(|i| i as usize)
    }

    fn source(&self, seq: u64) -> u32 {
        self.source_index(seq)
            .and_then(|i| self.sources.get(i).copied())
            .unwrap_or(NO_PATH)
    }

    fn strikes_mut(&mut self, path: u32) -> &mut u32 {
        let i = path as usize;
        if self.strikes.len() <= i {
            self.strikes.resize(i + 1, 0);
        }
        &mut self.strikes[i]
    }

    fn strikes_of(&self, path: u32) -> u32 {
        self.strikes.get(path as usize).copied().unwrap_or(0)
    }

    /// Forgets the blocks wholly behind the cursor (all verified and delivered).
    fn trim(&mut self, cursor: u64) {
        let per = self.packets_per_block;
        while !self.blocks.is_empty() && (self.block_base + 1) * per <= cursor {
            self.blocks.pop_front();
            let n = (per as usize).min(self.sources.len());
            self.sources.drain(..n);
            self.block_base += 1;
        }
        if self.blocks.is_empty() {
            self.sources.clear();
            self.block_base = self.block_base.max(cursor / per);
        }
    }

    /// Notes that `path` delivered `seq`; returns its block, and whether it is now complete.
    fn note_arrival(&mut self, seq: u64, path: u32) -> Option<(u64, bool)> {
        let block = seq / self.packets_per_block;
        let i = block.checked_sub(self.block_base)? as usize;
        while self.blocks.len() <= i {
            self.blocks.push_back(BlockState::default());
        }
        let s = self.source_index(seq)?;
        while self.sources.len() <= s {
            self.sources.push_back(NO_PATH);
        }
        self.sources[s] = path;
        let packets = self.manifest.block_seqs(block);
        let state = &mut self.blocks[i];
        state.received += 1;
        Some((block, u64::from(state.received) == packets.end - packets.start))
    }
}

impl Download {
    /// A packet `path` delivered is stored; checks its block once the block is complete.
    #[cold]
    #[inline(never)]
    pub(super) fn on_verified_arrival(&mut self, now: Instant, seq: u64, path: PathId) {
        let cursor = self.cursor;
        let v = self.verify.as_mut().expect("verifying");
        v.trim(cursor);
        if let Some((block, true)) = v.note_arrival(seq, path.0) {
            self.check_block(now, block);
        }
        self.stats.sample_ofo(self.ofo_bytes);
    }

    fn payload(&self, seq: u64) -> &[u8] {
        &self.payloads[(seq - self.ring_base) as usize]
    }

    /// Hashes the complete block `block` and acts on the result.
    fn check_block(&mut self, now: Instant, block: u64) {
        let v = self.verify.as_mut().expect("verifying");
        let manifest = v.manifest.clone();
        let mut scratch = std::mem::take(&mut v.scratch);
        let seqs = manifest.block_seqs(block);
        let good = manifest.verify_block_parts(block, seqs.map(|seq| self.payload(seq)), &mut scratch);
        self.verify.as_mut().expect("verifying").scratch = scratch;
        if good {
            self.block_verified(now, block);
        } else {
            self.block_failed(now, block);
        }
    }

    fn block_verified(&mut self, now: Instant, block: u64) {
        self.stats.blocks_verified += 1;
        let v = self.verify.as_mut().expect("verifying");
        let state = v.block_mut(block).expect("checked block is held");
        state.verified = true;
        if let Some(record) = state.record.take() {
            self.resolve(now, &record);
        }
        self.advance_deliver_limit();
        self.deliver(now);
        let cursor = self.cursor;
        self.verify.as_mut().expect("verifying").trim(cursor);
    }

    /// A failed block has verified: its remembered packets prove or clear their paths.
    fn resolve(&mut self, now: Instant, record: &FailureRecord) {
        let mut proven: Vec<(u32, u64)> = Vec::new();
        for e in &record.evidence {
            if digest(self.payload(e.seq)) != e.digest {
                match proven.iter_mut().find(|(p, _)| *p == e.path) {
                    Some((_, n)) => *n += 1,
                    None => proven.push((e.path, 1)),
                }
            }
        }
        let v = self.verify.as_mut().expect("verifying");
        for s in &record.suspects {
            let strikes = v.strikes_mut(s.path);
            *strikes = strikes.saturating_sub(s.sole);
        }
        for (path, packets) in proven {
            if let Some(ps) = self.stats.paths.get_mut(path as usize) {
                ps.corrupt_packets += packets;
            }
            self.ban(now, path);
        }
    }

    /// The complete block `block` does not match its hash: its packets are discarded and
    /// fetched again, the paths that sent them become suspects.
    fn block_failed(&mut self, now: Instant, block: u64) {
        self.stats.blocks_rejected += 1;
        let v = self.verify.as_ref().expect("verifying");
        let seqs = v.manifest.block_seqs(block);
        let mut evidence = Vec::with_capacity((seqs.end - seqs.start) as usize);
        let mut contributors: Vec<u32> = Vec::new();
        for seq in seqs.clone() {
            let path = v.source(seq);
            evidence.push(Evidence {
                seq,
                path,
                digest: digest(self.payload(seq)),
            });
            if let Err(at) = contributors.binary_search(&path) {
                contributors.insert(at, path);
            }
        }
        for seq in seqs.clone() {
            self.unreceive(seq);
        }
        let v = self.verify.as_mut().expect("verifying");
        let max_strikes = v.max_strikes;
        let sole = contributors.len() == 1;
        let mut bans = Vec::new();
        let mut record = v
            .block_mut(block)
            .expect("failed block is held")
            .record
            .take()
            .unwrap_or_default();
        for e in evidence {
            if !record.evidence.contains(&e) {
                record.evidence.push(e);
            }
        }
        for &path in &contributors {
            let at = match record.suspects.iter().position(|s| s.path == path) {
                Some(at) => at,
                None => {
                    record.suspects.push(Suspect {
                        path,
                        involved: 0,
                        sole: 0,
                    });
                    record.suspects.len() - 1
                }
            };
            let suspect = &mut record.suspects[at];
            suspect.involved += 1;
            if sole {
                suspect.sole += 1;
                let twice = suspect.sole >= 2;
                let strikes = v.strikes_mut(path);
                *strikes += 1;
                if twice || *strikes >= max_strikes {
                    bans.push(path);
                }
            }
        }
        v.block_mut(block).expect("failed block is held").record = Some(record);
        self.events.push_back(Event::BlockRejected {
            block,
            paths: contributors.iter().map(|&p| PathId(p)).collect(),
        });
        for path in bans {
            self.ban(now, path);
        }
        self.parole_block(block, seqs);
    }

    /// Forgets the received packet `seq` (its block failed, or its path was banned).
    fn unreceive(&mut self, seq: u64) {
        let i = (seq - self.ring_base) as usize;
        self.slots[i].received = false;
        let buffer = std::mem::take(&mut self.payloads[i]);
        if buffer.capacity() > 0 {
            self.pool.push(buffer);
        }
        self.ofo_bytes -= self.packet_len(seq);
        let v = self.verify.as_mut().expect("verifying");
        if let Some(s) = v.source_index(seq).filter(|&s| s < v.sources.len()) {
            v.sources[s] = NO_PATH;
        }
        let block = seq / v.packets_per_block;
        if let Some(state) = v.block_mut(block) {
            state.received -= 1;
        }
    }

    /// `seq` is missing and asked for nowhere.
    fn is_orphan(&self, seq: u64) -> bool {
        self.slot_index(seq)
            .is_some_and(|i| !self.slots[i].received && self.slots[i].copies == 0)
    }

    /// Queues the missing packets of the failed `block` for the least suspected usable path,
    /// or returns them to the pending queue when there is none.
    fn parole_block(&mut self, block: u64, seqs: std::ops::Range<u64>) {
        let v = self.verify.as_ref().expect("verifying");
        let record = v.block(block).and_then(|b| b.record.as_deref());
        // Least suspected first: fewest failures of this block as its only source, then fewest
        // failures of it at all, fewest strikes, least parole work queued; then the lowest id.
        let best = self
            .paths
            .iter()
            .filter(|path| path.is_established() && !self.stats.paths[path.id.0 as usize].banned)
            .map(|path| {
                let id = path.id.0;
                let (sole, involved) = record
                    .and_then(|r| r.suspects.iter().find(|s| s.path == id))
                    .map_or((0, 0), |s| (s.sole, s.involved));
                let queued = v.parole.iter().find(|(p, _)| *p == id).map_or(0, |(_, q)| q.len());
                (sole, involved, v.strikes_of(id), queued, id)
            })
            .min();
        let orphans: Vec<u64> = seqs.filter(|&seq| self.is_orphan(seq)).collect();
        match best {
            Some((.., path)) => {
                for seq in &orphans {
                    self.holes.remove(seq);
                }
                let v = self.verify.as_mut().expect("verifying");
                match v.parole.iter_mut().find(|(p, _)| *p == path) {
                    Some((_, queue)) => queue.extend(orphans),
                    None => v.parole.push((path, orphans.into())),
                }
            }
            None => self.holes.extend(orphans),
        }
    }

    /// Returns the packets queued for `path` on parole to the pending queue.
    pub(super) fn release_parole(&mut self, path: PathId) {
        let v = self.verify.as_mut().expect("verifying");
        let Some(at) = v.parole.iter().position(|(p, _)| *p == path.0) else {
            return;
        };
        let (_, queue) = v.parole.swap_remove(at);
        for seq in queue {
            if self.is_orphan(seq) {
                self.holes.insert(seq);
            }
        }
    }

    /// Asks for the packets on parole, each from its one path, while that path has room.
    #[cold]
    #[inline(never)]
    pub(super) fn apply_parole(&mut self, now: Instant, views: &mut [PathView]) {
        let mut parole = std::mem::take(&mut self.verify.as_mut().expect("verifying").parole);
        for (path, queue) in &mut parole {
            let Some(view) = views.iter().position(|v| v.id.0 == *path) else {
                continue;
            };
            let index = self.view_index[view];
            while self.paths[index].can_send(now) {
                let Some(seq) = queue.pop_front() else { break };
                if !self.is_orphan(seq) || seq < self.cursor {
                    // Arrived late after all, or asked for again elsewhere.
                    continue;
                }
                // Through the pending queue, so that `apply` books it as any other pick.
                self.holes.insert(seq);
                let new_end = self.new_end();
                self.apply(
                    now,
                    index,
                    Pick {
                        path: PathId(*path),
                        seq,
                    },
                    new_end,
                );
                self.paths[index].write_view(now, &mut views[view], false);
            }
        }
        parole.retain(|(_, queue)| !queue.is_empty());
        let v = self.verify.as_mut().expect("verifying");
        // Paths may have been put on parole while this ran (none are today); keep both.
        parole.append(&mut v.parole);
        v.parole = parole;
    }

    /// Bans `path` for corrupt data: its unverified packets are discarded, and the path fails
    /// with `PathError::Corrupt` and is never used again.
    fn ban(&mut self, now: Instant, path: u32) {
        let Some(ps) = self.stats.paths.get_mut(path as usize) else {
            return;
        };
        if ps.banned {
            return;
        }
        ps.banned = true;
        // Its packets still waiting for their blocks would only make innocent paths suspects.
        let v = self.verify.as_ref().expect("verifying");
        let first = v.block_base * v.packets_per_block;
        let suspect: Vec<u64> = v
            .sources
            .iter()
            .enumerate()
            .filter(|&(_, &p)| p == path)
            .map(|(i, _)| first + i as u64)
            .filter(|&seq| v.block(seq / v.packets_per_block).is_some_and(|b| !b.verified))
            .collect();
        for seq in suspect {
            self.unreceive(seq);
            if self.is_orphan(seq) {
                self.holes.insert(seq);
            }
        }
        match self.path_index(PathId(path)) {
            Some(index) if self.paths[index].state != PathState::Failed => {
                self.fail(now, index, PathError::Corrupt);
            }
            _ => self.release_parole(PathId(path)),
        }
    }

    /// Moves `deliver_limit` to the end of the verified blocks from the cursor on.
    pub(super) fn advance_deliver_limit(&mut self) {
        let v = self.verify.as_ref().expect("verifying");
        let mut limit = self.deliver_limit.max(self.cursor);
        while limit < self.total_seqs {
            let block = limit / v.packets_per_block;
            if !v.block(block).is_some_and(|b| b.verified) {
                break;
            }
            limit = ((block + 1) * v.packets_per_block).min(self.total_seqs);
        }
        self.deliver_limit = limit;
    }
}
