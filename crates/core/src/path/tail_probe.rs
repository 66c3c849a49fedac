//! Tail loss probes (RFC 8985 §7): a path whose requests have gone unanswered for two smoothed
//! RTTs, or until its retransmission timeout would fire if that comes first, asks again for one
//! of them; the probe's answer lets the time threshold declare the others lost. A lost tail
//! then costs a loss, which halves a window, not a timeout, which collapses it.

use super::{Path, PathStats};
use crate::time::{Duration, Instant};

/// The least probe timeout: RFC 9002 §6.2.1's timer granularity (`kGranularity`), so that a
/// loopback path's sub-millisecond RTT does not probe at every scheduling hiccup. Every
/// simulated path's two RTTs exceed it (one-way delays of 2 ms and more).
const GRANULARITY: Duration = Duration::from_millis(1);

/// A tail loss probe in flight: its pn and the packet it asks for again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TailProbe {
    pub pn: u64,
    pub seq: u64,
    /// When it was sent: the retransmission timer restarts there (RFC 8985 §7.3).
    pub sent: Instant,
}

impl Path {
    /// When the path sends a tail loss probe: two smoothed RTTs after it last sent a request
    /// or was answered (RFC 8985 §7.2's PTO, restarted by both), or when its retransmission
    /// timeout would fire if that is sooner (as Linux does: the probe comes first, and the
    /// timeout one RTO after it); with requests in flight, no probe among them and no timeout
    /// recovery under way.
    pub fn tail_probe_deadline(&self) -> Option<Instant> {
        if !self.tail_probes || self.tail_probe.is_some() || self.consecutive_timeouts > 0 || self.in_flight == 0 {
            return None;
        }
        let pto = self.pto_start.max(self.answered_at) + (self.rtt.smoothed() * 2).max(GRANULARITY);
        Some(pto.min(self.rto_deadline()?))
    }

    /// The packet a tail loss probe asks for again: the oldest request in flight whose packet
    /// `missing` says the download still waits for (the likeliest lost, and the nearest the
    /// in-order cursor), else the latest in flight, as RFC 8985 §7.3 has it. Any of them
    /// does as a probe: its answer comes after every request in flight, which is what the
    /// time threshold needs. Only requests the download's slot ring holds qualify, so that
    /// the probe alone is in `in_flight_spill` for its packet.
    pub fn tail_probe_seq(&self, missing: impl Fn(u64) -> bool) -> Option<u64> {
        let mut latest = None;
        for sent in &self.ledger {
            if sent.done || sent.probe || self.in_flight_spill.contains_key(sent.seq) {
                continue;
            }
            if missing(sent.seq) {
                return Some(sent.seq);
            }
            latest = Some(sent.seq);
        }
        latest
    }

    /// Sends the tail loss probe for `seq` (of `bytes`), a packet in flight on this path: a
    /// probe (its loss requeues nothing and signals no congestion) that does not restart the
    /// probe timer. Returns its pn.
    pub fn record_tail_probe(&mut self, ps: &mut PathStats, now: Instant, seq: u64, bytes: u64) -> u64 {
        let pn = self.record_probe(ps, now, seq, bytes);
        self.tail_probe = Some(TailProbe { pn, seq, sent: now });
        ps.tail_probes += 1;
        pn
    }

    /// The tail loss probe in flight for `seq`, if any (its pn).
    pub fn tail_probe_for(&self, seq: u64) -> Option<u64> {
        self.tail_probe.filter(|probe| probe.seq == seq).map(|probe| probe.pn)
    }

    /// A probe was due with nothing to ask again (every request in flight here is a copy the
    /// download's ring holds for another path): the timer starts over from `now`.
    pub fn defer_tail_probe(&mut self, now: Instant) {
        self.pto_start = now;
    }

    /// When the tail loss probe in flight was sent; `Instant::ZERO` without one.
    pub(super) fn tail_probe_sent(&self) -> Instant {
        self.tail_probe.map_or(Instant::ZERO, |probe| probe.sent)
    }
}
