//! The `subflow` transport: each path a reliable in-order stream, as a TCP connection or an
//! MPTCP subflow.
//!
//! Under [`Transport::Pull`] (pcdn's protocol) a request declared lost goes back to the
//! download's pending queue and any path may ask for it again. Under [`Transport::Subflow`] a
//! number assigned to a path stays on that path until the path delivers it:
//!
//! - a request the path declares lost (its reordering or time threshold, or its RTO) goes to
//!   the path's own retransmission queue, which the path serves before the scheduler picks
//!   anything for it; the scheduler never sees such numbers as pending. On a timeout the
//!   oldest of them is re-sent at once, one per backed-off RTO, as TCP retransmits on its
//!   timer (RFC 6298 §5.4), and its answer ends the timeout recovery;
//! - the path delivers in assignment order: data that arrives behind a hole on its path is
//!   held (not handed to reassembly, verification or the player) until the hole is filled.
//!   Its congestion control sees every arrival at once, as TCP with SACK does;
//! - a path that fails (too many timeouts in a row, a refusal) or whose session is reset gives
//!   everything it has not delivered in order, held data included, back to the pending
//!   queue: MPTCP reinjects a dead subflow's unacknowledged data on the others, and a client
//!   with one TCP connection per server (MPRD's) asks another server once the connection is
//!   given up. Until then nothing is taken from it.
//!
//! With `opportunistic`, MPTCP's opportunistic retransmission and penalisation (Raiciu et al.,
//! "How Hard Can It Be? Designing and Implementing a Deployable Multipath TCP", NSDI 2012,
//! §4.2) runs too: when the reorder buffer (MPTCP's receive window) lets nothing new be asked
//! for and the packet at its left edge is outstanding on one path, every other path with
//! window room asks for it as well, and the path holding it has its window cut through its
//! controller's loss response (at most once per its smoothed RTT, and only if it is the
//! slower one), as Linux MPTCP halves a slow subflow's window.

use super::{Download, NO_PATH};
use crate::cc::Loss;
use crate::path::{Answered, PathId};
use crate::scheduler::SchedEvent;
use crate::time::Instant;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// How requests and their losses are bound to paths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// pcdn's pull protocol: a lost request goes back to the pending queue, for any path.
    #[default]
    Pull,
    /// Each path a reliable in-order stream (TCP per server, MPTCP subflows): a lost request
    /// is retransmitted on its path, which holds what arrives behind it.
    Subflow {
        /// MPTCP's opportunistic retransmission and penalisation (see the module doc).
        opportunistic: bool,
    },
}

impl Transport {
    /// The transports by name, with a one-line summary each (scenario files, the CLI).
    pub const NAMES: &'static [(&'static str, &'static str)] = &[
        (
            "pull",
            "pcdn's protocol: a lost request goes back to the pending queue, for any path",
        ),
        (
            "subflow",
            "each path an in-order TCP stream: losses retransmitted on their path, data behind them held",
        ),
        (
            "subflow-or",
            "subflow with MPTCP's opportunistic retransmission and penalisation (Raiciu et al. 2012)",
        ),
    ];

    /// The transport called `name` in [`Transport::NAMES`].
    pub fn by_name(name: &str) -> Option<Transport> {
        match name {
            "pull" => Some(Transport::Pull),
            "subflow" => Some(Transport::Subflow { opportunistic: false }),
            "subflow-or" => Some(Transport::Subflow { opportunistic: true }),
            _ => None,
        }
    }

    /// Its name in [`Transport::NAMES`].
    pub fn name(self) -> &'static str {
        match self {
            Transport::Pull => "pull",
            Transport::Subflow { opportunistic: false } => "subflow",
            Transport::Subflow { opportunistic: true } => "subflow-or",
        }
    }
}

/// One number a path was asked for, in the path's stream order.
#[derive(Debug)]
struct Entry {
    seq: u64,
    /// When it arrived on this path (`None`: outstanding, in flight or awaiting retransmission).
    arrived: Option<Instant>,
    /// It arrived as new data and is counted in `Subflows::held_bytes` until released.
    held: bool,
    /// Its payload while held (with `keep_data`).
    data: Option<Vec<u8>>,
}

