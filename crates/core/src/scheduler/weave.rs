//! `weave`, pcdn's own scheduler: paths pick packets by predicted arrival, and a task's
//! tail goes where it completes soonest.
//!
//! - **Arrival clock**: a request sent now on path i is answered after the path's minimum
//!   RTT, or after the requests already queued on it, whichever is later, plus what the
//!   answers have shown this model to miss:
//!   `A_i = max(min_rtt_i, clock_i − now + 1/R̂_i) + L_i + ē_i + d̄_i`, with `clock_i` the
//!   modelled answer to the path's latest request, `R̂_i` its peak rate over the last 10
//!   round trips (the bottleneck's rate; a windowed maximum, as BBR's bandwidth filter, so
//!   an aged-out peak gives way to the best rate since), sampled from the delivery rate
//!   (Eq. 5) and from the rate each round trip's answers came at, which shows within one RTT
//!   what Eq. 5's window of answers shows seconds later,
//!   `L_i` Eq. 6's loss penalty (E − sRTT), on every answer, queued or not, but not in the
//!   clock the next request queues behind (a request behind a queue is as likely lost; a
//!   penalty chained into the clock made answers come early against the model, and the
//!   error term learnt it away: Kondo's C, 20 seeds, 0.7–0.85 fewer underflows under LIA,
//!   OLIA and BALIA; MPRD Fig. 8(a), (c), an edge losing 10 %, OFO and waiting time 22–32 %
//!   lower), and `ē_i`, `d̄_i` the smoothed error of the model
//!   against the measured answers and its mean deviation (RFC 6298 §2's SRTT and RTTVAR
//!   estimators, gain 1/4, applied to the error). A burst of requests (a task's start, a
//!   window opening) is answered over `n/R̂`, not all after one sRTT (before a peak is kept,
//!   `R̂` is Eq. 5's stand-in, a window per sRTT); the error term carries
//!   what the model cannot see (delay jitter, a queue other traffic builds), and the
//!   deviation moves a jittery path's packets later in the order, because an answer that
//!   comes late holds back everything the other paths delivered behind it, while one that
//!   comes early only waits itself.
//! - **Order** (Pscheduler's Eq. 7 on those clocks): a path with room takes the pending
//!   packet whose turn comes when its own request would land — the packets the paths
//!   answering sooner deliver meanwhile are skipped for them:
//!   `offset_i = Σ_{A_j < A_i} (A_i − A_j) · R̂_j / size`. The soonest path (offset 0) takes
//!   the head of the queue, lost packets first. A sooner path whose control has cut its full
//!   window to a quarter or less of its pipe and of its own recent peak (BBR's ProbeRTT
//!   holds 4 packets for 200 ms) counts `cwnd_j / min_rtt_j` instead of `R̂_j`: its peak
//!   lasts 10 round trips, and the later paths would wait for packets it cannot carry.
//! - **Pipe cap**: a path keeps at most `1.25 · R̂_i ÷ (1 − loss) · rtt_i` plus 4 requests
//!   in flight (BBR's in-flight bound with its 1.25 probing gain, Cardwell et al. 2016):
//!   enough to keep its bottleneck busy and to measure more rate when there is more, but no
//!   standing queue whose length the congestion control sets (a loss-based control fills
//!   the whole buffer, and answers then come a buffer's delay late). `rtt_i` is the minimum
//!   RTT, or, once the path has delivered below `R̂_i ÷ 1.25` (its pipe was not full, so no
//!   queue of its own was there to inflate the RTT), the smallest RTT sample of the last
//!   round trip measured then: under delay jitter the minimum RTT is an outlier, a cap
//!   sized by it starves the path, and the peak rate then decays with the starved rate.
//!   When that round trip's samples spread by more than a quarter of the smallest (jitter;
//!   a queue lifts them together), their mean: a request meets the mean RTT.
//!   Only requests the model queued behind less than a fifth of their RTT give such samples:
//!   the answers to a burst (a task's start) measure the burst's own queue, and a cap sized
//!   by them lets the queue grow until the bottleneck drops packets.
//!   While a path starts up (its round trips' answer rate still grows by a quarter within
//!   3 round trips, BBR's full-pipe test; once over, for good), has lost nothing, and no
//!   first frame is awaited, the gain is 1.75: the peak rate lags a window that doubles
//!   each round trip, and a cap at 1.25 of it held Copa's growth back (Pscheduler Fig. 17:
//!   9.66 s against ECF's 9.64, now 9.60).
//! - **Near the buffer's limit**: a slower path does not take a packet the sooner paths
//!   would reach the reorder buffer's limit from within 4 deviations of its answers: if it
//!   came that late, it would hold the cursor while they stall at the limit (Pscheduler
//!   Fig. 5's 256 kB buffer under BBR, a shared bottleneck whose queue the far path's
//!   packets wait in). Before a path's first answer its deviation is taken as half its RTT
//!   (RFC 6298 §2.2's first RTTVAR).
//! - **End of the queue, with packets left to ask for**: when a path's offset runs past the
//!   queue (the task's tail, or the reorder buffer's limit), the sooner paths will drain it
//!   by themselves in `pending / Σ R̂_sooner`. The path takes the last pending packet only if
//!   its request lands before they would get to it (the reasoning of ECF, Lim et al. 2017,
//!   and BLEST, Ferlin et al. 2016); otherwise it waits, rather than become the packet
//!   everything else waits for.
//! - **Tail, everything in flight**: a path asks again for a packet in flight elsewhere if its
//!   request would land before the original's modelled answer (with that path's error
//!   terms), or, once that answer is overdue (3 more deviations past it, RFC 6298's K = 4:
//!   an answer barely late is late, not lost), before the resend would: the holder finds the
//!   request lost 9/8 · sRTT after sending it (RFC 9002 §6.1.2, when a later request is there
//!   to be answered; its RTO otherwise) and the soonest path asks again. A copy landing later
//!   only takes the resend's place, as a packet in flight elsewhere is not asked again when
//!   found lost (Pscheduler Fig. 5 at 256 kB: a 90 ms path's copy of a packet lost on the
//!   30 ms one held the cursor 60-120 ms in 5 of 10 runs). On a path losing 1 % or more the
//!   resend may be lost too, and any overdue packet is copied. On such a path whose window
//!   holds 3 requests or fewer, any request is copied, even one the holder answers first:
//!   no 3 later answers can pass a lost one there (RFC 9002 §6.1.1's packet threshold), so
//!   its loss shows only by the time threshold or the RTO, and the task's end, with the next
//!   task's start, waits for it, while the copier has nothing else to ask. Kondo's C and E
//!   (a coupled control holds the 6 %-loss Wi-Fi path at a window of about 2), 20 seeds:
//!   stalled time 0.015–0.035 points lower and completion 0.08–0.16 s sooner in all six
//!   coupled cells, waste 0.01–0.03 % → 0.03–0.06 %; in any window, the `weft` cells, whose
//!   lossy path holds dozens of requests at each tail, finished 0.5 % later (the copies
//!   delay the next task's first answers on the copier). Oldest first, each packet once,
//!   copies capped at a small share of requests. Between paths of equal RTT the original is
//!   usually the sooner, so the tail is cut without Pscheduler's blanket redundancy or
//!   copies that only waste.
//!   Before the task's tail, when everything the reorder buffer allows is in flight, the
//!   same holds for overdue requests, and requests not overdue yet are copied only off a
//!   path losing 1 % or more: a request lost there holds the buffer's cursor until the loss
//!   is detected, the buffer fills, and the other paths stall, then refill all at once (MPRD
//!   Fig. 7(e), 2 servers under CUBIC: the CDN path idled ~150 ms, then sent 1 100 requests
//!   into its 1 000-packet queue). Copying every original there cost Pscheduler Fig. 5's
//!   small buffers 4-7 % of their aggregation. A path's loss rate shows nothing before its
//!   first answers, and its first window is the burst most likely to be lost whole; the
//!   overdue rule covers it (MPRD Fig. 8(a), 64 KB: two of the 10 %-loss edge's first ten
//!   requests lost held the CDN at the buffer's limit for 140 ms, until the edge's RTO).
//!   The copy rules turn true with time, not only with answers: after a call that picks
//!   nothing, the scheduler asks to be called again when the next request it could copy
//!   turns overdue (`Scheduler::poll_timeout`), since a path whose last requests are the
//!   late ones sees no other event until its RTO.
//! - **The player's next packet**: with a player attached, the packet at the in-order cursor,
//!   overdue on the one path that holds it, is asked again on a path with room while the
//!   player's buffer is shorter than the holder's RTO plus the copy's answer time. Lost, it
//!   may be found only by the timeout (a path with a window of two, as a coupled control
//!   holds one losing 6 %, has no later answers to trigger RFC 9002's thresholds), and the
//!   picture stops meanwhile; with more buffered than that, the resend comes in time anyway.
//!   Kondo's C and E under LIA, OLIA and BALIA: 1.2–3.8 fewer rebuffers (5 seeds); in E,
//!   more frames still incomplete when played (66–75 against 39–45 of 18 720), as the
//!   in-order bytes keep just ahead of the playhead instead of running dry. The copy waits
//!   while the original is barely overdue (less than 3 deviations), unless it must go now to
//!   land in time (the buffer within 20 ms of its answer): such an original is mostly late,
//!   not lost, and under BALIA a third of the copies came back twice. Kondo's E, 20 seeds:
//!   stalled time 0.02 points lower under each coupled control, and one underflow less under
//!   Compound (seed 14); 9–15 more discarded pictures under LIA and OLIA.
//!   While playing, the buffer counts to the start of the frame holding the cursor, not to
//!   where the in-order bytes end: Kondo's picture discard judges a frame when the playhead
//!   enters it, up to a frame (33 ms at 30 fps) before the buffer runs dry. Kondo's C and E
//!   under LIA, OLIA and BALIA, 20 seeds: 0.35–2.95 fewer discarded pictures in each (C
//!   35.1, 33.5, 33.0 → 34.4, 33.15, 31.65; E 41.1, 39.35, 38.25 → 38.65, 37.05, 35.3),
//!   underflows within ±0.25; under Compound in E seed 14's one discarded picture (a Wi-Fi
//!   packet lost twice) now also stalls 0.73 s, the timing of the run shifted by 2 ms.
//! - **The first frame**: while the player waits for it, a path with nothing of the frame
//!   left to ask for (its pick lies past the frame's last packet) asks again for a frame
//!   packet in flight only on a path answering later, if the original is at risk: its path
//!   has given fewer than 100 answers (a loss rate under 1 % cannot show in fewer), loses
//!   1 % or more, would answer after the copy lands, or answers later than the copier even
//!   without a queue (its losses are unmeasured, not ruled out: 0.1 % shows as none in the
//!   ~330 answers of the player scenario's 30 ms edge before its frame is asked for). Every
//!   packet of the frame counts at the frame's time, and a lost one there costs the holder's
//!   loss detection and a resend; a copy costs the copier one packet time past the frame.
//!   XLINK (seed 004) re-injects the whole first frame; copying what a lossless path of equal
//!   RTT holds only wastes (Kondo's A: 0.06 s later completion). Which packet first: an
//!   overdue original, the lowest (the likeliest lost; its loss shows only once later
//!   answers pass it), then the latest modelled answer, the packet the frame would wait for
//!   last. Lowest first, the copies went to the jittery edge's early packets, answered in
//!   time, while its last ones came 6–10 ms after the frame's other packets (the player
//!   scenario under `weft` at 16 Mbit/s, seeds 4, 10, 12). MPRD Fig. 8(a), 4 MB, 1 Mbit/s:
//!   the 10 %-loss edge gets about 15 of the frame's 90 packets before any loss is measured
//!   there, and one was lost in 3 of 5 seeds (frame at 0.159–0.175 s, MPRD 0.1525); copied,
//!   0.140 s. Only the soonest path copies: it lands a copy first, even after asking for what
//!   of the frame it has left (less than a later path's Eq. 7 offset) or waiting for its
//!   window (the player scenario, 16 Mbit/s, seed 12: a frame packet lost on the jittery edge
//!   was copied on the 30 ms edge, whose queue answered in 44 ms, where the CDN's did in 27).
//!   The player scenario, 20 seeds: the first frame 0.5–2.5 ms sooner in five of six cells
//!   (`weft` at 16 Mbit/s 0.4720 → 0.4695 s, Pscheduler-nr 0.4697), 0.2 ms later in one.
//! - **Playback about to run dry stalls at a frame's start**: with a player, while packets
//!   arrive slower than the video plays (ρ < 1, video seconds a second over the last 2 s),
//!   the buffer ahead of the playhead shrinks by `1 − ρ` a second, and from where it would
//!   hold less than a frame every frame is entered before all of it is in: Kondo's picture
//!   discard, about `1 ÷ (1 − ρ)` frames (25 at ρ = 0.96) before it runs dry. The packet
//!   starting that frame (its first full one) is held back, so the playhead stops there and
//!   one frame is lost, not a creep of them; it is asked for once playback stalls, well
//!   within the 1 s the player waits for. The buffer is what has arrived, in order or not,
//!   less what the paths' different delays keep out of order all along (each two round
//!   trips of the slowest path, the most that waited; their median over 2 s, as a lost
//!   packet's hole comes and goes): the in-order bytes advance in steps, one per answer
//!   that fills the hole at the cursor, and a frame is entered just before a step as often
//!   as anywhere. Holding any earlier than the creep costs underflows: over a video, the
//!   stalled time is what the missing rate makes it, but each stall that starts with more
//!   arrived makes the next one come sooner. Once a pick went past it, the packet stays
//!   held while the prediction puts the stall no more than 250 ms past it. Kondo's C and E
//!   under LIA, OLIA and BALIA, 20 seeds: 32.6–41.8 discarded pictures where 37.4–79.2 were
//!   (the best other's 29.8–49.2), 0.45–0.95 more underflows (fewer than any other's but in C
//!   under BALIA, 22.75 against LRF's 22.6), the stalled time within 0.02 points; every
//!   other scenario unchanged. A held packet is asked for anyway once nothing else of the
//!   task is pending: the next task cannot start without it.
//! - **The last stall fills a buffer that lasts to the end**: a stall lasts until the
//!   player's `resume` (1 s) is buffered, and what of that is unplayed when the last packet
//!   arrives was waited for in vain: over a video, the stalled time is the last arrival less
//!   the first frame less the video's length plus that remainder (0.2–1.1 s in Kondo's E,
//!   whichever of the 25 stalls comes last). While the buffer is to run dry before the last
//!   packet arrives at the rate of the last 30 s (ρ < 1), the stall is placed where the
//!   buffer it fills lasts to the end with 0.3 s to spare, `(resume − 0.3 s) ÷ (1 − ρ)` before
//!   the end, by the same hold; it comes with some video in, so it is shorter, and it
//!   replaces the one the buffer would run into later. Kondo's C and E under LIA, OLIA and
//!   BALIA, 20 seeds: stalled time 0.01–0.04 points lower, underflows within 0.1. Only
//!   where that place lies within the 30 s the rate is measured over: near ρ = 1 it lies
//!   minutes before the end, and a dip of the rate there placed a stall no other scheduler
//!   had (Kondo's E under Compound, seed 13: 0.22 s; seeds 101–200: 2 underflows in 100 runs
//!   instead of 3, XLINK's 2).
//! - **Shared bottleneck**: a path whose answers take at least twice the minimum RTT of a
//!   sooner one, and whose queueing delay moves with that path's at the same scale
//!   (coherence ≥ 0.9, `estimate::shared`) while the sooner path's peak covers what both
//!   carry, waits in the same queue: it adds no rate, only packets that arrive out of order.
//!   Once it carries a tenth of the pair's rate or more (enough to measure), it is left idle
//!   for a trial of 8 of the sooner path's RTTs; if the sooner path then carries 90 % of
//!   what both carried, the later one stays idle while the sooner answers sooner (it takes
//!   over if the sooner fails or falls behind); otherwise the pair is not suspected again
//!   (two separate links the same requests fill at once, which the coherence alone cannot
//!   tell apart).

