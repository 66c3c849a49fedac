//! The rate stage: when the packet at the head of the queue has been fully serialized, at a fixed
//! bit rate (ns-3's point-to-point device) or by a Mahimahi delivery-opportunity trace.
//!
//! Times are u64 nanoseconds; sizes are bits for the fixed rate and bytes for traces.

use super::config::{OPPORTUNITY_BYTES, Rate, Trace};

const NS_PER_S: u128 = 1_000_000_000;
const NS_PER_MS: u64 = 1_000_000;

/// Where a trace stands: the next unused opportunity and what is left of the last used one.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Cursor {
    /// Start of the current repetition of the trace, ns.
    base: u64,
    /// Index of the next unused opportunity in the trace.
    idx: usize,
    /// Time of the most recently used opportunity, ns.
    opp_time: u64,
    /// Bytes of that opportunity not used yet.
    opp_left: u32,
}

impl Cursor {
    fn starting_at(t: u64) -> Cursor {
        Cursor {
            base: t,
            ..Cursor::default()
        }
    }

    fn next_time(&self, trace: &Trace) -> u64 {
        self.base + trace.offsets_ms()[self.idx] * NS_PER_MS
    }

    fn advance(&mut self, trace: &Trace) {
        self.idx += 1;
        if self.idx == trace.offsets_ms().len() {
            // Mahimahi's wraparound: the next repetition starts at base + last timestamp.
            self.idx = 0;
            self.base += trace.period_ns();
        }
    }

    /// Burns, unused, every opportunity at or before `t`. Mahimahi does the same: it uses up
    /// the opportunities due by `now` before it accepts a packet arriving at `now`, so a
    /// packet can only ride an opportunity strictly after its arrival.
    fn skip_through(&mut self, trace: &Trace, t: u64) {
        if self.next_time(trace) > t {
            return;
        }
        let period = trace.period_ns();
        if t >= self.base + period {
            // Jump whole idle repetitions at once so a long idle link costs O(log n).
            self.base += (t - self.base) / period * period;
            self.idx = 0;
        }
        let ms = trace.offsets_ms();
        let base = self.base;
        let i = self.idx + ms[self.idx..].partition_point(|&m| base + m * NS_PER_MS <= t);
        if i == ms.len() {
            self.idx = 0;
            self.base += period;
        } else {
            self.idx = i;
        }
    }
}

/// Outcome of serving bytes from a trace.
enum Served {
    /// The last byte went out at this opportunity (ns).
    Done(u64),
    /// The limit came first; this many bytes are still unsent.
    Left(u64),
}

/// Runs `bytes` of a packet that arrived at `arrival` through the trace, using only
/// opportunities before `limit`. Several small packets share one opportunity, and a packet
/// may span several, exactly as Mahimahi's `LinkQueue::rationalize` does.
fn serve(trace: &Trace, cur: &mut Cursor, arrival: u64, mut bytes: u64, limit: Option<u64>) -> Served {
    // Leftover bytes of the opportunity that finished the previous packet carry this one too,
    // provided it was already queued when that opportunity came.
    if cur.opp_left > 0 && arrival < cur.opp_time && limit.is_none_or(|l| cur.opp_time < l) {
        let take = u64::from(cur.opp_left).min(bytes);
        cur.opp_left -= take as u32;
        bytes -= take;
        if bytes == 0 {
            return Served::Done(cur.opp_time);
        }
    }
    cur.skip_through(trace, arrival);
    loop {
        let t = cur.next_time(trace);
        if limit.is_some_and(|l| t >= l) {
            return Served::Left(bytes);
        }
        cur.advance(trace);
        cur.opp_time = t;
        let take = u64::from(OPPORTUNITY_BYTES).min(bytes);
        cur.opp_left = OPPORTUNITY_BYTES - take as u32;
        bytes -= take;
        if bytes == 0 {
            return Served::Done(t);
        }
    }
}

/// What the rate stage remembers about the packet it is serving, to finish or re-rate it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HeadService {
    /// When the packet entered the queue, ns (decides which trace opportunities it may use).
    pub arrival: u64,
    /// Bits still to send as of the start of service or the last rate change.
    pub bits: u64,
    /// The trace cursor at that moment, to replay the service up to a rate change.
    cursor: Cursor,
    /// When the last bit leaves, ns; `None` while the link is stalled at rate 0.
    pub done: Option<u64>,
}

pub(crate) enum Server {
    Fixed(Fixed),
    Trace { trace: Trace, cursor: Cursor },
}

