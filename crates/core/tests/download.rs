//! The client session on its own, driven by hand-made server datagrams: handshakes, refusals,
//! duplicates, path loss, and bad input that must be dropped without a panic.

mod common;
use common::transmits;

use pcdn_core::cc;
use pcdn_core::scheduler;
use pcdn_core::wire::{self, Message, Reason};
use pcdn_core::{Download, DownloadConfig, Duration, Event, Instant, PathError, PathId, ServerInfo};
use proptest::prelude::*;

const LENGTH: u64 = 14_000;
const PACKET: u32 = 1400;

fn download() -> Download {
    let config = DownloadConfig::new(wire::ContentId([3; 32]), LENGTH, PACKET);
    Download::new(config, scheduler::by_name("minrtt", 0).unwrap()).unwrap()
}

fn add(d: &mut Download) -> PathId {
    d.add_path(
        Instant::ZERO,
        ServerInfo::default(),
        cc::by_name("cubic").unwrap().build(Instant::ZERO, 1400),
    )
}

fn events(d: &mut Download) -> Vec<Event> {
    std::iter::from_fn(|| d.poll_event()).collect()
}

fn conn_id_of_hello(datagram: &[u8]) -> u64 {
    match wire::decode(datagram).unwrap() {
        Message::Hello(h) => h.conn_id,
        other => panic!("expected HELLO, got {other:?}"),
    }
}

fn welcome(conn_id: u64, length: u64, packet_size: u16) -> Vec<u8> {
    let mut b = Vec::new();
    wire::encode_welcome(
        &mut b,
        &wire::Welcome {
            conn_id,
            content_length: length,
            packet_size,
            token: &[1; 8],
        },
    )
    .unwrap();
    b
}

fn data(conn_id: u64, seq: u64) -> Vec<u8> {
    common::data_of_len(conn_id, seq, (LENGTH - seq * 1400).min(1400) as usize)
}

/// A download with one established path; returns it, the path and its connection id.
fn established() -> (Download, PathId, u64) {
    established_with(download())
}

/// `d` with one established path; returns it, the path and its connection id.
fn established_with(mut d: Download) -> (Download, PathId, u64) {
    let p = add(&mut d);
    let out = transmits(&mut d, Instant::ZERO);
    let conn_id = conn_id_of_hello(&out[0].1);
    d.handle_datagram(
        Instant::ZERO + Duration::from_millis(20),
        p,
        &welcome(conn_id, LENGTH, 1400),
    );
    assert_eq!(events(&mut d), vec![Event::PathEstablished(p)]);
    (d, p, conn_id)
}

/// The id of every REQUEST among `out`.
fn request_ids<'a>(out: impl IntoIterator<Item = &'a (PathId, Vec<u8>)>) -> Vec<u64> {
    out.into_iter()
        .filter_map(|(_, b)| match wire::decode(b).unwrap() {
            Message::Request(r) => Some(r.request_id),
            _ => None,
        })
        .collect()
}

fn requested(out: &[(PathId, Vec<u8>)]) -> Vec<u64> {
    common::requested(out)
}

#[test]
fn a_handshake_then_requests_then_in_order_bytes() {
    let (mut d, p, conn_id) = established();
    let now = Instant::ZERO + Duration::from_millis(20);
    let seqs = requested(&transmits(&mut d, now));
    assert_eq!(
        seqs,
        (0..10).collect::<Vec<_>>(),
        "the initial window asks for the first packets"
    );
    for seq in [1, 0, 2] {
        d.handle_datagram(now + Duration::from_millis(20), p, &data(conn_id, seq));
    }
    let mut buf = vec![0; 10_000];
    let n = d.read(&mut buf);
    assert_eq!(n, 4200);
    assert!(buf[..1400].iter().all(|&b| b == 0) && buf[1400..2800].iter().all(|&b| b == 1));
    let s = d.stats();
    assert_eq!(s.packets_delivered, 3);
    assert_eq!(s.ofo_max, 1400, "packet 1 waited for packet 0");
}