/// A path's stream: what it was asked for and has not delivered in order.
#[derive(Debug, Default)]
struct Flow {
    entries: VecDeque<Entry>,
    /// Stream position of `entries[0]`.
    front: u64,
    /// seq → stream position, for the numbers in `entries`.
    position: HashMap<u64, u64>,
    /// Lost numbers awaiting retransmission on this path: stream position → seq.
    retx: BTreeMap<u64, u64>,
    /// When the path's window was last cut for holding up the reorder buffer.
    penalised: Option<Instant>,
}

impl Flow {
    fn entry(&mut self, seq: u64) -> Option<(u64, &mut Entry)> {
        let pos = *self.position.get(&seq)?;
        let entry = self.entries.get_mut((pos - self.front) as usize)?;
        Some((pos, entry))
    }

    /// `seq` is in the path's stream and has not arrived.
    fn outstanding(&self, seq: u64) -> bool {
        self.position
            .get(&seq)
            .is_some_and(|&pos| self.entries[(pos - self.front) as usize].arrived.is_none())
    }

    /// Moves the arrived entries at the front of the stream to `out`, in order.
    fn release(&mut self, out: &mut Vec<Entry>) {
        while self.entries.front().is_some_and(|e| e.arrived.is_some()) {
            let entry = self.entries.pop_front().expect("checked");
            self.front += 1;
            self.position.remove(&entry.seq);
            out.push(entry);
        }
    }
}

/// The per-path streams of a download under [`Transport::Subflow`].
#[derive(Debug)]
pub(super) struct Subflows {
    opportunistic: bool,
    /// Indexed by `PathId.0` (ids are dense and never reused).
    flows: Vec<Flow>,
    /// Bytes arrived and held behind a hole, on all paths.
    held_bytes: u64,
    released: Vec<Entry>,
}

impl Subflows {
    pub(super) fn new(transport: Transport) -> Option<Box<Subflows>> {
        match transport {
            Transport::Pull => None,
            Transport::Subflow { opportunistic } => Some(Box::new(Subflows {
                opportunistic,
                flows: Vec::new(),
                held_bytes: 0,
                released: Vec::new(),
            })),
        }
    }

    pub(super) fn add_path(&mut self, id: PathId) {
        let i = id.0 as usize;
        if self.flows.len() <= i {
            self.flows.resize_with(i + 1, Flow::default);
        }
    }

    fn flow(&mut self, id: PathId) -> &mut Flow {
        &mut self.flows[id.0 as usize]
    }

    /// The path's stream holds `seq` (outstanding or held): it may not be asked for it again.
    pub(super) fn holds(&self, id: PathId, seq: u64) -> bool {
        self.flows[id.0 as usize].position.contains_key(&seq)
    }

    /// `seq` was assigned to the path: it joins the end of its stream.
    pub(super) fn assign(&mut self, id: PathId, seq: u64) {
        let flow = self.flow(id);
        let pos = flow.front + flow.entries.len() as u64;
        flow.entries.push_back(Entry {
            seq,
            arrived: None,
            held: false,
            data: None,
        });
        flow.position.insert(seq, pos);
    }

    /// Some path has a retransmission waiting.
    pub(super) fn has_retransmissions(&self) -> bool {
        self.flows.iter().any(|f| !f.retx.is_empty())
    }
}

impl Download {
    fn subflows(&mut self) -> &mut Subflows {
        self.subflows.as_deref_mut().expect("subflow transport")
    }

    /// `on_data` under `Transport::Subflow`: the path's stream decides what is delivered.
    #[inline(never)]
    pub(super) fn on_subflow_data<const VERIFYING: bool>(
        &mut self,
        now: Instant,
        index: usize,
        seq: u64,
        answered: Option<Answered>,
        payload: &[u8],
    ) {
        let path = self.paths[index].id;
        let duplicate = self.slot_index(seq).is_none_or(|i| self.slots[i].received);
        if duplicate {
            self.stats.duplicates += 1;
            self.stats.paths[path.0 as usize].duplicates += 1;
        }
        let arrived = SchedEvent::Arrived {
            path,
            seq,
            rtt: answered.and_then(|a| a.rtt).unwrap_or_default(),
            duplicate,
        };
        self.scheduler.on_event(now, &arrived);
        if answered.is_some() {
            self.detect_losses_on(now, index);
        }
        self.subflow_arrival::<VERIFYING>(now, index, seq, duplicate, payload);
    }

