//! XLINK (Zheng et al., ACM SIGCOMM 2021): minRTT plus QoE-driven re-injection.
//!
//! New data goes to the sendable path with the lowest sRTT. Once every new packet the
//! window allows has been requested, a path with room re-injects: it asks again for the
//! oldest packet still in flight on another path (lowest sequence number first), each packet
//! at most once. A double threshold on the remaining play time switches re-injection on
//! below `low` and off above `high`, so it costs little when the viewer is safe; with no
//! player attached, the reorder buffer stands in for the play buffer (the head of line is in
//! danger when the buffer is nearly full of bytes that cannot be delivered). First-video-frame
//! acceleration keeps re-injection on until the player shows its first frame (without a
//! player: until the first `FIRST_FRAME_PACKETS` packets are delivered). Re-injection goes in
//! order of urgency, the earliest play deadline (the lowest sequence number) first. Re-injected
//! requests are capped at a share of all requests (XLINK reports about 2% redundant traffic).

use super::{Pick, SchedEvent, Scheduler, View};
use crate::path::PathId;
use crate::time::{Duration, Instant};
use std::collections::HashSet;

/// Re-injection switches on below this much buffered play time...
const LOW: Duration = Duration::from_secs(2);
/// ...and off above this much.
const HIGH: Duration = Duration::from_secs(4);
/// Without a player: on when this share of the reorder buffer is in use, off below `OFF_FILL`.
const ON_FILL: f64 = 0.8;
const OFF_FILL: f64 = 0.5;
/// Packets of the first video frame (about 140 kB at 1400 bytes), accelerated regardless.
const FIRST_FRAME_PACKETS: u64 = 100;
/// Largest share of requests that may be re-injections, plus a small allowance so that
/// short downloads can still repair their tails.
const CAP_SHARE: f64 = 0.02;
const CAP_ALLOWANCE: u64 = 8;

#[derive(Debug, Default)]
pub struct Xlink {
    reinjecting: bool,
    /// Sequence number the first frame ends at, fixed when the first task starts.
    first_frame_end: Option<u64>,
    requested: u64,
    reinjected: u64,
    copied: HashSet<u64>,
}

impl Xlink {
    /// Applies the double threshold; returns whether re-injection is on.
    fn update_threshold(&mut self, view: &View<'_>) -> bool {
        let before_first_frame = match view.first_frame_shown() {
            Some(shown) => !shown,
            None => self.first_frame_end.is_some_and(|end| view.cursor < end),
        };
        if before_first_frame {
            return true;
        }
        match view.player_buffer {
            Some(buffer) if buffer < LOW => self.reinjecting = true,
            Some(buffer) if buffer > HIGH => self.reinjecting = false,
            Some(_) => {}
            None => {
                let window = view.reorder_limit.saturating_sub(view.cursor).max(1) as f64;
                let fill = view.pending.next_new.saturating_sub(view.cursor) as f64 / window;
                if fill >= ON_FILL {
                    self.reinjecting = true;
                } else if fill <= OFF_FILL {
                    self.reinjecting = false;
                }
            }
        }
        self.reinjecting
    }

    fn under_cap(&self) -> bool {
        self.reinjected < CAP_ALLOWANCE + (self.requested as f64 * CAP_SHARE) as u64
    }

    /// The oldest packet in flight on another path only, not yet re-injected.
    fn candidate(&self, view: &View<'_>, path: PathId) -> Option<u64> {
        let mut found = None;
        view.scan_in_flight(&mut |seq, _| {
            if !self.copied.contains(&seq) && !view.in_flight_on(seq, path) {
                found = Some(seq);
                return false;
            }
            true
        });
        found
    }
}

