//! One link direction in virtual time: drop-tail queue → rate (fixed or trace) → loss →
//! propagation delay + jitter, in Mahimahi's stage style (`enqueue`, `dequeue`, `next_due`).
//!
//! A packet's life: [`Link::enqueue`] admits it or drops it at the tail (queue limits in bytes
//! and packets). At the head of the queue it is serialized at the link's rate; when its last bit
//! has left (ns-3's `TransmitComplete`) the loss model and the blackouts decide whether it is
//! lost, otherwise it exits after the propagation delay plus jitter (ns-3's channel delay).
//! [`Link::dequeue`] hands out the packets whose exit time has come, [`Link::next_due`] says
//! when the next one will.
//!
//! The head packet's fate (lost or not, its jitter) is drawn when it reaches the head of the
//! queue, so `next_due` can name its exact exit time without an extra wake-up at the end of
//! serialization. Loss and jitter changes therefore apply to packets that reach the head
//! afterwards; a delay change to packets whose serialization ends afterwards; a rate change
//! re-times the bits still unsent of the packet on the wire.
//!
//! Times inside are u64 nanoseconds of [`Instant`]; sizes are bytes.

mod config;
mod random;
mod serve;

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::path::Path;
use std::time::Duration;

use pcdn_core::time::Instant;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

pub use config::{
    Blackout, Change, GilbertElliott, Jitter, JitterDist, LinkChange, LinkConfig, LinkError, Loss, OPPORTUNITY_BYTES,
    QueueLimit, Rate, Trace,
};
use random::LossState;
use serve::{HeadService, Server};

/// A datagram in flight: its size on the wire in bytes and whatever the caller carries with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet<T> {
    /// Bytes on the wire (what the rate and the queue limits count).
    pub len: u32,
    pub payload: T,
}

impl<T> Packet<T> {
    pub fn new(len: u32, payload: T) -> Packet<T> {
        Packet { len, payload }
    }
}

/// Counters of one link. Packets offered = `enqueued` + `dropped`; `enqueued` = `lost` +
/// `delivered` + the packets still inside the link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Admitted by the queue.
    pub enqueued_packets: u64,
    pub enqueued_bytes: u64,
    /// Refused by the full queue (drop-tail).
    pub dropped_packets: u64,
    pub dropped_bytes: u64,
    /// Lost on the wire (loss model or blackout).
    pub lost_packets: u64,
    pub lost_bytes: u64,
    /// Handed out by [`Link::dequeue`].
    pub delivered_packets: u64,
    pub delivered_bytes: u64,
}

struct Queued<T> {
    arrival: u64,
    packet: Packet<T>,
}

/// What becomes of the head packet when its serialization ends.
#[derive(Clone, Copy, Debug)]
enum Fate {
    /// The link is stalled at rate 0: it never ends.
    Stalled,
    /// Lost (the loss model or a blackout) when its serialization ends at `at`.
    Lost { at: u64 },
    /// It leaves the link at `at`.
    Exits { at: u64 },
}

/// The head packet's rate-stage state plus its pre-drawn fate.
#[derive(Clone, Copy, Default)]
struct Head {
    service: HeadService,
    lost: bool,
    jitter_ns: i64,
}

/// A packet in the reordering delay line, ordered by (exit time, sequence) earliest first.
struct Flight<T> {
    exit: u64,
    seq: u64,
    packet: Packet<T>,
}

impl<T> PartialEq for Flight<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.exit, self.seq) == (other.exit, other.seq)
    }
}
impl<T> Eq for Flight<T> {}
impl<T> PartialOrd for Flight<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Flight<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.exit, self.seq).cmp(&(other.exit, other.seq))
    }
}