    /// Data for `seq` (`duplicate`: already received) arrived on the path at `index`, whose
    /// congestion control has seen it: it is delivered once everything before it on the path
    /// has arrived. Data its stream does not hold (a session reset dropped it) is taken as is.
    fn subflow_arrival<const VERIFYING: bool>(
        &mut self,
        now: Instant,
        index: usize,
        seq: u64,
        duplicate: bool,
        payload: &[u8],
    ) {
        let id = self.paths[index].id;
        let data = if duplicate { None } else { self.copy_payload(payload) };
        let flows = self.subflows.as_deref_mut().expect("subflow transport");
        let mut released = std::mem::take(&mut flows.released);
        let flow = &mut flows.flows[id.0 as usize];
        let outstanding = match flow.entry(seq) {
            Some((pos, entry)) if entry.arrived.is_none() => {
                entry.arrived = Some(now);
                entry.held = !duplicate;
                entry.data = data;
                flow.retx.remove(&pos);
                if !duplicate {
                    flows.held_bytes += payload.len() as u64;
                }
                true
            }
            Some(_) => false,
            None => {
                if !duplicate {
                    released.push(Entry {
                        seq,
                        arrived: Some(now),
                        held: false,
                        data,
                    });
                }
                false
            }
        };
        flows.flows[id.0 as usize].release(&mut released);
        if outstanding && let Some(i) = self.slot_index(seq) {
            let slot = &mut self.slots[i];
            slot.copies = slot.copies.saturating_sub(1);
        }
        let mut accepted = Vec::new();
        for entry in released.drain(..) {
            let len = self.packet_len(entry.seq);
            if entry.held {
                let flows = self.subflows();
                flows.held_bytes = flows.held_bytes.saturating_sub(len);
            }
            let arrival = entry.arrived.expect("released entries arrived");
            match self.slot_index(entry.seq).filter(|&i| !self.slots[i].received) {
                Some(i) if !(VERIFYING && entry.seq < self.cursor) => {
                    self.accept(index, i, entry.seq, arrival, len, entry.data);
                    accepted.push(entry.seq);
                }
                _ => {
                    if entry.held {
                        // Became a duplicate while held: another path delivered it first.
                        self.stats.duplicates += 1;
                        self.stats.paths[id.0 as usize].duplicates += 1;
                    }
                    if let Some(data) = entry.data {
                        self.pool.push(data);
                    }
                }
            }
        }
        self.subflows().released = released;
        if !accepted.is_empty() && !VERIFYING {
            self.deliver(now);
        }
        let held = self.subflows().held_bytes;
        self.stats.sample_ofo(self.ofo_bytes + held);
        if VERIFYING {
            // Verification last, once the path has seen its data (as under pull).
            for seq in accepted {
                self.on_verified_arrival(now, seq, id);
            }
        }
    }

    /// Lost requests of the path at `index` wait for retransmission on that path. Numbers
    /// its stream no longer holds outstanding (answered meanwhile) need nothing.
    pub(super) fn subflow_lost(&mut self, now: Instant, index: usize, lost: &mut Vec<u64>) {
        let id = self.paths[index].id;
        for seq in lost.drain(..) {
            self.take_in_flight(index, seq);
            self.stats.losses += 1;
            let flow = self.subflows().flow(id);
            if let Some((pos, entry)) = flow.entry(seq)
                && entry.arrived.is_none()
            {
                flow.retx.insert(pos, seq);
            }
            self.scheduler.on_event(now, &SchedEvent::Lost { path: id, seq });
        }
    }

    /// Every path with window room re-sends what it lost, oldest first, before the scheduler
    /// picks anything for it.
    pub(super) fn serve_retransmissions(&mut self, now: Instant) {
        for index in 0..self.paths.len() {
            let id = self.paths[index].id;
            while self.paths[index].can_send(now) {
                let Some((_, seq)) = self.subflows().flow(id).retx.pop_first() else {
                    break;
                };
                self.resend(now, index, seq);
            }
        }
    }

    /// On a timeout the path re-sends its oldest lost number at once, its window or not (RFC
    /// 6298 §5.4); returns whether it had one. Its answer ends the timeout recovery.
    pub(super) fn retransmit_on_timeout(&mut self, now: Instant, index: usize) -> bool {
        let id = self.paths[index].id;
        let Some((_, seq)) = self.subflows().flow(id).retx.pop_first() else {
            return false;
        };
        self.resend(now, index, seq);
        true
    }