impl Scheduler for Xlink {
    fn name(&self) -> &'static str {
        "xlink"
    }

    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        let fastest = view.sendable().min_by_key(|p| (p.srtt, p.id))?;
        if let Some(seq) = view.pending.first() {
            self.requested += 1;
            return Some(Pick { path: fastest.id, seq });
        }
        if !self.update_threshold(view) || !self.under_cap() {
            return None;
        }
        let mut paths: Vec<_> = view.sendable().collect();
        paths.sort_by_key(|p| (p.srtt, p.id));
        for p in paths {
            if let Some(seq) = self.candidate(view, p.id) {
                self.copied.insert(seq);
                self.requested += 1;
                self.reinjected += 1;
                return Some(Pick { path: p.id, seq });
            }
        }
        None
    }

    fn on_event(&mut self, _now: Instant, event: &SchedEvent) {
        match *event {
            SchedEvent::TaskStarted {
                index: 0, start_seq, ..
            } => {
                self.first_frame_end = Some(start_seq + FIRST_FRAME_PACKETS);
            }
            SchedEvent::Arrived { seq, .. } => {
                self.copied.remove(&seq);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Fixture, path};
    use super::*;

    #[test]
    fn new_data_goes_to_the_lowest_rtt_path() {
        let mut f = Fixture::new(vec![path(0, 80, 4, 0), path(1, 20, 4, 0)], 0..100);
        let mut x = Xlink::default();
        let pick = x.next(&f.view()).unwrap();
        assert_eq!(
            pick,
            Pick {
                path: PathId(1),
                seq: 0
            }
        );
        f.apply(pick);
    }

    #[test]
    fn reinjects_the_oldest_in_flight_packet_during_the_first_frame() {
        // Everything requested: 0..4 in flight on the slow path, the fast path has room.
        let mut f = Fixture::new(vec![path(0, 80, 4, 0), path(1, 20, 4, 4)], 0..4);
        for seq in 0..4 {
            f.apply(Pick { path: PathId(0), seq });
        }
        f.paths[1].in_flight = 0;
        f.paths[1].can_send = true;
        let mut x = Xlink::default();
        x.on_event(
            Instant::ZERO,
            &SchedEvent::TaskStarted {
                index: 0,
                start_seq: 0,
                end_seq: 4,
            },
        );
        let pick = x.next(&f.view()).unwrap();
        assert_eq!(
            pick,
            Pick {
                path: PathId(1),
                seq: 0
            },
            "the oldest packet, on the other path"
        );
        f.apply(pick);
        let pick = x.next(&f.view()).unwrap();
        assert_eq!(pick.seq, 1, "each packet is re-injected once");
    }

    /// Packets 0 and 1 in flight on the slow path, the fast one with room, and a player at
    /// 8 Mbit/s (1000-byte packets: 1 ms each) with `buffered_ms` of video in order.
    fn with_player(startup_s: u64, buffered_ms: u64) -> Fixture {
        let mut f = Fixture::new(vec![path(0, 80, 4, 0), path(1, 20, 4, 0)], 0..2);
        f.apply(Pick {
            path: PathId(0),
            seq: 0,
        });
        f.apply(Pick {
            path: PathId(0),
            seq: 1,
        });
        let mut spec = crate::player::VideoSpec::new(8_000_000, Duration::from_secs(60));
        spec.startup = Duration::from_secs(startup_s);
        let mut player = crate::player::Player::new(spec, Instant::ZERO).unwrap();
        player.on_delivered(Instant::ZERO, buffered_ms * 1000);
        f.player = Some(player);
        f
    }

    #[test]
    fn first_frame_acceleration_follows_the_player() {
        // 4.5 s buffered, above the high threshold, but a 5 s start-up: no first frame yet.
        let f = with_player(5, 4500);
        assert_eq!(f.view().first_frame_shown(), Some(false));
        let mut x = Xlink {
            first_frame_end: Some(0),
            ..Xlink::default()
        };
        assert_eq!(
            x.next(&f.view()).map(|p| p.seq),
            Some(0),
            "accelerated until the first frame"
        );
        // Shown, with the same buffer: safe, although the packet count of the heuristic
        // (cursor 0 < 100) would still call it the first frame.
        let f = with_player(1, 4500);
        let mut x = Xlink {
            first_frame_end: Some(FIRST_FRAME_PACKETS),
            ..Xlink::default()
        };
        assert_eq!(x.next(&f.view()), None);
    }

    #[test]
    fn the_double_threshold_holds_back_when_the_viewer_is_safe() {
        let mut f = Fixture::new(vec![path(0, 80, 4, 0), path(1, 20, 4, 0)], 0..2);
        f.apply(Pick {
            path: PathId(0),
            seq: 0,
        });
        f.apply(Pick {
            path: PathId(0),
            seq: 1,
        });
        // Past the first frame, with a comfortable play buffer: no re-injection.
        let mut x = Xlink {
            first_frame_end: Some(0),
            ..Xlink::default()
        };
        let mut view = f.view();
        view.player_buffer = Some(Duration::from_secs(10));
        assert_eq!(x.next(&view), None);
        // The buffer runs low: on.
        view.player_buffer = Some(Duration::from_secs(1));
        assert!(x.next(&view).is_some());
        // Between the thresholds it stays on...
        view.player_buffer = Some(Duration::from_secs(3));
        assert!(x.update_threshold(&view));
        // ...and goes off only above the high one.
        view.player_buffer = Some(Duration::from_secs(5));
        assert!(!x.update_threshold(&view));
    }
}
