//! The `subflow` transport: a lost packet is retransmitted on its own path and holds up what
//! arrived behind it there; a dead path's data goes elsewhere only once the path has failed;
//! opportunistic retransmission re-asks the packet that blocks the reorder buffer. Each test
//! also runs the same script under `pull` and checks that it behaves otherwise, so that it
//! fails if the mechanism is removed.

mod common;
use common::transmits;

use pcdn_core::cc;
use pcdn_core::harness::{Harness, PathSpec};
use pcdn_core::scheduler::{self, Pick, SCHEDULERS, Scheduler, View};
use pcdn_core::wire::{self, Message};
use pcdn_core::{Download, DownloadConfig, Duration, Event, Instant, PathId, ServerInfo, Transport};
use std::collections::VecDeque;

const PACKET: u32 = 1400;
const SUBFLOW: Transport = Transport::Subflow { opportunistic: false };

/// Asks for the scripted (path, seq) picks in order, each once its path can send; then for
/// the first pending number, on the last path that can send.
#[derive(Debug)]
struct Scripted(VecDeque<(u32, u64)>);

impl Scheduler for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }
    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        if let Some(&(path, seq)) = self.0.front() {
            let path = PathId(path);
            if !view.path(path).is_some_and(|p| p.can_send) {
                return None;
            }
            self.0.pop_front();
            return Some(Pick { path, seq });
        }
        let seq = view.pending.first()?;
        let path = view.sendable().last()?.id;
        Some(Pick { path, seq })
    }
}

fn ms(n: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(n)
}

/// The sequence numbers the REQUESTs among `out` ask `path` for.
fn requested_on(out: &[(PathId, Vec<u8>)], path: PathId) -> Vec<u64> {
    common::requested(out.iter().filter(|(p, _)| *p == path))
}

fn data(conn_id: u64, seq: u64) -> Vec<u8> {
    common::data_of_len(conn_id, seq, PACKET as usize)
}

/// A download of `packets` packets with `script`, over paths whose WELCOMEs arrive at the
/// given times (their first RTT samples). Returns it and each path's connection id.
fn setup(
    transport: Transport,
    packets: u64,
    reorder_packets: u64,
    welcomes: &[u64],
    script: &[(u32, u64)],
) -> (Download, Vec<u64>) {
    let length = packets * u64::from(PACKET);
    let mut config = DownloadConfig::new(wire::ContentId([7; 32]), length, PACKET);
    config.transport = transport;
    config.reorder_buffer = reorder_packets * u64::from(PACKET);
    let mut d = Download::new(config, Box::new(Scripted(script.iter().copied().collect()))).unwrap();
    let paths: Vec<PathId> = welcomes
        .iter()
        .map(|_| {
            let cubic = cc::by_name("cubic").unwrap().build(Instant::ZERO, u64::from(PACKET));
            d.add_path(Instant::ZERO, ServerInfo::default(), cubic)
        })
        .collect();
    let conn_ids: Vec<u64> = transmits(&mut d, Instant::ZERO)
        .iter()
        .map(|(_, b)| match wire::decode(b).unwrap() {
            Message::Hello(h) => h.conn_id,
            other => panic!("expected HELLO, got {other:?}"),
        })
        .collect();
    for ((&path, &conn_id), &at) in paths.iter().zip(&conn_ids).zip(welcomes) {
        let mut b = Vec::new();
        let welcome = wire::Welcome {
            conn_id,
            content_length: length,
            packet_size: PACKET as u16,
            token: &[1; 8],
        };
        wire::encode_welcome(&mut b, &welcome).unwrap();
        d.handle_datagram(ms(at), path, &b);
    }
    (d, conn_ids)
}

