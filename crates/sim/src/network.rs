//! Links and routes in virtual time: a route is a chain of links, routes may share links (a
//! shared bottleneck), and one binary heap of link due times drives everything in time order.
//!
//! Use: [`Network::add_link`] and [`Network::add_route`] to build; each link is one direction,
//! so a two-way path is two routes. Then, in the simulation loop, with `deadline` the nodes'
//! earliest timer:
//!
//! ```text
//! match net.next_delivery(deadline) {
//!     Some(t) => while let Some((route, packet)) = net.poll_delivered(t) { /* to the node */ },
//!     None => { /* clock = deadline: fire the node timers */ }
//! }
//! // nodes call net.send(now, route, packet) at any time ≥ the last time seen
//! ```
//!
//! [`Network::next_wakeup`] with [`Network::poll_delivered`] works too, but also wakes the
//! caller for each hop inside the network.
//!
//! Cost per link hop: two deque operations in the link and one in-place heap re-time here, with
//! no allocation beyond amortized buffer growth.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;

use pcdn_core::time::Instant;

use crate::link::{Blackout, Change, Link, LinkChange, LinkConfig, LinkError, LinkStats, Packet};

/// Index of a link in its [`Network`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u32);

/// Index of a route in its [`Network`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteId(pub u32);

/// The payload a network's links carry: the caller's payload plus where it is on its route.
pub struct Routed<T> {
    route: u32,
    hop: u32,
    payload: T,
}

impl<T> Routed<T> {
    pub fn route(&self) -> RouteId {
        RouteId(self.route)
    }
    pub fn payload(&self) -> &T {
        &self.payload
    }
}

/// The seed of link number `index` in a simulation seeded with `seed`: a hash of both, so
/// adding a link never changes the random draws of the others.
pub fn link_seed(seed: u64, index: u64) -> u64 {
    let mut h = blake3::Hasher::new_derive_key("pcdn-sim 2025 link seed");
    h.update(&seed.to_le_bytes());
    h.update(&index.to_le_bytes());
    let bytes: [u8; 8] = h.finalize().as_bytes()[..8].try_into().expect("8 bytes");
    u64::from_le_bytes(bytes)
}

/// Links, routes over them, and the packets in between. See the [module docs](self).
pub struct Network<T> {
    seed: u64,
    links: Vec<Link<Routed<T>>>,
    /// All routes' links, back to back; route `r` is `hops[spans[r].0..spans[r].1]`.
    hops: Vec<u32>,
    spans: Vec<(u32, u32)>,
    /// (due time ns, link index), earliest first. Entries that do not match `scheduled` are
    /// stale and skipped, so re-timing a link is a push rather than a search.
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    scheduled: Vec<Option<u64>>,
    /// Packets at the end of their route, in time order.
    delivered: VecDeque<(Instant, RouteId, Packet<T>)>,
}

impl<T> Network<T> {
    /// An empty network whose links draw their randomness from `seed`.
    pub fn new(seed: u64) -> Network<T> {
        Network {
            seed,
            links: Vec::new(),
            hops: Vec::new(),
            spans: Vec::new(),
            heap: BinaryHeap::new(),
            scheduled: Vec::new(),
            delivered: VecDeque::new(),
        }
    }

    /// Adds a link seeded with [`link_seed`]`(seed, index)`.
    pub fn add_link(&mut self, config: &LinkConfig) -> Result<LinkId, LinkError> {
        let index = self.links.len();
        let link = Link::new(config, link_seed(self.seed, index as u64))?;
        self.links.push(link);
        self.scheduled.push(None);
        Ok(LinkId(u32::try_from(index).expect("fewer than 2^32 links")))
    }

