//! A path's reordering window (RACK, RFC 8985 §6.2): how long an unanswered request may trail
//! the answers to later ones before it counts as lost, grown by spurious declarations.

use super::{Path, PathStats};
use crate::time::{Duration, Instant};
use std::collections::VecDeque;

/// Settings of the reordering window; scenario files set any field under
/// `[client] reordering = { ... }` (docs/scenarios.md).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReorderConfig {
    /// Off: RFC 9002's fixed thresholds only (the packet threshold and 9/8 of the RTT), even
    /// on a path that reorders.
    pub adaptive: bool,
    /// One step of the window is the minimum RTT divided by this (RFC 8985 §6.2 step 4:
    /// `RACK.min_RTT / 4`).
    pub min_rtt_divisor: u32,
    /// Loss recoveries without a spurious declaration before the window falls back to one
    /// step (RFC 8985 §6.2 step 4: `RACK.reo_wnd_persist = 16`).
    pub persist_recoveries: u32,
    /// Most steps the window grows to; it never exceeds the smoothed RTT either (RFC 8985
    /// §6.2 step 4 caps it at SRTT; Linux keeps the step count in 8 bits, 255).
    pub max_steps: u32,
    /// Requests declared lost that the path remembers, to recognize a late answer to one (the
    /// DSACK signal of RFC 8985 §6.2 step 4). At 20 Mbit/s a round trip of 100 ms holds about
    /// 180 packets; 256 covers the declarations of one round trip even on such a path.
    pub remembered: usize,
}

impl Default for ReorderConfig {
    fn default() -> Self {
        ReorderConfig {
            adaptive: true,
            min_rtt_divisor: 4,
            persist_recoveries: 16,
            max_steps: 255,
            remembered: 256,
        }
    }
}

/// When a path declares a request lost: what schedulers read to predict it (the one place).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LossThresholds {
    /// A request is lost once this many requests sent after it were answered (RFC 9002
    /// §6.1.1). `None` once the path has reordered: then only time declares it, as RACK does
    /// (RFC 8985 §6.2 leaves out the DupThresh shortcut once reordering was seen).
    pub packets: Option<u64>,
    /// ... or once it has been out this long with a request sent after it answered:
    /// `max(sRTT, latest RTT) + reorder_window` (RFC 9002 §6.1.2, RFC 8985 §6.2 step 5).
    pub time: Duration,
    /// The part of `time` above the RTT: RFC 9002's eighth of the RTT until the path reorders,
    /// then RACK's adaptive window (never below that eighth).
    pub reorder_window: Duration,
    /// The path has answered a request after a later one (RFC 8985 §6.2 step 3), and the
    /// window adapts to it (`ReorderConfig::adaptive`).
    pub reordering: bool,
}

/// The time threshold's least value (RFC 9002 §6.1.2's `kGranularity`).
const MIN_TIME_THRESHOLD_NANOS: u64 = 1_000_000;

// `eighth_nanos` is `Duration`'s `rtt * num / den - rtt` only if `den` divides a second's
// nanoseconds: `Duration` divides the seconds and the nanoseconds apart, each rounded down.
const _: () = assert!(1_000_000_000 % super::TIME_THRESHOLD.1 == 0);

/// RFC 9002's eighth of an RTT of `rtt` nanoseconds, `rtt · num / den − rtt` for
/// `TIME_THRESHOLD` = (num, den), rounded down as `Duration`'s arithmetic rounds it.
#[inline]
fn eighth_nanos(rtt: u64) -> u64 {
    let (num, den) = (u64::from(super::TIME_THRESHOLD.0), u64::from(super::TIME_THRESHOLD.1));
    // rtt · num / den without overflow.
    rtt / den * num + rtt % den * num / den - rtt
}

/// The reordering state of one path. Every rule is RFC 8985 §6.2 read for the pull
/// protocol: a request is a segment, its answer an acknowledgment, pns the send order, and a
/// late answer to a request the path declared lost is the DSACK.
#[derive(Clone, Debug)]
pub(crate) struct Reordering {
    config: ReorderConfig,
    /// Reordering was seen (`RACK.reordering_seen`).
    seen: bool,
    /// The largest pn answered: pns are the send order, so it stands for `RACK.xmit_ts`.
    largest: Option<u64>,
    /// `RACK.reo_wnd_mult`.
    steps: u32,
    /// `RACK.reo_wnd_persist`.
    persist: u32,
    /// The window grew at most once a round trip: until a request sent from this pn on is
    /// answered (`RACK.dsack_round`).
    grown_until: Option<u64>,
    /// In loss recovery until a request sent from this pn on is answered (the recovery point).
    recovery_until: Option<u64>,
    /// (seq, when sent) of the latest requests declared lost by the thresholds, oldest first.
    declared: VecDeque<(u64, Instant)>,
    /// Spurious declarations seen (late answers to requests declared lost).
    spurious: u64,
}