#[test]
fn duplicates_are_counted_as_waste() {
    let (mut d, p, conn_id) = established();
    let now = Instant::ZERO + Duration::from_millis(20);
    transmits(&mut d, now);
    d.handle_datagram(now, p, &data(conn_id, 0));
    d.handle_datagram(now, p, &data(conn_id, 0));
    assert_eq!(d.stats().duplicates, 1);
    assert_eq!(d.stats().packets_received, 2);
}

#[test]
fn a_welcome_for_another_content_fails_the_path() {
    let mut d = download();
    let p = add(&mut d);
    let conn_id = conn_id_of_hello(&transmits(&mut d, Instant::ZERO)[0].1);
    d.handle_datagram(Instant::ZERO, p, &welcome(conn_id, LENGTH + 1, 1400));
    assert_eq!(
        events(&mut d),
        vec![Event::PathFailed {
            path: p,
            reason: PathError::Mismatch
        }]
    );
}

#[test]
fn unknown_content_fails_the_path() {
    let mut d = download();
    let p = add(&mut d);
    let conn_id = conn_id_of_hello(&transmits(&mut d, Instant::ZERO)[0].1);
    let mut b = Vec::new();
    wire::encode_reject(
        &mut b,
        &wire::Reject {
            conn_id,
            reason: Reason::UnknownContent,
            request_id: 0,
        },
    );
    d.handle_datagram(Instant::ZERO, p, &b);
    assert_eq!(
        events(&mut d),
        vec![Event::PathFailed {
            path: p,
            reason: PathError::Rejected(Reason::UnknownContent)
        }]
    );
}

#[test]
fn a_silent_server_fails_the_handshake_after_retries() {
    let mut d = download();
    let p = add(&mut d);
    let mut hellos = 0;
    let mut now = Instant::ZERO;
    for _ in 0..20 {
        hellos += transmits(&mut d, now).len();
        let Some(t) = d.poll_timeout() else { break };
        now = t;
        d.handle_timeout(now);
    }
    assert_eq!(hellos, 5, "five HELLOs, spaced by a doubling timeout");
    assert_eq!(
        events(&mut d),
        vec![Event::PathFailed {
            path: p,
            reason: PathError::Timeout
        }]
    );
    assert!(
        now >= Instant::ZERO + Duration::from_secs(31),
        "1 + 2 + 4 + 8 + 16 s of tries"
    );
}

#[test]
fn a_bad_token_reject_starts_a_new_handshake() {
    let (mut d, p, conn_id) = established();
    let now = Instant::ZERO + Duration::from_millis(20);
    transmits(&mut d, now);
    let mut b = Vec::new();
    wire::encode_reject(
        &mut b,
        &wire::Reject {
            conn_id,
            reason: Reason::BadToken,
            request_id: 1,
        },
    );
    d.handle_datagram(now, p, &b);
    let out = transmits(&mut d, now);
    assert!(
        matches!(wire::decode(&out[0].1).unwrap(), Message::Hello(_)),
        "HELLO again"
    );
}

#[test]
fn a_removed_path_gives_its_requests_to_another() {
    let (mut d, p, _) = established();
    let now = Instant::ZERO + Duration::from_millis(20);
    assert_eq!(requested(&transmits(&mut d, now)).len(), 10);
    let q = add(&mut d);
    let conn_q = conn_id_of_hello(&transmits(&mut d, now)[0].1);
    d.remove_path(now, p);
    d.handle_datagram(now, q, &welcome(conn_q, LENGTH, 1400));
    let out = transmits(&mut d, now);
    assert!(
        matches!(wire::decode(&out[0].1).unwrap(), Message::Bye(_)),
        "BYE to the removed server"
    );
    assert_eq!(out[0].0, p);
    assert_eq!(
        requested(&out[1..]),
        (0..10).collect::<Vec<_>>(),
        "the new path asks for all ten again"
    );
}

