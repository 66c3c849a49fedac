//! One path of a download: a connection to one server, its estimators, its congestion
//! control and the ledger of its requests in flight.

use crate::cc::{Controller, DataArrival, Loss};
use crate::estimate::{DeliveryRate, LossEventRate, RttEstimator, expected_transmission_time};
use crate::scheduler::PathView;
use crate::time::{Duration, Instant};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// A path's handle, unique within one download (never reused).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct PathId(pub u32);

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
}

/// Sequence numbers are dense integers: a multiplicative hash spreads them well and costs
/// one multiplication, where SipHash would cost far more per packet.
#[derive(Default)]
pub(crate) struct SeqHasher(u64);

impl Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

pub(crate) type SeqMap<V> = HashMap<u64, V, BuildHasherDefault<SeqHasher>>;

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
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Final smoothed RTT in microseconds.
    pub srtt_us: u64,
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
    /// seq → pn of the requests in flight on this path.
    pub in_flight: SeqMap<u64>,
    pub in_flight_bytes: u64,
    pub largest_answered: Option<u64>,
    /// Sequence numbers picked and not yet put in a REQUEST, with the pn of the first.
    pub outbox: Vec<u64>,
    pub outbox_first_pn: u64,
    /// Earliest time pacing lets the next request go.
    pub next_send: Instant,
    pub delivered_bytes: u64,
    pub delivered_time: Instant,
    pub consecutive_timeouts: u32,
    /// Distinct packets this path delivered first.
    pub delivered_packets: u64,
    /// The estimates changed since the last view was written.
    view_stale: bool,
    /// Payload bytes per packet.
    packet_size: u64,
    /// The controller's window in packets (at least one), kept current after every event it
    /// sees: schedulers and timers ask for it far more often than it changes.
    cwnd: u64,
    /// `rtt.rto()`, kept current: the timer is asked for on every event, the estimate
    /// changes only on samples and timeouts.
    rto: Duration,
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
            in_flight: SeqMap::default(),
            in_flight_bytes: 0,
            largest_answered: None,
            outbox: Vec::new(),
            outbox_first_pn: 0,
            next_send: now,
            delivered_bytes: 0,
            delivered_time: now,
            consecutive_timeouts: 0,
            delivered_packets: 0,
            view_stale: true,
            rto: Duration::ZERO,
        }
        .with_current_estimates()
    }

    fn with_current_estimates(mut self) -> Path {
        self.rto = self.rtt.rto();
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
        self.in_flight.len() as u64
    }

    /// Congestion window in packets of `packet_size` (at least one).
    pub fn cwnd_packets(&self) -> u64 {
        self.cwnd
    }

    /// Re-reads the controller's window after it saw an event.
    fn refresh_cwnd(&mut self) {
        self.cwnd = (self.cc.window() / self.packet_size).max(1);
    }

    pub fn can_send(&self, now: Instant) -> bool {
        self.is_established() && self.in_flight_count() < self.cwnd && self.next_send <= now
    }

    /// The scheduler's read-only picture of this path.
    pub fn view(&mut self, now: Instant) -> PathView {
        let mut view = self.fresh_view();
        self.write_view(now, &mut view, true);
        view
    }

    /// Brings `out`, this path's view from an earlier call, up to date. The estimates are
    /// recomputed only after they changed (or with `full`): schedulers ask far more often
    /// than packets arrive.
    pub fn write_view(&mut self, now: Instant, out: &mut PathView, full: bool) {
        if full || self.view_stale || out.id != self.id {
            *out = self.fresh_view();
            self.view_stale = false;
        }
        out.cwnd = self.cwnd;
        out.in_flight = self.in_flight_count();
        out.can_send = self.can_send(now);
        out.delivered = self.delivered_packets;
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
            cwnd: self.cwnd,
            in_flight: self.in_flight_count(),
            can_send: false,
            delivered: self.delivered_packets,
        }
    }

    /// The estimates changed: the next view recomputes them.
    pub fn invalidate_view(&mut self) {
        self.view_stale = true;
        self.rto = self.rtt.rto();
    }

    /// Puts a request for `seq` on the ledger and in the outbox; returns its pn.
    pub fn record_request(&mut self, ps: &mut PathStats, now: Instant, seq: u64, bytes: u64, app_limited: bool) -> u64 {
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
        });
        self.in_flight.insert(seq, pn);
        self.in_flight_bytes += bytes;
        ps.requests += 1;
        self.cc.on_request_sent(now, bytes, self.in_flight_bytes);
        self.refresh_cwnd();
        if let Some(rate) = self.cc.pacing_rate().filter(|&r| r > 0) {
            // Spacing starts from now when the path was idle, so an idle path earns no burst.
            let gap = Duration::from_nanos(bytes.saturating_mul(1_000_000_000) / rate);
            self.next_send = self.next_send.max(now) + gap;
        }
        pn
    }

    fn entry_mut(&mut self, pn: u64) -> Option<&mut Sent> {
        let index = pn.checked_sub(self.base_pn)?;
        self.ledger.get_mut(usize::try_from(index).ok()?)
    }

    /// Removes settled entries from the front of the ledger.
    fn trim(&mut self) {
        while self.ledger.front().is_some_and(|s| s.done) {
            self.ledger.pop_front();
            self.base_pn += 1;
        }
    }

    /// Data for `seq` arrived. Returns the RTT sample when it answers a request in flight.
    pub fn on_data(&mut self, ps: &mut PathStats, now: Instant, seq: u64, bytes: u64) -> Option<Duration> {
        ps.packets += 1;
        ps.bytes += bytes;
        self.consecutive_timeouts = 0;
        let pn = self.in_flight.remove(&seq)?;
        let entry = *self.entry_mut(pn)?;
        self.entry_mut(pn)?.done = true;
        self.in_flight_bytes = self.in_flight_bytes.saturating_sub(entry.bytes);
        self.largest_answered = Some(self.largest_answered.map_or(pn, |l| l.max(pn)));
        let rtt = now - entry.sent;
        self.rtt.update(rtt);
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
        Some(rtt)
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
        self.in_flight.remove(&entry.seq);
        self.in_flight_bytes = self.in_flight_bytes.saturating_sub(entry.bytes);
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

    /// Loss by reordering: a request still unanswered after `threshold` requests sent later
    /// were answered is lost (the rule of RFC 9002 §6.1.1, counted in requests).
    pub fn detect_reorder_losses(&mut self, ps: &mut PathStats, now: Instant, threshold: u64, lost: &mut Vec<u64>) {
        let Some(largest) = self.largest_answered else { return };
        let mut pn = self.base_pn;
        while pn + threshold <= largest {
            if let Some(seq) = self.settle_lost(ps, now, pn, false, true) {
                lost.push(seq);
            }
            pn += 1;
        }
        self.trim();
    }

    /// When the oldest request in flight times out.
    pub fn rto_deadline(&self) -> Option<Instant> {
        let oldest = self.ledger.iter().find(|s| !s.done)?;
        Some(oldest.sent + self.rto)
    }

    /// Retransmission timeout (RFC 6298 §5.4–5.6): every request older than one RTO is lost,
    /// and the RTO backs off. Returns whether the timer fired.
    pub fn on_rto(&mut self, ps: &mut PathStats, now: Instant, lost: &mut Vec<u64>) -> bool {
        let Some(deadline) = self.rto_deadline() else {
            return false;
        };
        if deadline > now {
            return false;
        }
        let rto = self.rto;
        let mut first = true;
        for pn in self.base_pn..self.next_pn {
            let Some(entry) = self.entry_mut(pn) else { break };
            if entry.done {
                continue;
            }
            if entry.sent + rto > now {
                break;
            }
            // One timeout is one congestion signal, whatever number of requests it covers.
            if let Some(seq) = self.settle_lost(ps, now, pn, true, first) {
                lost.push(seq);
            }
            first = false;
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

    /// Abandons every request in flight (path failed, removed, or its session reset).
    pub fn abandon_all(&mut self, ps: &mut PathStats, now: Instant, lost: &mut Vec<u64>) {
        for pn in self.base_pn..self.next_pn {
            if let Some(seq) = self.settle_lost(ps, now, pn, false, false) {
                lost.push(seq);
            }
        }
        self.outbox.clear();
        self.trim();
    }

    /// Marks pn `first` as the first request of a REQUEST datagram.
    pub fn mark_request(&mut self, first: u64) {
        if let Some(e) = self.entry_mut(first) {
            e.request_start = true;
        }
    }
}
