//! A session's queue of requested sequence numbers, in order of arrival, with an index by
//! sequence number so that a CANCEL costs what it cancels (docs/protocol.md §7.5).
//!
//! The queue holds entries of at most 64 sequence numbers that never cross a multiple of 64
//! (a *chunk*): each entry is the chunk's base and a bit mask, sent lowest bit first, which is
//! the listed order since a range ascends. A CANCEL clears bits, so an entry never splits and
//! keeps its place in the queue. The index (chunk → positions of its live entries, with the
//! union of their masks) is built on a session's first CANCEL, paid for by the REQUESTs that
//! queued the entries; the reference client never cancels, so its sessions never pay for it.

use pcdn_wire as wire;
use std::collections::{BTreeMap, VecDeque};

/// Sequence numbers per chunk: the bits of a `u64` mask.
const CHUNK: u64 = 64;

#[derive(Clone, Copy, Debug)]
struct Entry {
    request_id: u64,
    /// First sequence number of the chunk (a multiple of [`CHUNK`]).
    base: u64,
    /// Sequence numbers `base + bit` still to send; 0: cancelled whole (a tombstone).
    mask: u64,
}

/// The live entries of one chunk.
#[derive(Debug, Default)]
struct ChunkEntries {
    /// Queue positions, ascending (the order of arrival).
    positions: VecDeque<u64>,
    /// A superset of the union of their masks: exact after a CANCEL visited the chunk, and
    /// only stale by bits sent since, so a CANCEL of numbers the chunk does not hold costs one
    /// lookup.
    union: u64,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct SeqQueue {
    entries: VecDeque<Entry>,
    /// Position of `entries[0]`: how many entries were ever popped.
    head: u64,
    /// Sequence numbers queued (set bits over all entries).
    queued: u64,
    /// Chunk number (`seq / 64`) → its live entries; `None` until the first CANCEL.
    index: Option<BTreeMap<u64, ChunkEntries>>,
}

/// The bits `from..to` of a mask, `0 <= from < to <= 64`.
fn bits(from: u64, to: u64) -> u64 {
    let width = to - from;
    let ones = if width == CHUNK { u64::MAX } else { (1u64 << width) - 1 };
    ones << from
}

impl SeqQueue {
    pub(crate) fn queued(&self) -> u64 {
        self.queued
    }

    /// Appends the sequence numbers of `range`, asked for by `request_id`.
    pub(crate) fn push(&mut self, request_id: u64, range: wire::SeqRange) {
        let end = range.start + u64::from(range.len);
        let mut start = range.start;
        while start < end {
            let base = start - start % CHUNK;
            let stop = end.min(base + CHUNK);
            let mask = bits(start - base, stop - base);
            let position = self.head + self.entries.len() as u64;
            self.entries.push_back(Entry { request_id, base, mask });
            if let Some(index) = &mut self.index {
                let chunk = index.entry(base / CHUNK).or_default();
                chunk.positions.push_back(position);
                chunk.union |= mask;
            }
            start = stop;
        }
        self.queued += u64::from(range.len);
    }

    /// The next sequence number to send and the request that asked for it.
    pub(crate) fn pop(&mut self) -> Option<(u64, u64)> {
        loop {
            let entry = self.entries.front_mut()?;
            if entry.mask == 0 {
                // Cancelled whole: already out of the index.
                self.entries.pop_front();
                self.head += 1;
                continue;
            }
            let seq = entry.base + u64::from(entry.mask.trailing_zeros());
            let request_id = entry.request_id;
            entry.mask &= entry.mask - 1;
            if entry.mask == 0 {
                let base = entry.base;
                self.entries.pop_front();
                self.unindex_head(base);
                self.head += 1;
            }
            self.queued -= 1;
            return Some((request_id, seq));
        }
    }

    /// Takes the head entry (position `self.head`, in chunk `base`) out of the index: being the
    /// oldest live entry, it is first in its chunk's list.
    fn unindex_head(&mut self, base: u64) {
        let Some(index) = &mut self.index else { return };
        let chunk = base / CHUNK;
        if let Some(entries) = index.get_mut(&chunk) {
            debug_assert_eq!(entries.positions.front(), Some(&self.head));
            entries.positions.pop_front();
            if entries.positions.is_empty() {
                index.remove(&chunk);
            }
        }
    }