#[test]
fn timeouts_requeue_and_fail_a_dead_path() {
    let (mut d, p, _) = established();
    let mut now = Instant::ZERO + Duration::from_millis(20);
    transmits(&mut d, now);
    for _ in 0..10 {
        let Some(t) = d.poll_timeout() else { break };
        now = t;
        d.handle_timeout(now);
        transmits(&mut d, now);
    }
    assert!(events(&mut d).contains(&Event::PathFailed {
        path: p,
        reason: PathError::Timeout
    }));
    assert!(d.stats().paths[0].timeouts >= 4);
}

#[test]
fn bad_datagrams_from_a_server_are_dropped() {
    let (mut d, p, conn_id) = established();
    let now = Instant::ZERO + Duration::from_millis(20);
    transmits(&mut d, now);
    let mut wrong_version = data(conn_id, 0);
    wrong_version[0] = 2;
    let truncated = data(conn_id, 0)[..20].to_vec();
    let oversized = vec![0x01; 2000];
    let short_payload = common::data_of_len(conn_id, 0, 10);
    let past_end = data(conn_id, 0);
    let mut past_end = past_end;
    past_end[18..26].copy_from_slice(&500u64.to_be_bytes());
    let other_connection = data(conn_id ^ 1, 0);
    for bad in [
        wrong_version,
        truncated,
        oversized,
        short_payload,
        past_end,
        other_connection,
        vec![],
    ] {
        d.handle_datagram(now, p, &bad);
    }
    assert_eq!(d.stats().invalid, 7);
    assert_eq!(d.stats().packets_delivered, 0);
    assert!(
        transmits(&mut d, now).is_empty(),
        "a client never answers bad datagrams"
    );
}

proptest! {
    /// Whatever a server sends, the client neither panics nor answers it.
    #[test]
    fn arbitrary_server_datagrams_never_panic_the_client(
        garbage in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..1600), 1..30),
    ) {
        let (mut d, p, conn_id) = established();
        let now = Instant::ZERO + Duration::from_millis(20);
        transmits(&mut d, now);
        for g in &garbage {
            let mut g = g.clone();
            if g.len() >= 26 && g[0] % 2 == 0 {
                // Shape some inputs as DATA of this connection to reach the deeper code.
                g[0] = wire::VERSION;
                g[1] = wire::kind::DATA;
                g[2..10].copy_from_slice(&conn_id.to_be_bytes());
                let seq = u64::from(g[18] % 12);
                g[18..26].copy_from_slice(&seq.to_be_bytes());
            }
            d.handle_datagram(now, p, &g);
        }
        let mut buf = vec![0; 20_000];
        let n = d.read(&mut buf);
        prop_assert!(n as u64 <= LENGTH);
    }
}

/// Packets in the content of the timeout tests: more than the requests they send.
const LONG: u64 = 100;

/// A DATA for packet `seq` of a `LONG`-packet content.
fn long_data(conn_id: u64, seq: u64) -> Vec<u8> {
    common::data_of_len(conn_id, seq, PACKET as usize)
}

fn ms(n: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(n)
}

/// One established path of a `LONG`-packet download whose requests went out at 20, 40, 60
/// and 80 ms as answers to the oldest five came in (a window growing in slow start). Returns
/// the download, the path, its connection id and the numbers still in flight, grouped by
/// when they were sent, the oldest first.
fn four_rounds() -> (Download, PathId, u64, Vec<Vec<u64>>) {
    let mut config = DownloadConfig::new(wire::ContentId([3; 32]), LONG * u64::from(PACKET), PACKET);
    // The retransmission timeout itself, not the tail loss probe that would come first.
    config.tail_probes = false;
    let mut d = Download::new(config, scheduler::by_name("minrtt", 0).unwrap()).unwrap();
    let p = add(&mut d);
    let conn_id = conn_id_of_hello(&transmits(&mut d, Instant::ZERO)[0].1);
    d.handle_datagram(ms(20), p, &welcome(conn_id, LONG * u64::from(PACKET), 1400));
    let mut rounds = vec![requested(&transmits(&mut d, ms(20)))];
    for t in [40, 60, 80] {
        let mut answered = 0;
        while answered < 5 {
            let seq = rounds[0].remove(0);
            d.handle_datagram(ms(t), p, &long_data(conn_id, seq));
            answered += 1;
            if rounds[0].is_empty() {
                rounds.remove(0);
            }
        }
        rounds.push(requested(&transmits(&mut d, ms(t))));
    }
    assert_eq!(rounds.len(), 3, "three rounds in flight: {rounds:?}");
    assert_eq!(d.stats().losses, 0);
    (d, p, conn_id, rounds)
}

