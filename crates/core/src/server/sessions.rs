//! The server's session table: slots that keep their place while a session lives, the
//! sessions each source holds, and the choice of which session gives way when a source is
//! at its cap or the table is full.

use super::TOKEN_LEN;
use super::queue::SeqQueue;
use crate::time::{Duration, Instant};
use pcdn_wire as wire;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

pub(super) type SessionKey = (SocketAddr, u64);

#[derive(Debug)]
pub(super) struct Session {
    pub(super) key: SessionKey,
    pub(super) content: wire::ContentId,
    pub(super) length: u64,
    /// The token that opened the session; the same bytes again need no MAC check.
    pub(super) token: [u8; TOKEN_LEN],
    /// Requested sequence numbers with their request ids, in order of arrival.
    pub(super) queue: SeqQueue,
    /// The last REQUEST: a CANCEL or BYE does not keep a session alive.
    pub(super) last_request: Instant,
    /// In the round-robin ring of sessions with work.
    pub(super) active: bool,
}

/// Who a session belongs to, for the per-source cap and the fair share: an IPv4 address, or
/// an IPv6 /64, the smallest block a subscriber is commonly given (RFC 6177 §2), so one host
/// gains nothing from its other ports or addresses.
pub(super) fn source_of(addr: SocketAddr) -> IpAddr {
    match addr.ip() {
        IpAddr::V4(ip) => IpAddr::V4(ip),
        IpAddr::V6(ip) => match ip.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(ip) & !u128::from(u64::MAX)).into()),
        },
    }
}

/// The sessions, each in a slot that keeps its place while the session lives, so the ring
/// of sessions with work reaches its next one by index: one key hash per DATA packet was the
/// server's largest cost.
pub(super) struct Sessions {
    /// Keyed by a hasher seeded from the token key: fast, and, being secret, safe from peers
    /// who choose their connection ids to collide.
    index: HashMap<SessionKey, usize, ahash::RandomState>,
    slots: Vec<Option<Session>>,
    free: Vec<usize>,
    /// Sessions held per source ([`source_of`]).
    per_source: HashMap<IpAddr, usize, ahash::RandomState>,
}

/// Why no session could be made room for.
pub(super) struct NoRoom;

impl Sessions {
    pub(super) fn new(hasher: ahash::RandomState) -> Sessions {
        Sessions {
            index: HashMap::with_hasher(hasher.clone()),
            slots: Vec::new(),
            free: Vec::new(),
            per_source: HashMap::with_hasher(hasher),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The slot of `key`'s session.
    pub(super) fn find(&self, key: &SessionKey) -> Option<usize> {
        self.index.get(key).copied()
    }

    /// The slot of `key`'s session, which was in `slot` when it was last seen there.
    pub(super) fn find_from(&self, key: &SessionKey, slot: usize) -> Option<usize> {
        match &self.slots[slot] {
            Some(s) if s.key == *key => Some(slot),
            _ => self.find(key),
        }
    }

    pub(super) fn get(&self, slot: usize) -> &Session {
        self.slots[slot].as_ref().expect("a live slot")
    }

    pub(super) fn get_mut(&mut self, slot: usize) -> &mut Session {
        self.slots[slot].as_mut().expect("a live slot")
    }

    pub(super) fn insert(&mut self, session: Session) -> usize {
        let key = session.key;
        *self.per_source.entry(source_of(key.0)).or_default() += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(session);
                slot
            }
            None => {
                self.slots.push(Some(session));
                self.slots.len() - 1
            }
        };
        self.index.insert(key, slot);
        slot
    }

    pub(super) fn remove(&mut self, key: &SessionKey) -> bool {
        let Some(slot) = self.index.remove(key) else {
            return false;
        };
        self.slots[slot] = None;
        self.free.push(slot);
        let source = source_of(key.0);
        if let Some(held) = self.per_source.get_mut(&source) {
            *held -= 1;
            if *held == 0 {
                self.per_source.remove(&source);
            }
        }
        true
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Session> {
        self.slots.iter().flatten()
    }

    /// Keeps the sessions for which `keep` is true; returns how many were removed.
    pub(super) fn retain(&mut self, keep: impl Fn(&Session) -> bool) -> usize {
        let mut removed = 0;
        for slot in 0..self.slots.len() {
            if let Some(key) = self.slots[slot].as_ref().filter(|s| !keep(s)).map(|s| s.key) {
                self.remove(&key);
                removed += 1;
            }
        }
        removed
    }

    /// The session longest without a REQUEST among those `of` selects.
    fn stalest(&self, of: impl Fn(&Session) -> bool) -> Option<&Session> {
        self.iter().filter(|s| of(s)).min_by_key(|s| s.last_request)
    }

    /// The session that gives way to a new one for `newcomer`, if one must: `Ok(None)` when
    /// there is room, `Err(NoRoom)` when none may be evicted.
    ///
    /// - A source at `per_source` sessions replaces its own stalest one, if that has had no
    ///   REQUEST for `idle`; the cap keeps one host (any of its ports) from taking the table.
    /// - A full table (`max` sessions) evicts the stalest session anywhere if it has had no
    ///   REQUEST for `idle`; otherwise, the fair share: the stalest session of the source
    ///   holding the most, if that source holds at least two more than the newcomer (so two
    ///   sources never evict each other back and forth).
    ///
    /// A scan of the table, paid only when a session opens at a cap.
    pub(super) fn make_room(
        &self,
        now: Instant,
        newcomer: SocketAddr,
        max: usize,
        per_source: usize,
        idle: Duration,
    ) -> Result<Option<SessionKey>, NoRoom> {
        let source = source_of(newcomer);
        let held = self.per_source.get(&source).copied().unwrap_or(0);
        let idle_enough = |s: &&Session| now - s.last_request >= idle;
        if held >= per_source {
            return match self.stalest(|s| source_of(s.key.0) == source).filter(idle_enough) {
                Some(s) => Ok(Some(s.key)),
                None => Err(NoRoom),
            };
        }
        if self.len() < max {
            return Ok(None);
        }
        if let Some(s) = self.stalest(|_| true).filter(idle_enough) {
            return Ok(Some(s.key));
        }
        let top = self.per_source.iter().max_by_key(|&(_, &n)| n).map(|(&ip, &n)| (ip, n));
        match top {
            Some((ip, n)) if n >= held + 2 => self
                .stalest(|s| source_of(s.key.0) == ip)
                .map(|s| Some(s.key))
                .ok_or(NoRoom),
            _ => Err(NoRoom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_addresses_and_ipv6_slash_64s() {
        let at = |s: &str| source_of(s.parse().unwrap()).to_string();
        assert_eq!(at("192.0.2.7:1"), "192.0.2.7");
        assert_eq!(at("192.0.2.7:2"), "192.0.2.7");
        assert_eq!(at("[2001:db8:1:2:aaaa::1]:5"), "2001:db8:1:2::");
        assert_eq!(at("[::ffff:192.0.2.7]:5"), "192.0.2.7");
    }
}