use super::{Pending, Pick, SchedEvent, Scheduler, View};
use crate::estimate::{SharedBottleneck, WindowedMax};
use crate::path::PathId;
use crate::player::{Player, VideoSpec};
use crate::scheduler::PathView;
use crate::time::{Duration, Instant};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::hash::BuildHasherDefault;

/// Maps keyed by path ids and sequence numbers: ours, not an attacker's, so a fast hash
/// (`ahash`, fixed keys) rather than SipHash, which took 18 % of `pcdn bench core --scheduler
/// weave`'s samples (1.13 → 1.70 M packets per CPU second with `ahash`). Nothing iterates them
/// in an order that could reach a decision.
type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<ahash::AHasher>>;
type FastSet<T> = HashSet<T, BuildHasherDefault<ahash::AHasher>>;

/// Most copies as a share of requests, plus an allowance for short downloads. 4 % keeps the
/// duplicates under a 5 % waste budget once a download passes 3 200 requests (the allowance's
/// 32 packets are then under 1 %); at 5 % the allowance pushed Pscheduler Fig. 15–18 runs to
/// 5.1–5.4 %, and the extra copies bought no OFO or goodput there (docs/reproduction.md).
const COPY_SHARE: f64 = 0.04;
const COPY_ALLOWANCE: u64 = 32;
/// Loss rate from which a path's requests may be copied before the task's tail, once
/// everything the reorder buffer allows is in flight.
const LOSSY_PATH: f64 = 0.01;
/// Most requests a lossy path's window may hold for its requests to be copied at the task's
/// tail even where the original lands first: RFC 9002 §6.1.1's packet threshold, the later
/// answers it takes to find a request lost without the time threshold or the RTO.
const PACKET_THRESHOLD: u64 = 3;
/// The pipe cap's gain over the bandwidth-delay product, and its allowance in requests.
const PIPE_GAIN: f64 = 1.25;
const PIPE_ALLOWANCE: f64 = 4.0;
/// The pipe cap's gain while the path starts up: its answer rate has not yet stopped growing
/// by `STARTUP_GROWTH` a round trip for `STARTUP_FLAT_ROUNDS` round trips (BBR's test that
/// the pipe is full). The largest of 2, 1.75 and 1.5 that cost no scenario: at 2, Pscheduler
/// Fig. 5's 1 MB buffer under `weft` finished 0.04 s later.
const STARTUP_PIPE_GAIN: f64 = 1.75;
const STARTUP_GROWTH: f64 = 1.25;
const STARTUP_FLAT_ROUNDS: u32 = 3;
/// Round trips over which the peak delivery rate is kept (BBR's bandwidth filter).
const PEAK_WINDOW_RTTS: f64 = 10.0;
/// Most queueing delay, as a share of the RTT, that the model may have put ahead of a request
/// whose RTT sizes the pipe cap. A fifth: at a tenth Pscheduler Fig. 16 under BBR lost 1 %
/// aggregation at 20-40 ms jitter, at three tenths Fig. 17 under Vivace its OFO (3.8 against
/// 2.6 kB), and without the rule a task's first burst sized the cap (Fig. 15 at 50 ms, below).
const PIPE_SAMPLE_QUEUE: f64 = 0.2;
/// Spread of a round trip's unqueued RTT samples (their mean above their smallest, as a
/// share of the smallest) from which they are taken for delay jitter and the pipe cap is
/// sized by their mean. Pscheduler Fig. 16 under BBR, 10 seeds: at 40 ms of jitter 0.755
/// against 0.740 sized by the smallest (Ps 0.749). At 0.1 Fig. 17's CUBIC (a queue's
/// sawtooth) passed it, and its OFO rose from 3.5 to 4.8 kB; with the mean always, Copa's
/// aggregation fell 0.4 %; at 0.25 Fig. 17 is unchanged.
const JITTER_SPREAD: f64 = 0.25;
/// Least time, in deviations of a path's answers, that the sooner paths must need to reach
/// the reorder buffer's limit from the packet the path would ask for. Pscheduler Fig. 5
/// (BBR, 256 kB, 10 seeds): 0.914 against 0.912 without it (BLEST 0.907); before overdue
/// copies had to beat the resend, 0.907 against 0.902, and at 16 and 32 deviations the
/// 512 kB buffer lost 0.4 % and 1.1 %, at 1 and 2 nothing changed.
const BUFFER_SLACK_DEVIATIONS: f64 = 4.0;
/// A full window cut to this fraction or less of its path's pipe and of its own recent peak
/// is taken to deliver one window per RTT, not the path's peak rate (`Weave::sooner_rate`).
const WINDOW_CUT: u64 = 4;
/// Deviations of a path's answers past its modelled answer (which holds one already) before
/// a request there counts as overdue for a copy: RFC 6298 §2's RTO waits K = 4 deviations
/// past the smoothed RTT. Pscheduler Fig. 5, 64 kB under BBR: the last request of a task,
/// answered 2 ms past its modelled answer, was copied on the 90 ms path in 2 of 10 runs,
/// and that path's BBR paced at the rate measured from the one copy when it was needed.
/// On a path losing `LOSSY_PATH` or more, a request overdue at all is copied.
const OVERDUE_DEVIATIONS: f64 = 3.0;
/// How far ahead of the playhead's need the player's next packet is asked again while its
/// original is barely overdue: an answer just past its model is far more often late than
/// lost (on a 6 %-loss path, about 9 in 10), and a copy that comes back twice takes capacity
/// the video needs where both paths together carry less than its rate.
const PLAYER_COPY_SLACK: f64 = 0.02;
/// Span over which the stall prediction measures the arrivals' rate and the steady
/// out-of-order share (`Weave::stall_frame`), and the least time between two samples.
const FRONT_WINDOW: Duration = Duration::from_secs(2);
const FRONT_SAMPLE: Duration = Duration::from_millis(10);
/// How far past the predicted stall a packet already held back stays held.
const HOLD_SLACK: Duration = Duration::from_millis(250);
/// Span over which the last stall's placement measures the arrivals' rate (about one play
/// period between two stalls at ρ = 0.96, and with it the pauses between tasks), and the
/// least time between two samples.
const LAST_STALL_WINDOW: Duration = Duration::from_secs(30);
const LAST_STALL_SAMPLE: Duration = Duration::from_millis(250);
/// What the buffer the last stall fills is meant to keep at the end: the arrivals pause
/// between two tasks (the last answers of one and a round trip before the next one's) and
/// their rate swings about its 30-s mean. Kondo E under BALIA, 20 seeds: stalled time
/// 3.620/3.619/3.635/3.639 % at 0.2/0.3/0.4/0.5 s; without a margin another stall followed
/// in the last 6 s of the video in 19 seeds of 20 (3.686 %).
const LAST_STALL_MARGIN: Duration = Duration::from_millis(300);
/// The random-loss share the pipe cap makes up for at most.
const MAX_LOSS: f64 = 0.3;
/// Coherence of two paths' queueing delays from which they are taken to share a queue.
/// Separate links of Pscheduler Figs. 15–18 reach at most 0.85; at 0.95 Fig. 5's far path was
/// found later, and under `weft` its aggregation was 0.910 against 0.916 at ≥ 512 kB.
const SHARED_COHERENCE: f64 = 0.9;
/// Least standard deviation of each path's queueing delay for its coherence to count: a
/// queue that does not move shows nothing.
const SHARED_QUEUE_FLOOR: f64 = 1e-3;
/// A path is suspected of sharing the queue of a sooner one only if its minimum RTT is at
/// least this many times the sooner's: each of its packets then holds back a round trip or
/// more of the sooner path's answers. (Kondo's A, two separate 5 Mbit/s links of equal RTT
/// filled by the same player, is coherent too.)
const SHARED_RTT_RATIO: f64 = 2.0;
/// Length of the trial, in the kept path's smoothed RTTs (BBR's gain cycle: time for its
/// control to take the freed share), and the share of what both carried that the kept path
/// must then carry alone.
const SHARED_TRIAL_RTTS: f64 = 8.0;
const SHARED_CONFIRM: f64 = 0.9;
/// Least share of the pair's rate the path must carry for a trial: a share too small to
/// measure (a path still in its start-up) would confirm any trial.
const SHARED_MIN_SHARE: f64 = 0.1;
/// Gain of the arrival clock's error and deviation averages (RFC 6298 §2 uses 1/8 and 1/4;
/// 1/4 for both follows a jittery path's error closer, measured on Pscheduler's Fig. 16).
const ERROR_GAIN: f64 = 0.25;

/// Seconds until the answer to a request that meets no queue on path `p`: its minimum RTT
/// plus Eq. 6's loss penalty (E − sRTT).
fn unqueued_answer(p: &PathView) -> f64 {
    (p.min_rtt + penalty(p)).as_secs_f64()
}

/// Eq. 6's loss penalty on path `p` (E − sRTT), in seconds: what its losses add to an
/// answer on average, queued or not.
fn loss_penalty(p: &PathView) -> f64 {
    penalty(p).as_secs_f64()
}

fn penalty(p: &PathView) -> Duration {
    p.expected_time.saturating_sub(p.srtt)
}

/// Seconds of play before the playhead enters the frame holding the in-order cursor, with a
/// player attached: Kondo's picture discard judges a frame when the playhead reaches its first
/// byte, so the packet at the cursor is due up to a frame before the buffer runs dry.
fn until_cursor_frame(view: &View<'_>) -> Option<f64> {
    let buffer = view.player_buffer?;
    let Some(player) = view.player.filter(|p| p.has_started() && !p.is_stalled()) else {
        return Some(buffer.as_secs_f64());
    };
    let spec = player.spec();
    let position = player.position(view.now);
    // The last frame starting at or before where the in-order bytes end.
    let holding = spec
        .first_frame_from(position + buffer + Duration::from_nanos(1))
        .saturating_sub(1);
    Some(spec.frame_start(holding).saturating_sub(position).as_secs_f64())
}

/// The one path `seq` is in flight on, if exactly one.
fn sole_holder(view: &View<'_>, seq: u64) -> Option<PathId> {
    let mut holders = 0;
    let mut holder = None;
    view.in_flight.paths_of(seq, &mut |p| {
        holders += 1;
        holder = Some(p);
    });
    holder.filter(|_| holders == 1)
}