#[test]
fn a_loss_too_few_answers_reveal_is_declared_after_nine_eighths_of_an_rtt_not_an_rto() {
    // RFC 9002 §6.1.2. Packets 1 and 2 come back 20 ms after their requests; 0 does not. Two
    // later answers are under the packet threshold of 3 (a task's last requests have no more
    // behind them), so only the time threshold can declare 0 lost: 9/8 of the 20 ms RTT after
    // it was sent, long before the RTO.
    let (mut d, p, conn_id) = established();
    let sent = ms(20);
    assert_eq!(requested(&transmits(&mut d, sent)), (0..10).collect::<Vec<_>>());
    for seq in [1, 2] {
        d.handle_datagram(ms(40), p, &data(conn_id, seq));
    }
    assert_eq!(d.stats().losses, 0, "two answers after it are not enough");
    let deadline = d.poll_timeout().expect("the loss timer is armed");
    assert_eq!(deadline, sent + Duration::from_micros(22_500));
    d.handle_timeout(deadline - Duration::from_micros(1));
    assert_eq!(d.stats().losses, 0, "not before the threshold");
    d.handle_timeout(deadline);
    let s = d.stats();
    assert_eq!((s.losses, s.paths[0].timeouts), (1, 0), "lost by time, no timeout");
    assert_eq!(
        requested(&transmits(&mut d, deadline)).first(),
        Some(&0),
        "asked again first"
    );
}

#[test]
fn a_spurious_timeout_loses_the_oldest_requests_only() {
    let (mut d, p, conn_id, rounds) = four_rounds();
    let in_flight: Vec<u64> = rounds.concat();
    // A delay spike: nothing comes back until the timer fires, one RTO after the oldest round.
    let fire = d.poll_timeout().expect("requests in flight arm the timer");
    d.handle_timeout(fire);
    assert_eq!(d.stats().paths[0].timeouts, 1);
    assert_eq!(
        d.stats().losses,
        rounds[0].len() as u64,
        "only the requests older than one RTO are lost, not all {}",
        in_flight.len()
    );
    assert!(
        requested(&transmits(&mut d, fire)).is_empty(),
        "in timeout recovery the path takes no new requests"
    );
    // The spike ends: every request comes back, the ones given up included.
    let late = fire + Duration::from_millis(30);
    for &seq in &in_flight {
        d.handle_datagram(late, p, &long_data(conn_id, seq));
    }
    let s = d.stats();
    assert_eq!(s.losses, rounds[0].len() as u64, "no request still in flight was lost");
    assert_eq!(s.duplicates, 0);
    assert_eq!(s.packets_delivered, rounds.concat().iter().max().unwrap() + 1);
    // Recovery is over: the path asks for new numbers, none of those it already had.
    let next = requested(&transmits(&mut d, late));
    assert!(
        !next.is_empty() && next.iter().all(|seq| !in_flight.contains(seq)),
        "{next:?}"
    );
    assert!(d.poll_timeout().is_some_and(|t| t > late));
}

