//! What the weave modules' tests share.

pub(super) use super::WeaveConfig;
pub(super) use super::arrival::PathClock;
pub(super) use crate::path::PathId;
pub(super) use crate::player::{Player, VideoSpec};
pub(super) use crate::scheduler::testing::{Fixture, path, paths_of, seqs_of};
pub(super) use crate::scheduler::{PathView, Pending, Pick, SchedEvent, Scheduler};
pub(super) use crate::time::{Duration, Instant};

/// The answer to `seq` on path `path`, `rtt_ms` after its request.
pub(super) fn answer(path: u32, seq: u64, rtt_ms: u64) -> SchedEvent {
    SchedEvent::Arrived {
        path: PathId(path),
        seq,
        rtt: Duration::from_millis(rtt_ms),
        duplicate: false,
    }
}

/// A path delivering 1000 packets per second (the fixture's packets are 1000 bytes).
pub(super) fn measured(mut p: PathView) -> PathView {
    p.delivery_rate = Some(1_000_000.0);
    p.delivered = 1000;
    p
}

/// Ends the path's start-up: a first round trip, then as many without growth as it takes.
pub(super) fn end_start_up(clock: &mut PathClock) {
    while !clock.started() {
        clock.on_round_rate(1.0);
    }
}