/// The smaller of two optional values.
fn min_of<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b < a { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// What `weave` keeps of one path.
#[derive(Debug, Default)]
struct PathClock {
    /// Peak delivery rate (bytes per second) over the last `PEAK_WINDOW_RTTS` round trips.
    peak: WindowedMax<f64>,
    /// Largest congestion window (packets) over the same round trips.
    window_peak: WindowedMax<u64>,
    /// Modelled answer to the latest request, before the error terms.
    clock: Option<Instant>,
    /// Smoothed seconds the answers came after the model's prediction (negative: before).
    error: f64,
    /// Smoothed mean deviation of the answers' error from `error`.
    deviation: f64,
    /// RTT the pipe cap is sized by, when measured larger than the minimum (seconds).
    pipe_rtt: Option<f64>,
    /// The round trip under way.
    round: Option<Round>,
    /// RTT that could size the pipe cap (`Round::pipe_rtt`), from the last complete round
    /// trip that had one.
    last_round_pipe_rtt: Option<f64>,
    /// Rate of the last complete round trip's answers (packets per second).
    last_round_rate: Option<f64>,
    /// Best round-trip answer rate while starting up (packets per second).
    startup_peak: f64,
    /// Round trips since the answer rate last grew by `STARTUP_GROWTH`.
    startup_flat: u32,
    /// The answer rate stopped growing: the path's start-up is over, for good.
    started: bool,
    /// Smallest RTT sample (seconds): the queueing delay is measured above it.
    least_rtt: Option<f64>,
    /// The modelled answers of the path's requests, earliest on top, with the requests'
    /// sequence numbers; entries no longer in `Weave::predicted` are dropped when they reach
    /// the top (`Weave::earliest_answer`).
    answers: BinaryHeap<Reverse<(Instant, u64)>>,
}

/// One round trip of a path's answers: it lasts its smallest RTT sample.
#[derive(Debug, Clone, Copy)]
struct Round {
    start: Instant,
    /// Smallest RTT sample so far (seconds).
    least: f64,
    /// Smallest RTT sample so far of a request the model queued behind less than
    /// `PIPE_SAMPLE_QUEUE` of it (seconds).
    least_unqueued: Option<f64>,
    /// Sum and count of those samples.
    unqueued_sum: f64,
    unqueued_count: u32,
    /// Answers after the first.
    answers: u64,
}

impl Round {
    /// RTT a request met on this round trip when no queue of the path's own was ahead of
    /// it: the smallest unqueued sample, or their mean when they spread by more than
    /// `JITTER_SPREAD` of it. A queue lifts every sample of a round trip together; delay
    /// jitter spreads them, and a request then meets the mean, not the smallest (Little's
    /// law: in flight = rate × mean RTT).
    fn pipe_rtt(&self) -> Option<f64> {
        let least = self.least_unqueued?;
        let mean = self.unqueued_sum / f64::from(self.unqueued_count);
        Some(if mean - least > JITTER_SPREAD * least {
            mean
        } else {
            least
        })
    }
}

impl PathClock {
    /// Seconds added to the model's prediction.
    fn shift(&self) -> f64 {
        self.error + self.deviation
    }

    /// Folds an answer's RTT sample into the round trip it belongs to; a round trip lasts its
    /// smallest RTT sample.
    fn on_rtt_sample(&mut self, now: Instant, rtt: f64, queued: f64) {
        // A request sent behind a queue the model expected (a task's first burst, a window
        // opening) measures that queue, not the path: it says nothing about the pipe.
        let unqueued = (queued <= PIPE_SAMPLE_QUEUE * rtt).then_some(rtt);
        let fresh = Round {
            start: now,
            least: rtt,
            least_unqueued: unqueued,
            unqueued_sum: unqueued.unwrap_or(0.0),
            unqueued_count: u32::from(unqueued.is_some()),
            answers: 0,
        };
        match self.round.as_mut() {
            Some(round) if (now - round.start).as_secs_f64() < round.least => {
                round.least = round.least.min(rtt);
                round.least_unqueued = min_of(round.least_unqueued, unqueued);
                round.unqueued_sum += unqueued.unwrap_or(0.0);
                round.unqueued_count += u32::from(unqueued.is_some());
                round.answers += 1;
            }
            Some(round) => {
                // This answer closes the round trip: it counts in it.
                if let Some(rtt) = round.pipe_rtt() {
                    self.last_round_pipe_rtt = Some(rtt);
                }
                let rate = (round.answers + 1) as f64 / (now - round.start).as_secs_f64();
                self.last_round_rate = Some(rate);
                self.on_round_rate(rate);
                self.round = Some(fresh);
            }
            None => self.round = Some(fresh),
        }
    }

    /// Ends the start-up once a round trip's answer rate has not grown by `STARTUP_GROWTH`
    /// over the best before it for `STARTUP_FLAT_ROUNDS` round trips (BBR's full-pipe test,
    /// on the answers instead of the delivery-rate filter). Once over, for good: a task's
    /// start after a pause is a window reopening, not a pipe to discover.
    fn on_round_rate(&mut self, rate: f64) {
        if self.started {
            return;
        }
        if rate >= STARTUP_GROWTH * self.startup_peak {
            self.startup_peak = rate;
            self.startup_flat = 0;
        } else {
            self.startup_flat += 1;
            self.started = self.startup_flat >= STARTUP_FLAT_ROUNDS;
        }
    }

    /// Folds the error of a modelled answer into the averages (RFC 6298 §2.3's order:
    /// the deviation against the old average first).
    fn on_error(&mut self, error: f64) {
        self.deviation += ERROR_GAIN * ((error - self.error).abs() - self.deviation);
        self.error += ERROR_GAIN * (error - self.error);
    }
}

#[derive(Debug, Default)]
pub struct Weave {
    copied: FastSet<u64>,
    requests: u64,
    copies: u64,
    clocks: FastMap<PathId, PathClock>,
    /// Modelled answer of each request in flight.
    predicted: FastMap<(PathId, u64), Prediction>,
    /// Coherence of the paths' queueing delays.
    queues: SharedBottleneck,
    /// Pairs (smaller id first) taken, or on trial, to share a queue.
    sharing: FastMap<(PathId, PathId), Sharing>,
    /// Pairs whose trial failed.
    separate: FastSet<(PathId, PathId)>,
    /// When a request in flight turns overdue, after a call that picked nothing
    /// (`Weave::next_overdue`).
    wake: Option<Instant>,
    /// The per-path values of the call under way (`PerCall`).
    call: PerCall,
    /// Unique packets arrived, and their rate over `FRONT_WINDOW` and `LAST_STALL_WINDOW`.
    arrived: u64,
    front_rate: ArrivalRate<{ FRONT_WINDOW.as_millis() as u64 }, { FRONT_SAMPLE.as_millis() as u64 }>,
    long_rate: ArrivalRate<{ LAST_STALL_WINDOW.as_millis() as u64 }, { LAST_STALL_SAMPLE.as_millis() as u64 }>,
    /// The in-order cursor at the first call (before any arrival).
    first_cursor: Option<u64>,
    /// While playing: each round trip's start and the most video out of order in it
    /// (`steady_out_of_order`).
    out_of_order: VecDeque<(Instant, f64)>,
    /// The median of the complete round trips' most in `out_of_order`, kept as they change.
    steady: Option<f64>,
    /// The packet held back for a stall once a pick went past it, and its frame
    /// (`Weave::stall_hold`).
    held: Option<(u64, u64)>,
}

/// Counts of unique packets arrived at instants at least `SPACING_MS` apart over the last
/// `WINDOW_MS` (and one sample before it), for their rate.
#[derive(Debug, Default)]
struct ArrivalRate<const WINDOW_MS: u64, const SPACING_MS: u64> {
    samples: VecDeque<(Instant, u64)>,
}

impl<const WINDOW_MS: u64, const SPACING_MS: u64> ArrivalRate<WINDOW_MS, SPACING_MS> {
    const WINDOW: Duration = Duration::from_millis(WINDOW_MS);
    const SPACING: Duration = Duration::from_millis(SPACING_MS);

    fn sample(&mut self, now: Instant, arrived: u64) {
        if self.samples.back().is_none_or(|&(at, _)| now >= at + Self::SPACING) {
            self.samples.push_back((now, arrived));
        }
        while self.samples.get(1).is_some_and(|&(at, _)| at + Self::WINDOW <= now) {
            self.samples.pop_front();
        }
    }

    /// Packets a second over the window; `None` before a window's worth of samples.
    fn per_second(&self, now: Instant, arrived: u64) -> Option<f64> {
        let &(since, from) = self.samples.front()?;
        let span = (now - since).as_secs_f64();
        (since + Self::WINDOW <= now && span > 0.0).then(|| (arrived - from) as f64 / span)
    }
}

/// The pending queue as `choose` reads it: without the packet held back for a stall
/// (`Weave::stall_hold`), if that one is pending.
#[derive(Clone, Copy)]
struct Queue<'a> {
    pending: Pending<'a>,
    /// Position of the held packet in `pending`.
    held: Option<u64>,
}

impl Queue<'_> {
    fn len(&self) -> u64 {
        self.pending.len() - u64::from(self.held.is_some())
    }

    fn nth(&self, n: u64) -> Option<u64> {
        match self.held {
            Some(rank) if n >= rank => self.pending.nth(n + 1),
            _ => self.pending.nth(n),
        }
    }
}

/// What one `next()` call reads of each path, computed once per call rather than once per
/// use (each path's Eq. 7 offset and drain time read every sooner path's rate): the arrival
/// clock, the path's rate, and the rate it counts at in a later path's offset; and the paths
/// that may send, soonest first. Kept between calls so that a call allocates nothing.
#[derive(Debug, Default)]
struct PerCall {
    at: Vec<f64>,
    rate: Vec<f64>,
    sooner: Vec<f64>,
    order: Vec<usize>,
    /// Room for `Weave::steady_out_of_order`'s median.
    scratch: Vec<f64>,
}

/// Two paths found to wait in one queue: the sooner is kept, the other left idle.
#[derive(Debug, Clone, Copy)]
enum Sharing {
    /// Since `since`; the kept path must then carry `needed` packets per second (a share of
    /// what both carried).
    Trial {
        keep: PathId,
        since: Instant,
        needed: f64,
    },
    Confirmed {
        keep: PathId,
    },
}

/// The model's answer to one request in flight.
#[derive(Debug, Clone, Copy)]
struct Prediction {
    /// When the answer is modelled to come, before the error terms.
    at: Instant,
    /// Seconds of it the model put down to the requests queued ahead on the path.
    queued: f64,
    /// When the request was sent.
    sent: Instant,
}

impl Weave {
    /// Keeps each path's peak delivery rate over the last `PEAK_WINDOW_RTTS` round trips, and
    /// the pipe cap's RTT from a round measured while the path's pipe was not full.
    fn update_peaks(&mut self, view: &View<'_>) {
        for p in view.paths {
            let Some(rate) = p.delivery_rate else { continue };
            let window = Duration::from_secs_f64(PEAK_WINDOW_RTTS * p.srtt.as_secs_f64());
            let state = self.clocks.entry(p.id).or_default();
            if let (Some(peak), Some(rtt)) = (state.peak.get(), state.last_round_pipe_rtt) {
                if rate * PIPE_GAIN < peak {
                    state.pipe_rtt = Some(rtt);
                }
            }
            // The delivery rate is measured over a window's worth of answers, seconds when the
            // window is large and the cap holds the path to a few requests in flight; the last
            // round trip's answers show within one RTT that the path carries more.
            let rate = rate.max(state.last_round_rate.unwrap_or(0.0) * view.packet_size as f64);
            // Once the peak ages out, the best rate measured since takes over, not the latest:
            // that one may come from a window the control has just cut (BBR's ProbeRTT at 4
            // packets for 200 ms, longer than the delivery rate's lag behind its recovery).
            state.peak.update(view.now, rate, window);
            state.window_peak.update(view.now, p.cwnd, window);
        }
    }

    /// Packets per second: the peak delivery rate (the Eq. 5 estimate before one is kept), or
    /// the rate of the last round trip's answers if higher. The delivery rate is measured over
    /// a window of answers and lags a rising rate (a rate-based control such as Vivace ramping
    /// up), and a clock spaced by a lagging rate predicts a queue that is not there.
    fn rate(state: Option<&PathClock>, view: &View<'_>, p: &PathView) -> f64 {
        let bytes = match state.and_then(|c| c.peak.get()) {
            Some(peak) => peak,
            None => p.throughput(view.packet_size),
        };
        let answered = state.and_then(|c| c.last_round_rate).unwrap_or(0.0);
        (bytes / view.packet_size as f64).max(answered)
    }

    /// Packets per second path `p`, delivering `rate`, delivers while a later path's answer
    /// is on its way: its rate, or, when its control has cut a full window to a `WINDOW_CUT`th
    /// or less of its pipe and of its own peak over the last round trips, one window per
    /// minimum RTT. A window held at 4 packets for 200 ms by BBR's ProbeRTT, or at 1 after an
    /// RTO, keeps the rate measured before it for 10 round trips, and the later paths would
    /// wait for packets it cannot carry (Pscheduler Fig. 5, 64 kB under BBR). A window small
    /// all along (a coupled control on a lossy path) is its rate already.
    fn sooner_rate(state: Option<&PathClock>, rate: f64, p: &PathView) -> f64 {
        let min_rtt = p.min_rtt.as_secs_f64();
        let window = p.cwnd as f64;
        let window_peak = state.and_then(|c| c.window_peak.get()).unwrap_or(0);
        let cut = p.room() == 0 && WINDOW_CUT as f64 * window < rate * min_rtt && p.cwnd * WINDOW_CUT <= window_peak;
        if cut && min_rtt > 0.0 { window / min_rtt } else { rate }
    }

    /// Fills `call` for `view`: each path's rates and the seconds from now until the answer
    /// to a request sent now on it, and the paths that may send, soonest answer first.
    fn per_call(&self, view: &View<'_>, call: &mut PerCall) {
        let now = view.now.since_epoch().as_secs_f64();
        call.at.clear();
        call.rate.clear();
        call.sooner.clear();
        for p in view.paths {
            let state = self.clocks.get(&p.id);
            let rate = Self::rate(state, view, p);
            let base = unqueued_answer(p);
            let at = match state {
                // Before a rate is kept, Eq. 5's stand-in (a window per sRTT): a burst sent
                // at once is still answered one request after another.
                Some(state @ PathClock { clock: Some(clock), .. }) => {
                    // A request queued behind others is as likely lost as one that is not:
                    // the penalty goes on either answer.
                    let queued = clock.since_epoch().as_secs_f64() - now + 1.0 / rate;
                    let model = base.max(queued + loss_penalty(p));
                    // No answer comes before the minimum RTT, whatever the error says.
                    (model + state.shift()).max(p.min_rtt.as_secs_f64())
                }
                // Nothing asked on the path yet: Eq. 6 as Pscheduler has it.
                _ => p.expected_time.as_secs_f64(),
            };
            call.at.push(at);
            call.rate.push(rate);
            call.sooner.push(Self::sooner_rate(state, rate, p));
        }
        let at = &call.at;
        call.order.clear();
        call.order
            .extend((0..view.paths.len()).filter(|&j| view.paths[j].can_send));
        call.order
            .sort_by(|&a, &b| at[a].total_cmp(&at[b]).then(view.paths[a].id.cmp(&view.paths[b].id)));
    }