    /// Adds a route through `links` in order. Panics if it is empty or names an unknown link.
    pub fn add_route(&mut self, links: &[LinkId]) -> RouteId {
        assert!(!links.is_empty(), "a route needs at least one link");
        let start = self.hops.len() as u32;
        for l in links {
            assert!((l.0 as usize) < self.links.len(), "unknown link {l:?}");
            self.hops.push(l.0);
        }
        self.spans.push((start, self.hops.len() as u32));
        RouteId(u32::try_from(self.spans.len() - 1).expect("fewer than 2^32 routes"))
    }

    /// The links of a route, in order.
    pub fn route(&self, route: RouteId) -> impl Iterator<Item = LinkId> + '_ {
        let (a, b) = self.spans[route.0 as usize];
        self.hops[a as usize..b as usize].iter().map(|&l| LinkId(l))
    }

    pub fn link(&self, id: LinkId) -> &Link<Routed<T>> {
        &self.links[id.0 as usize]
    }

    pub fn stats(&self, id: LinkId) -> &LinkStats {
        self.links[id.0 as usize].stats()
    }

    pub fn links(&self) -> impl Iterator<Item = (LinkId, &Link<Routed<T>>)> {
        self.links.iter().enumerate().map(|(i, l)| (LinkId(i as u32), l))
    }

    /// Puts a packet on the first link of `route` at `now`. Everything due before or at `now`
    /// happens first, so time never runs backwards inside a link.
    pub fn send(&mut self, now: Instant, route: RouteId, packet: Packet<T>) {
        self.advance(now);
        let first = self.hops[self.spans[route.0 as usize].0 as usize];
        let Packet { len, payload } = packet;
        let packet = Packet::new(
            len,
            Routed {
                route: route.0,
                hop: 0,
                payload,
            },
        );
        self.links[first as usize].enqueue(now, packet);
        // The heap's top stays live: an entry made stale here is replaced by an earlier one.
        self.reschedule(first);
    }

    /// The next packet that reached the end of its route by `now`: earliest first, ties in
    /// link-processing order (link index, then send order), so runs are reproducible.
    pub fn poll_delivered(&mut self, now: Instant) -> Option<(RouteId, Packet<T>)> {
        self.poll_delivered_at(now).map(|(_, r, p)| (r, p))
    }

    /// Like [`Network::poll_delivered`], with the time the packet arrived (≤ `now`).
    pub fn poll_delivered_at(&mut self, now: Instant) -> Option<(Instant, RouteId, Packet<T>)> {
        self.advance(now);
        match self.delivered.front() {
            Some((t, ..)) if *t <= now => self.delivered.pop_front(),
            _ => None,
        }
    }

    /// The earliest time something happens in the network: a delivery, or a packet moving
    /// between links. Never late, but after a link was re-timed later it may name a visit that
    /// finds nothing. `None` when no packet is anywhere.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let link = self.heap.peek().map(|Reverse((t, _))| Instant::from_nanos(*t));
        let delivered = self.delivered.front().map(|(t, ..)| *t);
        match (link, delivered) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs the network up to the next delivery, but not past `limit`: returns the arrival time
    /// of the earliest packet waiting at the end of its route, or `None` if none arrives by
    /// `limit`. Hops inside the network then cost the caller no wake-ups: a simulation loop
    /// passes its nodes' earliest timer as `limit` and drains `poll_delivered(t)` on `Some(t)`.
    pub fn next_delivery(&mut self, limit: Instant) -> Option<Instant> {
        self.run(limit.as_nanos(), true);
        self.delivered.front().map(|d| d.0)
    }

    /// Moves every packet up to `now` (poll and send do this themselves).
    #[inline]
    pub fn advance(&mut self, now: Instant) {
        // Every entry is at or after the heap's top, so one look tells whether anything is due:
        // a simulation loop polls and sends far more often than a link has work.
        if self.heap.peek().is_some_and(|Reverse((t, _))| *t <= now.as_nanos()) {
            self.run(now.as_nanos(), false);
        }
    }

    /// Processes link events up to `limit`; with `until_delivery`, stops after the events at
    /// the time of the first delivery, so the caller can react before anything later happens.
    fn run(&mut self, limit: u64, until_delivery: bool) {
        while let Some(&Reverse((t, l))) = self.heap.peek() {
            if t > limit {
                break;
            }
            if until_delivery && self.delivered.front().is_some_and(|d| t > d.0.as_nanos()) {
                break;
            }
            if self.scheduled[l as usize] != Some(t) {
                self.heap.pop();
                continue;
            }
            self.scheduled[l as usize] = None;
            let at = Instant::from_nanos(t);
            while let Some((exit, packet)) = self.links[l as usize].dequeue(at) {
                self.forward(exit, packet);
            }
            // Usually the entry just served is still on top: re-time it in place, one sift
            // instead of a pop and a push.
            let on_top = self.heap.peek().is_some_and(|top| top.0 == (t, l));
            if on_top && self.scheduled[l as usize].is_none() {
                let mut top = self.heap.peek_mut().expect("peeked");
                match self.links[l as usize].next_due() {
                    Some(d) => {
                        *top = Reverse((d.as_nanos(), l));
                        self.scheduled[l as usize] = Some(d.as_nanos());
                    }
                    None => {
                        PeekMut::pop(top);
                    }
                }
            } else {
                self.reschedule(l);
            }
        }
        self.drop_stale();
    }

    /// Applies a change to a link at `now`.
    pub fn change_link(&mut self, now: Instant, id: LinkId, change: Change) -> Result<(), LinkError> {
        self.advance(now);
        self.links[id.0 as usize].apply(now, change)?;
        self.reschedule(id.0);
        self.drop_stale();
        Ok(())
    }

    /// Schedules a change on a link.
    pub fn schedule_change(&mut self, id: LinkId, change: LinkChange) -> Result<(), LinkError> {
        self.links[id.0 as usize].schedule(change)?;
        self.reschedule(id.0);
        Ok(())
    }

    /// Adds an outage window to a link.
    pub fn add_blackout(&mut self, id: LinkId, blackout: Blackout) -> Result<(), LinkError> {
        self.links[id.0 as usize].add_blackout(blackout)?;
        self.reschedule(id.0);
        Ok(())
    }

    /// A packet left a link at `exit`: on to the next hop, or delivered.
    fn forward(&mut self, exit: Instant, mut packet: Packet<Routed<T>>) {
        let r = &mut packet.payload;
        let (start, end) = self.spans[r.route as usize];
        let next = start + r.hop + 1;
        if next < end {
            r.hop += 1;
            let l = self.hops[next as usize];
            self.links[l as usize].enqueue(exit, packet);
            self.reschedule(l);
        } else {
            let Packet { len, payload } = packet;
            self.delivered
                .push_back((exit, RouteId(payload.route), Packet::new(len, payload.payload)));
        }
    }

    /// Makes sure the heap holds the link's next due time. A later due time than the one
    /// scheduled keeps the earlier entry: the link is then visited once for nothing, which is
    /// cheaper than removing an entry from the heap.
    fn reschedule(&mut self, l: u32) {
        if let Some(due) = self.links[l as usize].next_due() {
            let due = due.as_nanos();
            let s = &mut self.scheduled[l as usize];
            if s.is_none_or(|s| due < s) {
                *s = Some(due);
                self.heap.push(Reverse((due, l)));
            }
        }
    }

    /// Keeps the heap's top live, so `next_wakeup` is exact.
    fn drop_stale(&mut self) {
        while let Some(&Reverse((t, l))) = self.heap.peek() {
            if self.scheduled[l as usize] == Some(t) {
                break;
            }
            self.heap.pop();
        }
    }
}

impl<T> fmt::Debug for Network<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Network")
            .field("seed", &self.seed)
            .field("links", &self.links)
            .field("routes", &self.spans.len())
            .field("delivered_waiting", &self.delivered.len())
            .field("next_wakeup", &self.next_wakeup())
            .finish()
    }
}
