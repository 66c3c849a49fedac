//! Round-robin: cycle through the paths that have window room.

use super::{Pick, Scheduler, View};
use crate::path::PathId;

/// Remembers the last path served and gives the next sendable path after it.
#[derive(Debug, Default)]
pub struct RoundRobin {
    last: Option<PathId>,
}

impl Scheduler for RoundRobin {
    fn name(&self) -> &'static str {
        "round-robin"
    }
    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        let seq = view.pending.first()?;
        let after = |p: &&super::PathView| self.last.is_none_or(|last| p.id > last);
        let path = view
            .sendable()
            .filter(after)
            .min_by_key(|p| p.id)
            .or_else(|| view.sendable().min_by_key(|p| p.id))?;
        self.last = Some(path.id);
        Some(Pick { path: path.id, seq })
    }
}