/// A constant-rate server. Done times are computed from the start of the busy period, not
/// chained packet to packet, so rounding to nanoseconds never accumulates: the k-th packet of
/// a busy period leaves at epoch + ⌈(bits of packets 1..k) × 10^9 / bps⌉ exactly.
pub(crate) struct Fixed {
    bps: u64,
    /// Start of the current busy period (or of the last rate change), ns.
    epoch: u64,
    /// Bits of packets finished since `epoch`.
    epoch_bits: u64,
    /// `epoch_bits` × 10^9 = `acc_q` × bps + `acc_r`, kept incrementally.
    acc_q: u64,
    acc_r: u64,
    /// The same split for the last packet size seen: links carry runs of equal-sized packets,
    /// and a 64-bit division costs more than the rest of a packet's rate stage.
    size_bits: u64,
    size_q: u64,
    size_r: u64,
}

impl Fixed {
    fn new(bps: u64, epoch: u64) -> Fixed {
        Fixed {
            bps,
            epoch,
            epoch_bits: 0,
            acc_q: 0,
            acc_r: 0,
            size_bits: 0,
            size_q: 0,
            size_r: 0,
        }
    }

    /// `bits` × 10^9 as (quotient, remainder) of division by bps (which is non-zero).
    fn split(&mut self, bits: u64) -> (u64, u64) {
        if bits != self.size_bits {
            let n = u128::from(bits) * NS_PER_S;
            let bps = u128::from(self.bps);
            self.size_bits = bits;
            self.size_q = u64::try_from(n / bps).unwrap_or(u64::MAX);
            self.size_r = (n % bps) as u64;
        }
        (self.size_q, self.size_r)
    }

    /// (acc + bits) as (quotient, remainder).
    fn add(&mut self, bits: u64) -> (u64, u64) {
        let (q, r) = self.split(bits);
        let (mut q, mut r) = (self.acc_q.saturating_add(q), self.acc_r + r);
        if r >= self.bps {
            q = q.saturating_add(1);
            r -= self.bps;
        }
        (q, r)
    }

    fn begin(&mut self, start: u64, bits: u64, back_to_back: bool) -> Option<u64> {
        if !back_to_back {
            self.epoch = start;
            self.epoch_bits = 0;
            self.acc_q = 0;
            self.acc_r = 0;
        }
        if self.bps == 0 {
            return None;
        }
        let (q, r) = self.add(bits);
        Some(self.epoch.saturating_add(q).saturating_add(u64::from(r > 0)))
    }

    fn finish(&mut self, bits: u64) {
        self.epoch_bits += bits;
        if self.bps != 0 {
            (self.acc_q, self.acc_r) = self.add(bits);
        }
    }

    fn remaining_bits(&self, head: &HeadService, now: u64) -> u64 {
        if self.bps == 0 {
            return head.bits;
        }
        let sent = u128::from(now.saturating_sub(self.epoch)) * u128::from(self.bps) / NS_PER_S;
        let sent = u64::try_from(sent).unwrap_or(u64::MAX);
        head.bits - sent.saturating_sub(self.epoch_bits).min(head.bits)
    }
}

impl Server {
    /// A server for `rate`, starting at `now` (a trace's time zero). `rate` must be resolved.
    pub fn new(rate: &Rate, now: u64) -> Server {
        match rate {
            Rate::Fixed(bps) => Server::Fixed(Fixed::new(*bps, now)),
            Rate::Trace(trace) => Server::Trace {
                trace: trace.clone(),
                cursor: Cursor::starting_at(now),
            },
            Rate::TraceFile(p) => unreachable!("trace file {} not resolved", p.display()),
        }
    }

    /// Starts serving a packet of `bits` that arrived at `arrival`, at `start` =
    /// max(arrival, previous done). `back_to_back` says the link did not idle in between.
    pub fn begin(&mut self, arrival: u64, start: u64, bits: u64, back_to_back: bool) -> HeadService {
        let mut head = HeadService {
            arrival,
            bits,
            cursor: Cursor::default(),
            done: None,
        };
        match self {
            Server::Fixed(f) => head.done = f.begin(start, bits, back_to_back),
            Server::Trace { trace, cursor } => {
                head.cursor = *cursor;
                head.done = Some(if bits == 0 {
                    start
                } else {
                    match serve(trace, cursor, arrival, bits.div_ceil(8), None) {
                        Served::Done(t) => t,
                        Served::Left(_) => unreachable!("no limit"),
                    }
                });
            }
        }
        head
    }