impl Reordering {
    pub fn new(config: ReorderConfig) -> Reordering {
        Reordering {
            config,
            seen: false,
            largest: None,
            steps: 1,
            persist: 0,
            grown_until: None,
            recovery_until: None,
            declared: VecDeque::new(),
            spurious: 0,
        }
    }

    /// Spurious declarations so far.
    #[cfg(test)]
    pub fn spurious(&self) -> u64 {
        self.spurious
    }

    /// The window's current steps of `min RTT ÷ divisor`.
    #[cfg(test)]
    pub fn steps(&self) -> u32 {
        self.steps
    }

    /// The thresholds for a path whose RTT is `rtt` (max of smoothed and latest), with
    /// smoothed RTT `srtt` and minimum `min_rtt`, and a packet threshold of `packets`.
    pub fn thresholds(&self, packets: u64, rtt: Duration, srtt: Duration, min_rtt: Duration) -> LossThresholds {
        let eighth = Duration::from_nanos(eighth_nanos(crate::estimate::rtt::nanos(rtt)));
        let reordering = self.config.adaptive && self.seen;
        let window = if reordering {
            let rack = min_rtt / self.config.min_rtt_divisor.max(1) * self.steps;
            rack.min(srtt).max(eighth)
        } else {
            eighth
        };
        LossThresholds {
            packets: (!reordering).then_some(packets),
            time: (rtt + window).max(Duration::from_nanos(MIN_TIME_THRESHOLD_NANOS)),
            reorder_window: window,
            reordering,
        }
    }

    /// `thresholds(_, rtt, srtt, min_rtt).time`; a path computes it on every answer (its RTO
    /// is floored by it), so until the path reorders it takes nanoseconds, not `Duration`'s
    /// checked steps.
    #[inline]
    pub fn time_threshold(&self, rtt: Duration, srtt: Duration, min_rtt: Duration) -> Duration {
        if self.config.adaptive && self.seen {
            return self.thresholds(0, rtt, srtt, min_rtt).time;
        }
        let rtt = crate::estimate::rtt::nanos(rtt);
        Duration::from_nanos(rtt.saturating_add(eighth_nanos(rtt)).max(MIN_TIME_THRESHOLD_NANOS))
    }

    /// Request `pn` was answered. Returns whether the thresholds may have changed.
    pub fn on_answer(&mut self, pn: u64) -> bool {
        let mut changed = false;
        match self.largest {
            // RFC 8985 §6.2 step 3: answered after a request sent later. pns are the send
            // order, and a server sends a REQUEST's numbers in the listed order, which is the
            // order of their pns (docs/protocol.md §7.3): any lower pn answered after a higher
            // one was overtaken on the path, also within one REQUEST.
            Some(largest) if pn < largest => {
                if !self.seen {
                    self.seen = true;
                    changed = true;
                }
            }
            _ => self.largest = Some(pn),
        }
        if self.grown_until.is_some_and(|r| pn >= r) {
            self.grown_until = None;
        }
        if self.recovery_until.is_some_and(|r| pn >= r) {
            // The recovery ended (RFC 8985 §6.2 step 4: "exiting loss recovery").
            self.recovery_until = None;
            self.persist = self.persist.saturating_sub(1);
            if self.persist == 0 && self.steps != 1 {
                self.steps = 1;
                changed = true;
            }
        }
        changed
    }

    /// The thresholds declared the request for `seq`, sent at `sent`, lost; `next_pn` is the
    /// pn the path sends next.
    pub fn on_declared(&mut self, seq: u64, sent: Instant, next_pn: u64) {
        if self.declared.len() >= self.config.remembered {
            self.declared.pop_front();
        }
        if self.config.remembered > 0 {
            self.declared.push_back((seq, sent));
        }
        self.recovery_until.get_or_insert(next_pn);
    }

