//! BLEST, blocking estimation (Ferlin, Alay, Mehani, Boreli: "BLEST: Blocking
//! Estimation-based MPTCP Scheduler for Heterogeneous Networks", IFIP Networking 2016), with
//! λ handled as in Linux MPTCP's `net/mptcp/mptcp_blest.c` (multipath-tcp/mptcp, v0.95).
//!
//! minRTT's choice s is taken unless a faster path f (the lowest sRTT of all, now without
//! room) exists. Then, during one sRTT_s, f could ask for X = MSS · (cwnd_f + (r − 1)/2) · r
//! bytes with r = sRTT_s ÷ sRTT_f (a window growing by one packet per round). Until s answers,
//! the pick pins the in-order cursor, so f can request at most the pending bytes beyond the
//! pick, up to the reorder-buffer limit. If λ · X exceeds them, nothing is sent on s: f would
//! stall on a full reorder buffer (head-of-line blocking) before the slow packet arrived.
//!
//! λ corrects the estimate: +0.04 (at most 1.3) after a round in which f was seen blocked
//! (room in its window, nothing left to request below the limit), −0.01 (at least 1.0) after
//! a round without, starting at 1.2, updated at most once per minimum RTT of the slow path.
//! These are Linux's `lambda` 12, `max_lambda` 13, `min_lambda` 10 (tenths), `dyn_lambda_bad`
//! 40 and `dyn_lambda_good` 10 (thousandths); Linux raises λ on its receive-window-limited
//! opportunistic retransmissions, the same "fast flow blocked by the window" signal.

use super::{Pick, Scheduler, View};
use crate::time::{Duration, Instant};

/// λ in thousandths, as Linux keeps it.
const LAMBDA_START: u32 = 1200;
const LAMBDA_MIN: u32 = 1000;
const LAMBDA_MAX: u32 = 1300;
/// Raise after a round with head-of-line blocking: the estimate was too small.
const LAMBDA_BAD: u32 = 40;
/// Lower after a clean round, slowly, to use the slow path more again.
const LAMBDA_GOOD: u32 = 10;

#[derive(Debug)]
pub struct Blest {
    lambda_milli: u32,
    /// The fast path was held up by the reorder buffer since the last λ update.
    blocked: bool,
    last_update: Option<Instant>,
}

impl Default for Blest {
    fn default() -> Self {
        Blest {
            lambda_milli: LAMBDA_START,
            blocked: false,
            last_update: None,
        }
    }
}

impl Blest {
    /// The current scaling factor λ.
    pub fn lambda(&self) -> f64 {
        f64::from(self.lambda_milli) / 1000.0
    }

    fn update_lambda(&mut self, now: Instant, interval: Duration) {
        let Some(last) = self.last_update else {
            self.last_update = Some(now);
            return;
        };
        if now.saturating_duration_since(last) < interval {
            return;
        }
        self.lambda_milli = if self.blocked {
            self.lambda_milli + LAMBDA_BAD
        } else {
            self.lambda_milli.saturating_sub(LAMBDA_GOOD)
        }
        .clamp(LAMBDA_MIN, LAMBDA_MAX);
        self.blocked = false;
        self.last_update = Some(now);
    }
}

