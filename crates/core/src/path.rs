//! One path of a download: a connection to one server, its estimators, its congestion
//! control and the ledger of its requests in flight.

use crate::cc::{Controller, DataArrival, Loss};
use crate::estimate::{DeliveryRate, LossEventRate, RttEstimator, expected_transmission_time};
use crate::scheduler::PathView;
use crate::time::{Duration, Instant};
use std::collections::VecDeque;

mod reorder;
mod tail_probe;

use reorder::Reordering;
pub use reorder::{LossThresholds, ReorderConfig};
use tail_probe::TailProbe;

/// A path's handle, unique within one download (never reused).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct PathId(pub u32);

/// RFC 9002 §6.1.1's packet threshold (kPacketThreshold): a request is lost once this many
/// requests sent after it were answered, until the path reorders (`PathView::loss_thresholds`
/// has the path's current thresholds). The download's default `reorder_threshold`.
pub const PACKET_THRESHOLD: u64 = 3;

/// RFC 9002 §6.1.2's time threshold (kTimeThreshold = 9/8) as (numerator, denominator): a
/// request is lost once out this share of `max(sRTT, latest RTT)` after a later one was
/// answered, until the path reorders (then RFC 8985's window, `PathView::loss_thresholds`).
pub const TIME_THRESHOLD: (u32, u32) = (9, 8);

impl std::fmt::Display for PathId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "path{}", self.0)
    }
}

/// What the download knows of the server behind a path.
#[derive(Clone, Debug, Default)]
pub struct ServerInfo {
    /// A name for reports (host name, address or scenario name).
    pub name: String,
    /// The server is the CDN origin: it holds everything, and its bytes cost the most.
    pub origin: bool,
}

/// Where a path is in its life.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PathState {
    /// HELLO sent `attempts` times; the next one is due at `next_hello`.
    Connecting {
        attempts: u32,
        first_hello: Instant,
        next_hello: Instant,
    },
    Established {
        token: Vec<u8>,
    },
    Failed,
}

/// One request on the path's ledger, in send order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sent {
    pub seq: u64,
    pub sent: Instant,
    pub bytes: u64,
    pub delivered_at_send: u64,
    pub delivered_time_at_send: Instant,
    pub app_limited: bool,
    /// First sequence number of a REQUEST datagram (its request id is this entry's pn).
    pub request_start: bool,
    /// Answered, declared lost, or abandoned.
    pub done: bool,
    /// A timeout-recovery probe for a packet already delivered (see `record_probe`).
    pub probe: bool,
}

/// Sequence number → pn: an open-addressing table with linear probing and a multiplicative
/// hash, which sequence numbers (dense integers) spread well. Leaner than a general-purpose
/// map; the download keeps most pns in its slot ring and only the rest here.
#[derive(Clone, Debug)]
pub(crate) struct SeqIndex {
    /// (seq, pn); `seq == EMPTY` marks a free slot. The length is a power of two.
    slots: Vec<(u64, u64)>,
    len: usize,
    /// `64 - log2(slots.len())`: the hash is the top bits of a product.
    shift: u32,
}

/// A free slot. No sequence number reaches it: it would be a packet past 2^64 bytes.
const EMPTY: u64 = u64::MAX;

impl Default for SeqIndex {
    fn default() -> Self {
        SeqIndex::with_capacity_log2(4)
    }
}

impl SeqIndex {
    fn with_capacity_log2(bits: u32) -> SeqIndex {
        SeqIndex {
            slots: vec![(EMPTY, 0); 1 << bits],
            len: 0,
            shift: 64 - bits,
        }
    }