/// Path 0 asks for 3, 2, 1, 0 (in that order: a reverse segment, as MPRD's reverse servers
/// fetch), path 1 for 4..8. Everything arrives but 3, the first on path 0. Returns the
/// packets delivered in order then, and what each path asks for once 3 is declared lost.
fn reverse_segment_with_a_loss(transport: Transport) -> (u64, Vec<u64>, Vec<u64>, Download, Vec<u64>) {
    let script = [(0, 3), (0, 2), (0, 1), (0, 0), (1, 4), (1, 5), (1, 6), (1, 7)];
    let (mut d, conn) = setup(transport, 8, 8, &[20, 20], &script);
    let first = transmits(&mut d, ms(20));
    assert_eq!(requested_on(&first, PathId(0)), vec![3, 2, 1, 0]);
    assert_eq!(requested_on(&first, PathId(1)), vec![4, 5, 6, 7]);
    for seq in [2, 1, 0] {
        d.handle_datagram(ms(40), PathId(0), &data(conn[0], seq));
    }
    for seq in 4..8 {
        d.handle_datagram(ms(40), PathId(1), &data(conn[1], seq));
    }
    assert_eq!(d.stats().losses, 1, "three later answers declare 3 lost");
    let delivered = d.stats().packets_delivered;
    let after = transmits(&mut d, ms(40));
    (
        delivered,
        requested_on(&after, PathId(0)),
        requested_on(&after, PathId(1)),
        d,
        conn,
    )
}

#[test]
fn a_lost_packet_holds_up_its_path_and_is_asked_again_on_that_path_only() {
    let (delivered, again_0, again_1, mut d, conn) = reverse_segment_with_a_loss(SUBFLOW);
    assert_eq!(
        delivered, 0,
        "0, 1 and 2 arrived behind the hole at 3 on their path: held"
    );
    assert_eq!(again_0, vec![3], "the path that lost 3 retransmits it");
    assert!(again_1.is_empty(), "no other path is asked for it: {again_1:?}");
    let s = d.stats();
    assert_eq!(s.ofo_max, 7 * u64::from(PACKET), "held bytes count as out of order");
    d.handle_datagram(ms(60), PathId(0), &data(conn[0], 3));
    assert!(d.is_done(), "the retransmission releases everything behind it");
    assert_eq!(d.stats().duplicates, 0);
    // What was held waited from its arrival at 40 ms until 60 ms.
    assert!(d.stats().wait_p99() >= std::time::Duration::from_millis(20));

    // Under pull the same arrivals deliver 0..3 at once, and the loss is pending for any path.
    let (delivered, again_0, again_1, ..) = reverse_segment_with_a_loss(Transport::Pull);
    assert_eq!(delivered, 3);
    assert_eq!((again_0, again_1), (vec![], vec![3]), "pull re-asks on another path");
}

/// Path 0 asks for 0..4 and never answers; path 1 asks for 4..8 and answers at once. Returns
/// when path 0 failed (if it did) and when path 1 was first asked for one of 0..4.
fn dead_path(transport: Transport) -> (Option<Instant>, Option<Instant>, Download) {
    let script = [(0, 0), (0, 1), (0, 2), (0, 3), (1, 4), (1, 5), (1, 6), (1, 7)];
    let (mut d, conn) = setup(transport, 8, 8, &[20, 20], &script);
    let mut now = ms(20);
    let mut failed = None;
    let mut rescued = None;
    for _ in 0..10_000 {
        let out = transmits(&mut d, now);
        if rescued.is_none() && requested_on(&out, PathId(1)).iter().any(|&s| s < 4) {
            rescued = Some(now);
        }
        for seq in requested_on(&out, PathId(1)) {
            d.handle_datagram(now + Duration::from_millis(20), PathId(1), &data(conn[1], seq));
        }
        while let Some(e) = d.poll_event() {
            if let Event::PathFailed { path: PathId(0), .. } = e {
                failed.get_or_insert(now);
            }
        }
        if d.is_done() {
            break;
        }
        let Some(t) = d.poll_timeout() else { break };
        now = now.max(t);
        d.handle_timeout(now);
        while let Some(e) = d.poll_event() {
            if let Event::PathFailed { path: PathId(0), .. } = e {
                failed.get_or_insert(now);
            }
        }
    }
    (failed, rescued, d)
}

#[test]
fn a_dead_paths_data_goes_elsewhere_only_once_the_path_has_failed() {
    let (failed, rescued, d) = dead_path(SUBFLOW);
    assert!(d.is_done());
    let failed = failed.expect("six timeouts in a row fail the silent path");
    assert_eq!(
        rescued,
        Some(failed),
        "its data is asked of path 1 when, and only when, it failed"
    );
    let s = d.stats();
    assert!(s.paths[0].timeouts >= 6, "{:?}", s.paths[0]);
    assert!(
        s.paths[0].requests > 4,
        "the silent path retransmitted its oldest packet on each timeout"
    );

    // Under pull the second timeout already gives everything to path 1, long before.
    let (failed, rescued, d) = dead_path(Transport::Pull);
    assert!(d.is_done());
    assert!(failed.is_none_or(|f| rescued.unwrap() < f), "{rescued:?} {failed:?}");
}

