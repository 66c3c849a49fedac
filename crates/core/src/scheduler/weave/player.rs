//! Copies for the player: the first frame's packets at risk.
//!
//! **The first frame**: while the player waits for it, a path with nothing of the frame
//! left to ask for (its pick lies past the frame's last packet) asks again for a frame
//! packet in flight only on a path answering later, if the original is at risk: its path
//! has given fewer than 100 answers (a loss rate under 1 % cannot show in fewer), loses
//! 1 % or more, would answer after the copy lands, or answers later than the copier even
//! without a queue (its losses are unmeasured, not ruled out: 0.1 % shows as none in the
//! ~330 answers of the player scenario's 30 ms edge before its frame is asked for). Every
//! packet of the frame counts at the frame's time, and a lost one there costs the holder's
//! loss detection and a resend; a copy costs the copier one packet time past the frame.
//! XLINK (Zheng et al., ACM SIGCOMM 2021) re-injects the whole first frame; copying what a lossless path of equal
//! RTT holds only wastes (Kondo's A: 0.06 s later completion). Which packet first: an
//! overdue original, the lowest (the likeliest lost; its loss shows only once later
//! answers pass it), then the latest modelled answer, the packet the frame would wait for
//! last. Lowest first, the copies went to the jittery edge's early packets, answered in
//! time, while its last ones came 6–10 ms after the frame's other packets (the player
//! scenario under `weft` at 16 Mbit/s, seeds 4, 10, 12). MPRD Fig. 8(a), 4 MB, 1 Mbit/s:
//! the 10 %-loss edge gets about 15 of the frame's 90 packets before any loss is measured
//! there, and one was lost in 3 of 5 seeds (frame at 0.159–0.175 s, MPRD 0.1525); copied,
//! 0.140 s. Only the soonest path copies: it lands a copy first, even after asking for what
//! of the frame it has left (less than a later path's Eq. 7 offset) or waiting for its
//! window (the player scenario, 16 Mbit/s, seed 12: a frame packet lost on the jittery edge
//! was copied on the 30 ms edge, whose queue answered in 44 ms, where the CDN's did in 27).
//! The player scenario, 20 seeds: the first frame 0.5–2.5 ms sooner in five of six cells
//! (`weft` at 16 Mbit/s 0.4720 → 0.4695 s, Pscheduler-nr 0.4697), 0.2 ms later in one.

use super::{PerCall, Weave, sole_holder, unqueued_answer};
use crate::scheduler::View;