    /// Removes every queued occurrence of the sequence numbers of `ranges`. Returns how many
    /// queue entries it looked at: at most the entries it changed, plus those sharing a chunk
    /// with them, plus one per chunk whose union was stale.
    pub(crate) fn cancel(&mut self, ranges: impl Iterator<Item = wire::SeqRange>) -> u64 {
        if self.queued == 0 {
            return 0;
        }
        let mut merged: Vec<(u64, u64)> = ranges.map(|r| (r.start, r.start + u64::from(r.len))).collect();
        merged.sort_unstable();
        let mut disjoint: Vec<(u64, u64)> = Vec::with_capacity(merged.len());
        for (s, e) in merged {
            match disjoint.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => disjoint.push((s, e)),
            }
        }
        let (entries, head) = (&mut self.entries, self.head);
        let index = self.index.get_or_insert_with(|| {
            let mut index: BTreeMap<u64, ChunkEntries> = BTreeMap::new();
            for (i, e) in entries.iter().enumerate().filter(|(_, e)| e.mask != 0) {
                let chunk = index.entry(e.base / CHUNK).or_default();
                chunk.positions.push_back(head + i as u64);
                chunk.union |= e.mask;
            }
            index
        });
        // Each chunk the CANCEL reaches, once, with the bits it cancels there. The disjoint
        // ranges ascend, so two that end and start in one chunk are adjacent here.
        let mut targets: Vec<(u64, u64)> = Vec::new();
        for &(s, e) in &disjoint {
            for (&chunk, _) in index.range(s / CHUNK..=(e - 1) / CHUNK) {
                let base = chunk * CHUNK;
                let mask = bits(s.max(base) - base, e.min(base + CHUNK) - base);
                match targets.last_mut() {
                    Some(last) if last.0 == chunk => last.1 |= mask,
                    _ => targets.push((chunk, mask)),
                }
            }
        }
        let mut visited = 0;
        let mut cancelled = 0;
        for (chunk, mask) in targets {
            let Some(list) = index.get_mut(&chunk) else { continue };
            if list.union & mask == 0 {
                continue;
            }
            let mut union = 0;
            list.positions.retain(|&position| {
                visited += 1;
                let entry = &mut entries[(position - head) as usize];
                cancelled += u64::from((entry.mask & mask).count_ones());
                entry.mask &= !mask;
                union |= entry.mask;
                entry.mask != 0
            });
            list.union = union;
            if list.positions.is_empty() {
                index.remove(&chunk);
            }
        }
        self.queued -= cancelled;
        if self.queued == 0 {
            // Only tombstones left.
            self.head += self.entries.len() as u64;
            self.entries.clear();
        }
        visited
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(start: u64, len: u32) -> wire::SeqRange {
        wire::SeqRange { start, len }
    }

    fn drain(q: &mut SeqQueue) -> Vec<(u64, u64)> {
        std::iter::from_fn(|| q.pop()).collect()
    }

    #[test]
    fn ranges_come_out_in_the_listed_order_across_chunks() {
        let mut q = SeqQueue::default();
        q.push(1, range(60, 10));
        q.push(2, range(3, 2));
        q.push(3, range(3, 1));
        q.push(4, range(128, 64));
        assert_eq!(q.queued(), 77);
        let out = drain(&mut q);
        let mut expected: Vec<(u64, u64)> = (60..70).map(|s| (1, s)).collect();
        expected.extend([(2, 3), (2, 4), (3, 3)]);
        expected.extend((128..192).map(|s| (4, s)));
        assert_eq!(out, expected);
        assert_eq!(q.queued(), 0);
    }

    #[test]
    fn cancel_removes_every_occurrence_and_keeps_the_order() {
        let mut q = SeqQueue::default();
        q.push(1, range(0, 10));
        q.push(2, range(5, 100));
        q.push(3, range(2, 1));
        // Pop two, so the index is built with the head already moved.
        assert_eq!(q.pop(), Some((1, 0)));
        assert_eq!(q.pop(), Some((1, 1)));
        q.cancel([range(2, 4), range(60, 10), range(4, 1)].into_iter());
        let out = drain(&mut q);
        let mut expected: Vec<(u64, u64)> = (6..10).map(|s| (1, s)).collect();
        expected.extend((6..60).chain(70..105).map(|s| (2, s)));
        assert_eq!(out, expected);
        // After draining, a later REQUEST of cancelled numbers is served again.
        q.push(4, range(2, 3));
        assert_eq!(drain(&mut q), vec![(4, 2), (4, 3), (4, 4)]);
    }

    #[test]
    fn a_cancel_of_what_is_not_queued_looks_at_nothing() {
        let mut q = SeqQueue::default();
        // The worst case for a walk: the whole budget as single numbers of one chunk.
        for i in 0..4096 {
            q.push(i, range(5, 1));
        }
        q.push(9, range(1 << 40, 3));
        assert_eq!(q.cancel([range(6, 1)].into_iter()), 0);
        assert_eq!(q.cancel([range(0, u32::MAX)].into_iter()), 4096);
        assert_eq!(q.queued(), 3);
        assert_eq!(q.cancel([range(0, u32::MAX)].into_iter()), 0);
        assert_eq!(
            drain(&mut q),
            vec![(9, 1 << 40), (9, (1 << 40) + 1), (9, (1 << 40) + 2)]
        );
    }
}