    /// Data for `seq` arrived on the path. `asked_at`: when the request in flight it answers
    /// was sent, if any. A request declared lost whose answer comes anyway was not lost: when
    /// the path holds no request for it, or asked again too recently for this to be the
    /// answer to the new request (less than `min_rtt` ago, RFC 8985 §6.2 step 2's test), it
    /// is the late answer to the one declared lost. Returns whether it was: then the window
    /// grows a step (at most once a round trip, RFC 8985 §6.2 step 4) and the answer is no
    /// RTT sample for the new request.
    pub fn on_data(
        &mut self,
        seq: u64,
        asked_at: Option<Instant>,
        now: Instant,
        min_rtt: Duration,
        next_pn: u64,
    ) -> bool {
        if !self.config.adaptive || self.declared.is_empty() {
            return false;
        }
        let Some(i) = self.declared.iter().rposition(|&(s, _)| s == seq) else {
            return false;
        };
        if asked_at.is_some_and(|at| now - at >= min_rtt) {
            // The answer to the new request (the first was lost after all).
            self.declared.remove(i);
            return false;
        }
        self.declared.remove(i);
        self.spurious += 1;
        self.seen = true;
        if self.config.adaptive && self.grown_until.is_none() {
            self.grown_until = Some(next_pn);
            self.steps = (self.steps + 1).min(self.config.max_steps.max(1));
            self.persist = self.config.persist_recoveries;
        }
        true
    }
}

impl Path {
    /// Loss detection on an answer or on the loss timer (RFC 9002 §6.1): a request still
    /// unanswered when one sent later was answered is lost once the packet threshold's
    /// number of requests sent after it were answered (§6.1.1, counted in requests), or once
    /// it has been out the time threshold (§6.1.2), both as `loss_thresholds` gives them.
    /// Without the time threshold a loss among a task's last requests, with too few sent
    /// after it to reach the packet threshold, waited for the RTO, and the timeout then
    /// collapsed the window too.
    ///
    /// On a path that reorders, answers overtake each other by more than three requests, and
    /// each declaration they cause is a copy asked again for nothing (6-10 % of the data on
    /// an LTE-like path with 5 ms of normal jitter under `weft`, which keeps its window on
    /// such losses and so keeps the path fast enough to reorder by many requests). Once an
    /// answer comes behind a later one, the path therefore counts time only, as RACK does
    /// (RFC 8985 §6.2): the RTT plus a reordering window that starts at a quarter of the
    /// minimum RTT, grows by that much at each late answer to a request it declared lost
    /// (once a round trip), and falls back after 16 loss recoveries without one.
    pub fn detect_losses(&mut self, ps: &mut PathStats, now: Instant, lost: &mut Vec<u64>) {
        let Some(largest) = self.largest_answered else { return };
        if self.base_pn >= largest {
            // Nothing sent before the largest answered is unsettled (the usual case): the
            // ledger is trimmed after every change, so its front is the oldest in flight.
            return;
        }
        let thresholds = self.loss_thresholds();
        let (threshold, delay) = (thresholds.packets.unwrap_or(u64::MAX), thresholds.time);
        let mut pn = self.base_pn;
        while pn < largest {
            let Some(entry) = self.entry_mut(pn) else { break };
            let (done, sent) = (entry.done, entry.sent);
            // Requests go out in pn order: once one is neither old enough nor far enough
            // behind, the later ones are not either.
            if !done && pn.saturating_add(threshold) > largest && sent + delay > now {
                break;
            }
            if let Some(seq) = self.settle_lost(ps, now, pn, false, true) {
                self.reorder.on_declared(seq, sent, self.next_pn);
                lost.push(seq);
            }
            pn += 1;
        }
        self.trim();
    }

    /// The packet and time thresholds that declare a request lost now, and the path's
    /// reordering state: the one place schedulers read them from (through `PathView`).
    pub fn loss_thresholds(&self) -> LossThresholds {
        let rtt = self.rtt.smoothed().max(self.rtt.latest());
        self.reorder
            .thresholds(self.packet_threshold, rtt, self.rtt.smoothed(), self.rtt.min())
    }