/// A reorder buffer of four packets; path 0 (40 ms RTT) is asked for 0, path 1 (20 ms) for 1,
/// 2 and 3: nothing new may be asked for until 0 arrives. Returns what path 1 is asked for.
fn blocked_window(transport: Transport) -> (Vec<u64>, Download) {
    let script = [(0, 0), (1, 1), (1, 2), (1, 3)];
    let (mut d, _) = setup(transport, 8, 4, &[40, 20], &script);
    let first = transmits(&mut d, ms(40));
    assert_eq!(requested_on(&first, PathId(0)), vec![0]);
    (requested_on(&first, PathId(1)), d)
}

#[test]
fn opportunistic_retransmission_reasks_the_blocking_packet_and_penalises_its_path() {
    let (on_1, d) = blocked_window(Transport::Subflow { opportunistic: true });
    assert_eq!(
        on_1,
        vec![1, 2, 3, 0],
        "path 1 has room: it asks for the window's left edge too"
    );
    let s = d.stats();
    assert_eq!((s.reinjections, s.penalties), (1, 1), "the slower path 0 is penalised");

    for transport in [SUBFLOW, Transport::Pull] {
        let (on_1, d) = blocked_window(transport);
        assert_eq!(on_1, vec![1, 2, 3], "{transport:?}");
        assert_eq!((d.stats().reinjections, d.stats().penalties), (0, 0));
    }
}

#[test]
fn every_scheduler_completes_on_lossy_subflows_byte_exact() {
    let specs = [
        PathSpec::new(8_000_000, Duration::from_millis(10), 0.02),
        PathSpec::new(4_000_000, Duration::from_millis(30), 0.05),
        PathSpec::new(2_000_000, Duration::from_millis(20), 0.0),
    ];
    for transport in [SUBFLOW, Transport::Subflow { opportunistic: true }] {
        for &(name, _) in SCHEDULERS {
            let mut config = DownloadConfig::new(Default::default(), 1_000_000, PACKET);
            config.transport = transport;
            config.reorder_buffer = 200_000;
            let mut h = Harness::new(
                config,
                scheduler::by_name(name, 1).unwrap(),
                cc::by_name("cubic").unwrap().as_ref(),
                &specs,
                1,
            );
            assert!(
                h.run(Duration::from_secs(300)),
                "{name} on {transport:?} did not complete"
            );
            assert_eq!(h.verified, 1_000_000, "{name} on {transport:?}: every byte checked");
        }
    }
}

#[test]
fn a_verified_download_on_subflows_bans_a_corrupter_and_completes_byte_exact() {
    use pcdn_core::PathError;
    use pcdn_core::harness::{Corruption, PatternContent};
    use pcdn_core::manifest::DEFAULT_BLOCK_SIZE;
    let (length, packet) = (2 << 20, 1024);
    let specs = [
        PathSpec::new(10_000_000, Duration::from_millis(10), 0.02),
        PathSpec::new(10_000_000, Duration::from_millis(12), 0.02),
        PathSpec::new(10_000_000, Duration::from_millis(14), 0.0),
    ];
    for name in ["minrtt", "mprd", "weave"] {
        let mut config = DownloadConfig::new(Default::default(), length, packet);
        config.transport = SUBFLOW;
        let manifest = PatternContent::new(length).manifest(packet, DEFAULT_BLOCK_SIZE);
        config.verify = Some(std::sync::Arc::new(manifest));
        let cubic = cc::by_name("cubic").unwrap();
        let mut h = Harness::new(config, scheduler::by_name(name, 1).unwrap(), cubic.as_ref(), &specs, 1);
        h.corrupt_server(1, Corruption::everything(u64::from(DEFAULT_BLOCK_SIZE)));
        assert!(h.run(Duration::from_secs(120)), "{name} did not complete");
        assert_eq!(h.verified, length, "{name}: every byte checked");
        let failed: Vec<_> = std::iter::from_fn(|| h.client.poll_event())
            .filter_map(|e| match e {
                Event::PathFailed { path, reason } => Some((path, reason)),
                _ => None,
            })
            .collect();
        assert_eq!(failed, [(h.path_ids[1], PathError::Corrupt)], "{name}");
    }
}
