//! The server session on its own: tokens, anti-amplification, budgets, the upload cap, and
//! its answers to bad input.

use pcdn_core::harness::PatternContent;
use pcdn_core::wire::{self, Message, Reason, SeqRange};
use pcdn_core::{Duration, Instant, ServerConfig, ServerSession};
use proptest::prelude::*;
use std::net::SocketAddr;

const CLIENT: &str = "127.0.0.1:9000";
const OTHER: &str = "127.0.0.2:9000";

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn server(config: ServerConfig) -> (ServerSession<PatternContent>, PatternContent) {
    let content = PatternContent::new(1_000_000);
    (ServerSession::new(config, content), content)
}

/// Every datagram the server wants to send now.
fn drain(s: &mut ServerSession<PatternContent>, now: Instant) -> Vec<(SocketAddr, Vec<u8>)> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(t) = s.poll_transmit(now, &mut buf) {
        out.push((t.to, buf[..t.len].to_vec()));
    }
    out
}

fn hello(conn_id: u64, content: wire::ContentId) -> Vec<u8> {
    let mut b = Vec::new();
    wire::encode_hello(&mut b, &wire::Hello { conn_id, content });
    b
}

fn request(conn_id: u64, token: &[u8], request_id: u64, ranges: &[SeqRange]) -> Vec<u8> {
    let mut b = Vec::new();
    wire::encode_request(&mut b, conn_id, token, request_id, ranges).unwrap();
    b
}

/// Handshakes as `from` and returns the token.
fn token_for(
    s: &mut ServerSession<PatternContent>,
    content: &PatternContent,
    from: SocketAddr,
    now: Instant,
) -> Vec<u8> {
    s.handle_datagram(now, from, &hello(7, content.id));
    let out = drain(s, now);
    assert_eq!(out.len(), 1);
    match wire::decode(&out[0].1).unwrap() {
        Message::Welcome(w) => {
            assert_eq!(w.conn_id, 7);
            assert_eq!(w.content_length, 1_000_000);
            assert_eq!(w.packet_size, 1400);
            w.token.to_vec()
        }
        other => panic!("expected WELCOME, got {other:?}"),
    }
}

/// A server whose client at `CLIENT` has handshaken at time zero, and the client's token.
fn validated(config: ServerConfig) -> (ServerSession<PatternContent>, Vec<u8>) {
    let (mut s, content) = server(config);
    let token = token_for(&mut s, &content, addr(CLIENT), Instant::ZERO);
    (s, token)
}

/// `CLIENT` asks, at time zero on connection 7, for `len` packets from `start`.
fn ask(s: &mut ServerSession<PatternContent>, token: &[u8], request_id: u64, start: u64, len: u32) {
    let ranges = [SeqRange { start, len }];
    s.handle_datagram(Instant::ZERO, addr(CLIENT), &request(7, token, request_id, &ranges));
}

fn reject_of(datagram: &[u8]) -> wire::Reject {
    match wire::decode(datagram).unwrap() {
        Message::Reject(r) => r,
        other => panic!("expected REJECT, got {other:?}"),
    }
}

#[test]
fn requests_are_answered_in_order_with_the_right_bytes() {
    let (mut s, token) = validated(ServerConfig::default());
    let now = Instant::ZERO;
    let ranges = [SeqRange { start: 5, len: 2 }, SeqRange { start: 1, len: 1 }];
    s.handle_datagram(now, addr(CLIENT), &request(7, &token, 42, &ranges));
    let out = drain(&mut s, now);
    let seqs: Vec<u64> = out
        .iter()
        .map(|(to, d)| {
            assert_eq!(*to, addr(CLIENT));
            match wire::decode(d).unwrap() {
                Message::Data(data) => {
                    assert_eq!(data.request_id, 42);
                    let mut expected = vec![0; 1400];
                    PatternContent::fill(data.seq * 1400, &mut expected);
                    assert_eq!(data.payload, &expected[..]);
                    data.seq
                }
                other => panic!("expected DATA, got {other:?}"),
            }
        })
        .collect();
    assert_eq!(seqs, vec![5, 6, 1]);
    assert_eq!(s.session_count(), 1);
}