#[test]
fn a_second_timeout_gives_back_every_request_and_probes_with_a_delivered_packet() {
    let (mut d, p, conn_id, rounds) = four_rounds();
    let first = d.poll_timeout().unwrap();
    d.handle_timeout(first);
    assert_eq!(d.stats().losses, rounds[0].len() as u64);
    // Still silent one backed-off RTO after the second round was sent: the path has lost
    // everything it held, not only the requests older than that RTO (the third round).
    let second = d.poll_timeout().unwrap();
    d.handle_timeout(second);
    assert_eq!(d.stats().paths[0].timeouts, 2);
    assert_eq!(d.stats().losses, rounds.concat().len() as u64);
    // It is probed with the last packet it delivered, which holds up nothing.
    let delivered = d.stats().packets_delivered;
    let probe = requested(&transmits(&mut d, second));
    assert_eq!(probe.len(), 1);
    assert!(probe[0] < delivered, "probe {probe:?}, {delivered} delivered");
    // A lost probe requeues nothing; the next one goes out at the next, backed-off, timeout.
    let third = d.poll_timeout().unwrap();
    assert!(third - second > second - first, "the probes back off");
    d.handle_timeout(third);
    assert_eq!(d.stats().losses, rounds.concat().len() as u64);
    assert_eq!(requested(&transmits(&mut d, third)), probe);
    // The answer ends the recovery: the path asks for what it had given up, oldest first.
    d.handle_datagram(third + Duration::from_millis(20), p, &long_data(conn_id, probe[0]));
    assert_eq!(d.stats().duplicates, 1);
    let resumed = requested(&transmits(&mut d, third + Duration::from_millis(20)));
    assert_eq!(resumed.first(), rounds[0].first(), "{resumed:?}");
}

#[test]
fn an_answer_restarts_the_timeout_and_the_thresholds_judge_the_losses_before_it() {
    // RFC 6298 §5.3: every answer to a request in flight restarts the timer. A loss among
    // answers that keep coming is then found by the thresholds, a plain loss, not by a
    // timeout, which `weft` reads as heavy congestion and which holds the path's window at
    // zero until the next answer.
    let mut config = DownloadConfig::new(wire::ContentId([3; 32]), LONG * u64::from(PACKET), PACKET);
    // Strict spacing: each 5 ms tick lets out one request, not a tick's worth of lost time.
    config.pacing_slack = Duration::ZERO;
    let mut d = Download::new(config, scheduler::by_name("minrtt", 0).unwrap()).unwrap();
    let weft = cc::by_name("weft").unwrap().build(Instant::ZERO, 1400);
    let p = d.add_path(Instant::ZERO, ServerInfo::default(), weft);
    let conn_id = conn_id_of_hello(&transmits(&mut d, Instant::ZERO)[0].1);
    d.handle_datagram(ms(20), p, &welcome(conn_id, LONG * u64::from(PACKET), 1400));
    // Every request answered 20 ms after it leaves (the pacer lets out one per 5 ms tick),
    // until the RTT variation has all but vanished: the RTO is the 200 ms floor.
    let mut sent: Vec<(u64, u64)> = Vec::new();
    let mut last = Vec::new();
    for t in (20..=110).step_by(5) {
        for &(seq, _) in sent.iter().filter(|s| s.1 + 20 == t) {
            d.handle_datagram(ms(t), p, &long_data(conn_id, seq));
        }
        last = requested(&transmits(&mut d, ms(t)));
        sent.extend(last.iter().map(|&seq| (seq, t)));
    }
    d.handle_datagram(
        ms(115),
        p,
        &long_data(conn_id, sent.iter().find(|s| s.1 == 95).unwrap().0),
    );
    let [oldest, middle, newest] = [100, 105, 110].map(|t| sent.iter().find(|s| s.1 == t).unwrap().0);
    assert_eq!(last, vec![newest]);
    // The newest comes back after 182 ms, 8 ms before the oldest's 200 ms RTO would fire
    // counted from its sending. Counted from this answer, the timeout is 200 ms away, and the
    // time threshold (9/8 · 182 = 204.75 ms from each request's sending) loses the oldest
    // and then the middle one first, with no timeout.
    d.handle_datagram(ms(292), p, &long_data(conn_id, newest));
    assert_eq!(d.stats().losses, 0);
    let first = d.poll_timeout().expect("a timer is armed");
    assert_eq!(
        first,
        ms(100) + Duration::from_micros(204_750),
        "the loss timer, not the RTO"
    );
    d.handle_timeout(first);
    assert_eq!(
        (d.stats().paths[0].timeouts, d.stats().losses),
        (0, 1),
        "{oldest} lost by time"
    );
    let second = d.poll_timeout().expect("a timer is armed");
    assert_eq!(second, ms(105) + Duration::from_micros(204_750));
    d.handle_timeout(second);
    assert_eq!(
        (d.stats().paths[0].timeouts, d.stats().losses),
        (0, 2),
        "{middle} lost by time"
    );
    // Not in timeout recovery: the path asks again for what it lost.
    assert!(!requested(&transmits(&mut d, second)).is_empty());
}

