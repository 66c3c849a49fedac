//! Replay keys remembered in memory until they expire: the SQLite store's nonce set (one
//! tracker process owns a SQLite store, so memory is shared by every request it sees).

use std::collections::HashMap;
use std::collections::hash_map::Entry;

/// Size below which the set is never swept: a sweep then costs less than a few requests.
const MIN_SWEEP_SIZE: usize = 1024;

/// Replay keys and when each may be forgotten (Unix ms).
#[derive(Debug)]
pub(crate) struct NonceSet {
    seen: HashMap<[u8; 32], u64>,
    /// Expired keys are swept when the set reaches this size; then it becomes twice what is
    /// left, so sweeping costs O(1) per insertion amortised.
    sweep_at: usize,
}

impl Default for NonceSet {
    fn default() -> NonceSet {
        NonceSet {
            seen: HashMap::new(),
            sweep_at: MIN_SWEEP_SIZE,
        }
    }
}

impl NonceSet {
    /// Records `key` until `forget_at_ms`; false if it is already recorded and not yet expired.
    pub fn insert(&mut self, key: [u8; 32], forget_at_ms: u64, now_ms: u64) -> bool {
        if self.seen.len() >= self.sweep_at {
            self.seen.retain(|_, forget_at| *forget_at > now_ms);
            self.sweep_at = (self.seen.len() * 2).max(MIN_SWEEP_SIZE);
        }
        match self.seen.entry(key) {
            Entry::Occupied(entry) if *entry.get() > now_ms => false,
            Entry::Occupied(mut entry) => {
                entry.insert(forget_at_ms);
                true
            }
            Entry::Vacant(entry) => {
                entry.insert(forget_at_ms);
                true
            }
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_are_refused_until_forgotten_and_expired_keys_are_swept() {
        let mut set = NonceSet::default();
        assert!(set.insert([1; 32], 100, 0));
        assert!(!set.insert([1; 32], 100, 99));
        assert!(set.insert([1; 32], 300, 100));
        for i in 0..MIN_SWEEP_SIZE as u32 - 1 {
            let mut key = [0; 32];
            key[..4].copy_from_slice(&i.to_be_bytes());
            key[4] = 9;
            assert!(set.insert(key, 200, 150));
        }
        assert_eq!(set.len(), MIN_SWEEP_SIZE);
        assert!(set.insert([2; 32], 400, 250));
        assert_eq!(set.len(), 2, "expired keys are swept");
        assert!(!set.insert([1; 32], 500, 250));
    }
}