#[test]
fn the_last_packet_is_short() {
    let (mut s, token) = validated(ServerConfig::default());
    let last = 1_000_000u64.div_ceil(1400) - 1;
    ask(&mut s, &token, 1, last, 1);
    let out = drain(&mut s, Instant::ZERO);
    let Message::Data(d) = wire::decode(&out[0].1).unwrap() else {
        panic!()
    };
    assert_eq!(d.payload.len() as u64, 1_000_000 - last * 1400);
}

#[test]
fn a_token_is_bound_to_address_and_connection_and_expires() {
    let config = ServerConfig {
        token_lifetime: Duration::from_secs(10),
        ..ServerConfig::default()
    };
    let (mut s, token) = validated(config);
    let one = [SeqRange { start: 0, len: 1 }];
    // Another address presenting the token.
    s.handle_datagram(Instant::ZERO, addr(OTHER), &request(7, &token, 1, &one));
    // Another connection id.
    s.handle_datagram(Instant::ZERO, addr(CLIENT), &request(8, &token, 2, &one));
    // A flipped bit.
    let mut forged = token.clone();
    forged[45] ^= 1;
    s.handle_datagram(Instant::ZERO, addr(CLIENT), &request(7, &forged, 3, &one));
    // Expired.
    s.handle_datagram(
        Instant::ZERO + Duration::from_secs(11),
        addr(CLIENT),
        &request(7, &token, 4, &one),
    );
    let out = drain(&mut s, Instant::ZERO + Duration::from_secs(11));
    assert_eq!(out.len(), 4);
    for (i, (_, d)) in out.iter().enumerate() {
        let r = reject_of(d);
        assert_eq!(r.reason, Reason::BadToken);
        assert_eq!(r.request_id, i as u64 + 1);
    }
    assert_eq!(s.session_count(), 0, "no state for unvalidated requests");
}

#[test]
fn unknown_content_is_refused() {
    let (mut s, _) = server(ServerConfig::default());
    s.handle_datagram(Instant::ZERO, addr(CLIENT), &hello(1, wire::ContentId([9; 32])));
    let out = drain(&mut s, Instant::ZERO);
    assert_eq!(reject_of(&out[0].1).reason, Reason::UnknownContent);
}