    /// The paths answering sooner than path `i`, in index order.
    fn sooner_than(call: &PerCall, i: usize) -> impl Iterator<Item = usize> + '_ {
        let at = &call.at;
        (0..at.len()).filter(move |&j| j != i && at[j] < at[i])
    }

    /// Eq. 7 on arrival clocks: packets the paths answering sooner deliver first.
    fn offset(call: &PerCall, i: usize) -> u64 {
        let at = &call.at;
        let packets: f64 = Self::sooner_than(call, i)
            .map(|j| (at[i] - at[j]) * call.sooner[j])
            .sum();
        // The clocks pass through nanoseconds: a whole number of packets must not floor to one less.
        (packets + 1e-6).floor() as u64
    }

    /// Seconds until the paths answering sooner than `i` have drained `pending` packets.
    fn drain_time(call: &PerCall, i: usize, pending: u64) -> Option<f64> {
        let rate: f64 = Self::sooner_than(call, i).map(|j| call.sooner[j]).sum();
        (rate > 0.0).then(|| pending as f64 / rate)
    }

    /// Path `i`'s pick `seq` lies so near the reorder buffer's limit that the sooner paths
    /// would reach the limit within `BUFFER_SLACK_DEVIATIONS` of `i`'s answer deviations: an
    /// answer that late holds the cursor while they stall at the limit. Only where the buffer,
    /// not the task, ends the queue (at a task's tail, the end of the queue rule decides).
    fn near_the_buffer_limit(&self, view: &View<'_>, call: &PerCall, i: usize, seq: u64) -> bool {
        if view.reorder_limit >= view.task_end {
            return false;
        }
        let p = &view.paths[i];
        let mut deviation = self.clocks.get(&p.id).map_or(0.0, |c| c.deviation);
        if p.delivered == 0 {
            // Nothing answered yet, so nothing measured of how the answers vary: RFC 6298
            // §2.2's first RTTVAR, half the RTT. A path's first window is also the burst most
            // likely lost whole (MPRD Fig. 8(a), 64 KB: the 10 %-loss edge's first ten
            // requests at offset 20 of a 46-packet buffer held the CDN at the limit).
            deviation = deviation.max(p.srtt.as_secs_f64() / 2.0);
        }
        Self::drain_time(call, i, view.reorder_limit.saturating_sub(seq))
            .is_some_and(|slack| slack < BUFFER_SLACK_DEVIATIONS * deviation)
    }

    /// The path's requests in flight are under its pipe cap (always, before a rate is kept).
    fn under_pipe_cap(&self, view: &View<'_>, p: &PathView) -> bool {
        let Some(state) = self.clocks.get(&p.id) else {
            return true;
        };
        let Some(peak) = state.peak.get() else {
            return true;
        };
        let min_rtt = p.min_rtt.as_secs_f64();
        let rtt = state.pipe_rtt.map_or(min_rtt, |r| r.max(min_rtt));
        let pipe = peak / (1.0 - p.loss_rate.min(MAX_LOSS)) * rtt / view.packet_size as f64;
        // Only on a path that has lost nothing (a loss says the pipe is full, or the path lossy,
        // and more in flight there is more to resend) and not before the first frame (its
        // packets then wait in the deeper queue).
        let starting = !state.started && p.loss_rate == 0.0 && view.first_frame_shown() != Some(false);
        let gain = if starting { STARTUP_PIPE_GAIN } else { PIPE_GAIN };
        (p.in_flight as f64) < gain * pipe + PIPE_ALLOWANCE
    }

    /// Seconds from `now` (since the epoch) until the modelled answer to `seq` on `path`, with
    /// that path's error terms; negative once overdue. `None` for a request the scheduler
    /// did not make.
    fn modelled_answer(&self, now: f64, path: PathId, seq: u64) -> Option<f64> {
        let predicted = self.predicted.get(&(path, seq))?;
        Some(self.answer_in(now, path, predicted.at))
    }

    /// Seconds from `now` until an answer the model put at `at` on `path`, with that path's
    /// error terms.
    fn answer_in(&self, now: f64, path: PathId, at: Instant) -> f64 {
        let shift = self.clocks.get(&path).map_or(0.0, PathClock::shift);
        at.since_epoch().as_secs_f64() + shift - now
    }

    /// The oldest packet in flight on one path only, not copied before, whose copy on `i`
    /// would land first: before the original's modelled answer (with its path's error terms;
    /// `before_tail`, only on a path losing `LOSSY_PATH` or more), or, if that answer is
    /// overdue, before the resend (`resend_lands`). Without a model of the original (a request
    /// the scheduler did not make), before the answer of a request sent now on the original's
    /// path. At the task's tail, any packet on a path losing `LOSSY_PATH` or more whose window
    /// holds `PACKET_THRESHOLD` requests or fewer (a loss there is found late). `soonest`:
    /// seconds until the soonest path's answer.
    fn copy_candidate(&self, view: &View<'_>, at: &[f64], soonest: f64, i: usize, before_tail: bool) -> Option<u64> {
        let me = view.paths[i].id;
        let now = view.now.since_epoch().as_secs_f64();
        let original_lands = |path: PathId, seq: u64| -> Option<f64> {
            self.modelled_answer(now, path, seq)
                .or_else(|| view.paths.iter().position(|p| p.id == path).map(|j| at[j]))
        };
        let lossy: Vec<PathId> = view
            .paths
            .iter()
            .filter(|q| q.loss_rate >= LOSSY_PATH)
            .map(|q| q.id)
            .collect();
        // At the tail, the lossy paths whose losses show only by the time threshold or the RTO.
        let found_late: Vec<PathId> = view
            .paths
            .iter()
            .filter(|q| !before_tail && q.loss_rate >= LOSSY_PATH && q.cwnd <= PACKET_THRESHOLD)
            .map(|q| q.id)
            .collect();
        // Once per call, not once per request in flight.
        let overdue_after: Vec<(PathId, f64)> = view.paths.iter().map(|q| (q.id, self.overdue_after(q))).collect();
        let mut found = None;
        view.scan_in_flight(&mut |seq, copies| {
            if copies == 1 && !self.copied.contains(&seq) && !view.in_flight_on(seq, me) {
                let mut sooner = false;
                view.in_flight.paths_of(seq, &mut |p| {
                    let overdue_after = overdue_after
                        .iter()
                        .find(|&&(id, _)| id == p)
                        .map_or(0.0, |&(_, after)| after);
                    // Before the tail a request not overdue yet is only copied off a lossy
                    // path: elsewhere its answer is late, not lost.
                    let sooner_copies = !before_tail || lossy.contains(&p);
                    sooner |= original_lands(p, seq).is_some_and(|lands| {
                        if lands > 0.0 {
                            sooner_copies && (at[i] < lands || found_late.contains(&p))
                        } else if lands > overdue_after {
                            false
                        } else {
                            self.resend_lands(view, now, p, seq, soonest)
                                .is_none_or(|resent| at[i] < resent)
                        }
                    })
                });
                if sooner {
                    found = Some(seq);
                    return false;
                }
            }
            true
        });
        found
    }

    /// The earliest modelled answer (before the error terms) of the requests the scheduler
    /// made on `path` that are still in flight; drops the entries of answered and lost
    /// requests it finds on top, so the heap holds about what is in flight.
    fn earliest_answer(&mut self, path: PathId) -> Option<Instant> {
        let state = self.clocks.get_mut(&path)?;
        while let Some(&Reverse((at, seq))) = state.answers.peek() {
            if self.predicted.get(&(path, seq)).is_some_and(|p| p.at == at) {
                return Some(at);
            }
            state.answers.pop();
        }
        None
    }

    /// Before the task's tail, whether `copy_candidate` could find anything: a path losing
    /// `LOSSY_PATH` or more, a path whose arrival clock reads zero (a request without a
    /// model is taken to land then), or a request overdue on its path. Otherwise no request
    /// qualifies, and the scan of everything in flight is skipped: at the reorder buffer's
    /// limit it ran on every call, over thousands of requests on a fast path.
    fn may_copy_before_tail(&mut self, view: &View<'_>, call: &PerCall) -> bool {
        if view.paths.iter().any(|q| q.loss_rate >= LOSSY_PATH) || call.at.iter().any(|&at| at <= 0.0) {
            return true;
        }
        let now = view.now.since_epoch().as_secs_f64();
        view.paths.iter().any(|q| {
            // The earliest answer: the others are later.
            self.earliest_answer(q.id)
                .is_some_and(|earliest| self.answer_in(now, q.id, earliest) <= self.overdue_after(q))
        })
    }

    /// Seconds from its modelled answer (0 or less, as `modelled_answer` counts) from which a
    /// request on path `q` counts as overdue for a copy.
    fn overdue_after(&self, q: &PathView) -> f64 {
        if q.loss_rate >= LOSSY_PATH {
            0.0
        } else {
            -OVERDUE_DEVIATIONS * self.clocks.get(&q.id).map_or(0.0, |c| c.deviation)
        }
    }

    /// The next moment a request in flight on one path only and not copied turns overdue:
    /// `copy_candidate`'s trigger once nothing is pending (each such request), and
    /// `player_copy`'s otherwise (the packet at the cursor). When the late requests are the
    /// last ones their path holds, no other event comes until that path's RTO.
    fn next_overdue(&self, view: &View<'_>) -> Option<Instant> {
        let now = view.now.since_epoch().as_secs_f64();
        let mut earliest = f64::INFINITY;
        let mut consider = |seq: u64, threshold: &dyn Fn(&PathView) -> f64| {
            let Some(q) = sole_holder(view, seq).and_then(|h| view.path(h)) else {
                return;
            };
            if let Some(lands) = self.modelled_answer(now, q.id, seq) {
                let until = lands - threshold(q);
                if until > 0.0 {
                    earliest = earliest.min(until);
                }
            }
        };
        if view.pending.is_empty() {
            view.scan_in_flight(&mut |seq, copies| {
                if copies == 1 && !self.copied.contains(&seq) {
                    consider(seq, &|q| self.overdue_after(q));
                }
                true
            });
        } else if view.player_buffer.is_some() && !self.copied.contains(&view.cursor) {
            consider(view.cursor, &|_| 0.0);
        }
        // Whole microseconds past the moment: a wake that lands on it, rounded down, would
        // find nothing overdue and ask for itself again.
        earliest
            .is_finite()
            .then(|| view.now + Duration::from_micros((earliest * 1e6).ceil() as u64 + 1))
    }

    /// Seconds from `now` until the answer to `seq`, overdue on `path`, if nothing is copied:
    /// the path finds it lost (RFC 9002 §6.1.2's time threshold, 9/8 · sRTT after sending it,
    /// when a request sent after it is there to be answered; the RTO otherwise) and
    /// the soonest path, answering `soonest` seconds after a request, asks again. `None` (no
    /// bound: copy) on a path losing `LOSSY_PATH` or more, where the resend may be lost too.
    fn resend_lands(&self, view: &View<'_>, now: f64, path: PathId, seq: u64, soonest: f64) -> Option<f64> {
        let predicted = self.predicted.get(&(path, seq))?;
        let holder = view.path(path)?;
        if holder.loss_rate >= LOSSY_PATH {
            return None;
        }
        // The path's clock, the modelled answer to its latest request, is past this one's
        // once a request went out after it.
        let sent_after = self
            .clocks
            .get(&path)
            .and_then(|c| c.clock)
            .is_some_and(|c| c > predicted.at);
        let found_after = if sent_after {
            holder.srtt.as_secs_f64() * 9.0 / 8.0
        } else {
            holder.rto.as_secs_f64()
        };
        Some((predicted.sent.since_epoch().as_secs_f64() + found_after - now).max(0.0) + soonest)
    }

    /// With a player attached, the packet at the in-order cursor if it is overdue on the one
    /// path holding it (its modelled answer, with that path's error terms, has passed) and the
    /// player's buffer is shorter than that path's RTO plus `i`'s answer: the longest a lost
    /// request there can take to be found (with few requests behind it, neither RFC 9002's
    /// packet nor time threshold fires) and asked again. And only once the original is
    /// `OVERDUE_DEVIATIONS` late, or the copy must go now to land before the playhead needs
    /// it (the buffer within `PLAYER_COPY_SLACK` of `i`'s answer).
    fn player_copy(&self, view: &View<'_>, at: &[f64], i: usize) -> Option<u64> {
        let buffer = until_cursor_frame(view)?;
        let seq = view.cursor;
        let me = view.paths[i].id;
        if self.copied.contains(&seq) {
            return None;
        }
        let holder = sole_holder(view, seq).filter(|&h| h != me)?;
        let lands = self.modelled_answer(view.now.since_epoch().as_secs_f64(), holder, seq)?;
        let rto = view.path(holder)?.rto.as_secs_f64();
        let deviation = self.clocks.get(&holder).map_or(0.0, |c| c.deviation);
        let late = lands <= -OVERDUE_DEVIATIONS * deviation;
        let needed = buffer <= at[i] + PLAYER_COPY_SLACK;
        (lands <= 0.0 && buffer < rto + at[i] && (late || needed)).then_some(seq)
    }

    /// While the player waits for its first frame (packets below `end`), one of its packets in
    /// flight only on a path answering later than `i`, not copied before, whose original is at
    /// risk: its path loses `LOSSY_PATH` or more, has given fewer answers than it takes to tell
    /// a loss rate that low from zero, answers later than the copy would land (the model's
    /// answer, with the path's error terms), or answers later than `i` even without a queue
    /// (a loss there is unmeasured, not ruled out, and costs the frame a loss detection and a
    /// resend). An original overdue comes first, the lowest: it is the likeliest lost, and
    /// its loss is found only once later answers pass it. Then the latest modelled answer:
    /// the packet the frame would wait for last.
    fn first_frame_copy(&self, view: &View<'_>, call: &PerCall, i: usize, end: u64) -> Option<u64> {
        let now = view.now.since_epoch().as_secs_f64();
        let copier = unqueued_answer(&view.paths[i]);
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
            let at_risk = q.loss_rate >= LOSSY_PATH
                || (q.delivered as f64) < 1.0 / LOSSY_PATH
                || unqueued_answer(q) > copier
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

    /// Path `i` waits in the queue of a path kept in its place (see the module's doc).
    fn shadowed(&mut self, view: &View<'_>, call: &PerCall, i: usize) -> bool {
        let at = &call.at;
        let me = &view.paths[i];
        let answered = |p: &PathView| self.clocks.get(&p.id).and_then(|c| c.last_round_rate).unwrap_or(0.0);
        for (j, kept) in view.paths.iter().enumerate() {
            let pair = (me.id.min(kept.id), me.id.max(kept.id));
            if j == i || self.separate.contains(&pair) {
                continue;
            }
            match self.sharing.get(&pair).copied() {
                Some(Sharing::Confirmed { keep }) => {
                    // Only while the kept path answers sooner: it may fail or fall behind.
                    if keep == kept.id && at[j] <= at[i] {
                        return true;
                    }
                }
                Some(Sharing::Trial { keep, since, needed }) if keep == kept.id => {
                    let trial = SHARED_TRIAL_RTTS * kept.srtt.as_secs_f64();
                    if (view.now - since).as_secs_f64() < trial {
                        return true;
                    }
                    if answered(kept) >= needed {
                        self.sharing.insert(pair, Sharing::Confirmed { keep });
                        return true;
                    }
                    self.sharing.remove(&pair);
                    self.separate.insert(pair);
                }
                Some(Sharing::Trial { .. }) => {}
                None => {
                    let later =
                        at[j] <= at[i] && me.min_rtt.as_secs_f64() >= SHARED_RTT_RATIO * kept.min_rtt.as_secs_f64();
                    // Evaluated last: most pairs fail a cheaper test first.
                    let coherent = || {
                        self.queues
                            .coherence(me.id, kept.id)
                            .is_some_and(|c| c >= SHARED_COHERENCE)
                            && self
                                .queues
                                .deviations(me.id, kept.id)
                                .is_some_and(|(a, b)| a.min(b) >= SHARED_QUEUE_FLOOR)
                    };
                    // The two carry no more than the kept path has carried alone (half of
                    // this path's rate is the margin), this path carries enough of it for the
                    // trial to measure, and there is work to carry.
                    let (mine, theirs) = (answered(me), answered(kept));
                    let no_gain = theirs + 0.5 * mine <= call.rate[j];
                    let measurable = theirs > 0.0 && mine > 0.0 && mine >= SHARED_MIN_SHARE * (mine + theirs);
                    if later && no_gain && measurable && !view.pending.is_empty() && coherent() {
                        self.sharing.insert(
                            pair,
                            Sharing::Trial {
                                keep: kept.id,
                                since: view.now,
                                needed: SHARED_CONFIRM * (mine + theirs),
                            },
                        );
                        return true;
                    }
                }
            }
        }
        false
    }

    /// Sends `seq` on path `p`, whose answer is predicted `arrival` seconds from now.
    fn pick(&mut self, now: Instant, p: &PathView, seq: u64, arrival: f64) -> Option<Pick> {
        self.requests += 1;
        let path = p.id;
        let state = self.clocks.entry(path).or_default();
        // The clock chains the model's predictions; the error terms are added when read, and
        // the loss penalty too: it is what a loss adds on average to this answer, not a delay
        // the next request waits behind.
        let model = (arrival - state.shift()).max(0.0);
        let model = (model - loss_penalty(p)).max(p.min_rtt.as_secs_f64());
        let raw = Instant::from_nanos(((now.since_epoch().as_secs_f64() + model) * 1e9) as u64);
        state.clock = Some(raw);
        state.answers.push(Reverse((raw, seq)));
        let queued = (model - unqueued_answer(p)).max(0.0);
        self.predicted.insert(
            (path, seq),
            Prediction {
                at: raw,
                queued,
                sent: now,
            },
        );
        Some(Pick { path, seq })
    }

    /// Asks again on path `p` for `seq`, in flight elsewhere: once per packet, against the cap.
    fn copy(&mut self, now: Instant, p: &PathView, seq: u64, arrival: f64) -> Option<Pick> {
        self.copied.insert(seq);
        self.copies += 1;
        self.pick(now, p, seq, arrival)
    }

    fn sample_arrivals(&mut self, now: Instant) {
        self.front_rate.sample(now, self.arrived);
        self.long_rate.sample(now, self.arrived);
    }

    /// Video seconds of new packets that arrived per second over the window of `rate`: the
    /// rate the in-order bytes advance at, whatever is held back; `None` before a window's
    /// worth of samples.
    fn video_rate<const W: u64, const S: u64>(
        &self,
        rate: &ArrivalRate<W, S>,
        view: &View<'_>,
        bitrate_bps: u64,
    ) -> Option<f64> {
        let packets = rate.per_second(view.now, self.arrived)?;
        (bitrate_bps > 0).then(|| packets * view.packet_size as f64 * 8.0 / bitrate_bps as f64)
    }

    /// Seconds of video that arrived but wait out of order, as the paths' different delays
    /// keep it all along: over each two round trips of the slowest path, the most that waited
    /// (the in-order bytes advance in steps, one per answer that fills the hole at the
    /// cursor, and a frame is as likely to be entered just before a step as anywhere), and
    /// the median of those over the last `FRONT_WINDOW`: a lost packet's hole lasts a round
    /// trip or two and comes and goes, and between two tasks nothing waits.
    fn steady_out_of_order(&mut self, view: &View<'_>, out_of_order: f64) -> f64 {
        let now = view.now;
        let round = view.paths.iter().map(|p| p.srtt).max().unwrap_or(Duration::ZERO) * 2;
        // Only the round trip under way changes between calls; the median is of the others.
        let mut changed = false;
        match self.out_of_order.back_mut() {
            Some((start, most)) if now < *start + round => *most = most.max(out_of_order),
            _ => {
                self.out_of_order.push_back((now, out_of_order));
                changed = true;
            }
        }
        while self
            .out_of_order
            .front()
            .is_some_and(|&(start, _)| start + FRONT_WINDOW < now)
        {
            self.out_of_order.pop_front();
            changed = true;
        }
        if changed {
            let complete = self.out_of_order.len().saturating_sub(1);
            let most = &mut self.call.scratch;
            most.clear();
            most.extend(self.out_of_order.iter().take(complete).map(|&(_, most)| most));
            self.steady = (complete > 0).then(|| *most.select_nth_unstable_by(complete / 2, f64::total_cmp).1);
        }
        self.steady.unwrap_or(out_of_order)
    }

    /// The first packet not in yet, were `held` in: the in-order cursor, or past `held` when
    /// it is the cursor.
    fn front_without(view: &View<'_>, held: Option<u64>) -> u64 {
        let Some(held) = held.filter(|&h| h == view.cursor) else {
            return view.cursor;
        };
        let pending = view
            .pending
            .holes
            .range(held + 1..)
            .next()
            .copied()
            .unwrap_or(view.pending.next_new);
        let mut in_flight = pending;
        view.scan_in_flight(&mut |seq, _| {
            if seq > held {
                in_flight = seq;
                return false;
            }
            true
        });
        pending.min(in_flight)
    }

    /// While playing, the frame to stall at: where the last stall had better be
    /// (`last_stall`), or, sooner, with packets arriving slower than the video plays, the
    /// frame the playhead would reach with less than a frame of it in: the buffer ahead of the
    /// playhead shrinks by `(1 − ρ)` a second, ρ the arrivals' rate in video seconds a second,
    /// so `v` seconds past the playhead it holds `B − (1 − ρ)·v`, under a frame from
    /// `v = (B − frame) ÷ (1 − ρ)`. `B` is what has arrived, in order or not, less the
    /// steady out-of-order share, with the packet held back (`held`) counted as in: the
    /// in-order bytes alone dip with every lost packet's hole for a round trip or two, and a
    /// hold placed on a dip stalls with more arrived than needed.
    fn stall_frame(&mut self, view: &View<'_>, held: Option<u64>) -> Option<u64> {
        let player = view.player?;
        if !player.has_started() || player.is_stalled() || player.is_finished() {
            self.out_of_order.clear();
            self.steady = None;
            return None;
        }
        let spec = player.spec();
        let position = player.position(view.now);
        let front = spec.time_of(Self::front_without(view, held).saturating_mul(view.packet_size));
        // One sequence number per packet from the first cursor on: the unique arrivals end
        // where the in-order bytes would if every hole were filled.
        let first = self.first_cursor.unwrap_or(view.cursor);
        let arrived = spec.time_of((first + self.arrived).max(view.cursor).saturating_mul(view.packet_size));
        let out_of_order = self.steady_out_of_order(view, arrived.saturating_sub(front).as_secs_f64());
        let buffer = arrived.saturating_sub(position).as_secs_f64() - out_of_order;
        let frame = 1.0 / f64::from(spec.fps.max(1));
        let dry = self
            .video_rate(&self.front_rate, view, spec.bitrate_bps)
            .filter(|&rate| rate < 1.0)
            .map(|rate| {
                let ahead = ((buffer - frame) / (1.0 - rate)).clamp(0.0, spec.duration.as_secs_f64());
                position + Duration::from_secs_f64(ahead)
            });
        let at = min_of(dry, self.last_stall(view, spec, position, arrived, buffer))?;
        let index = spec.first_frame_from(at);
        (index < spec.frames()).then_some(index)
    }

    /// Where the last stall before the end of the video had better be: a stall lasts until
    /// `resume` is buffered, and what of it is still unplayed when the last packet arrives
    /// was waited for in vain. Stalled at `s` with ρ < 1 the arrivals' rate, playback runs
    /// dry again `resume ÷ (1 − ρ)` of video later; from `s = duration − (resume − margin)
    /// ÷ (1 − ρ)` the buffer the stall fills lasts to the end with `LAST_STALL_MARGIN` to
    /// spare. A stall there (it comes with some video in, so it is shorter by that)
    /// replaces the one the buffer would run into later, which would fill `resume` with less
    /// of the video left to play it over. Only while the buffer is to run dry before the last packet arrives, at the rate over
    /// `LAST_STALL_WINDOW`, while `s` is still ahead of the playhead, and while `s` lies
    /// within that window of the end: the rate is not extrapolated further than it was
    /// measured over. Near ρ = 1 (a download barely ahead of the video, as Kondo's E under
    /// Compound) `s` lies minutes before the end, and a dip of the rate there placed a
    /// stall the others did not have (seed 13: 0.22 s).
    fn last_stall(
        &self,
        view: &View<'_>,
        spec: &VideoSpec,
        position: Duration,
        arrived: Duration,
        buffer: f64,
    ) -> Option<Duration> {
        let rate = self
            .video_rate(&self.long_rate, view, spec.bitrate_bps)
            .filter(|&rate| rate > 0.0 && rate < 1.0)?;
        let duration = spec.duration.as_secs_f64();
        let to_arrive = spec.duration.saturating_sub(arrived).as_secs_f64();
        // The buffer when the last packet arrives, were playback not to stall before it.
        if buffer - (1.0 - rate) / rate * to_arrive >= 0.0 {
            return None;
        }
        let refill = spec.resume.saturating_sub(LAST_STALL_MARGIN).as_secs_f64();
        let before_end = refill / (1.0 - rate);
        let at = duration - before_end;
        (at > position.as_secs_f64() && before_end <= LAST_STALL_WINDOW.as_secs_f64())
            .then(|| Duration::from_secs_f64(at))
    }

    /// The packet held back so that playback, about to run dry, stalls at a frame's start
    /// instead of creeping through incomplete frames: from the frame `stall_frame` finds,
    /// each frame is entered before all of it is in, and discarded (Kondo's picture
    /// discard), about `1 ÷ (1 − ρ)` of them before the buffer runs dry (25 at ρ = 0.96).
    /// The held packet is the frame's second (its first also ends the previous frame): the
    /// frame is lost either way, the previous one is kept, and the playhead stops a packet
    /// into the frame. Once a pick went past it (`Weave::held`), the packet stays held while
    /// the prediction puts the stall no more than `HOLD_SLACK` past it: the prediction moves
    /// with every burst of arrivals. Returns the packet and its frame.
    fn stall_hold(&mut self, view: &View<'_>) -> Option<(u64, u64)> {
        let held = self.held.take().filter(|&(seq, _)| view.pending.rank(seq).is_some());
        let index = self.stall_frame(view, held.map(|(seq, _)| seq))?;
        let spec = view.player?.spec();
        if let Some((seq, frame)) = held {
            if spec.frame_start(frame) <= spec.frame_start(index) + HOLD_SLACK {
                self.held = held;
                return Some((seq, frame));
            }
        }
        let size = view.packet_size.max(1);
        let boundary = |index: u64| spec.bytes_at(spec.frame_start(index)).div_ceil(size);
        let mut index = index.max(1);
        // Asked for already: the first frame after it whose packet has not been.
        while index < spec.frames()
            && boundary(index) < view.pending.next_new
            && view.pending.rank(boundary(index)).is_none()
        {
            index += 1;
        }
        (index < spec.frames()).then(|| (boundary(index), index))
    }

    /// The decision of one `next()` call, on the per-path values of `call`.
    fn choose(&mut self, view: &View<'_>, call: &PerCall, queue: Queue<'_>) -> Option<Pick> {
        let pending = queue.len();
        let soonest = call.at.iter().copied().fold(f64::INFINITY, f64::min);
        // Copies so far against their cap; it moves only with a pick, which ends the call.
        let may_copy = self.copies < COPY_ALLOWANCE + (self.requests as f64 * COPY_SHARE) as u64;
        // Some path with room reached the copy rules.
        let mut could_copy = false;
        let at_task_tail = view.reorder_limit >= view.task_end;
        // Whether a copy before the task's tail is possible at all, once asked.
        let mut before_tail = None;
        let first_frame_end = view.first_frame_end();
        // Soonest answer first: it takes the head of the queue, the others their offsets.
        for &j in &call.order {
            let p = &view.paths[j];
            if !self.under_pipe_cap(view, p) || self.shadowed(view, call, j) {
                continue;
            }
            could_copy |= may_copy;
            if may_copy {
                if let Some(seq) = self.player_copy(view, &call.at, j) {
                    return self.copy(view.now, p, seq, call.at[j]);
                }
            }
            let k = Self::offset(call, j);
            // Nothing of the first frame left for the soonest path to ask for: what is at
            // risk of it. A later path's copy would land after the soonest path's, which only
            // has to ask for what of the frame is left first (by Eq. 7, no more than the
            // later path's offset) or wait for its window.
            let frame_copy = first_frame_end
                .filter(|&end| may_copy && call.at[j] <= soonest && queue.nth(k).is_none_or(|seq| seq >= end))
                .and_then(|end| self.first_frame_copy(view, call, j, end));
            if let Some(seq) = frame_copy {
                return self.copy(view.now, p, seq, call.at[j]);
            }
            if k < pending {
                let seq = queue.nth(k)?;
                if k > 0 && self.near_the_buffer_limit(view, call, j, seq) {
                    continue;
                }
                return self.pick(view.now, p, seq, call.at[j]);
            }
            if pending > 0 {
                // The queue ends (the task's tail, or the reorder buffer's limit) before this
                // path's turn: the last packet, if it lands before the sooner paths get to it.
                let theirs = Self::drain_time(call, j, pending).map_or(f64::INFINITY, |d| d + soonest);
                if call.at[j] < theirs {
                    let seq = queue.nth(pending - 1)?;
                    return self.pick(view.now, p, seq, call.at[j]);
                }
                continue;
            }
            if may_copy && (at_task_tail || *before_tail.get_or_insert_with(|| self.may_copy_before_tail(view, call))) {
                if let Some(seq) = self.copy_candidate(view, &call.at, soonest, j, !at_task_tail) {
                    return self.copy(view.now, p, seq, call.at[j]);
                }
            }
        }
        if could_copy {
            self.wake = self.next_overdue(view);
        }
        None
    }
}