/// One direction of a link. See the [module docs](self) for the stages.
pub struct Link<T> {
    rate: Rate,
    server: Server,
    delay_ns: u64,
    jitter: Jitter,
    loss: LossState,
    limit: QueueLimit,
    /// Sorted by start; windows before `blackout_from` have ended.
    blackouts: Vec<Blackout>,
    blackout_from: usize,
    /// Sorted by time, equal times in insertion order.
    changes: VecDeque<LinkChange>,
    rng: ChaCha8Rng,
    spare_normal: Option<f64>,
    /// Latest time the link has been brought to, ns.
    now: u64,
    /// Earliest time the rate stage has work (a departure or a change), ns; `u64::MAX` if none.
    /// Lets the many calls with nothing to do return after one comparison.
    stage_due: u64,

    queue: VecDeque<Queued<T>>,
    queued_bytes: u64,
    /// Valid while `queue` is non-empty.
    head: Head,
    /// What becomes of the head packet, worked out with it: `next_due` is asked after every
    /// event, and the departure needs it too. Valid while `queue` is non-empty.
    head_fate: Fate,

    /// Delay line while order is kept: exit times never decrease, so a FIFO suffices.
    fifo: VecDeque<(u64, Packet<T>)>,
    /// Delay line while reordering is allowed.
    reordering: BinaryHeap<Reverse<Flight<T>>>,
    seq: u64,
    /// Latest exit time given to any packet, ns.
    last_exit: u64,
    /// When the last packet finished serialization, ns: the link has been idle since, if its
    /// queue is empty (`LossState::pass_idle`). `None` before the first packet, so a new
    /// link's chain starts in the good state.
    free_since: Option<u64>,

    stats: LinkStats,
}

impl<T> Link<T> {
    /// Builds a link from `config`; all its randomness comes from `seed`. Trace files still
    /// named in the config are read relative to the working directory.
    pub fn new(config: &LinkConfig, seed: u64) -> Result<Link<T>, LinkError> {
        let rate = config.rate.clone().resolve(Path::new(""))?;
        config.loss.validate()?;
        let mut link = Link {
            server: Server::new(&rate, 0),
            rate,
            delay_ns: duration_ns(config.delay),
            jitter: config.jitter,
            loss: LossState::new(config.loss),
            limit: config.queue,
            blackouts: Vec::new(),
            blackout_from: 0,
            changes: VecDeque::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            spare_normal: None,
            now: 0,
            stage_due: u64::MAX,
            queue: VecDeque::new(),
            queued_bytes: 0,
            head: Head::default(),
            head_fate: Fate::Stalled,
            fifo: VecDeque::new(),
            reordering: BinaryHeap::new(),
            seq: 0,
            last_exit: 0,
            free_since: None,
            stats: LinkStats::default(),
        };
        for b in &config.blackouts {
            link.add_blackout(*b)?;
        }
        for c in &config.changes {
            link.schedule(c.clone())?;
        }
        Ok(link)
    }

    /// Offers a packet at `now`. Returns false if the drop-tail queue refused it (counted in
    /// `dropped`). `now` must not go backwards.
    pub fn enqueue(&mut self, now: Instant, packet: Packet<T>) -> bool {
        let now = self.catch_up(now.as_nanos());
        let len = u64::from(packet.len);
        let over_packets = self.limit.packets.is_some_and(|l| self.queue.len() as u64 >= l);
        let over_bytes = self.limit.bytes.is_some_and(|l| self.queued_bytes + len > l);
        if over_packets || over_bytes {
            self.stats.dropped_packets += 1;
            self.stats.dropped_bytes += len;
            return false;
        }
        self.stats.enqueued_packets += 1;
        self.stats.enqueued_bytes += len;
        self.queued_bytes += len;
        self.queue.push_back(Queued { arrival: now, packet });
        if self.queue.len() == 1 {
            self.begin_head(now, false);
            self.update_stage_due();
        }
        true
    }

    /// Hands out one packet that has left the link by `now`, with the time it left, earliest
    /// first (ties in the order they were sent). Call until `None`.
    #[inline]
    pub fn dequeue(&mut self, now: Instant) -> Option<(Instant, Packet<T>)> {
        let now = self.catch_up(now.as_nanos());
        // Every call ends with one that finds nothing: keep it free of the full call.
        let fifo_due = self.fifo.front().is_some_and(|f| f.0 <= now);
        let heap_due = self.reordering.peek().is_some_and(|f| f.0.exit <= now);
        if !fifo_due && !heap_due {
            return None;
        }
        self.dequeue_due(now)
    }