/// Requests a weft path sends once its RTT is known (at 40 ms, when its pacer last let one
/// out at 20 ms), then at 43 ms, 2.5 ms after its pacer's next tick, with `slack` of lost time
/// it may make up.
fn paced_requests_after_a_late_wake(slack: Duration) -> (usize, usize) {
    let mut config = DownloadConfig::new(wire::ContentId([3; 32]), LONG * u64::from(PACKET), PACKET);
    config.pacing_slack = slack;
    let mut d = Download::new(config, scheduler::by_name("minrtt", 0).unwrap()).unwrap();
    let weft = cc::by_name("weft").unwrap().build(Instant::ZERO, 1400);
    let p = d.add_path(Instant::ZERO, ServerInfo::default(), weft);
    let conn_id = conn_id_of_hello(&transmits(&mut d, Instant::ZERO)[0].1);
    d.handle_datagram(ms(20), p, &welcome(conn_id, LONG * u64::from(PACKET), 1400));
    // The initial window goes out unpaced; its answers 20 ms later give the RTT.
    let first = requested(&transmits(&mut d, ms(20)));
    for &seq in &first {
        d.handle_datagram(ms(40), p, &long_data(conn_id, seq));
    }
    let at_40 = requested(&transmits(&mut d, ms(40))).len();
    (at_40, requested(&transmits(&mut d, ms(43))).len())
}

#[test]
fn a_paced_path_woken_late_makes_up_the_lost_time_within_the_slack() {
    // Slow start paces at 2 × window ÷ sRTT: 2 × 20 packets per 20 ms, one per 0.5 ms.
    // Without slack, one request per wake-up, however late. With 1 ms, a wake-up sends what
    // the last millisecond owed: at 40 ms the path idle since 20 ms earns 1 ms, not 20 (3
    // requests); at 43 ms, due since 40.5 ms, it sends 3 again and 1.5 ms stay lost.
    assert_eq!(paced_requests_after_a_late_wake(Duration::ZERO), (1, 1));
    assert_eq!(paced_requests_after_a_late_wake(Duration::from_millis(1)), (3, 3));
}

/// The ten packets of the content asked for at 20 ms, the first seven answered at 40 ms and
/// the last three lost: nothing answered after them, so neither threshold can find them.
/// Returns the download, its path and connection id, and the first REQUEST's id.
fn silent_tail(tail_probes: bool) -> (Download, PathId, u64, u64) {
    let mut config = DownloadConfig::new(wire::ContentId([3; 32]), LENGTH, PACKET);
    config.tail_probes = tail_probes;
    let (mut d, p, conn_id) =
        established_with(Download::new(config, scheduler::by_name("minrtt", 0).unwrap()).unwrap());
    let out = transmits(&mut d, ms(20));
    assert_eq!(requested(&out), (0..10).collect::<Vec<_>>());
    let first_request = request_ids(&out)[0];
    for seq in 0..7 {
        d.handle_datagram(ms(40), p, &data(conn_id, seq));
    }
    assert!(
        requested(&transmits(&mut d, ms(40))).is_empty(),
        "nothing left to ask for"
    );
    (d, p, conn_id, first_request)
}