impl Scheduler for Weave {
    fn name(&self) -> &'static str {
        "weave"
    }

    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        self.wake = None;
        self.update_peaks(view);
        self.first_cursor.get_or_insert(view.cursor);
        self.sample_arrivals(view.now);
        let hold = self.stall_hold(view);
        let mut call = std::mem::take(&mut self.call);
        self.per_call(view, &mut call);
        // Held only while something else is pending: the task cannot end without the packet,
        // and the paths would idle until playback stalls.
        let queue = Queue {
            pending: view.pending,
            held: hold
                .and_then(|(seq, _)| view.pending.rank(seq))
                .filter(|_| view.pending.len() > 1),
        };
        let pick = self.choose(view, &call, queue);
        if let (Some(hold), Some(pick)) = (hold, pick) {
            // A pick past the packet: it is held from now on, even as the prediction moves.
            if pick.seq > hold.0 && queue.held.is_some() {
                self.held = Some(hold);
            }
        }
        self.call = call;
        if queue.held.is_some() {
            // The hold ends once playback stalls at it: be called then.
            let dry = view
                .player
                .and_then(Player::runs_dry_at)
                .map(|at| at + Duration::from_micros(1));
            self.wake = min_of(self.wake, dry);
        }
        pick
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.wake
    }

    fn on_event(&mut self, now: Instant, event: &SchedEvent) {
        match *event {
            SchedEvent::Arrived {
                path,
                seq,
                rtt,
                duplicate,
            } => {
                self.arrived += u64::from(!duplicate);
                self.copied.remove(&seq);
                let state = self.clocks.entry(path).or_default();
                let predicted = self.predicted.remove(&(path, seq));
                // A zero RTT: the answer matched no request in flight, so no sample.
                if rtt > Duration::ZERO {
                    let rtt = rtt.as_secs_f64();
                    state.on_rtt_sample(now, rtt, predicted.map_or(0.0, |p| p.queued));
                    let least = state.least_rtt.map_or(rtt, |l| l.min(rtt));
                    state.least_rtt = Some(least);
                    self.queues.on_sample(now, path, rtt - least);
                }
                if let Some(predicted) = predicted {
                    state.on_error(now.since_epoch().as_secs_f64() - predicted.at.since_epoch().as_secs_f64());
                }
                self.earliest_answer(path);
            }
            SchedEvent::Lost { path, seq } => {
                self.predicted.remove(&(path, seq));
                self.earliest_answer(path);
            }
            SchedEvent::PathRemoved(path) => {
                self.clocks.remove(&path);
                self.queues.remove(path);
                self.sharing.retain(|&(a, b), _| a != path && b != path);
                self.separate.retain(|&(a, b)| a != path && b != path);
                self.predicted.retain(|&(p, _), _| p != path);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Fixture, path, paths_of, seqs_of};
    use super::*;
    use crate::player::{Player, VideoSpec};

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

    /// Packet 10_000, the player's next, asked on the 80 ms path 1 at 1.1 s, whose answers
    /// vary by `deviation` seconds; at `now_ms` the 20 ms path 0 has room and `buffer_ms` of
    /// video is buffered. What does path 0 ask for?
    fn player_copy_pick(deviation: f64, now_ms: u64, buffer_ms: u64) -> Option<Pick> {
        let mut f = Fixture::new(vec![path(1, 80, 8, 0)], 10_000..10_010);
        f.now = Instant::from_nanos(1_100_000_000);
        let mut w = Weave::default();
        let first = w.next(&f.view()).unwrap();
        assert_eq!(
            first,
            Pick {
                path: PathId(1),
                seq: 10_000
            }
        );
        f.apply(first);
        w.clocks.get_mut(&PathId(1)).unwrap().deviation = deviation;
        f.paths.insert(0, path(0, 20, 8, 0));
        f.now = Instant::from_nanos(now_ms * 1_000_000);
        // 8 Mbit/s: a millisecond of video is 1000 bytes.
        let spec = VideoSpec::new(8_000_000, Duration::from_secs(60));
        let mut player = Player::new(spec, Instant::ZERO).unwrap();
        player.on_delivered(Instant::ZERO, 1_000 * (now_ms + buffer_ms));
        player.advance(f.now);
        f.player = Some(player);
        w.next(&f.view())
    }

    /// A player 2 s into a video of 1000-byte packets at 8 Mbit/s (a packet a millisecond of
    /// video, 30 frames a second) with 100 ms in order ahead of the playhead, `arrived`
    /// packets having come in the last 2 s, and nothing in flight: what does a path with room
    /// for 700 requests ask for?
    fn picks_near_a_stall(arrived: u64) -> Vec<u64> {
        let mut f = Fixture::new(vec![path(0, 20, 700, 0)], 2_100..10_000);
        // The download began at packet 0.
        let mut w = Weave {
            first_cursor: Some(0),
            ..Weave::default()
        };
        w.sample_arrivals(Instant::ZERO);
        for seq in 0..arrived {
            let event = SchedEvent::Arrived {
                path: PathId(0),
                seq,
                rtt: Duration::ZERO,
                duplicate: false,
            };
            w.on_event(Instant::from_nanos(seq * 1_000_000), &event);
        }
        f.now = Instant::from_nanos(2_000_000_000);
        let mut player = Player::new(VideoSpec::new(8_000_000, Duration::from_secs(60)), Instant::ZERO).unwrap();
        player.on_delivered(Instant::ZERO, 2_100_000);
        player.advance(f.now);
        f.player = Some(player);
        seqs_of(&f.run(&mut w))
    }

    #[test]
    fn playback_about_to_run_dry_stalls_at_a_frames_start() {
        // 1 700 packets in 2 s: the in-order bytes advance at 0.85 of the video's rate, and
        // the 100 ms buffered fall under a frame (33 ms) (100 − 33) ÷ (1 − 0.85) = 444 ms past
        // the playhead, from frame 74 (2.467 s, bytes from 2 466 667) on. Its first full
        // packet, 2 467, is held back: the playhead stops there instead of entering every
        // frame after it before all of it is in.
        let picks = picks_near_a_stall(1_700);
        assert_eq!(picks.len(), 700);
        assert!(picks.contains(&2_466) && picks.contains(&2_468));
        assert!(!picks.contains(&2_467));
        // At 1.1 times the video's rate the buffer grows: nothing is held.
        let picks = picks_near_a_stall(2_200);
        assert_eq!(picks, (2_100..2_800).collect::<Vec<_>>());
    }

    /// Where a player at `position_s` of a 60-s video, with `buffer_s` arrived ahead of it
    /// and packets arriving at 0.9 of the video's rate over the last 30 s, has its last stall.
    fn last_stall_at(position_s: f64, buffer_s: f64) -> Option<Duration> {
        last_stall_in(60, 0.9, position_s, buffer_s)
    }

    /// As `last_stall_at`, for a video of `video_s` seconds and packets arriving at `rate` of
    /// the video's rate.
    fn last_stall_in(video_s: u64, rate: f64, position_s: f64, buffer_s: f64) -> Option<Duration> {
        let mut f = Fixture::new(vec![path(0, 20, 700, 0)], 0..1);
        let mut w = Weave::default();
        w.sample_arrivals(Instant::ZERO);
        // 8 Mbit/s in 1000-byte packets: a packet a millisecond of video.
        w.arrived = (30_000.0 * rate).round() as u64;
        f.now = Instant::from_nanos(30_000_000_000);
        w.sample_arrivals(f.now);
        let spec = VideoSpec::new(8_000_000, Duration::from_secs(video_s));
        let position = Duration::from_secs_f64(position_s);
        let arrived = Duration::from_secs_f64(position_s + buffer_s);
        w.last_stall(&f.view(), &spec, position, arrived, buffer_s)
    }

    #[test]
    fn the_last_stall_fills_a_buffer_that_lasts_to_the_end() {
        // At ρ = 0.9 the 0.5 s ahead of the playhead at 40 s falls 1.7 s short of the 19.5 s
        // still to arrive: the last stall is at 60 − (1 − 0.3) ÷ (1 − 0.9) = 53 s, and the
        // 1 s it fills lasts to the end with 0.3 s to spare.
        let at = last_stall_at(40.0, 0.5).unwrap();
        assert!((at.as_secs_f64() - 53.0).abs() < 1e-6, "{at:?}");
        // 2.5 s ahead at 40 s last to the end: no stall to place.
        assert_eq!(last_stall_at(40.0, 2.5), None);
        // Past 53 s the stall the buffer runs into is the one there is.
        assert_eq!(last_stall_at(54.0, 0.5), None);
        // At ρ = 0.99, 0.5 s ahead at 400 s of 600 falls 1.5 s short too, but the stall would
        // go 70 s before the end: further than the 30 s the rate was measured over.
        assert_eq!(last_stall_in(600, 0.99, 400.0, 0.5), None);
        // At ρ = 0.98, 35 s before the end; at ρ = 0.97, 23.3 s before it.
        assert_eq!(last_stall_in(600, 0.98, 400.0, 0.5), None);
        let at = last_stall_in(600, 0.97, 400.0, 0.5).unwrap();
        assert!((at.as_secs_f64() - (600.0 - 0.7 / 0.03)).abs() < 1e-3, "{at:?}");
    }

    #[test]
    fn a_pending_packets_rank_counts_the_holes_first() {
        let holes = [3, 7].into_iter().collect();
        let pending = Pending {
            holes: &holes,
            next_new: 10,
            new_end: 20,
        };
        assert_eq!(pending.rank(7), Some(1));
        assert_eq!(pending.rank(12), Some(4));
        assert_eq!(pending.nth(4), Some(12));
        assert_eq!(pending.rank(5), None);
        assert_eq!(pending.rank(20), None);
    }

    fn on_path_0(seq: u64) -> Option<Pick> {
        Some(Pick { path: PathId(0), seq })
    }

    #[test]
    fn the_players_next_packet_overdue_on_its_path_is_asked_again_when_the_buffer_runs_short() {
        // Overdue at 1.2 s. Lost, it could take the 80 ms path's RTO (240 ms) to be found,
        // and the 20 ms path's answer to come: with 100 ms of video buffered the fast path
        // asks for it again; with 400 ms it takes the head of the queue.
        for (buffer_ms, expected) in [(100, 10_000), (400, 10_001)] {
            assert_eq!(
                player_copy_pick(0.0, 1_200, buffer_ms),
                on_path_0(expected),
                "{buffer_ms} ms buffered"
            );
        }
    }

    #[test]
    fn the_players_next_packet_barely_overdue_is_asked_again_only_when_it_must_go_now() {
        // Answers that vary by 50 ms put the modelled answer, with the error terms, at 1.23 s.
        // 20 ms past it the original is more likely late than lost: with 100 ms buffered the
        // 20 ms path goes on with the queue, with 30 ms it must ask again now to land in
        // time; 170 ms past it (over 3 deviations) it asks again with 100 ms buffered.
        // The packet is due when the playhead enters its frame: 45 ms buffered end 28 ms into
        // frame 38 (1 266.7-1 300 ms), entered in 16.7 ms, so the copy must go now; with 85 ms
        // the cursor's frame (39, from 1 300 ms) is 50 ms away.
        for (now_ms, buffer_ms, expected) in [
            (1_250, 100, 10_001),
            (1_250, 30, 10_000),
            (1_400, 100, 10_000),
            (1_250, 45, 10_000),
            (1_250, 85, 10_001),
        ] {
            assert_eq!(
                player_copy_pick(0.05, now_ms, buffer_ms),
                on_path_0(expected),
                "{buffer_ms} ms buffered at {now_ms} ms"
            );
        }
    }

    #[test]
    fn a_lossy_paths_penalty_stays_on_its_answers_once_they_come_in_time() {
        // One 20 ms path whose losses add 10 ms to an answer on average (Eq. 6's E − sRTT),
        // room for 4 requests: asked at once, answered 5 ms apart (a window per sRTT) from
        // 20 ms on, as the model chains them, the penalty not among the delays it chains.
        let mut f = Fixture::new(vec![path(0, 20, 4, 0)], 0..100);
        f.path_mut(0).expected_time = Duration::from_millis(30);
        let mut w = Weave::default();
        let picks = f.run(&mut w);
        assert_eq!(seqs_of(&picks), vec![0, 1, 2, 3]);
        for seq in 0..4 {
            f.now = Instant::from_nanos(20_000_000 + seq * 5_000_000);
            f.arrive(seq, 0);
            let event = SchedEvent::Arrived {
                path: PathId(0),
                seq,
                rtt: f.now - Instant::ZERO,
                duplicate: false,
            };
            w.on_event(f.now, &event);
        }
        // The answers came as modelled: no error to learn (a penalty among the chained delays
        // would have been learnt away as an error of −6.8 ms).
        let clock = &w.clocks[&PathId(0)];
        assert!(clock.error.abs() < 1e-9 && clock.deviation.abs() < 1e-9, "{clock:?}");
        // The next request, sent into an empty pipe, is answered after the minimum RTT plus
        // the penalty.
        let mut call = PerCall::default();
        w.per_call(&f.view(), &mut call);
        assert!((call.at[0] - 0.030).abs() < 1e-9, "{:?}", call.at);
    }

    /// The pipe-cap RTT of a round trip of 100 ms (opened by a 100 ms sample at 0) whose
    /// other answers, none queued behind the model's requests, measured `samples_ms`; closed
    /// by an answer at 100 ms.
    fn round_pipe_rtt(samples_ms: &[f64]) -> Option<f64> {
        let mut clock = PathClock::default();
        clock.on_rtt_sample(Instant::ZERO, 0.1, 0.0);
        for (i, &rtt) in samples_ms.iter().enumerate() {
            clock.on_rtt_sample(Instant::from_nanos(1_000_000 * (i as u64 + 1)), rtt / 1e3, 0.0);
        }
        clock.on_rtt_sample(Instant::from_nanos(100_000_000), 0.1, 0.0);
        clock.last_round_pipe_rtt
    }

    #[test]
    fn a_jittery_round_trip_sizes_the_pipe_cap_by_its_mean_rtt_and_a_queued_one_by_its_least() {
        // Samples from 100 to 120 ms (a queue's rise, or little jitter): the smallest.
        let tight = round_pipe_rtt(&[105.0, 110.0, 115.0, 120.0]).unwrap();
        assert!((tight - 0.100).abs() < 1e-9, "{tight}");
        // From 100 to 220 ms: mean 160 ms, 60 % above the smallest.
        let jittery = round_pipe_rtt(&[130.0, 160.0, 190.0, 220.0]).unwrap();
        assert!((jittery - 0.160).abs() < 1e-9, "{jittery}");
        // A request the model queued behind most of its RTT says nothing of the pipe.
        let mut clock = PathClock::default();
        clock.on_rtt_sample(Instant::ZERO, 0.1, 0.09);
        clock.on_rtt_sample(Instant::from_nanos(100_000_000), 0.1, 0.09);
        assert_eq!(clock.last_round_pipe_rtt, None);
    }

    #[test]
    fn a_slow_path_leaves_a_packet_near_the_buffers_limit_when_its_answers_vary_more_than_the_slack() {
        // The reorder buffer ends the queue at 50 (the task runs to 1000). The fast path's
        // window is full; the slow one's turn is packet 40, which the fast path (1000
        // packets/s) passes 10 ms before it reaches the limit. Answers varying by 1 ms (4 ms
        // for 4 deviations): it takes it; by 5 ms (20 ms): it waits.
        for (deviation, expected) in [(0.001, Some(40)), (0.005, None)] {
            let mut f = Fixture::new(vec![measured(path(0, 10, 10, 10)), measured(path(1, 50, 5, 0))], 0..50);
            f.task_end = 1000;
            let mut w = Weave::default();
            w.clocks.entry(PathId(1)).or_default().deviation = deviation;
            let pick = w.next(&f.view());
            assert_eq!(pick.map(|p| p.seq), expected, "deviation {deviation}");
        }
    }

    #[test]
    fn a_path_not_answered_yet_leaves_a_packet_near_the_buffers_limit() {
        // As above, with answers that do not vary: the slow path takes packet 40, 10 ms
        // before the fast path reaches the limit, once it has delivered; before its first
        // answer its deviation is half its 50 ms RTT (100 ms for 4 deviations): it waits.
        for (delivered, expected) in [(1000, Some(40)), (0, None)] {
            let mut slow = measured(path(1, 50, 5, 0));
            slow.delivered = delivered;
            let mut f = Fixture::new(vec![measured(path(0, 10, 10, 10)), slow], 0..50);
            f.task_end = 1000;
            let pick = Weave::default().next(&f.view());
            assert_eq!(pick.map(|p| p.seq), expected, "delivered {delivered}");
        }
    }

    #[test]
    fn the_fast_path_takes_the_head_and_the_slow_path_its_offset() {
        // 10 ms and 50 ms paths; the fast one delivers 10 packets per... cwnd 10 / 10 ms.
        let mut f = Fixture::new(vec![path(0, 10, 10, 0), path(1, 50, 10, 0)], 0..1000);
        let mut w = Weave::default();
        let first = w.next(&f.view()).unwrap();
        assert_eq!(
            first,
            Pick {
                path: PathId(0),
                seq: 0
            }
        );
        f.apply(first);
        f.path_mut(0).can_send = false;
        let second = w.next(&f.view()).unwrap();
        // The fast path's next request would land at 11 ms, one packet time after packet 0:
        // offset = (50 − 11) ms · 1000 packets/s = 39 packets past packet 0.
        assert_eq!(
            second,
            Pick {
                path: PathId(1),
                seq: 40
            }
        );
    }

    /// The answer to `seq` on path `path`, `rtt_ms` after its request.
    fn answer(path: u32, seq: u64, rtt_ms: u64) -> SchedEvent {
        SchedEvent::Arrived {
            path: PathId(path),
            seq,
            rtt: Duration::from_millis(rtt_ms),
            duplicate: false,
        }
    }

    /// A path delivering 1000 packets per second (the fixture's packets are 1000 bytes).
    fn measured(mut p: PathView) -> PathView {
        p.delivery_rate = Some(1_000_000.0);
        p.delivered = 1000;
        p
    }

    #[test]
    fn a_burst_on_the_slow_path_interleaves_with_the_fast_one() {
        // The fast path's window is full; the slow one opens 5 requests at once. Their answers
        // come 1 ms apart (1000 packets/s), so each skips one more packet for the fast path
        // than the one before: 40, 42, 44... With one sRTT for all five they would take
        // 40, 41, 42, 43, 44, and the fast path's packets would arrive behind them.
        let mut f = Fixture::new(
            vec![measured(path(0, 10, 10, 10)), measured(path(1, 50, 5, 0))],
            0..1000,
        );
        let mut w = Weave::default();
        let picks = f.run(&mut w);
        assert_eq!(paths_of(&picks), vec![1; 5]);
        assert_eq!(seqs_of(&picks), vec![40, 42, 44, 46, 48]);
    }

    #[test]
    fn two_unmeasured_paths_share_their_first_windows_in_turn() {
        // Nothing measured yet on either 80 ms path: a window of 4 per sRTT stands in for the
        // rate, so each request lands 20 ms after the path's one before, and the paths take
        // the head in turn. Modelled all at once, path 0 took 0-3 and path 1 4-7: path 1's
        // answers to 4-7 waited behind path 0's, and each of path 0's second to fourth
        // answers was overdue when path 1's first came (Kondo A: 7 copies before the first
        // frame, which came 9 ms late).
        let mut f = Fixture::new(vec![path(0, 80, 4, 0), path(1, 80, 4, 0)], 0..1000);
        let picks = f.run(&mut Weave::default());
        assert_eq!(paths_of(&picks), vec![0, 1, 0, 1, 0, 1, 0, 1]);
        assert_eq!(seqs_of(&picks), (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn answers_faster_than_the_peak_space_the_clock() {
        // As above, but the slow path's last round trip brought 2000 answers per second: its
        // answers are predicted 0.5 ms apart, not 1 ms, and interleave half as far.
        let mut f = Fixture::new(
            vec![measured(path(0, 10, 10, 10)), measured(path(1, 50, 5, 0))],
            0..1000,
        );
        let mut w = Weave::default();
        for i in 0..=100u64 {
            w.on_event(Instant::from_nanos(i * 500_000), &answer(1, 2000 + i, 50));
        }
        f.now = Instant::from_nanos(50_000_000);
        let picks = f.run(&mut w);
        assert_eq!(paths_of(&picks), vec![1; 5]);
        assert_eq!(seqs_of(&picks), vec![40, 41, 43, 44, 46]);
    }

    /// A 10 ms path (full window, 1500 packets/s peak) and a 30 ms one, answered for 400 ms:
    /// the fast one at 1000 packets/s, the slow one at 200, their RTTs `fast_queue(bin)` and
    /// `slow_queue(bin)` ms above their minimum in each 10 ms bin. Then, for 100 ms, the fast
    /// path alone at `trial_rate`. Returns the picks the slow path makes at 400 ms (the start
    /// of the trial, if any) and at 500 ms (after it).
    fn slow_path_picks_beside_a_queue(
        fast_queue: impl Fn(u64) -> f64,
        slow_queue: impl Fn(u64) -> f64,
        trial_rate: f64,
    ) -> (Option<Pick>, Option<Pick>) {
        let mut fast = path(0, 10, 10, 10);
        fast.delivery_rate = Some(1_500_000.0);
        let mut f = Fixture::new(vec![fast, measured(path(1, 30, 10, 0))], 0..1000);
        let mut w = Weave::default();
        w.update_peaks(&f.view());
        let mut answers: Vec<(u64, u32, f64)> = Vec::new();
        for us in (0..400_000).step_by(1000) {
            answers.push((us, 0, 10.0 + fast_queue(us / 10_000)));
        }
        for us in (0..400_000).step_by(5000) {
            answers.push((us + 500, 1, 30.0 + slow_queue(us / 10_000)));
        }
        for us in (400_000..500_000).step_by((1e6 / trial_rate) as usize) {
            answers.push((us, 0, 10.0));
        }
        answers.sort_by_key(|a| a.0);
        let mut picks = Vec::new();
        for (seq, (us, p, rtt_ms)) in (5000..).zip(answers) {
            if us >= 400_000 && picks.is_empty() {
                f.now = Instant::from_nanos(400_000_000);
                picks.push(w.next(&f.view()));
            }
            let rtt = Duration::from_secs_f64(rtt_ms / 1e3);
            w.on_event(
                Instant::from_nanos(us * 1000),
                &SchedEvent::Arrived {
                    path: PathId(p),
                    seq,
                    rtt,
                    duplicate: false,
                },
            );
        }
        f.now = Instant::from_nanos(500_000_000);
        picks.push(w.next(&f.view()));
        (picks[0], picks[1])
    }

    /// A queueing delay that moves 0-4 ms in a 50 ms cycle.
    fn saw(bin: u64) -> f64 {
        (bin % 5) as f64
    }

    #[test]
    fn a_slower_path_in_the_same_queue_is_left_idle_once_the_sooner_one_carries_its_share() {
        // One queue: the slow path waits while the fast path is on trial, and after it, as the
        // fast path then carried 1200 answers a second (the 1200 both carried before).
        let (at_start, after) = slow_path_picks_beside_a_queue(saw, saw, 1200.0);
        assert_eq!(at_start, None);
        assert_eq!(after, None);
        // The fast path could not take the slow one's share: they are not one bottleneck.
        let (at_start, after) = slow_path_picks_beside_a_queue(saw, saw, 800.0);
        assert_eq!(at_start, None);
        assert_eq!(after.map(|p| p.path), Some(PathId(1)));
        // Separate queues (the slow one's moves on another rhythm): no trial at all.
        let (at_start, _) = slow_path_picks_beside_a_queue(saw, |bin| ((bin * 7) % 3) as f64, 1200.0);
        assert_eq!(at_start.map(|p| p.path), Some(PathId(1)));
    }

    #[test]
    fn a_path_at_its_pipe_cap_gets_no_request() {
        // 10 ms at 1000 packets/s: a 10-packet pipe, so at most 1.25 · 10 + 4 = 16.5 in flight,
        // however large the window.
        let mut f = Fixture::new(vec![measured(path(0, 10, 100, 16))], 0..1000);
        let mut w = Weave::default();
        w.clocks.entry(PathId(0)).or_default().started = true;
        assert!(w.next(&f.view()).is_some(), "16 in flight: under the cap");
        f.path_mut(0).in_flight = 17;
        assert_eq!(w.next(&f.view()), None, "17 in flight: at the cap");
    }

    #[test]
    fn a_starting_path_without_loss_has_the_larger_cap() {
        // The same pipe while the path starts up: 1.75 · 10 + 4 = 21.5 in flight.
        let mut f = Fixture::new(vec![measured(path(0, 10, 100, 21))], 0..1000);
        let mut w = Weave::default();
        assert!(w.next(&f.view()).is_some(), "21 in flight: under the start-up cap");
        f.path_mut(0).in_flight = 22;
        assert_eq!(w.next(&f.view()), None, "22 in flight: at the start-up cap");
        // A path that has lost packets has the steady cap (17 over 1.25 · 10 / 0.99 + 4).
        f.path_mut(0).in_flight = 17;
        f.path_mut(0).loss_rate = 0.01;
        assert_eq!(w.next(&f.view()), None, "lossy: the steady cap");
    }

    #[test]
    fn the_start_up_ends_for_good_after_three_round_trips_without_growth() {
        let mut clock = PathClock::default();
        // Each round trip 25 % faster or more: still starting.
        for rate in [100.0, 125.0, 160.0, 250.0] {
            clock.on_round_rate(rate);
        }
        assert!(!clock.started);
        // Two round trips under 312.5 (1.25 · 250), then one past it: the count starts over.
        for rate in [300.0, 310.0, 320.0] {
            clock.on_round_rate(rate);
        }
        assert!(!clock.started);
        for rate in [330.0, 340.0] {
            clock.on_round_rate(rate);
        }
        assert!(!clock.started, "2 flat round trips after 320");
        clock.on_round_rate(350.0);
        assert!(clock.started, "3 flat round trips");
        // A later burst of growth (a task's start after a pause) does not start it again.
        clock.on_round_rate(1000.0);
        assert!(clock.started);
    }

    /// The slow path's first request (seq 40) is answered `rtt_ms` after it was sent; returns
    /// the slow path's next pick.
    fn next_pick_after_an_answer(rtt_ms: u64) -> Pick {
        let mut f = Fixture::new(
            vec![measured(path(0, 10, 10, 10)), measured(path(1, 50, 1, 0))],
            0..1000,
        );
        let mut w = Weave::default();
        assert_eq!(seqs_of(&f.run(&mut w)), vec![40]);
        f.now = Instant::from_nanos(rtt_ms * 1_000_000);
        f.arrive(40, 1);
        w.on_event(f.now, &answer(1, 40, rtt_ms));
        w.next(&f.view()).unwrap()
    }

    #[test]
    fn a_late_answer_moves_the_path_later_in_the_order() {
        // On time (50 ms), the model stands: the slow path's next packet is 40 ahead again
        // (seq 41, with 40 taken). 20 ms late, the error average takes 5 ms of it and the
        // deviation 5 ms more: 10 ms later at 1000 packets/s, 10 packets further (seq 51).
        assert_eq!(next_pick_after_an_answer(50).seq, 41);
        assert_eq!(next_pick_after_an_answer(70).seq, 51);
    }

    /// A path with a 10 ms minimum RTT and a 1000 packets/s peak, answered in 40 ms over a whole
    /// round trip, then delivering `rate` bytes/s: may it take a request with 30 in flight?
    fn takes_a_request_after_slow_rounds(rate: f64) -> bool {
        let mut f = Fixture::new(vec![measured(path(0, 10, 100, 30))], 0..1000);
        let mut w = Weave::default();
        assert_eq!(w.next(&f.view()), None, "30 in flight: over the 16.5 cap of 10 ms");
        for (at_ms, seq) in [(0, 500), (50, 501)] {
            w.on_event(Instant::from_nanos(at_ms * 1_000_000), &answer(0, seq, 40));
        }
        f.now = Instant::from_nanos(50_000_000);
        f.path_mut(0).delivery_rate = Some(rate);
        w.next(&f.view()).is_some()
    }

    #[test]
    fn a_path_below_its_peak_sizes_its_cap_by_the_rtt_it_measures() {
        // Delivering 400 packets/s of its 1000 peak, the path's pipe is not full, so its 40 ms
        // answers are no queue of its own: the cap grows to 1.25 · 1000 · 0.04 + 4 = 54.
        assert!(takes_a_request_after_slow_rounds(400_000.0));
        // At its peak, the same 40 ms may be its own queue: the cap stays at the minimum RTT's.
        assert!(!takes_a_request_after_slow_rounds(1_000_000.0));
    }

    #[test]
    fn a_round_of_answers_faster_than_the_delivery_rate_raises_the_cap() {
        // The delivery rate says 100 packets/s (it is measured over a window's worth of
        // answers, and lags); a round trip of answers 1 ms apart says 1100. The peak takes the
        // faster at once, and the cap with it: 1.25 · 1100 · 0.01 + 4 = 17.75 in flight, where
        // the delivery rate alone allows 1.25 · 100 · 0.01 + 4 = 5.25.
        let mut f = Fixture::new(vec![measured(path(0, 10, 100, 10))], 0..1000);
        f.path_mut(0).delivery_rate = Some(100_000.0);
        let mut w = Weave::default();
        assert_eq!(w.next(&f.view()), None, "10 in flight: over the delivery rate's cap");
        for i in 0..=20u64 {
            w.on_event(Instant::from_nanos(i * 1_000_000), &answer(0, 500 + i, 10));
        }
        f.now = Instant::from_nanos(20_000_000);
        assert!(w.next(&f.view()).is_some(), "10 in flight: under the answers' cap");
    }

    #[test]
    fn a_burst_s_own_queue_does_not_size_the_cap() {
        // The path takes 17 requests at once (its cap): the model answers the k-th k ms after
        // the first, so the last two were queued 15 and 16 ms of their 40 ms RTT, more than a
        // fifth. Slow rounds of those answers say the burst queued, not that the pipe is
        // longer: the cap stays the minimum RTT's, where the same answers to requests sent
        // into an empty pipe grow it (the test above).
        let mut f = Fixture::new(vec![measured(path(0, 10, 100, 0))], 0..1000);
        let mut w = Weave::default();
        w.clocks.entry(PathId(0)).or_default().started = true;
        assert_eq!(f.run(&mut w).len(), 17);
        for (at_ms, seq) in [(0, 16), (50, 15)] {
            w.on_event(Instant::from_nanos(at_ms * 1_000_000), &answer(0, seq, 40));
        }
        f.now = Instant::from_nanos(50_000_000);
        f.path_mut(0).in_flight = 30;
        f.path_mut(0).delivery_rate = Some(400_000.0);
        assert_eq!(w.next(&f.view()), None);
    }

    #[test]
    fn a_tail_packet_is_copied_only_where_it_lands_sooner_or_once_its_answer_is_overdue() {
        // Two equal 10 ms paths, the last packet asked on path 1 at 0 ms: its answer is due
        // at 10 ms. At 5 ms a copy on path 0 would land at 15 ms, after it: no copy. At 20 ms
        // the answer is overdue: path 0 asks again.
        let mut f = Fixture::new(vec![measured(path(0, 10, 10, 0)), measured(path(1, 10, 10, 0))], 0..1);
        f.path_mut(0).can_send = false;
        let mut w = Weave::default();
        assert_eq!(
            f.run(&mut w),
            vec![Pick {
                path: PathId(1),
                seq: 0
            }]
        );
        f.path_mut(0).can_send = true;
        f.now = Instant::from_nanos(5_000_000);
        assert_eq!(w.next(&f.view()), None, "the original lands first");
        f.now = Instant::from_nanos(20_000_000);
        assert_eq!(
            w.next(&f.view()),
            Some(Pick {
                path: PathId(0),
                seq: 0
            }),
            "the original is overdue"
        );
    }

    /// The reorder buffer allows one packet of a 100-packet task; it went to the 40 ms path 1
    /// (loss rate `loss`) at 0 ms, its answer due at 40 ms: does the 10 ms path 0 copy it at
    /// `now_ms`?
    fn copies_a_packet_before_the_task_tail(loss: f64, now_ms: u64) -> Option<Pick> {
        let mut f = Fixture::new(vec![measured(path(1, 40, 10, 0))], 0..1);
        f.task_end = 100;
        let mut w = Weave::default();
        assert_eq!(seqs_of(&f.run(&mut w)), vec![0]);
        // Path 0 comes up once the packet is in flight.
        f.paths.insert(0, measured(path(0, 10, 10, 0)));
        f.path_mut(1).loss_rate = loss;
        f.now = Instant::from_nanos(now_ms * 1_000_000);
        w.next(&f.view())
    }

    /// The task's last `packets` went to the 10 ms path 0 at 0 ms (its RTO `rto_ms`, its loss
    /// rate `loss`, its answers' deviation from the model `deviation` seconds): does the 60 ms
    /// path 1 copy the first one at `now_ms`?
    fn slow_path_copies_a_tail_packet(
        packets: u64,
        rto_ms: u64,
        loss: f64,
        deviation: f64,
        now_ms: u64,
    ) -> Option<Pick> {
        let mut f = Fixture::new(
            vec![measured(path(0, 10, 10, 0)), measured(path(1, 60, 10, 0))],
            0..packets,
        );
        f.path_mut(0).rto = Duration::from_millis(rto_ms);
        f.path_mut(1).can_send = false;
        let mut w = Weave::default();
        assert_eq!(paths_of(&f.run(&mut w)), vec![0; packets as usize]);
        w.clocks.get_mut(&PathId(0)).unwrap().deviation = deviation;
        f.path_mut(0).can_send = false;
        f.path_mut(0).loss_rate = loss;
        f.path_mut(1).can_send = true;
        f.now = Instant::from_nanos(now_ms * 1_000_000);
        w.next(&f.view())
    }

    /// As above, at 15 ms, when the first answer is overdue on a path whose answers do not vary.
    fn slow_path_copies_an_overdue_tail_packet(packets: u64, rto_ms: u64, loss: f64) -> Option<Pick> {
        slow_path_copies_a_tail_packet(packets, rto_ms, loss, 0.0, 15)
    }

    #[test]
    fn an_overdue_tail_packet_is_copied_on_a_slower_path_only_if_its_resend_would_land_later() {
        // With two requests behind it, path 0 finds the first lost at 11.25 ms (9/8 · sRTT)
        // and its resend lands 10 ms later: a copy landing in 60 ms would only replace it.
        assert_eq!(slow_path_copies_an_overdue_tail_packet(3, 30, 0.0), None);
        // Alone in flight, it is found lost by the RTO: at 30 ms the resend would land at
        // 40 ms, still sooner; at 200 ms, 210 ms, and the copy is sooner.
        assert_eq!(slow_path_copies_an_overdue_tail_packet(1, 30, 0.0), None);
        let copy = Some(Pick {
            path: PathId(1),
            seq: 0,
        });
        assert_eq!(slow_path_copies_an_overdue_tail_packet(1, 200, 0.0), copy);
        // On a path losing 5 % the resend may be lost too: copy.
        assert_eq!(slow_path_copies_an_overdue_tail_packet(3, 30, 0.05), copy);
    }

    /// The task's last 2 packets went to the 20 ms path 1 (window `cwnd`, loss rate `loss`)
    /// at 0 ms; at 5 ms the 30 ms path 0, whose copy would land after the originals, has
    /// room: does it copy one?
    fn copies_a_tail_packet_its_holder_answers_first(cwnd: u64, loss: f64) -> Option<Pick> {
        let mut f = Fixture::new(vec![measured(path(0, 30, 10, 0)), measured(path(1, 20, cwnd, 0))], 0..2);
        f.path_mut(0).can_send = false;
        let mut w = Weave::default();
        assert_eq!(paths_of(&f.run(&mut w)), vec![1, 1]);
        f.path_mut(1).loss_rate = loss;
        f.path_mut(0).can_send = true;
        f.now = Instant::from_nanos(5_000_000);
        w.next(&f.view())
    }

    #[test]
    fn at_the_tail_a_lossy_window_of_three_or_less_is_copied_even_where_it_answers_first() {
        // Losing 6 % with a window of 2: a loss there shows only by the time threshold or
        // the RTO, and the copier has nothing else to ask.
        assert_eq!(
            copies_a_tail_packet_its_holder_answers_first(2, 0.06),
            Some(Pick {
                path: PathId(0),
                seq: 0
            })
        );
        // A window of 4: three later answers can pass a lost request.
        assert_eq!(copies_a_tail_packet_its_holder_answers_first(4, 0.06), None);
        // A lossless path: its answers come first.
        assert_eq!(copies_a_tail_packet_its_holder_answers_first(2, 0.0), None);
    }

    #[test]
    fn a_tail_packet_barely_overdue_on_a_path_whose_answers_vary_is_not_copied() {
        // Path 0's answers deviate by 2 ms from the model: the last packet's answer, modelled
        // at 12 ms with that deviation, counts as overdue for a copy 3 deviations later, at
        // 18 ms. (Its RTO is 200 ms, so once overdue the 60 ms path's copy lands sooner.)
        let copy_at = |now_ms: u64| slow_path_copies_a_tail_packet(1, 200, 0.0, 0.002, now_ms);
        assert_eq!(copy_at(15), None, "late by less than the answers vary");
        assert_eq!(
            copy_at(20),
            Some(Pick {
                path: PathId(1),
                seq: 0
            })
        );
    }

    #[test]
    fn a_window_cut_far_below_its_pipe_counts_one_window_per_rtt() {
        // The 20 ms path delivers 1000 packets/s, a pipe of 20; the 60 ms path's request lands
        // 40 ms later, when the 20 ms path has delivered 40 more: it takes packet 40. With the
        // 20 ms path's full window cut from 40 to 4 (BBR's ProbeRTT), that path delivers 4
        // per 20 ms, 8 in the 40 ms, and the 60 ms path takes packet 8. A window of 4 all
        // along is the path's rate already, and the measured rate stands.
        let slow_pick = |windows: &[u64]| {
            let mut f = Fixture::new(
                vec![measured(path(0, 20, 40, 40)), measured(path(1, 60, 5, 0))],
                0..1000,
            );
            let mut w = Weave::default();
            f.path_mut(1).can_send = false;
            for &cwnd in windows {
                f.path_mut(0).cwnd = cwnd;
                assert_eq!(w.next(&f.view()), None);
            }
            f.path_mut(1).can_send = true;
            w.next(&f.view()).map(|p| (p.path, p.seq))
        };
        assert_eq!(slow_pick(&[40]), Some((PathId(1), 40)));
        assert_eq!(slow_pick(&[40, 4]), Some((PathId(1), 8)));
        assert_eq!(slow_pick(&[4]), Some((PathId(1), 40)));
    }

    #[test]
    fn a_full_buffer_copies_what_a_lossy_path_holds_and_what_is_overdue() {
        // The lost request of a lossy path holds the buffer's cursor: copy it, due or not. On
        // a path that loses nothing a request not due yet is late, not lost: no copy. Overdue
        // (3 deviations past its answer), it is copied if the copy lands before the resend.
        let copy = Some(Pick {
            path: PathId(0),
            seq: 0,
        });
        assert_eq!(copies_a_packet_before_the_task_tail(0.05, 5), copy);
        assert_eq!(copies_a_packet_before_the_task_tail(0.0, 5), None);
        // Alone in flight on path 1 (RTO 120 ms), it is found lost at 120 ms and its resend
        // lands at 130 ms; path 0's copy at 50 ms lands at 60 ms.
        assert_eq!(copies_a_packet_before_the_task_tail(0.0, 50), copy);
    }

    /// Two 10 ms paths and a reorder buffer that allows one packet, sent on path 1 at 0 ms
    /// (its answer modelled at 10 ms); path 0 has room.
    fn one_packet_allowed_in_flight_on_path_1() -> (Fixture, Weave) {
        let mut f = Fixture::new(vec![measured(path(0, 10, 10, 0)), measured(path(1, 10, 10, 0))], 0..1);
        f.task_end = 100;
        f.path_mut(0).can_send = false;
        let mut w = Weave::default();
        assert_eq!(seqs_of(&f.run(&mut w)), vec![0]);
        f.path_mut(0).can_send = true;
        (f, w)
    }

    #[test]
    fn a_full_buffer_skips_the_scan_for_copies_until_a_request_can_be_copied() {
        // One packet allowed, in flight on path 1 since 0 ms, due at 10 ms: before then no
        // request qualifies on a path that loses nothing, so nothing in flight is scanned.
        let (mut f, mut w) = one_packet_allowed_in_flight_on_path_1();
        let may_copy = |w: &mut Weave, f: &Fixture| {
            let view = f.view();
            let mut call = PerCall::default();
            w.per_call(&view, &mut call);
            w.may_copy_before_tail(&view, &call)
        };
        f.now = Instant::from_nanos(5_000_000);
        assert!(!may_copy(&mut w, &f));
        // Overdue: the scan runs, and finds it.
        f.now = Instant::from_nanos(11_000_000);
        assert!(may_copy(&mut w, &f));
        // On a lossy path a request may be copied before it is due.
        f.now = Instant::from_nanos(5_000_000);
        f.path_mut(1).loss_rate = 0.05;
        assert!(may_copy(&mut w, &f));
        // Answered, the request leaves the model: nothing to copy again.
        f.path_mut(1).loss_rate = 0.0;
        w.on_event(f.now, &answer(1, 0, 5));
        assert_eq!(w.earliest_answer(PathId(1)), None);
    }

    #[test]
    fn a_call_that_picks_nothing_asks_to_be_called_when_a_request_turns_overdue() {
        // The buffer allows one packet; it went to path 1 at 0 ms, due at 10 ms. At 5 ms
        // nothing is copied and the scheduler asks for a call just past 10 ms (no answer would
        // come before path 1's RTO at 30 ms); then it copies.
        let (mut f, mut w) = one_packet_allowed_in_flight_on_path_1();
        f.now = Instant::from_nanos(5_000_000);
        assert_eq!(w.next(&f.view()), None);
        let wake = w.poll_timeout().expect("a wake-up");
        assert!(
            wake > Instant::from_nanos(10_000_000) && wake < Instant::from_nanos(10_100_000),
            "{wake:?}"
        );
        f.now = wake;
        assert_eq!(
            w.next(&f.view()),
            Some(Pick {
                path: PathId(0),
                seq: 0
            })
        );
        // Copied: nothing more turns overdue, no wake-up.
        assert_eq!(w.next(&f.view()), None);
        assert_eq!(w.poll_timeout(), None);
    }

    #[test]
    fn a_slow_path_waits_at_the_tail_when_the_fast_one_finishes_sooner() {
        // 3 packets left; the fast path drains them in 3 ms, the slow path needs 50 ms.
        let mut f = Fixture::new(vec![path(0, 10, 10, 10), path(1, 50, 10, 0)], 0..3);
        f.path_mut(0).can_send = false;
        let mut w = Weave::default();
        assert_eq!(w.next(&f.view()), None);
    }

    #[test]
    fn copies_a_tail_packet_from_a_slower_path_once() {
        let mut f = Fixture::new(vec![path(0, 10, 10, 0), path(1, 50, 10, 0)], 0..2);
        f.apply(Pick {
            path: PathId(1),
            seq: 0,
        });
        f.apply(Pick {
            path: PathId(1),
            seq: 1,
        });
        let mut w = Weave::default();
        assert_eq!(
            w.next(&f.view()),
            Some(Pick {
                path: PathId(0),
                seq: 0
            })
        );
        f.apply(Pick {
            path: PathId(0),
            seq: 0,
        });
        assert_eq!(
            w.next(&f.view()),
            Some(Pick {
                path: PathId(0),
                seq: 1
            })
        );
        f.apply(Pick {
            path: PathId(0),
            seq: 1,
        });
        assert_eq!(w.next(&f.view()), None, "each packet once");
    }
}