impl Scheduler for Blest {
    fn name(&self) -> &'static str {
        "blest"
    }
    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        let fast = view.fastest()?;
        if fast.can_send && view.pending.is_empty() && view.reorder_limit < view.task_end {
            self.blocked = true;
        }
        let seq = view.pending.first()?;
        let slow = view.fastest_sendable()?;
        if slow.id != fast.id {
            self.update_lambda(view.now, slow.min_rtt);
            let r = slow.srtt.as_secs_f64() / fast.srtt.as_secs_f64().max(1e-9);
            let mss = view.packet_size as f64;
            let fast_bytes = mss * (fast.cwnd as f64 + (r - 1.0) / 2.0) * r;
            let space = (view.pending.len() - 1) * view.packet_size;
            if self.lambda() * fast_bytes > space as f64 {
                return None;
            }
        }
        Some(Pick { path: slow.id, seq })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::PathId;
    use crate::scheduler::testing::{Fixture, path};

    /// A full 10 ms path with a window of 10 and a free 30 ms path: r = 3, so
    /// X = 1000 B · (10 + 1) · 3 = 33 000 B, 39 600 B at the starting λ = 1.2.
    fn fast_full_slow_free(pending: u64) -> Fixture {
        let mut f = Fixture::new(vec![path(0, 10, 10, 10), path(1, 30, 10, 0)], 0..pending);
        f.task_end = 10_000;
        f
    }

    #[test]
    fn the_fast_path_is_used_whenever_it_has_room() {
        let f = Fixture::new(vec![path(0, 10, 10, 0), path(1, 30, 10, 0)], 0..3);
        assert_eq!(
            Blest::default().next(&f.view()),
            Some(Pick {
                path: PathId(0),
                seq: 0
            })
        );
    }

    #[test]
    fn holds_back_when_the_reorder_buffer_is_nearly_full() {
        // 20 packets left below the limit: 19 000 B of space after the pick < 39 600 B.
        let f = fast_full_slow_free(20);
        assert_eq!(Blest::default().next(&f.view()), None);
    }

    #[test]
    fn sends_on_the_slow_path_when_the_buffer_is_empty() {
        // 100 packets below the limit: 99 000 B of space ≥ 39 600 B.
        let f = fast_full_slow_free(100);
        assert_eq!(
            Blest::default().next(&f.view()),
            Some(Pick {
                path: PathId(1),
                seq: 0
            })
        );
    }

    #[test]
    fn lambda_decides_the_margin() {
        // 37 pending: 36 000 B of space, between X = 33 000 and 1.2 · X = 39 600.
        let f = fast_full_slow_free(37);
        let mut s = Blest::default();
        assert_eq!(s.next(&f.view()), None);
        s.lambda_milli = LAMBDA_MIN;
        assert_eq!(s.next(&f.view()).map(|p| p.path), Some(PathId(1)));
    }

    #[test]
    fn lambda_grows_after_blocking_and_shrinks_without() {
        let mut s = Blest::default();
        let mut f = fast_full_slow_free(1000);
        let at = |ms: u64| Instant::ZERO + Duration::from_millis(ms);
        s.next(&f.view()); // the first slow-path decision starts the clock
        assert_eq!(s.lambda(), 1.2);

        // The fast path has room but the reorder limit (10) is reached: head-of-line blocking.
        let mut blocked = Fixture::new(vec![path(0, 10, 10, 5), path(1, 30, 10, 0)], 0..10);
        blocked.next_new = 10;
        blocked.task_end = 10_000;
        assert_eq!(s.next(&blocked.view()), None);
        // Not yet a slow RTT (30 ms) later: no update.
        f.now = at(20);
        s.next(&f.view());
        assert_eq!(s.lambda(), 1.2);
        f.now = at(30);
        s.next(&f.view());
        assert!((s.lambda() - 1.24).abs() < 1e-9);
        f.now = at(60);
        s.next(&f.view());
        assert!((s.lambda() - 1.23).abs() < 1e-9, "a clean round lowers it");

        for round in 3..40 {
            blocked.now = at(round * 30);
            s.next(&blocked.view());
            f.now = at(round * 30);
            s.next(&f.view());
        }
        assert_eq!(s.lambda(), 1.3, "capped above");
        for round in 40..100 {
            f.now = at(round * 30);
            s.next(&f.view());
        }
        assert_eq!(s.lambda(), 1.0, "capped below");
    }

    #[test]
    fn the_end_of_the_task_is_no_blocking() {
        let mut s = Blest::default();
        let f = fast_full_slow_free(1000);
        s.next(&f.view());
        // Nothing left to request because the task ends there, not because of the buffer.
        let mut done = Fixture::new(vec![path(0, 10, 10, 5), path(1, 30, 10, 0)], 0..10);
        done.next_new = 10;
        assert_eq!(s.next(&done.view()), None);
        assert!(!s.blocked);
    }
}
