//! A path's loss detection against answers that overtake each other, with and without loss.

use super::*;
use crate::cc::{ControllerFactory, NewRenoConfig};
use std::collections::HashMap;

const PACKET: u64 = 1400;

fn path(reorder: ReorderConfig) -> Path {
    let cc = NewRenoConfig::default().build(Instant::ZERO, PACKET);
    let mut path = Path::new(
        PathId(0),
        ServerInfo::default(),
        1,
        cc,
        Instant::ZERO,
        Duration::from_millis(200),
        PACKET,
    )
    .with_loss_detection(3, reorder);
    path.state = PathState::Established { token: vec![1] };
    path
}

/// Normal deviates (Box-Muller over a xorshift generator): the test needs no crate.
struct Normal(u64);

impl Normal {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn sample(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// What a run of `run` saw.
struct Outcome {
    /// Requests of the second half declared lost although the link delivers them.
    late_spurious: u64,
    /// (sent, declared lost, the time threshold then) of each request the link dropped.
    dropped: Vec<(Instant, Instant, Duration)>,
}

/// `count` requests, one every 0.5 ms (20 Mbit/s of 1400-byte packets), each answered 40 ms
/// later plus normal jitter of 5 ms standard deviation that lets answers overtake each other
/// (an LTE-like path, the reorder world of `scenarios/reorder-lte.toml`); the link drops
/// every request whose number `drop` accepts. Loss detection runs on every answer and every
/// send, as the download's loss timer would (within the 0.5 ms between sends).
fn run(reorder: ReorderConfig, count: u64, drop: impl Fn(u64) -> bool) -> Outcome {
    let mut p = path(reorder);
    let mut ps = PathStats::default();
    let mut jitter = Normal(0x9e37_79b9_7f4a_7c15);
    let gap = Duration::from_micros(500);
    // (answer time, seq) of every answer to come, and each request's pn while in flight.
    let mut answers: Vec<(Instant, u64)> = Vec::new();
    let mut pns = HashMap::new();
    let mut sent_at = HashMap::new();
    let mut lost = Vec::new();
    let mut outcome = Outcome {
        late_spurious: 0,
        dropped: Vec::new(),
    };
    let declare = |p: &mut Path,
                   ps: &mut PathStats,
                   now: Instant,
                   lost: &mut Vec<u64>,
                   pns: &mut std::collections::HashMap<u64, u64>,
                   out: &mut Outcome,
                   sent_at: &std::collections::HashMap<u64, Instant>| {
        lost.clear();
        p.detect_losses(ps, now, lost);
        for &seq in lost.iter() {
            pns.remove(&seq);
            if !drop(seq) && seq >= count / 2 {
                out.late_spurious += 1;
            }
            if drop(seq) {
                out.dropped.push((sent_at[&seq], now, p.loss_thresholds().time));
            }
        }
    };
    for seq in 0..count {
        let now = Instant::ZERO + gap * seq as u32;
        // Every answer due before this send, in time order.
        answers.sort_by_key(|&(at, s)| std::cmp::Reverse((at, s)));
        while answers.last().is_some_and(|&(at, _)| at <= now) {
            let (at, s) = answers.pop().unwrap();
            let pn = pns.remove(&s);
            p.on_data(&mut ps, at, s, pn, PACKET);
            declare(&mut p, &mut ps, at, &mut lost, &mut pns, &mut outcome, &sent_at);
        }
        declare(&mut p, &mut ps, now, &mut lost, &mut pns, &mut outcome, &sent_at);
        let pn = p.record_request(&mut ps, now, seq, PACKET, false);
        pns.insert(seq, pn);
        sent_at.insert(seq, now);
        if !drop(seq) {
            let delay = (40.0 + 5.0 * jitter.sample()).max(0.0);
            answers.push((now + Duration::from_secs_f64(delay / 1000.0), seq));
        }
    }
    outcome
}

#[test]
fn a_reordering_path_stops_declaring_spurious_losses_once_its_window_adapts() {
    let fixed = ReorderConfig {
        adaptive: false,
        ..ReorderConfig::default()
    };
    let without = run(fixed, 8000, |_| false);
    let with = run(ReorderConfig::default(), 8000, |_| false);
    // RFC 9002's three requests are 1.5 ms here, far below the jitter.
    assert!(
        without.late_spurious > 400,
        "{} spurious without the window",
        without.late_spurious
    );
    assert!(with.late_spurious <= 4, "{} spurious with it", with.late_spurious);
}

#[test]
fn a_reordering_path_still_finds_real_losses_within_about_an_rtt_and_its_window() {
    // One request in 100 dropped from the second half on (the window has adapted by then),
    // while requests still follow it.
    let out = run(ReorderConfig::default(), 8000, |seq| {
        (4000..7800).contains(&seq) && seq % 100 == 0
    });
    assert_eq!(
        out.dropped.len(),
        38,
        "every dropped request is found by the thresholds"
    );
    for &(sent, declared, time) in &out.dropped {
        let took = declared - sent;
        // About one RTT (40 ms and the jitter's tail) plus the window.
        assert!(
            took < Duration::from_millis(100),
            "found after {took:?} (threshold {time:?})"
        );
    }
}

#[test]
fn a_loss_on_a_long_steady_path_is_found_by_the_thresholds_not_by_a_timeout() {
    // A 300 ms path answering a request every 4 ms, always exactly one RTT later: RTTVAR
    // falls to zero, and SRTT + max(G, 4·RTTVAR) is 301 ms, before the time threshold
    // (9/8 · 300 ms) and before the three later answers of the packet threshold (4-12 ms
    // after the lost one's). Request 200 is dropped: the thresholds must find it, not the
    // RTO, which would count a random loss as a timeout (a congestion signal, the window
    // held at zero until the next answer).
    let mut p = path(ReorderConfig::default());
    let mut ps = PathStats::default();
    let rtt = Duration::from_millis(300);
    let mut pns = HashMap::new();
    let mut answers = std::collections::VecDeque::new();
    let mut lost = Vec::new();
    let mut declared = Vec::new();
    for ms in 0..2_000u64 {
        let now = Instant::from_nanos(ms * 1_000_000);
        while answers.front().is_some_and(|&(at, _)| at <= now) {
            let (at, seq) = answers.pop_front().unwrap();
            let pn = pns.remove(&seq);
            p.on_data(&mut ps, at, seq, pn, PACKET);
        }
        lost.clear();
        p.detect_losses(&mut ps, now, &mut lost);
        p.on_rto(&mut ps, now, &mut lost);
        declared.extend(lost.iter().copied());
        if ms % 4 == 0 && ms < 1_600 {
            let seq = ms / 4;
            pns.insert(seq, p.record_request(&mut ps, now, seq, PACKET, false));
            if seq != 200 {
                answers.push_back((now + rtt, seq));
            }
        }
    }
    assert_eq!(declared, vec![200]);
    assert_eq!(ps.timeouts, 0, "the RTO ({:?}) came first", p.rto);
    assert!(p.rto > p.loss_delay(), "{:?} against {:?}", p.rto, p.loss_delay());
}

#[test]
fn a_late_answer_to_a_request_declared_lost_is_no_rtt_sample_of_its_resend() {
    let mut p = path(ReorderConfig::default());
    let mut ps = PathStats::default();
    let ms = |n: u64| Instant::ZERO + Duration::from_millis(n);
    let pns: Vec<u64> = (0..4)
        .map(|seq| p.record_request(&mut ps, ms(seq), seq, PACKET, false))
        .collect();
    for seq in 1..4 {
        let answered = p.on_data(&mut ps, ms(40 + seq), seq, Some(pns[seq as usize]), PACKET);
        assert!(answered.is_some_and(|a| a.rtt == Some(Duration::from_millis(40))));
    }
    let mut lost = Vec::new();
    p.detect_losses(&mut ps, ms(44), &mut lost);
    assert_eq!(lost, vec![0], "three later answers declare the first request lost");
    let resend = p.record_request(&mut ps, ms(44), 0, PACKET, false);
    // The first request's own answer, late: matched to the resend, 0.5 ms after it left.
    let at = ms(44) + Duration::from_micros(500);
    let answered = p.on_data(&mut ps, at, 0, Some(resend), PACKET);
    assert_eq!(answered, Some(Answered { rtt: None }));
    assert_eq!(p.rtt.min(), Duration::from_millis(40), "the path's minimum RTT kept");
}