    /// [`Link::dequeue`] once something has left by `now` (ns).
    fn dequeue_due(&mut self, now: u64) -> Option<(Instant, Packet<T>)> {
        let fifo = self.fifo.front().map(|f| f.0);
        let heap = self.reordering.peek().map(|f| f.0.exit);
        let (exit, packet) = match (fifo, heap) {
            (Some(f), h) if f <= now && h.is_none_or(|h| f <= h) => self.fifo.pop_front()?,
            (_, Some(h)) if h <= now => {
                let Reverse(f) = self.reordering.pop()?;
                (f.exit, f.packet)
            }
            _ => return None,
        };
        self.stats.delivered_packets += 1;
        self.stats.delivered_bytes += u64::from(packet.len);
        Some((Instant::from_nanos(exit), packet))
    }

    /// When the link next needs attention: the next exit, the end of a serialization that
    /// ends in a loss, or a scheduled change while packets are queued. `None` when idle.
    pub fn next_due(&self) -> Option<Instant> {
        let mut due = self.fifo.front().map(|f| f.0);
        let mut earliest = |t: u64| due = Some(due.map_or(t, |d| d.min(t)));
        if let Some(f) = self.reordering.peek() {
            earliest(f.0.exit);
        }
        if !self.queue.is_empty() {
            if let Fate::Lost { at } | Fate::Exits { at } = self.head_fate {
                earliest(at);
            }
            // Idle links take changes lazily; a busy one must re-time its head at the change.
            if let Some(c) = self.changes.front() {
                earliest(c.at.as_nanos());
            }
        }
        due.map(Instant::from_nanos)
    }

    /// Applies a change now. Fails only for an invalid loss model or an unreadable trace file
    /// (read relative to the working directory).
    pub fn apply(&mut self, now: Instant, change: Change) -> Result<(), LinkError> {
        let change = validate(change)?;
        let now = self.catch_up(now.as_nanos());
        self.apply_at(now, change);
        self.update_stage_due();
        Ok(())
    }

    /// Schedules a change for when time reaches `change.at` (at once, if that has passed).
    pub fn schedule(&mut self, change: LinkChange) -> Result<(), LinkError> {
        let change = LinkChange {
            // The past cannot be rewritten: a late change acts at the link's current time.
            at: change.at.max(Instant::from_nanos(self.now)),
            change: validate(change.change)?,
        };
        let at = change.at;
        let i = self.changes.partition_point(|c| c.at <= at);
        self.changes.insert(i, change);
        self.update_stage_due();
        Ok(())
    }

    /// Changes the rate at `now`; the packet on the wire sends its remaining bits at the new rate.
    pub fn set_rate(&mut self, now: Instant, rate: Rate) -> Result<(), LinkError> {
        self.apply(now, Change::Rate(rate))
    }
    /// Changes the propagation delay for packets whose serialization ends from now on.
    pub fn set_delay(&mut self, now: Instant, delay: Duration) {
        self.apply(now, Change::Delay(delay)).expect("a delay is always valid");
    }
    /// Changes the jitter for packets that reach the head of the queue from now on.
    pub fn set_jitter(&mut self, now: Instant, jitter: Jitter) {
        self.apply(now, Change::Jitter(jitter))
            .expect("a jitter is always valid");
    }
    /// Changes the loss model (a Gilbert–Elliott chain restarts in the good state).
    pub fn set_loss(&mut self, now: Instant, loss: Loss) -> Result<(), LinkError> {
        self.apply(now, Change::Loss(loss))
    }
    /// Changes the queue limits; packets already queued stay, arrivals are dropped until the
    /// queue is under the new limit.
    pub fn set_queue(&mut self, now: Instant, limit: QueueLimit) {
        self.apply(now, Change::Queue(limit))
            .expect("a queue limit is always valid");
    }