#[test]
fn the_request_budget_refuses_the_excess() {
    let config = ServerConfig {
        request_budget: 10,
        ..ServerConfig::default()
    };
    let (mut s, token) = validated(config);
    ask(&mut s, &token, 1, 0, 8);
    ask(&mut s, &token, 2, 8, 8);
    let out = drain(&mut s, Instant::ZERO);
    let rejects: Vec<_> = out
        .iter()
        .filter_map(|(_, d)| match wire::decode(d).unwrap() {
            Message::Reject(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(rejects.len(), 1);
    assert_eq!(rejects[0].reason, Reason::Overloaded);
    assert_eq!(rejects[0].request_id, 2);
    assert_eq!(out.len(), 9, "the first request's 8 packets and one REJECT");
}

#[test]
fn requests_past_the_end_are_refused() {
    let (mut s, token) = validated(ServerConfig::default());
    ask(&mut s, &token, 3, 700, 20);
    let out = drain(&mut s, Instant::ZERO);
    assert_eq!(out.len(), 1);
    assert_eq!(reject_of(&out[0].1).reason, Reason::OutOfRange);
}

#[test]
fn cancel_drops_queued_numbers_and_bye_closes() {
    let (mut s, token) = validated(ServerConfig::default());
    ask(&mut s, &token, 1, 0, 10);
    let mut b = Vec::new();
    wire::encode_cancel(&mut b, 7, &token, &[SeqRange { start: 2, len: 3 }]).unwrap();
    s.handle_datagram(Instant::ZERO, addr(CLIENT), &b);
    assert_eq!(s.queued(), 7);
    let seqs: Vec<u64> = drain(&mut s, Instant::ZERO)
        .iter()
        .map(|(_, d)| match wire::decode(d).unwrap() {
            Message::Data(d) => d.seq,
            _ => panic!(),
        })
        .collect();
    assert_eq!(seqs, vec![0, 1, 5, 6, 7, 8, 9]);
    let mut b = Vec::new();
    wire::encode_bye(
        &mut b,
        &wire::Bye {
            conn_id: 7,
            token: &token,
        },
    )
    .unwrap();
    s.handle_datagram(Instant::ZERO, addr(CLIENT), &b);
    assert_eq!(s.session_count(), 0);
}

#[test]
fn idle_sessions_expire() {
    let config = ServerConfig {
        idle_timeout: Duration::from_secs(5),
        ..ServerConfig::default()
    };
    let (mut s, token) = validated(config);
    ask(&mut s, &token, 1, 0, 1);
    drain(&mut s, Instant::ZERO);
    let mut now = Instant::ZERO;
    while s.session_count() > 0 && now < Instant::ZERO + Duration::from_secs(20) {
        now = s
            .poll_timeout()
            .expect("a live session has a timer")
            .max(now + Duration::from_millis(1));
        s.handle_timeout(now);
    }
    assert_eq!(s.session_count(), 0);
    assert!(now >= Instant::ZERO + Duration::from_secs(5));
}

#[test]
fn the_upload_cap_holds_the_rate() {
    // 1 Mbit/s = 125,000 bytes/s of datagrams.
    let config = ServerConfig {
        upload_rate: Some(125_000),
        upload_burst: 3000,
        ..ServerConfig::default()
    };
    let (mut s, token) = validated(config);
    ask(&mut s, &token, 1, 0, 700);
    let mut now = Instant::ZERO;
    let end = Instant::ZERO + Duration::from_secs(2);
    let mut bytes = 0u64;
    let mut buf = Vec::new();
    while now < end {
        while let Some(t) = s.poll_transmit(now, &mut buf) {
            bytes += t.len as u64;
        }
        now = s.poll_timeout().expect("queued data has a timer");
        s.handle_timeout(now);
    }
    let expected = 2.0 * 125_000.0 + 3000.0;
    assert!(
        (bytes as f64 - expected).abs() / expected < 0.02,
        "sent {bytes} bytes in 2 s, expected about {expected}"
    );
}

#[test]
fn bad_datagrams_get_a_reason_when_that_does_not_amplify() {
    let (mut s, _) = server(ServerConfig::default());
    let mut wrong_version = hello(1, wire::ContentId([0; 32]));
    wrong_version[0] = 9;
    s.handle_datagram(Instant::ZERO, addr(CLIENT), &wrong_version);
    let out = drain(&mut s, Instant::ZERO);
    assert_eq!(reject_of(&out[0].1).reason, Reason::UnsupportedVersion);
    // §7.7: a datagram shorter than the 19-byte REJECT gets nothing, whatever it holds (the
    // 3x of §7.6 would allow an answer to one of 7 bytes and more).
    let truncated_hello = hello(0x0102_0304_0506_0708, wire::ContentId([0; 32]));
    for len in 1..wire::REJECT_LEN {
        s.handle_datagram(Instant::ZERO, addr(CLIENT), &truncated_hello[..len]);
        let out = drain(&mut s, Instant::ZERO);
        assert!(out.is_empty(), "{len} bytes drew {out:?}");
    }
    // From 19 bytes on it is answered, naming the datagram's connection id.
    s.handle_datagram(Instant::ZERO, addr(CLIENT), &truncated_hello[..wire::REJECT_LEN]);
    let out = drain(&mut s, Instant::ZERO);
    let reject = reject_of(&out[0].1);
    assert_eq!(reject.reason, Reason::Malformed);
    assert_eq!(reject.conn_id, 0x0102_0304_0506_0708);
    // Oversized.
    s.handle_datagram(Instant::ZERO, addr(CLIENT), &vec![1u8; 4000]);
    let out = drain(&mut s, Instant::ZERO);
    assert_eq!(reject_of(&out[0].1).reason, Reason::Malformed);
    // A server-to-client type sent to a server is dropped.
    let mut data = Vec::new();
    wire::encode_data(
        &mut data,
        &wire::Data {
            conn_id: 1,
            request_id: 1,
            seq: 0,
            payload: &[0; 10],
        },
    )
    .unwrap();
    s.handle_datagram(Instant::ZERO, addr(CLIENT), &data);
    assert!(drain(&mut s, Instant::ZERO).is_empty());
}

/// A HELLO from `from` on `conn_id`, then a REQUEST of one packet with its token, at `now`;
/// returns what the REQUEST drew (DATA, or a REJECT).
fn open(
    s: &mut ServerSession<PatternContent>,
    id: wire::ContentId,
    from: SocketAddr,
    conn_id: u64,
    now: Instant,
) -> Vec<u8> {
    s.handle_datagram(now, from, &hello(conn_id, id));
    let out = drain(s, now);
    let Message::Welcome(w) = wire::decode(&out[0].1).unwrap() else {
        panic!("expected WELCOME")
    };
    let token = w.token.to_vec();
    s.handle_datagram(
        now,
        from,
        &request(conn_id, &token, 1, &[SeqRange { start: 0, len: 1 }]),
    );
    let out = drain(s, now);
    assert_eq!(out.len(), 1);
    out[0].1.clone()
}

fn is_data(datagram: &[u8]) -> bool {
    matches!(wire::decode(datagram).unwrap(), Message::Data(_))
}

#[test]
fn one_source_cannot_take_the_table() {
    // One address, any ports: at most max_sessions_per_source sessions, the rest Overloaded;
    // another address still gets in.
    let (mut s, content) = server(ServerConfig::default());
    let now = Instant::ZERO;
    let mut opened = 0;
    for i in 0..1100u64 {
        let from = SocketAddr::new("10.0.0.1".parse().unwrap(), 1000 + (i % 50) as u16);
        let answer = open(&mut s, content.id, from, i, now);
        if is_data(&answer) {
            opened += 1;
        } else {
            assert_eq!(reject_of(&answer).reason, Reason::Overloaded);
        }
    }
    assert_eq!(opened, ServerConfig::default().max_sessions_per_source);
    assert!(is_data(&open(&mut s, content.id, addr(OTHER), 1, now)));
    // An IPv6 host is one source over its /64.
    for i in 0..40u64 {
        let from = SocketAddr::new(format!("2001:db8::{i:x}").parse().unwrap(), 9);
        open(&mut s, content.id, from, i, now);
    }
    assert_eq!(s.session_count(), 2 * 16 + 1);
}

#[test]
fn a_full_table_gives_a_new_source_a_fair_share() {
    let config = ServerConfig {
        max_sessions: 64,
        max_sessions_per_source: 16,
        evict_idle_after: Duration::from_secs(5),
        ..ServerConfig::default()
    };
    let (mut s, content) = server(config);
    let mut now = Instant::ZERO;
    // Four attacking addresses fill the table and keep every session busy.
    let attacker = |n: u64| SocketAddr::new(format!("10.0.0.{}", 1 + n % 4).parse().unwrap(), 5000);
    for i in 0..64u64 {
        assert!(is_data(&open(&mut s, content.id, attacker(i), i, now)));
    }
    assert_eq!(s.session_count(), 64);
    // A newcomer takes the stalest session of a source holding the most.
    now += Duration::from_secs(1);
    assert!(is_data(&open(&mut s, content.id, addr(OTHER), 1, now)));
    assert_eq!(s.stats().sessions_evicted, 1);
    // The attackers reopening (fresh connection ids, all sessions busy) cannot push it out:
    // no source holds two more than the one asking.
    for i in 100..400u64 {
        now += Duration::from_millis(10);
        open(&mut s, content.id, attacker(i), i, now);
    }
    let other = addr(OTHER);
    s.handle_datagram(now, other, &hello(1, content.id));
    let welcome = drain(&mut s, now);
    let Message::Welcome(w) = wire::decode(&welcome[0].1).unwrap() else {
        panic!()
    };
    s.handle_datagram(now, other, &request(1, w.token, 2, &[SeqRange { start: 1, len: 1 }]));
    assert!(is_data(&drain(&mut s, now)[0].1), "the newcomer kept its session");
    assert_eq!(s.session_count(), 64);
}

#[test]
fn an_idle_session_gives_way_when_the_table_is_full() {
    let config = ServerConfig {
        max_sessions: 8,
        evict_idle_after: Duration::from_secs(5),
        ..ServerConfig::default()
    };
    let (mut s, content) = server(config);
    for i in 0..8u64 {
        let from = SocketAddr::new(format!("10.0.1.{i}").parse().unwrap(), 5000);
        assert!(is_data(&open(&mut s, content.id, from, i, Instant::ZERO)));
    }
    // Everyone holds one: a newcomer is refused while all are busy...
    let t1 = Instant::ZERO + Duration::from_secs(4);
    assert_eq!(
        reject_of(&open(&mut s, content.id, addr(OTHER), 1, t1)).reason,
        Reason::Overloaded
    );
    // ...and gets the stalest once it has been silent for evict_idle_after.
    let t2 = Instant::ZERO + Duration::from_secs(5);
    assert!(is_data(&open(&mut s, content.id, addr(OTHER), 1, t2)));
    assert_eq!(s.stats().sessions_evicted, 1);
    assert_eq!(s.session_count(), 8);
}

#[test]
fn a_cancel_flood_costs_what_it_cancels() {
    // The worst queue for a walk: the whole budget as single numbers, 118 ranges per REQUEST;
    // then CANCELs of 119 numbers that are not queued, as a flood would send.
    let (mut s, token) = validated(ServerConfig::default());
    let now = Instant::ZERO;
    let mut request_id = 0;
    let mut queued = 0u64;
    while queued + 118 <= 4096 {
        let ranges: Vec<SeqRange> = (0..118).map(|i| SeqRange { start: 2 * i, len: 1 }).collect();
        s.handle_datagram(now, addr(CLIENT), &request(7, &token, request_id, &ranges));
        request_id += 1;
        queued += 118;
    }
    assert_eq!(s.queued(), queued);
    let missing: Vec<SeqRange> = (0..119)
        .map(|i| SeqRange {
            start: 2 * i + 1,
            len: 1,
        })
        .collect();
    let mut cancel = Vec::new();
    wire::encode_cancel(&mut cancel, 7, &token, &missing).unwrap();
    for _ in 0..1000 {
        s.handle_datagram(now, addr(CLIENT), &cancel);
    }
    assert_eq!(s.queued(), queued, "nothing was cancelled");
    // Building the index once looks at nothing; each CANCEL then costs a lookup per chunk.
    assert_eq!(s.stats().cancel_visits, 0);
    // A CANCEL that removes numbers looks at the entries of the chunk it changes: the 32
    // numbers of 0..64 that each REQUEST queued, not the whole queue.
    let mut cancel = Vec::new();
    wire::encode_cancel(&mut cancel, 7, &token, &[SeqRange { start: 0, len: 1 }]).unwrap();
    s.handle_datagram(now, addr(CLIENT), &cancel);
    assert_eq!(s.queued(), queued - request_id);
    assert_eq!(s.stats().cancel_visits, 32 * request_id);
}

proptest! {
    /// RFC 9000 §8 from a spoofed source: whatever arrives from an address that never shows
    /// a valid token, the server sends it at most 3× the bytes.
    #[test]
    fn a_spoofed_source_gets_at_most_three_times_its_bytes(
        datagrams in prop::collection::vec(
            prop_oneof![
                prop::collection::vec(any::<u8>(), 0..1600),
                any::<u64>().prop_map(|c| hello(c, PatternContent::new(1_000_000).id)),
                (any::<u64>(), prop::collection::vec(any::<u8>(), 0..64)).prop_map(|(c, t)| request(c, &t, 1, &[SeqRange { start: 0, len: 100 }])),
            ],
            1..40,
        )
    ) {
        let (mut s, _) = server(ServerConfig::default());
        let mut received = 0usize;
        let mut sent = 0usize;
        for d in &datagrams {
            received += d.len();
            s.handle_datagram(Instant::ZERO, addr(OTHER), d);
            for (to, out) in drain(&mut s, Instant::ZERO) {
                prop_assert_eq!(to, addr(OTHER));
                sent += out.len();
            }
            prop_assert!(sent <= 3 * received, "sent {} for {} received", sent, received);
        }
        prop_assert_eq!(s.session_count(), 0);
    }

    /// Arbitrary bytes never panic the server, from a validated client either.
    #[test]
    fn arbitrary_bytes_never_panic_the_server(garbage in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..1600), 1..20)) {
        let (mut s, token) = validated(ServerConfig::default());
        for g in &garbage {
            let mut d = g.clone();
            if d.len() > 11 + token.len() && d.len() % 2 == 0 {
                // Make some inputs decode as far as the token to reach deeper code.
                d[0] = wire::VERSION;
                d[1] = wire::kind::REQUEST;
                d[2..10].copy_from_slice(&7u64.to_be_bytes());
                d[10] = token.len() as u8;
                d[11..11 + token.len()].copy_from_slice(&token);
            }
            s.handle_datagram(Instant::ZERO, addr(CLIENT), &d);
            drain(&mut s, Instant::ZERO);
        }
    }
}
