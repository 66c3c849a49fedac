//! minRTT (Kondo et al.'s LRF, Linux MPTCP's default): the path with room and the lowest sRTT.
//!
//! Packets pick paths: the first pending sequence number goes to the sendable path with the
//! smallest smoothed RTT (ties: the lower path id, so runs repeat).

use super::{Pick, Scheduler, View};

#[derive(Debug, Default)]
pub struct MinRtt;

impl Scheduler for MinRtt {
    fn name(&self) -> &'static str {
        "minrtt"
    }
    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        let seq = view.pending.first()?;
        let path = view.sendable().min_by_key(|p| (p.srtt, p.id))?;
        Some(Pick { path: path.id, seq })
    }
}