    /// Adds an outage window.
    pub fn add_blackout(&mut self, blackout: Blackout) -> Result<(), LinkError> {
        blackout.validate()?;
        self.blackouts.push(blackout);
        self.blackouts.sort_by_key(|b| b.start);
        self.blackout_from = 0;
        self.retime_head();
        Ok(())
    }

    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }
    // The knob getters report the state as of the last call that drove the link: an idle link
    // applies a scheduled change only when it is next used.
    pub fn rate(&self) -> &Rate {
        &self.rate
    }
    pub fn delay(&self) -> Duration {
        Duration::from_nanos(self.delay_ns)
    }
    pub fn jitter(&self) -> Jitter {
        self.jitter
    }
    pub fn loss(&self) -> Loss {
        self.loss.model
    }
    pub fn queue_limit(&self) -> QueueLimit {
        self.limit
    }
    pub fn blackouts(&self) -> &[Blackout] {
        &self.blackouts
    }
    /// Changes scheduled and not yet applied.
    pub fn pending_changes(&self) -> impl Iterator<Item = &LinkChange> {
        self.changes.iter()
    }
    /// Packets in the queue, including the one being serialized.
    pub fn queued_packets(&self) -> usize {
        self.queue.len()
    }
    /// Bytes in the queue, including the packet being serialized.
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }
    /// Packets past the queue and not yet handed out (propagating, or due).
    pub fn propagating_packets(&self) -> usize {
        self.fifo.len() + self.reordering.len()
    }

    /// Runs the rate stage up to `now`: scheduled changes and departures in time order, a
    /// change first when both fall on the same nanosecond.
    /// Returns the link's time, `now` or later if a caller went back in time.
    #[inline]
    fn catch_up(&mut self, now: u64) -> u64 {
        let now = self.now.max(now);
        self.now = now;
        // Most calls have nothing to do; keep them free of the slow path's stack frame.
        if now >= self.stage_due {
            self.run_stage(now);
        }
        now
    }

    #[inline(never)]
    fn run_stage(&mut self, now: u64) {
        loop {
            let departure = if self.queue.is_empty() {
                None
            } else {
                self.head.service.done
            };
            if let Some(c) = self.changes.front() {
                let at = c.at.as_nanos();
                if at <= now && departure.is_none_or(|d| at <= d) {
                    let c = self.changes.pop_front().expect("peeked");
                    self.apply_at(at, c.change);
                    continue;
                }
            }
            match departure {
                Some(d) if d <= now => self.depart(d),
                _ => break,
            }
        }
        self.update_stage_due();
    }

    fn update_stage_due(&mut self) {
        let departure = match self.head.service.done {
            Some(d) if !self.queue.is_empty() => d,
            _ => u64::MAX,
        };
        let change = self.changes.front().map_or(u64::MAX, |c| c.at.as_nanos());
        self.stage_due = departure.min(change);
    }

    /// The head packet's last bit leaves at `t`.
    fn depart(&mut self, t: u64) {
        let Queued { packet, .. } = self.queue.pop_front().expect("a head to depart");
        let len = u64::from(packet.len);
        self.queued_bytes -= len;
        self.free_since = Some(t);
        let head = self.head;
        self.server.finish(&head.service);
        while self
            .blackouts
            .get(self.blackout_from)
            .is_some_and(|b| b.end.as_nanos() <= t)
        {
            self.blackout_from += 1;
        }
        debug_assert_eq!(head.service.done, Some(t), "the head departs when it is done");
        if let Fate::Exits { at: exit } = self.head_fate {
            self.last_exit = self.last_exit.max(exit);
            if self.jitter.reorder {
                self.reordering.push(Reverse(Flight {
                    exit,
                    seq: self.seq,
                    packet,
                }));
                self.seq += 1;
            } else {
                self.fifo.push_back((exit, packet));
            }
        } else {
            self.stats.lost_packets += 1;
            self.stats.lost_bytes += len;
        }
        if let Some(next) = self.queue.front() {
            let arrival = next.arrival;
            self.begin_head(arrival.max(t), arrival <= t);
        }
    }

    /// Serves the packet now at the head of the queue and draws its fate.
    fn begin_head(&mut self, start: u64, back_to_back: bool) {
        let q = self.queue.front().expect("a head to begin");
        let (arrival, bits) = (q.arrival, u64::from(q.packet.len) * 8);
        let service = self.server.begin(arrival, start, bits, back_to_back);
        if let Some(free) = self.free_since.filter(|_| !back_to_back) {
            // Idle since the last departure: the chain passes the silence in packet times.
            if let Some(slot) = service.done.map(|d| d.saturating_sub(start)).filter(|&s| s > 0) {
                self.loss.pass_idle(start.saturating_sub(free) / slot, &mut self.rng);
            }
        }
        let lost = self.loss.lose(&mut self.rng);
        let jitter_ns = random::jitter_ns(&self.jitter, &mut self.rng, &mut self.spare_normal);
        self.head = Head {
            service,
            lost,
            jitter_ns,
        };
        self.retime_head();
    }

    /// Works out `head_fate` again after the head, its service, the delay, the jitter or the
    /// blackouts changed. (Between such changes it stays put: `last_exit` only moves when the
    /// head departs, and blackouts are only passed by once they end before the head's.)
    fn retime_head(&mut self) {
        self.head_fate = match self.head.service.done {
            None => Fate::Stalled,
            Some(done) if self.head.lost || self.in_blackout(done) => Fate::Lost { at: done },
            Some(done) => Fate::Exits {
                at: self.exit_time(done, self.head.jitter_ns),
            },
        };
    }

    /// Exit time of a packet whose serialization ends at `done`: + delay + jitter, never before
    /// `done`, and never before the previous exit unless reordering is allowed.
    fn exit_time(&self, done: u64, jitter_ns: i64) -> u64 {
        let exit = done
            .saturating_add(self.delay_ns)
            .saturating_add_signed(jitter_ns)
            .max(done);
        if self.jitter.reorder {
            exit
        } else {
            exit.max(self.last_exit)
        }
    }

    fn in_blackout(&self, t: u64) -> bool {
        self.blackouts[self.blackout_from.min(self.blackouts.len())..]
            .iter()
            .take_while(|b| b.start.as_nanos() <= t)
            .any(|b| t < b.end.as_nanos())
    }

    /// Applies a validated change at `at` (≥ every time already processed).
    fn apply_at(&mut self, at: u64, change: Change) {
        match change {
            Change::Rate(rate) => {
                let mut server = Server::new(&rate, at);
                if !self.queue.is_empty() {
                    let old = self.head.service;
                    let bits = self.server.remaining_bits(&old, at);
                    self.head.service = server.begin(old.arrival, at, bits, false);
                }
                self.server = server;
                self.rate = rate;
            }
            Change::Delay(d) => self.delay_ns = duration_ns(d),
            Change::Jitter(j) => self.jitter = j,
            Change::Loss(l) => self.loss = LossState::new(l),
            Change::Queue(q) => self.limit = q,
        }
        self.retime_head();
    }
}

/// Resolves trace files (relative to the working directory) and checks probabilities.
fn validate(change: Change) -> Result<Change, LinkError> {
    Ok(match change {
        Change::Rate(r) => Change::Rate(r.resolve(Path::new(""))?),
        Change::Loss(l) => {
            l.validate()?;
            Change::Loss(l)
        }
        c => c,
    })
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl<T> fmt::Debug for Link<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Link")
            .field("rate", &self.rate)
            .field("delay", &self.delay())
            .field("jitter", &self.jitter)
            .field("loss", &self.loss.model)
            .field("queue_limit", &self.limit)
            .field("queued_packets", &self.queue.len())
            .field("propagating_packets", &self.propagating_packets())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}