    /// Asks the path at `index` for `seq`, already in its stream (or just added to it).
    fn resend(&mut self, now: Instant, index: usize, seq: u64) {
        let bytes = self.packet_len(seq);
        let id = self.paths[index].id;
        let ps = &mut self.stats.paths[id.0 as usize];
        let pn = self.paths[index].record_request(ps, now, seq, bytes, false);
        match self.slot_index(seq) {
            Some(i) if self.slots[i].holder == NO_PATH => {
                self.slots[i].holder = id.0;
                self.slots[i].pn = pn;
            }
            _ => self.paths[index].in_flight_spill.insert(seq, pn),
        }
        if self.paths[index].outbox.len() == 1 {
            self.outboxes += 1;
        }
        self.stats.requests_sent += 1;
        self.scheduler.on_event(now, &SchedEvent::Sent { path: id, seq });
    }

    /// The path at `index` is given up (failed, removed, reset): everything its stream did not
    /// deliver goes back to the pending queue, and its requests in flight (abandoned into
    /// `lost`) leave the in-flight records.
    pub(super) fn subflow_abandon(&mut self, now: Instant, index: usize, lost: &mut Vec<u64>) {
        self.release_stream(index);
        let path = self.paths[index].id;
        self.paths[index].abandon_all(&mut self.stats.paths[path.0 as usize], now, lost);
        for seq in lost.drain(..) {
            self.take_in_flight(index, seq);
            self.scheduler.on_event(now, &SchedEvent::Lost { path, seq });
        }
    }

    /// Gives back what the stream of the path at `index` did not deliver.
    fn release_stream(&mut self, index: usize) {
        let id = self.paths[index].id;
        let flows = self.subflows();
        let flow = std::mem::take(flows.flow(id));
        for entry in flow.entries {
            let seq = entry.seq;
            if entry.held {
                let len = self.packet_len(seq);
                let flows = self.subflows();
                flows.held_bytes = flows.held_bytes.saturating_sub(len);
            }
            if let Some(data) = entry.data {
                self.pool.push(data);
            }
            let Some(i) = self.slot_index(seq) else { continue };
            let slot = &mut self.slots[i];
            if entry.arrived.is_none() {
                // The path held one of its copies.
                slot.copies = slot.copies.saturating_sub(1);
            }
            if !slot.received && slot.copies == 0 && seq >= self.cursor {
                self.holes.insert(seq);
            }
        }
    }

    /// Opportunistic retransmission (see the module doc): when nothing new may be asked for,
    /// the packet at the reorder buffer's left edge, outstanding on some path, is asked of
    /// every other path with room, and the slower path holding it is penalised.
    pub(super) fn reinject(&mut self, now: Instant) {
        if !self.subflows.as_ref().is_some_and(|s| s.opportunistic)
            || self.done
            || !self.holes.is_empty()
            || self.next_new < self.new_end()
        {
            return;
        }
        let seq = self.cursor;
        let Some(i) = self.slot_index(seq) else { return };
        if self.slots[i].received {
            return;
        }
        let flows = self.subflows.as_deref().expect("subflow transport");
        let Some(slow) = self
            .paths
            .iter()
            .position(|p| flows.flows[p.id.0 as usize].outstanding(seq))
        else {
            return;
        };
        for index in 0..self.paths.len() {
            let id = self.paths[index].id;
            if index == slow
                || !self.paths[index].can_send(now)
                || self.subflows().holds(id, seq)
                || (!self.paths[index].info.origin && self.is_origin_only(seq))
            {
                continue;
            }
            self.slots[i].copies = self.slots[i].copies.saturating_add(1);
            self.subflows().assign(id, seq);
            self.resend(now, index, seq);
            self.stats.reinjections += 1;
            let (fast, slow_srtt) = (self.paths[index].rtt.smoothed(), self.paths[slow].rtt.smoothed());
            let slow_id = self.paths[slow].id;
            let flow = self.subflows().flow(slow_id);
            let due = flow.penalised.is_none_or(|t| t + slow_srtt <= now);
            if slow_srtt > fast && due {
                flow.penalised = Some(now);
                self.penalise(now, slow);
            }
        }
    }

    /// Cuts the window of the path at `index` through its controller's loss response.
    fn penalise(&mut self, now: Instant, index: usize) {
        let path = &mut self.paths[index];
        path.cc.on_loss(&Loss {
            now,
            sent: now,
            lost_bytes: self.packet_size,
            in_flight_bytes: path.in_flight_bytes,
            by_timeout: false,
        });
        path.refresh_cwnd();
        self.stats.penalties += 1;
    }
}