    /// The head packet has left.
    pub fn finish(&mut self, head: &HeadService) {
        if let Server::Fixed(f) = self {
            f.finish(head.bits);
        }
    }

    /// Bits of the head packet still unsent at `now` (≤ its done time).
    pub fn remaining_bits(&self, head: &HeadService, now: u64) -> u64 {
        match self {
            Server::Fixed(f) => f.remaining_bits(head, now),
            Server::Trace { trace, .. } => {
                let mut cursor = head.cursor;
                match serve(trace, &mut cursor, head.arrival, head.bits.div_ceil(8), Some(now)) {
                    Served::Done(_) => 0,
                    Served::Left(bytes) => (bytes * 8).min(head.bits),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = NS_PER_MS;

    fn trace(ms: &[u64]) -> Server {
        Server::new(&Rate::Trace(Trace::new(ms.to_vec()).unwrap()), 0)
    }

    #[test]
    fn fixed_rate_is_exact_over_many_packets() {
        // 7 Mbit/s does not divide 12000 bits into whole nanoseconds.
        let mut s = Server::new(&Rate::Fixed(7_000_000), 0);
        let mut h = s.begin(0, 0, 12_000, false);
        for _ in 1..7_000 {
            s.finish(&h);
            h = s.begin(0, h.done.unwrap(), 12_000, true);
        }
        // 7000 packets × 12000 bits at 7 Mbit/s = exactly 12 s.
        assert_eq!(h.done, Some(12_000 * MS));
    }

    #[test]
    fn fixed_rate_with_mixed_sizes_matches_the_closed_form() {
        let bps = 3_333_333;
        let mut s = Server::new(&Rate::Fixed(bps), 5);
        let sizes = [12_000, 400, 400, 12_000, 1, 96_000, 400];
        let mut total = 0u128;
        let mut prev = 5;
        for (i, &bits) in sizes.iter().enumerate() {
            let h = s.begin(0, prev, bits, i > 0);
            total += u128::from(bits);
            let want = 5 + (total * NS_PER_S).div_ceil(u128::from(bps)) as u64;
            assert_eq!(h.done, Some(want), "packet {i}");
            s.finish(&h);
            prev = want;
        }
    }

    #[test]
    fn trace_opportunities_repeat_with_the_period() {
        let mut s = trace(&[2, 5]);
        let mut done = Vec::new();
        for _ in 0..5 {
            let h = s.begin(0, 0, 1500 * 8, true);
            done.push(h.done.unwrap() / MS);
        }
        assert_eq!(done, [2, 5, 7, 10, 12]);
    }

    #[test]
    fn small_packets_share_and_big_ones_span_opportunities() {
        let mut s = trace(&[1]);
        let d: Vec<u64> = [500, 500, 500, 500, 2000]
            .iter()
            .map(|&b| s.begin(0, 0, b * 8, true).done.unwrap() / MS)
            .collect();
        // Three 500 B fit opportunity 1 ms; the 4th uses 2 ms, leaving 1000 B that the 2000 B
        // packet takes before finishing in the 3 ms opportunity.
        assert_eq!(d, [1, 1, 1, 2, 3]);
    }

    #[test]
    fn opportunities_at_or_before_arrival_are_burned() {
        let mut s = trace(&[1]);
        // Arriving exactly at an opportunity misses it (Mahimahi burns it first).
        assert_eq!(s.begin(5 * MS, 5 * MS, 8, false).done, Some(6 * MS));
        // Leftover of the 6 ms opportunity is not for a packet arriving at 6 ms.
        assert_eq!(s.begin(6 * MS, 6 * MS, 8, false).done, Some(7 * MS));
        // A long idle gap is skipped in one jump.
        let t = 1_000_000_007 * MS + 3;
        assert_eq!(s.begin(t, t, 8, false).done, Some(1_000_000_008 * MS));
    }

    #[test]
    fn remaining_bits_at_a_rate_change() {
        let mut s = Server::new(&Rate::Fixed(10_000_000), 0);
        let h = s.begin(0, 0, 12_000, false);
        assert_eq!(h.done, Some(1_200_000));
        assert_eq!(s.remaining_bits(&h, 600_000), 6_000);
        let mut t = trace(&[1]);
        let h = t.begin(0, 0, 3000 * 8, false);
        assert_eq!(h.done, Some(2 * MS));
        assert_eq!(t.remaining_bits(&h, MS), 3000 * 8);
        assert_eq!(t.remaining_bits(&h, MS + 1), 1500 * 8);
    }
}