    /// Where `seq` starts probing (Fibonacci hashing).
    #[inline]
    fn home(&self, seq: u64) -> usize {
        (seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// The slot holding `seq`, or the free slot that ends its probe run.
    #[inline]
    fn probe(&self, seq: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = self.home(seq);
        loop {
            let s = self.slots[i].0;
            if s == seq || s == EMPTY {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    pub fn contains_key(&self, seq: u64) -> bool {
        self.slots[self.probe(seq)].0 == seq
    }

    /// Maps `seq` to `pn`, replacing any earlier pn.
    pub fn insert(&mut self, seq: u64, pn: u64) {
        debug_assert_ne!(seq, EMPTY);
        // At most half full keeps probe runs short.
        if 2 * (self.len + 1) > self.slots.len() {
            self.grow();
        }
        let i = self.probe(seq);
        if self.slots[i].0 == EMPTY {
            self.len += 1;
        }
        self.slots[i] = (seq, pn);
    }

    /// Removes `seq`; returns its pn.
    pub fn remove(&mut self, seq: u64) -> Option<u64> {
        let mut hole = self.probe(seq);
        let (s, pn) = self.slots[hole];
        if s != seq {
            return None;
        }
        self.len -= 1;
        // Backward-shift deletion: an entry further along the run moves into the hole unless
        // its home lies cyclically in (hole, i], so lookups never meet tombstones.
        let mask = self.slots.len() - 1;
        let mut i = hole;
        loop {
            i = (i + 1) & mask;
            let entry = self.slots[i];
            if entry.0 == EMPTY {
                break;
            }
            let home = self.home(entry.0);
            let stays = if hole <= i {
                hole < home && home <= i
            } else {
                hole < home || home <= i
            };
            if !stays {
                self.slots[hole] = entry;
                hole = i;
            }
        }
        self.slots[hole] = (EMPTY, 0);
        Some(pn)
    }

    #[cold]
    fn grow(&mut self) {
        let bits = 64 - self.shift + 1;
        let old = std::mem::replace(self, SeqIndex::with_capacity_log2(bits));
        for (seq, pn) in old.slots {
            if seq != EMPTY {
                self.insert(seq, pn);
            }
        }
    }
}

/// Counters of one path, reported in [`crate::Stats`].
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PathStats {
    pub name: String,
    pub origin: bool,
    /// Data requests sent (one per sequence number).
    pub requests: u64,
    /// DATA packets received, duplicates included.
    pub packets: u64,
    /// Payload bytes received, duplicates included.
    pub bytes: u64,
    /// DATA packets that were already received from elsewhere.
    pub duplicates: u64,
    /// Requests declared lost (by reordering or timeout).
    pub losses: u64,
    /// Requests declared lost by the thresholds whose answer came anyway (spurious
    /// declarations, RFC 8985 §6.2's DSACK signal).
    #[serde(skip_serializing_if = "crate::stats::is_zero")]
    pub spurious_losses: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Tail loss probes sent (RFC 8985 §7).
    pub tail_probes: u64,
    /// Final smoothed RTT in microseconds.
    pub srtt_us: u64,
    /// Packets proven corrupt: sent in a block that failed verification, differing from the
    /// block's verified bytes (only with `DownloadConfig::verify`).
    #[serde(skip_serializing_if = "crate::stats::is_zero")]
    pub corrupt_packets: u64,
    /// The path was banned for sending corrupt data (`PathError::Corrupt`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub banned: bool,
}

/// Data that answered a request in flight.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Answered {
    /// Its round trip, when that is a sample of the path (see `DataArrival::rtt`).
    pub rtt: Option<Duration>,
}

/// A path's full state.
#[derive(Debug)]
pub(crate) struct Path {
    pub id: PathId,
    pub info: ServerInfo,
    pub conn_id: u64,
    pub state: PathState,
    pub rtt: RttEstimator,
    pub loss: LossEventRate,
    pub rate: DeliveryRate,
    pub cc: Box<dyn Controller>,
    /// Requests in send order; entry `i` has pn `base_pn + i`.
    pub ledger: VecDeque<Sent>,
    pub base_pn: u64,
    pub next_pn: u64,
    /// Requests in flight on this path.
    in_flight: u64,
    /// seq → pn of the requests in flight on this path that the download's slot ring does not
    /// hold (see `Download::take_in_flight`).
    pub in_flight_spill: SeqIndex,
    pub in_flight_bytes: u64,
    pub largest_answered: Option<u64>,
    /// Sequence numbers picked and not yet put in a REQUEST, with the pn of the first.
    pub outbox: Vec<u64>,
    pub outbox_first_pn: u64,
    /// Earliest time pacing lets the next request go.
    pub next_send: Instant,
    /// Time a late wake-up may make up with back-to-back requests (`DownloadConfig::pacing_slack`).
    pub pacing_slack: Duration,
    pub delivered_bytes: u64,
    pub delivered_time: Instant,
    /// Retransmission timeouts since the path last sent data; while non-zero the path is in
    /// timeout recovery and takes no new requests (see `cwnd_packets`).
    pub consecutive_timeouts: u32,
    /// The sequence number of the latest request this path answered, which its timeout
    /// probes ask for again.
    last_answered: Option<u64>,
    /// Distinct packets this path delivered first.
    delivered_packets: u64,
    /// The estimates changed since the last view was written.
    view_stale: bool,
    /// The window, the requests in flight, pacing or the delivered count may have changed
    /// since the last view was written (at `view_at`).
    view_dirty: bool,
    view_at: Instant,
    /// Payload bytes per packet.
    packet_size: u64,
    /// The controller's window in packets (at least one), kept current after every event it
    /// sees: schedulers and timers ask for it far more often than it changes.
    cwnd: u64,
    /// `rtt.rto()`, kept current: the timer is asked for on every event, the estimate
    /// changes only on samples and timeouts. Also in nanoseconds (saturating), for the timer.
    rto: Duration,
    rto_ns: u64,
    /// When the oldest request in flight was sent: kept current by every change to the
    /// ledger's front, as the download asks for the RTO deadline after every event.
    oldest_sent: Option<Instant>,
    /// When the path last answered a request in flight: the timeout restarts there (RFC 6298
    /// §5.3), so it fires on a path gone silent, not on one loss among answers that keep
    /// coming, which the thresholds judge. `Instant::ZERO` before the first answer.
    answered_at: Instant,
    /// RFC 9002 §6.1.1's packet threshold (`DownloadConfig::reorder_threshold`).
    packet_threshold: u64,
    /// The reordering window of the time threshold (RFC 8985 §6.2).
    reorder: Reordering,
    /// Whether the path sends tail loss probes (`DownloadConfig::tail_probes`).
    pub tail_probes: bool,
    /// The tail loss probe in flight, if any: no other is sent until it is settled.
    tail_probe: Option<TailProbe>,
    /// When the tail loss probe's timer starts, unless an answer came since: the latest
    /// request sent other than a probe, or a probe due when there was nothing to ask again.
    pto_start: Instant,
}

impl Path {
    pub fn new(
        id: PathId,
        info: ServerInfo,
        conn_id: u64,
        cc: Box<dyn Controller>,
        now: Instant,
        min_rto: Duration,
        packet_size: u64,
    ) -> Path {
        Path {
            packet_size,
            packet_threshold: PACKET_THRESHOLD,
            reorder: Reordering::new(ReorderConfig::default()),
            cwnd: 1,
            id,
            info,
            conn_id,
            state: PathState::Connecting {
                attempts: 0,
                first_hello: now,
                next_hello: now,
            },
            rtt: RttEstimator::new(Duration::from_millis(333), min_rto, Duration::from_secs(60)),
            loss: LossEventRate::new(),
            rate: DeliveryRate::new(),
            cc,
            ledger: VecDeque::new(),
            base_pn: 0,
            next_pn: 0,
            in_flight: 0,
            in_flight_spill: SeqIndex::default(),
            in_flight_bytes: 0,
            largest_answered: None,
            outbox: Vec::new(),
            outbox_first_pn: 0,
            next_send: now,
            pacing_slack: Duration::ZERO,
            delivered_bytes: 0,
            delivered_time: now,
            consecutive_timeouts: 0,
            last_answered: None,
            delivered_packets: 0,
            view_stale: true,
            view_dirty: true,
            view_at: now,
            rto: Duration::ZERO,
            answered_at: Instant::ZERO,
            rto_ns: 0,
            oldest_sent: None,
            tail_probes: false,
            tail_probe: None,
            pto_start: Instant::ZERO,
        }
        .with_current_estimates()
    }

    /// The path with RFC 9002 §6.1.1's packet threshold `packet_threshold` (3 by default)
    /// and the reordering window's settings.
    pub fn with_loss_detection(mut self, packet_threshold: u64, reorder: ReorderConfig) -> Path {
        self.packet_threshold = packet_threshold;
        self.reorder = Reordering::new(reorder);
        self.invalidate_view();
        self
    }

    fn with_current_estimates(mut self) -> Path {
        self.set_rto();
        self.refresh_cwnd();
        self
    }

    pub fn token(&self) -> Option<&[u8]> {
        match &self.state {
            PathState::Established { token } => Some(token),
            _ => None,
        }
    }

    pub fn is_established(&self) -> bool {
        matches!(self.state, PathState::Established { .. })
    }

    pub fn in_flight_count(&self) -> u64 {
        self.in_flight
    }

    /// Requests the scheduler may have in flight on the path: its congestion window in
    /// packets of `packet_size` (at least one). In timeout recovery, none: the download
    /// probes the path itself (`probe_seq`), so that no packet anyone waits for is held by a
    /// path that may be dead; a path that has answered nothing yet cannot be probed that way
    /// and keeps RFC 5681 §3.1's loss window of one request. Either way a controller that
    /// does not collapse its window on a timeout cannot pour a window into a silent path.
    pub fn cwnd_packets(&self) -> u64 {
        match (self.consecutive_timeouts, self.last_answered) {
            (0, _) => self.cwnd,
            (_, Some(_)) => 0,
            (_, None) => 1,
        }
    }

    /// Re-reads the controller's window after it saw an event.
    pub(crate) fn refresh_cwnd(&mut self) {
        self.cwnd = (self.cc.window() / self.packet_size).max(1);
        self.view_dirty = true;
    }

    /// This path delivered a packet first.
    pub fn note_delivered(&mut self) {
        self.delivered_packets += 1;
        self.view_dirty = true;
    }

    pub fn can_send(&self, now: Instant) -> bool {
        self.is_established() && self.in_flight_count() < self.cwnd_packets() && self.next_send <= now
    }

    /// The scheduler's read-only picture of this path.
    pub fn view(&mut self, now: Instant) -> PathView {
        let mut view = self.fresh_view();
        self.write_view(now, &mut view, true);
        view
    }

    /// Brings `out`, the view this path wrote last, up to date. The estimates are recomputed
    /// only after they changed (or with `full`), the rest only after an event on this path or
    /// when time may have opened the pacing gate: schedulers ask far more often than packets
    /// arrive, and most asks follow an event on another path.
    #[inline]
    pub fn write_view(&mut self, now: Instant, out: &mut PathView, full: bool) {
        if full || self.view_stale || out.id != self.id {
            self.refresh_view(out);
        } else if !self.view_dirty && (out.can_send || self.next_send <= self.view_at) {
            // Nothing shown changed, and `now` ≥ `view_at` cannot change `can_send`.
            debug_assert!(
                out.cwnd == self.cwnd_packets()
                    && out.in_flight == self.in_flight_count()
                    && out.can_send == self.can_send(now)
                    && out.delivered == self.delivered_packets,
                "a clean view is current"
            );
            return;
        }
        out.cwnd = self.cwnd_packets();
        out.in_flight = self.in_flight_count();
        out.can_send = self.can_send(now);
        out.delivered = self.delivered_packets;
        self.view_dirty = false;
        self.view_at = now;
    }

    /// Out of line: the estimates are redone once per arrival, the quick check above runs for
    /// every path at every ask.
    #[inline(never)]
    fn refresh_view(&mut self, out: &mut PathView) {
        *out = self.fresh_view();
        self.view_stale = false;
    }

    fn fresh_view(&self) -> PathView {
        let srtt = self.rtt.smoothed();
        let rto = self.rto;
        let loss_rate = self.loss.rate();
        PathView {
            id: self.id,
            origin: self.info.origin,
            srtt,
            rttvar: self.rtt.rttvar(),
            min_rtt: self.rtt.min(),
            rto,
            loss_rate,
            delivery_rate: self.rate.rate(),
            expected_time: expected_transmission_time(srtt, rto, loss_rate),
            loss_thresholds: self.loss_thresholds(),
            cwnd: self.cwnd_packets(),
            in_flight: self.in_flight_count(),
            can_send: false,
            delivered: self.delivered_packets,
        }
    }

    /// The estimates changed: the next view recomputes them.
    pub fn invalidate_view(&mut self) {
        self.view_stale = true;
        self.set_rto();
    }

    /// The RTO, never before the time threshold of an answer that meets no queue (the
    /// minimum RTT's: 9/8 of it, or it plus the reordering window) and a millisecond, RFC
    /// 6298's G. The timeout is for requests the thresholds cannot judge (nothing sent after
    /// them answered); one that fires first declares a random loss a timeout, a congestion
    /// signal that also holds the window at zero until the next answer. On a path longer than
    /// the 200 ms floor whose RTT does not vary, SRTT + max(G, 4·RTTVAR) is SRTT + 1 ms, under
    /// 9/8 of the RTT and under the three later answers of the packet threshold: every loss
    /// of a 300 ms, 4 %-loss edge was a timeout, and `weft` held the edge at a third of its
    /// rate (`scenarios/segmented-lossy.toml`, docs/weave.md "The task tail"). A queue's
    /// variation is in RTTVAR already: the floor leaves such a path's RTO as it was.
    fn set_rto(&mut self) {
        use crate::estimate::rtt::{CLOCK_GRANULARITY, nanos};
        let min_rtt = self.rtt.min();
        let threshold = self.reorder.time_threshold(min_rtt, self.rtt.smoothed(), min_rtt);
        self.rto_ns = self
            .rtt
            .rto_at_least_nanos(nanos(threshold).saturating_add(nanos(CLOCK_GRANULARITY)));
        self.rto = Duration::from_nanos(self.rto_ns);
    }

    /// Puts a request for `seq` on the ledger and in the outbox; returns its pn, which the
    /// download notes as in flight for `seq`.
    pub fn record_request(&mut self, ps: &mut PathStats, now: Instant, seq: u64, bytes: u64, app_limited: bool) -> u64 {
        self.view_dirty = true;
        let pn = self.next_pn;
        self.next_pn += 1;
        if self.outbox.is_empty() {
            self.outbox_first_pn = pn;
        }
        self.outbox.push(seq);
        self.ledger.push_back(Sent {
            seq,
            sent: now,
            bytes,
            delivered_at_send: self.delivered_bytes,
            delivered_time_at_send: self.delivered_time,
            app_limited,
            request_start: false,
            done: false,
            probe: false,
        });
        if self.oldest_sent.is_none() {
            // The ledger was empty: this is now the oldest request in flight.
            self.oldest_sent = Some(now);
        }
        self.in_flight += 1;
        self.in_flight_bytes += bytes;
        self.pto_start = now;
        ps.requests += 1;
        self.cc.on_request_sent(now, bytes, self.in_flight_bytes);
        self.refresh_cwnd();
        if let Some(rate) = self.cc.pacing_rate().filter(|&r| r > 0) {
            // Spacing starts from now when the path was idle, so an idle path earns no burst
            // beyond the slack; within the slack, a send that comes late (a timer that fired
            // late) leaves the schedule where it was, and the next requests catch up on it.
            let gap = Duration::from_nanos(bytes.saturating_mul(1_000_000_000) / rate);
            self.next_send = self.next_send.max(now - self.pacing_slack) + gap;
        }
        pn
    }

    fn entry_mut(&mut self, pn: u64) -> Option<&mut Sent> {
        let index = pn.checked_sub(self.base_pn)?;
        self.ledger.get_mut(usize::try_from(index).ok()?)
    }

    /// Removes settled entries from the front of the ledger. Every settling ends here, so
    /// this also notes the oldest request in flight.
    fn trim(&mut self) {
        while self.ledger.front().is_some_and(|s| s.done) {
            self.ledger.pop_front();
            self.base_pn += 1;
        }
        // Trimmed, the front is the oldest request in flight.
        self.oldest_sent = self.ledger.front().map(|s| s.sent);
    }

    /// Data arrived, answering the request in flight `pn` if any (the download took it off its
    /// records). Returns what it answered, if anything.
    pub fn on_data(
        &mut self,
        ps: &mut PathStats,
        now: Instant,
        seq: u64,
        pn: Option<u64>,
        bytes: u64,
    ) -> Option<Answered> {
        ps.packets += 1;
        ps.bytes += bytes;
        if self.consecutive_timeouts > 0 {
            // The path answered: timeout recovery ends (and its window with it).
            self.consecutive_timeouts = 0;
            self.view_dirty = true;
        }
        let asked_at = pn.and_then(|pn| self.entry_mut(pn)).map(|e| e.sent);
        let spurious = self.reorder.on_data(seq, asked_at, now, self.rtt.min(), self.next_pn);
        if spurious {
            ps.spurious_losses += 1;
            self.invalidate_view();
        }
        let pn = pn?;
        self.in_flight -= 1;
        self.view_dirty = true;
        if self.tail_probe.is_some_and(|probe| probe.pn == pn) {
            self.tail_probe = None;
        }
        let entry = *self.entry_mut(pn)?;
        self.entry_mut(pn)?.done = true;
        self.last_answered = Some(entry.seq);
        self.answered_at = now;
        self.in_flight_bytes = self.in_flight_bytes.saturating_sub(entry.bytes);
        if self.reorder.on_answer(pn) {
            self.view_stale = true;
        }
        self.largest_answered = Some(self.largest_answered.map_or(pn, |l| l.max(pn)));
        // A late answer to the request declared lost is no sample of the new one (Karn's
        // rule, RFC 6298 §5): matched to the resend, it reads a fraction of the round trip
        // (0.36 ms on a 62 Mbit/s edge whose minimum is tens of ms), and a minimum filter fed
        // it (BBR's RTprop, weave's least RTT) keeps it for its whole window.
        let rtt = (!spurious).then(|| now - entry.sent);
        if let Some(rtt) = rtt {
            self.rtt.update(rtt);
        }
        self.invalidate_view();
        ps.srtt_us = self.rtt.smoothed().as_micros() as u64;
        self.delivered_bytes += bytes;
        self.delivered_time = now;
        let cwnd = self.cwnd;
        self.rate.on_arrival(now, bytes, cwnd);
        self.loss.on_arrival(pn);
        self.cc.on_data(&DataArrival {
            now,
            sent: entry.sent,
            bytes,
            rtt,
            smoothed_rtt: self.rtt.smoothed(),
            min_rtt: self.rtt.min(),
            in_flight_bytes: self.in_flight_bytes,
            delivered_bytes: self.delivered_bytes,
            delivered_bytes_at_send: entry.delivered_at_send,
            delivered_time_at_send: entry.delivered_time_at_send,
            app_limited: entry.app_limited,
        });
        self.refresh_cwnd();
        self.trim();
        Some(Answered { rtt })
    }

    /// Settles request `pn` as lost; returns its sequence number. `congestion`: the loss is a
    /// congestion signal (not an abandoned path or a refusal).
    fn settle_lost(
        &mut self,
        ps: &mut PathStats,
        now: Instant,
        pn: u64,
        by_timeout: bool,
        congestion: bool,
    ) -> Option<u64> {
        let srtt = self.rtt.smoothed();
        let entry = self.entry_mut(pn)?;
        if entry.done {
            return None;
        }
        entry.done = true;
        let entry = *entry;
        self.in_flight -= 1;
        self.view_dirty = true;
        self.in_flight_bytes = self.in_flight_bytes.saturating_sub(entry.bytes);
        if entry.probe {
            if self.tail_probe.is_some_and(|probe| probe.pn == pn) {
                self.tail_probe = None;
            }
            // Nobody waits for a probe's packet: nothing to requeue, and no congestion signal
            // (only timeouts after the first of a series lose probes).
            self.in_flight_spill.remove(entry.seq);
            return None;
        }
        // The download takes the returned number off its records.
        if congestion {
            self.invalidate_view();
            ps.losses += 1;
            self.loss.on_loss(pn, entry.sent, srtt);
            self.cc.on_loss(&Loss {
                now,
                sent: entry.sent,
                lost_bytes: entry.bytes,
                in_flight_bytes: self.in_flight_bytes,
                by_timeout,
            });
            self.refresh_cwnd();
        }
        Some(entry.seq)
    }

    /// When the time threshold declares the oldest request in flight lost, if a request sent
    /// after it has been answered (RFC 9002 §6.1.2's loss timer).
    pub fn loss_deadline(&self) -> Option<Instant> {
        if self.base_pn >= self.largest_answered? {
            return None;
        }
        Some(self.oldest_sent? + self.loss_delay())
    }

    /// When the path times out: one RTO after the oldest request in flight was sent or the
    /// path last answered, whichever is later (RFC 6298 §5.3 restarts the timer on every
    /// acknowledgment of new data).
    pub fn rto_deadline(&self) -> Option<Instant> {
        let start = self.oldest_sent?.max(self.answered_at).max(self.tail_probe_sent());
        // `start + rto`, which saturates the same way.
        let deadline = Some(Instant::from_nanos(start.as_nanos().saturating_add(self.rto_ns)));
        debug_assert_eq!(deadline, self.find_deadline(), "the deadline is current");
        deadline
    }

    fn find_deadline(&self) -> Option<Instant> {
        let oldest = self.ledger.iter().find(|s| !s.done)?;
        Some(oldest.sent.max(self.answered_at).max(self.tail_probe_sent()) + self.rto)
    }

    /// The packet to probe this path with, when it is in timeout recovery with nothing in
    /// flight: the latest one it delivered, which nobody needs any more (RFC 9002 §6.2.4 lets
    /// a probe carry data sent before). Sent on the path's own timer, probes back off with
    /// the RTO; any answer ends the recovery.
    pub fn probe_seq(&self) -> Option<u64> {
        let idle = self.consecutive_timeouts > 0 && self.in_flight == 0 && self.is_established();
        self.last_answered.filter(|_| idle)
    }

    /// Sends a probe for `seq` (of `bytes`), a packet already delivered: it is in flight on
    /// this path only (in `in_flight_spill`, which finds its answer), never a copy the
    /// download counts, so its loss requeues nothing. Returns its pn.
    pub fn record_probe(&mut self, ps: &mut PathStats, now: Instant, seq: u64, bytes: u64) -> u64 {
        let pto_start = self.pto_start;
        let pn = self.record_request(ps, now, seq, bytes, true);
        self.pto_start = pto_start;
        if let Some(entry) = self.entry_mut(pn) {
            entry.probe = true;
        }
        self.in_flight_spill.insert(seq, pn);
        pn
    }

    /// Retransmission timeout (RFC 6298 §5.4–5.6); the RTO backs off. Returns whether the
    /// timer fired.
    ///
    /// The first timeout of a series loses the oldest request (with any sent at its instant),
    /// as TCP retransmits the earliest segment, and is one congestion signal (RFC
    /// 5681 §3.1). The rest stay in flight. The path takes no new requests meanwhile (see
    /// `cwnd_packets`), so an answer before the next timeout answers a request sent before
    /// this one: F-RTO's proof of a spurious timeout (RFC 5682 §2.1 step 3b, an
    /// acknowledgment for data that was not retransmitted), which ends the recovery. A delay
    /// spike, or a queue grown faster than the RTO, thus costs one request, not a window of
    /// needless losses and duplicates; real losses among those still in flight are left to
    /// reorder detection. (Losing everything on every timeout was tried: on loss-free paths
    /// whose queue keeps the RTT just under the RTO it declared hundreds of losses.)
    ///
    /// A second timeout with no answer between shows the path silent for three RTOs: every
    /// request in flight is lost and goes back to the queue for the other paths
    /// (conventional RTO recovery), and the path is probed (`probe_seq`) until it answers.
    /// Holding them (the rule once was "lose what is older than one RTO" at every timeout)
    /// let a stalled path keep hundreds of requests that would never be answered, and stall
    /// in-order delivery until six timeouts failed it. Later timeouts of the series are no
    /// new congestion signal: they time out what this one already covered, or the probes,
    /// and RFC 5681 §3.1 holds ssthresh constant when retransmissions time out again.
    pub fn on_rto(&mut self, ps: &mut PathStats, now: Instant, lost: &mut Vec<u64>) -> bool {
        let Some(deadline) = self.rto_deadline() else {
            return false;
        };
        if deadline > now {
            return false;
        }
        let first_of_series = self.consecutive_timeouts == 0;
        // The oldest requests (those sent at the oldest's instant) on the first timeout, every
        // request in flight from the second on, or from the first after an unanswered tail
        // loss probe: the path has then been silent for a probe timeout and an RTO.
        let sent_by = if first_of_series && self.tail_probe.is_none() {
            self.oldest_sent.unwrap_or(now)
        } else {
            now
        };
        let mut signal = first_of_series;
        for pn in self.base_pn..self.next_pn {
            let Some(entry) = self.entry_mut(pn) else { break };
            if entry.done {
                continue;
            }
            if entry.sent > sent_by {
                break;
            }
            // One timeout is one congestion signal, whatever number of requests it covers.
            if let Some(seq) = self.settle_lost(ps, now, pn, true, signal) {
                lost.push(seq);
                signal = false;
            }
        }
        self.trim();
        self.rtt.back_off();
        self.invalidate_view();
        self.consecutive_timeouts += 1;
        ps.timeouts += 1;
        true
    }

    /// The server refused the REQUEST whose id is `request_id`: its requests are lost.
    pub fn on_refused(&mut self, ps: &mut PathStats, now: Instant, request_id: u64, lost: &mut Vec<u64>) {
        let mut pn = request_id;
        while pn < self.next_pn {
            match self.entry_mut(pn) {
                Some(e) if pn != request_id && e.request_start => break,
                Some(_) => {}
                None => break,
            }
            if let Some(seq) = self.settle_lost(ps, now, pn, false, pn == request_id) {
                lost.push(seq);
            }
            pn += 1;
        }
        self.trim();
    }

    /// Abandons every request in flight (path failed, removed, or its session reset). A reset
    /// session starts afresh: the server answered, so any timeout recovery is over.
    pub fn abandon_all(&mut self, ps: &mut PathStats, now: Instant, lost: &mut Vec<u64>) {
        for pn in self.base_pn..self.next_pn {
            if let Some(seq) = self.settle_lost(ps, now, pn, false, false) {
                lost.push(seq);
            }
        }
        self.outbox.clear();
        self.consecutive_timeouts = 0;
        self.view_dirty = true;
        self.trim();
    }

    /// Marks pn `first` as the first request of a REQUEST datagram.
    pub fn mark_request(&mut self, first: u64) {
        if let Some(e) = self.entry_mut(first) {
            e.request_start = true;
        }
    }
}

#[cfg(test)]
mod tests;