impl Weave {
    /// While the player waits for its first frame (packets below `end`), one of its packets in
    /// flight only on a path answering later than `i`, not copied before, whose original is at
    /// risk: its path loses `lossy_path` or more, has given fewer answers than it takes to tell
    /// a loss rate that low from zero, answers later than the copy would land (the model's
    /// answer, with the path's error terms), or answers later than `i` even without a queue
    /// (a loss there is unmeasured, not ruled out, and costs the frame a loss detection and a
    /// resend). An original overdue comes first, the lowest: it is the likeliest lost, and
    /// its loss is found only once later answers pass it. Then the latest modelled answer:
    /// the packet the frame would wait for last.
    pub(super) fn first_frame_copy(&self, view: &View<'_>, call: &PerCall, i: usize, end: u64) -> Option<u64> {
        let now = view.now.since_epoch().as_secs_f64();
        let copier = unqueued_answer(&view.paths[i], self.cfg.max_loss);
        // (modelled answer, seq) of the candidate so far.
        let mut found: Option<(f64, u64)> = None;
        view.scan_in_flight(&mut |seq, copies| {
            if seq >= end {
                return false;
            }
            if copies != 1 || self.copied.contains(&seq) {
                return true;
            }
            let Some(h) = sole_holder(view, seq).and_then(|id| view.paths.iter().position(|q| q.id == id)) else {
                return true;
            };
            if call.at[h] <= call.at[i] {
                return true;
            }
            let q = &view.paths[h];
            let lands = self.modelled_answer(now, q.id, seq);
            let at_risk = q.loss_rate >= self.cfg.lossy_path
                || (q.delivered as f64) < 1.0 / self.cfg.lossy_path
                || unqueued_answer(q, self.cfg.max_loss) > copier
                || lands.is_some_and(|lands| call.at[i] < lands);
            if !at_risk {
                return true;
            }
            // Without a model (a request the scheduler did not make), as one overdue.
            let lands = lands.unwrap_or(f64::NEG_INFINITY);
            if lands < 0.0 {
                found = Some((lands, seq));
                return false;
            }
            if found.is_none_or(|(latest, _)| lands > latest) {
                found = Some((lands, seq));
            }
            true
        });
        found.map(|(_, seq)| seq)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    /// A player waiting for a first frame of packets 0–9 (80 kbit/s, 1 s to start, 1000-byte
    /// packets): the 20 ms path 0 holds 0–7, the 40 ms path 1 holds 8 and 9, and 10 on are
    /// pending. `shown`: the frame was shown already. What does path 0 ask for?
    fn first_frame_pick(path1: PathView, shown: bool) -> Pick {
        let mut f = Fixture::new(vec![path(0, 20, 20, 8), path1], 10..100);
        f.cursor = 0;
        for seq in 0..10 {
            f = f.copies(seq, &[if seq < 8 { 0 } else { 1 }]);
        }
        let mut player = Player::new(VideoSpec::new(80_000, Duration::from_secs(60)), Instant::ZERO).unwrap();
        if shown {
            player.on_delivered(Instant::ZERO, 10_000);
        }
        f.player = Some(player);
        assert_eq!(f.view().first_frame_end(), (!shown).then_some(10));
        Weave::default().next(&f.view()).unwrap()
    }

    #[test]
    fn the_first_frames_packets_at_risk_on_a_slower_path_are_asked_again() {
        let copy = Pick {
            path: PathId(0),
            seq: 8,
        };
        let new = Pick {
            path: PathId(0),
            seq: 10,
        };
        // Path 1 has answered nothing yet: whether it loses cannot show.
        assert_eq!(first_frame_pick(path(1, 40, 20, 2), false), copy);
        // Once the frame is shown, the fast path goes on with the queue.
        assert_eq!(first_frame_pick(path(1, 40, 20, 2), true), new);
        // A path whose thousand answers show no loss, answering later only by its queue (its
        // minimum RTT is path 0's), is trusted with its share...
        let proven = PathView {
            delivered: 1_000,
            min_rtt: Duration::from_millis(20),
            ..path(1, 40, 20, 2)
        };
        assert_eq!(first_frame_pick(proven.clone(), false), new);
        // ...unless they show it losing 1 % or more,
        let lossy = PathView {
            loss_rate: 0.05,
            ..proven.clone()
        };
        assert_eq!(first_frame_pick(lossy, false), copy);
        // or it answers later even without a queue: a loss there is unmeasured, not ruled out.
        let farther = PathView {
            min_rtt: Duration::from_millis(40),
            ..proven
        };
        assert_eq!(first_frame_pick(farther, false), copy);
    }

    #[test]
    fn the_first_frames_copy_goes_to_an_overdue_packet_first_then_to_the_one_answered_last() {
        // The 40 ms path 1, its thousand answers lossless, asks for the frame's packets 6-9
        // (packets 0-5 are in flight on the 20 ms path 0, not there yet); its answers are
        // modelled one after another.
        let far = PathView {
            delivered: 1_000,
            ..path(1, 40, 20, 0)
        };
        let mut f = Fixture::new(vec![far], 6..100);
        f.cursor = 0;
        for seq in 0..6 {
            f = f.copies(seq, &[0]);
        }
        f.player = Some(Player::new(VideoSpec::new(80_000, Duration::from_secs(60)), Instant::ZERO).unwrap());
        let mut w = Weave::default();
        for seq in 6..10 {
            let pick = w.next(&f.view()).unwrap();
            assert_eq!(pick, Pick { path: PathId(1), seq });
            f.apply(pick);
        }
        let lands: Vec<f64> = (6..10)
            .map(|seq| w.modelled_answer(0.0, PathId(1), seq).unwrap())
            .collect();
        assert!(lands.windows(2).all(|l| l[0] < l[1]), "{lands:?}");
        // Path 0, with room and nothing of the frame left to ask for, copies the packet the
        // frame would wait for last...
        f.paths.insert(0, path(0, 20, 20, 6));
        assert_eq!(
            w.next(&f.view()),
            Some(Pick {
                path: PathId(0),
                seq: 9
            })
        );
        // ...but once the answers to 6 and 7 are overdue, the lower of them: the likeliest
        // lost (9 is asked again already, and 8 would be answered last now).
        f.now = Instant::from_nanos(((lands[1] + lands[2]) / 2.0 * 1e9) as u64);
        assert_eq!(
            w.next(&f.view()),
            Some(Pick {
                path: PathId(0),
                seq: 6
            })
        );
    }

    #[test]
    fn only_the_soonest_path_copies_the_first_frames_packets() {
        // The 20 ms path 0 holds 0–7 with its window full; the unmeasured 80 ms path 2 holds
        // 8 and 9, the frame's last packets; the 40 ms path 1 has room.
        let mut f = Fixture::new(vec![path(0, 20, 8, 8), path(1, 40, 20, 0), path(2, 80, 20, 2)], 10..100);
        f.cursor = 0;
        for seq in 0..10 {
            f = f.copies(seq, &[if seq < 8 { 0 } else { 2 }]);
        }
        f.player = Some(Player::new(VideoSpec::new(80_000, Duration::from_secs(60)), Instant::ZERO).unwrap());
        let mut w = Weave::default();
        // Path 1's copy would land after path 0's once its window opens: path 1 goes on
        // with the queue.
        let pick = w.next(&f.view()).unwrap();
        assert_eq!(pick.path, PathId(1));
        assert!(pick.seq >= 10, "{pick:?}: a copy of the frame");
        f.path_mut(0).cwnd = 9;
        f.path_mut(0).can_send = true;
        assert_eq!(
            w.next(&f.view()),
            Some(Pick {
                path: PathId(0),
                seq: 8
            })
        );
    }
}
