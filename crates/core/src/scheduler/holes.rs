//! The pending queue's holes: a sorted set of sequence numbers with positional access.
//!
//! A scheduler asks for the `n`-th pending packet (Pscheduler's Queue-Direct-Access, Eq. 7's
//! offset) once per decision. In an ordered tree that is a walk of `n` entries, and weave's
//! later paths skip hundreds of packets for the sooner ones: on a loopback fetch the queue
//! held 630–830 holes, and the walk took 1.8 % of the samples against `Weave::next`'s 5.2 %
//! (`perf record` of `loopback_bench --scheduler weave`, docs/benchmarks.md). Kept in a
//! sorted ring instead, the `n`-th hole is an index and a hole's rank a binary search. The
//! holes a pick leaves are above every other (numbers it skipped) and the head is what the
//! soonest path takes, so inserts land at the back and removals mostly at the front, both
//! O(1); a lost request's number goes back into the middle, shifting the shorter side.

use std::collections::VecDeque;
use std::ops::RangeBounds;

/// Sequence numbers in ascending order, each at most once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holes(VecDeque<u64>);

impl Holes {
    pub fn new() -> Holes {
        Holes(VecDeque::new())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, seq: &u64) -> bool {
        self.0.binary_search(seq).is_ok()
    }

    /// Adds `seq`; false if it was there already.
    pub fn insert(&mut self, seq: u64) -> bool {
        if self.0.back().is_none_or(|&last| last < seq) {
            self.0.push_back(seq);
            return true;
        }
        match self.0.binary_search(&seq) {
            Ok(_) => false,
            Err(at) => {
                self.0.insert(at, seq);
                true
            }
        }
    }

    /// Takes `seq` out; false if it was not there.
    pub fn remove(&mut self, seq: &u64) -> bool {
        if self.0.front() == Some(seq) {
            self.0.pop_front();
            return true;
        }
        match self.0.binary_search(seq) {
            Ok(at) => {
                self.0.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    pub fn first(&self) -> Option<&u64> {
        self.0.front()
    }

    pub fn last(&self) -> Option<&u64> {
        self.0.back()
    }

    /// The `n`-th smallest (0 = the smallest).
    pub fn nth(&self, n: usize) -> Option<u64> {
        self.0.get(n).copied()
    }

    /// How many are smaller than `seq`.
    pub fn rank(&self, seq: u64) -> usize {
        self.0.partition_point(|&s| s < seq)
    }

    pub fn iter(&self) -> std::collections::vec_deque::Iter<'_, u64> {
        self.0.iter()
    }

    /// Those within `range`, ascending.
    pub fn range(&self, range: impl RangeBounds<u64>) -> std::collections::vec_deque::Iter<'_, u64> {
        use std::ops::Bound;
        let start = match range.start_bound() {
            Bound::Included(&s) => self.rank(s),
            Bound::Excluded(&s) => self.0.partition_point(|&x| x <= s),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => self.0.partition_point(|&x| x <= e),
            Bound::Excluded(&e) => self.rank(e),
            Bound::Unbounded => self.0.len(),
        };
        self.0.range(start..end.max(start))
    }
}

impl Extend<u64> for Holes {
    fn extend<I: IntoIterator<Item = u64>>(&mut self, seqs: I) {
        for seq in seqs {
            self.insert(seq);
        }
    }
}

impl FromIterator<u64> for Holes {
    fn from_iter<I: IntoIterator<Item = u64>>(seqs: I) -> Holes {
        let mut holes = Holes::new();
        holes.extend(seqs);
        holes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::testing::xorshift;
    use std::collections::BTreeSet;

    #[test]
    fn holes_answer_as_an_ordered_set_does_under_any_order_of_changes() {
        // A fixed pseudo-random mix of inserts (at the back, in the middle, repeated) and
        // removals (the front, the middle, absent numbers) against `BTreeSet`.
        let mut holes = Holes::new();
        let mut set = BTreeSet::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..20_000u64 {
            xorshift(&mut x);
            let seq = match x % 4 {
                0 => step,
                _ => x % 512,
            };
            if x % 3 == 0 {
                assert_eq!(holes.remove(&seq), set.remove(&seq), "remove {seq}");
            } else if x % 5 == 0 {
                let front = set.first().copied().unwrap_or(seq);
                assert_eq!(holes.remove(&front), set.remove(&front), "remove front {front}");
            } else {
                assert_eq!(holes.insert(seq), set.insert(seq), "insert {seq}");
            }
            assert_eq!(holes.len(), set.len());
            assert_eq!(holes.contains(&seq), set.contains(&seq));
            let n = (x >> 20) as usize % (set.len() + 1);
            assert_eq!(holes.nth(n), set.iter().nth(n).copied(), "nth {n}");
            assert_eq!(holes.rank(seq), set.range(..seq).count(), "rank {seq}");
            let (lo, hi) = (seq.saturating_sub(40), seq + 40);
            assert!(holes.range(lo..=hi).eq(set.range(lo..=hi)), "range {lo}..={hi}");
            assert!(holes.range(..lo).eq(set.range(..lo)));
            assert!(holes.range(hi..).eq(set.range(hi..)));
        }
        assert!(holes.iter().eq(set.iter()));
        assert_eq!(holes.first(), set.first());
        assert_eq!(holes.last(), set.last());
    }
}