#[test]
fn a_silent_tail_is_probed_before_the_timeout_and_its_losses_are_found_by_time() {
    // RFC 8985 §7. Without probes only the retransmission timeout finds the lost tail, one
    // RTO (the 200 ms floor) after the last answer, and counts it as a timeout.
    let (mut d, _, _, _) = silent_tail(false);
    let fire = d.poll_timeout().expect("requests in flight arm the timer");
    assert_eq!(fire, ms(240));
    d.handle_timeout(fire);
    assert_eq!(d.stats().paths[0].timeouts, 1);

    // With them, two smoothed RTTs (20 ms) after the last answer the path asks again for the
    // oldest packet still missing, and for nothing else.
    let (mut d, p, conn_id, _) = silent_tail(true);
    let probe_at = d.poll_timeout().expect("requests in flight arm the timer");
    assert_eq!(probe_at, ms(80));
    d.handle_timeout(probe_at);
    let out = transmits(&mut d, probe_at);
    assert_eq!(requested(&out), vec![7]);
    let s = d.stats();
    assert_eq!((s.paths[0].tail_probes, s.paths[0].timeouts, s.losses), (1, 0, 0));
    // The timeout now runs from the probe.
    assert_eq!(d.poll_timeout(), Some(probe_at + Duration::from_millis(200)));
    // Its answer comes after every request left unanswered: the time threshold declares
    // them lost at once (7's first request included), a loss, not a timeout, and the path
    // asks again for the two still missing.
    let probe_id = request_ids(&out)[0];
    d.handle_datagram(ms(100), p, &common::data_answering(conn_id, probe_id, 7, 1400));
    let s = d.stats();
    assert_eq!((s.paths[0].timeouts, s.losses, s.duplicates), (0, 3, 0));
    assert_eq!(requested(&transmits(&mut d, ms(100))), vec![8, 9]);
}

#[test]
fn a_late_tail_answers_its_own_requests_and_the_probe_comes_back_a_duplicate() {
    // The tail was late, not lost: its answers come after the probe left and are matched to
    // the first REQUEST (so no request stays in flight to be declared lost), and the probe's
    // own answer is a duplicate.
    let (mut d, p, conn_id, first_request) = silent_tail(true);
    let probe_at = d.poll_timeout().unwrap();
    d.handle_timeout(probe_at);
    let out = transmits(&mut d, probe_at);
    assert_eq!(requested(&out), vec![7]);
    for seq in 7..10 {
        d.handle_datagram(ms(90), p, &common::data_answering(conn_id, first_request, seq, 1400));
    }
    assert!(d.is_done());
    d.handle_datagram(
        ms(100),
        p,
        &common::data_answering(conn_id, request_ids(&out)[0], 7, 1400),
    );
    let s = d.stats();
    assert_eq!((s.losses, s.duplicates, s.paths[0].timeouts), (0, 1, 0));
    assert_eq!(s.paths[0].requests, 11);
    assert_eq!(d.poll_timeout(), None, "nothing left in flight");
}

#[test]
fn a_probe_left_unanswered_makes_the_next_timeout_give_back_everything() {
    // Silent for a probe timeout and then an RTO: the path is not just slow, so its first
    // timeout gives every request back to the queue, as a second one would without probes,
    // and the path is probed with a packet it delivered.
    let (mut d, _, _, _) = silent_tail(true);
    let probe_at = d.poll_timeout().unwrap();
    d.handle_timeout(probe_at);
    assert_eq!(requested(&transmits(&mut d, probe_at)), vec![7]);
    let fire = d.poll_timeout().unwrap();
    assert_eq!(fire, probe_at + Duration::from_millis(200));
    d.handle_timeout(fire);
    let s = d.stats();
    assert_eq!((s.paths[0].timeouts, s.losses), (1, 3), "7, 8 and 9 lost at once");
    let probe = requested(&transmits(&mut d, fire));
    assert_eq!(probe.len(), 1);
    assert!(probe[0] < 7, "probed with a delivered packet: {probe:?}");
}