    /// The time threshold (RFC 9002 §6.1.2, RFC 8985 §6.2 step 5), at least `kGranularity`.
    pub(super) fn loss_delay(&self) -> Duration {
        self.loss_thresholds().time
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::testing::xorshift;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn before_reordering_the_thresholds_are_rfc_9002s() {
        let r = Reordering::new(ReorderConfig::default());
        let t = r.thresholds(3, ms(80), ms(80), ms(40));
        assert_eq!(t.packets, Some(3));
        assert_eq!(t.time, ms(90));
        assert!(!t.reordering);
    }

    #[test]
    fn the_eighth_in_nanoseconds_is_durations_arithmetic() {
        let (num, den) = super::super::TIME_THRESHOLD;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            xorshift(&mut x);
            // Up to about 18 minutes, and whole seconds plus a few nanoseconds.
            for rtt in [x >> 20, (x >> 54) * 1_000_000_000 + x % 16] {
                let d = Duration::from_nanos(rtt);
                assert_eq!(Duration::from_nanos(eighth_nanos(rtt)), d * num / den - d, "{rtt}");
            }
        }
        let mut r = Reordering::new(ReorderConfig::default());
        for rtt in [0, 7, 999_999, 1_000_000, 80_000_001, 3_000_000_007] {
            let t = |r: &Reordering| r.thresholds(3, Duration::from_nanos(rtt), ms(80), ms(40)).time;
            assert_eq!(r.time_threshold(Duration::from_nanos(rtt), ms(80), ms(40)), t(&r));
            r.on_answer(5);
            r.on_answer(4);
            assert_eq!(r.time_threshold(Duration::from_nanos(rtt), ms(80), ms(40)), t(&r));
            r = Reordering::new(ReorderConfig::default());
        }
    }

    #[test]
    fn reordering_drops_the_packet_threshold_and_opens_the_window() {
        let mut r = Reordering::new(ReorderConfig::default());
        assert!(!r.on_answer(5));
        assert!(r.on_answer(4), "an answer behind a later one is reordering");
        assert!(!r.on_answer(3), "seen once: nothing changes");
        let t = r.thresholds(3, ms(80), ms(80), ms(80));
        assert_eq!(t.packets, None);
        assert_eq!(t.reorder_window, ms(20), "min RTT / 4");
        assert_eq!(t.time, ms(100));
    }

    #[test]
    fn a_late_answer_grows_the_window_once_a_round_trip_up_to_srtt() {
        let mut r = Reordering::new(ReorderConfig::default());
        let t0 = Instant::from_nanos(0);
        r.on_declared(7, t0, 10);
        r.on_declared(8, t0, 10);
        assert!(r.on_data(7, None, t0 + ms(100), ms(80), 12));
        assert_eq!(r.steps(), 2);
        assert!(r.on_data(8, None, t0 + ms(100), ms(80), 12), "spurious, counted");
        assert_eq!(r.steps(), 2, "but the window grew once this round trip");
        assert_eq!(r.spurious(), 2);
        r.on_answer(12);
        r.on_declared(20, t0, 30);
        assert!(r.on_data(20, None, t0 + ms(200), ms(80), 30));
        assert_eq!(r.steps(), 3);
        assert_eq!(r.thresholds(3, ms(80), ms(80), ms(80)).reorder_window, ms(60));
        for _ in 0..3 {
            r.on_declared(40, t0, 50);
            r.on_data(40, None, t0 + ms(300), ms(80), 50);
            r.on_answer(50);
        }
        assert_eq!(
            r.thresholds(3, ms(80), ms(80), ms(80)).reorder_window,
            ms(80),
            "capped at sRTT"
        );
    }

    #[test]
    fn a_new_answer_to_a_request_asked_again_is_no_spurious_declaration() {
        let mut r = Reordering::new(ReorderConfig::default());
        let t0 = Instant::from_nanos(0);
        r.on_declared(7, t0, 10);
        // Asked again at 100 ms, answered at 190 ms: more than a minimum RTT, the new answer.
        assert!(!r.on_data(7, Some(t0 + ms(100)), t0 + ms(190), ms(80), 12));
        r.on_declared(8, t0, 12);
        // Answered 10 ms after being asked again: the first request's answer.
        assert!(r.on_data(8, Some(t0 + ms(100)), t0 + ms(110), ms(80), 12));
        assert!(!r.on_data(9, None, t0 + ms(110), ms(80), 12), "never declared");
    }

    #[test]
    fn the_window_decays_after_16_recoveries_without_reordering() {
        let mut r = Reordering::new(ReorderConfig::default());
        let t0 = Instant::from_nanos(0);
        r.on_declared(1, t0, 2);
        assert!(r.on_data(1, None, t0 + ms(50), ms(40), 2));
        r.on_answer(2);
        assert_eq!(r.steps(), 2);
        // The spurious declaration's own recovery ended with that answer: 15 more to go.
        let mut pn = 10;
        for i in 0..15 {
            assert_eq!(r.steps(), 2, "recovery {i}");
            r.on_declared(1000 + pn, t0, pn + 1);
            r.on_answer(pn + 1);
            pn += 10;
        }
        assert_eq!(r.steps(), 1);
    }
}
