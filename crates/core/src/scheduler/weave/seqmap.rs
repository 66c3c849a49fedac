//! A map keyed by one path's sequence numbers in flight: a ring over their window, not a hash.

use super::FastMap;

/// Numbers further apart than this stay in the ring; one further below the others (a request
/// neither answered nor declared lost, such as a pick the core refused) goes to the map, so
/// that it cannot pin the ring's start while the window moves on. 16 Ki slots cover the
/// default reorder buffer (4 MB, 2 858 packets of 1400 bytes) several times over.
const SPAN: u64 = 1 << 14;

/// A map from sequence numbers to `T`, for the requests one path has in flight. Their numbers
/// lie in a window that moves up as the content is fetched, so a ring over the window finds
/// an entry by an index where weave's hash map of (path, number) hashed and probed on every
/// pick, answer and lookup (about 230 instructions a delivered packet in `pcdn bench core
/// --scheduler weave`). It holds what a `HashMap<u64, T>` would, and nothing iterates it.
#[derive(Debug)]
pub(super) struct SeqMap<T> {
    /// The value of number `base + i` is in `slots[(head + i) & mask]` for `i < len`; the
    /// window starts and ends with a value, and every slot outside it is empty. A `VecDeque`
    /// cost twice the instructions of this ring: its resizes and pops go through generic code.
    base: u64,
    head: usize,
    len: usize,
    /// A power of two long (or empty).
    slots: Vec<Option<T>>,
    /// The values of numbers the window does not hold.
    far: FastMap<u64, T>,
}

impl<T> Default for SeqMap<T> {
    fn default() -> Self {
        SeqMap {
            base: 0,
            head: 0,
            len: 0,
            slots: Vec::new(),
            far: FastMap::default(),
        }
    }
}

impl<T> SeqMap<T> {
    /// The slot of the window's `i`th number.
    #[inline]
    fn at(&self, i: usize) -> usize {
        (self.head + i) & (self.slots.len() - 1)
    }

    /// The slot of `seq`, if the window covers it.
    #[inline]
    fn slot(&self, seq: u64) -> Option<usize> {
        let i = seq.checked_sub(self.base)?;
        (i < self.len as u64).then(|| self.at(i as usize))
    }

    #[inline]
    pub(super) fn get(&self, seq: u64) -> Option<&T> {
        if let Some(value) = self.slot(seq).and_then(|k| self.slots[k].as_ref()) {
            return Some(value);
        }
        if self.far.is_empty() { None } else { self.far.get(&seq) }
    }

    /// Sets `seq`'s value (a value it had is dropped).
    #[inline]
    pub(super) fn insert(&mut self, seq: u64, value: T) {
        // Most picks: a number at or past the window's start, within its span.
        match seq.checked_sub(self.base) {
            Some(i) if i < SPAN && self.len > 0 && self.far.is_empty() => {
                let i = i as usize;
                if i >= self.len {
                    self.reserve(i + 1);
                    self.len = i + 1;
                }
                let k = self.at(i);
                self.slots[k] = Some(value);
            }
            _ => self.insert_elsewhere(seq, value),
        }
    }

    /// `insert` for a number before the window or past its span, into an empty window, or
    /// with numbers held in the map.
    #[cold]
    fn insert_elsewhere(&mut self, seq: u64, value: T) {
        if !self.far.is_empty() {
            self.far.remove(&seq);
        }
        if self.len == 0 {
            self.base = seq;
        }
        if seq < self.base {
            let ahead = self.base - seq;
            if ahead + self.len as u64 > SPAN {
                self.far.insert(seq, value);
                return;
            }
            let ahead = ahead as usize;
            self.reserve(self.len + ahead);
            self.head = (self.head + self.slots.len() - ahead) & (self.slots.len() - 1);
            self.len += ahead;
            self.base = seq;
        } else if seq - self.base >= SPAN {
            // The window moved on: what its start still holds goes to the map.
            while self.len > 0 && seq - self.base >= SPAN {
                let k = self.head;
                if let Some(old) = self.slots[k].take() {
                    self.far.insert(self.base, old);
                }
                self.pop_front();
            }
            self.trim_front();
            if self.len == 0 {
                self.base = seq;
            }
        }
        let i = (seq - self.base) as usize;
        if i >= self.len {
            self.reserve(i + 1);
            self.len = i + 1;
        }
        let k = self.at(i);
        self.slots[k] = Some(value);
    }

    /// Takes `seq`'s value out.
    #[inline]
    pub(super) fn remove(&mut self, seq: u64) -> Option<T> {
        if let Some(k) = self.slot(seq) {
            if let Some(value) = self.slots[k].take() {
                if k == self.head {
                    self.trim_front();
                } else if seq - self.base + 1 == self.len as u64 {
                    while self.len > 0 && self.slots[self.at(self.len - 1)].is_none() {
                        self.len -= 1;
                    }
                }
                return Some(value);
            }
        }
        if self.far.is_empty() {
            None
        } else {
            self.far.remove(&seq)
        }
    }

    /// Drops the window's first number (its slot empty).
    #[inline]
    fn pop_front(&mut self) {
        self.head = self.at(1);
        self.len -= 1;
        self.base += 1;
    }

    /// Drops the empty slots at the window's start.
    #[inline]
    fn trim_front(&mut self) {
        let mut n = 0;
        while n < self.len && self.slots[self.at(n)].is_none() {
            n += 1;
        }
        self.head = self.at(n);
        self.len -= n;
        self.base += n as u64;
    }

    /// Room for a window of `len` numbers.
    #[inline]
    fn reserve(&mut self, len: usize) {
        if len > self.slots.len() {
            self.grow(len);
        }
    }

    /// The slots, twice as many as a window of `len` numbers needs, in order.
    #[cold]
    fn grow(&mut self, len: usize) {
        let mut slots: Vec<Option<T>> = Vec::new();
        slots.resize_with((2 * len).next_power_of_two().max(64), || None);
        for (i, slot) in slots.iter_mut().enumerate().take(self.len) {
            let k = self.at(i);
            *slot = self.slots[k].take();
        }
        self.slots = slots;
        self.head = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::testing::xorshift;
    use std::collections::HashMap;

    /// Inserts, removes and looks up numbers as a path's requests would (mostly rising, some
    /// resends far behind, some never removed) and as a `HashMap` would.
    #[test]
    fn holds_what_a_hash_map_holds() {
        let mut map = SeqMap::default();
        let mut reference = HashMap::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = 0u64;
        for step in 0..200_000u64 {
            xorshift(&mut x);
            let seq = match x % 10 {
                // A new number, up to a few ahead.
                0..=4 => {
                    next += 1 + x / 10 % 4;
                    next
                }
                // A resend, up to far behind (beyond the ring's span).
                5 => next.saturating_sub(x / 10 % (3 * SPAN)),
                _ => next.saturating_sub(x / 10 % 64),
            };
            match x / 7 % 3 {
                0 => {
                    map.insert(seq, step);
                    reference.insert(seq, step);
                }
                // Every fifth number is never removed: it must not pin the window.
                1 if seq % 5 != 0 => assert_eq!(map.remove(seq), reference.remove(&seq), "{step}"),
                _ => assert_eq!(map.get(seq), reference.get(&seq), "{step}"),
            }
            assert!(map.len as u64 <= SPAN);
        }
        for seq in 0..=next {
            assert_eq!(map.get(seq), reference.get(&seq));
        }
    }
}
