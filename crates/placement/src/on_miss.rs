//! `on-miss`: a looked-up content that too few devices hold goes to the least loaded devices,
//! least recently used contents evicted to make room.

use crate::{Assignment, Content, Input, PlacementConfig, Policy, Slot, into_assignment, slots};
use pcdn_wire::ContentId;
use std::collections::{BTreeMap, BTreeSet};

/// The `on-miss` policy.
///
/// 1. Each device starts from its previous assignment (or, on its first round, what it holds),
///    keeping the most recently looked-up contents that fit its disk budget.
/// 2. Live contents (demand > 0 and looked up within `on_miss_window_ms`), most demanded first,
///    ties by id: one that fewer than `on_miss_replicas` devices have is assigned to more, least
///    loaded first (reported upload ÷ capacity, then contents added this round, then id).
/// 3. To make room a device evicts its least recently looked-up contents (ties by id): only ones
///    looked up less recently than the content it takes, not added this round, and either not
///    live or held by more than `on_miss_replicas` devices (so an eviction never makes a new
///    miss, and a round on its own result moves nothing); if that does not make room, the next
///    device is tried.
#[derive(Clone, Copy, Debug, Default)]
pub struct OnMiss;

impl Policy for OnMiss {
    fn name(&self) -> &'static str {
        "on-miss"
    }

    fn place(&self, input: &Input, config: &PlacementConfig) -> Assignment {
        let contents: BTreeMap<ContentId, &Content> = input
            .contents
            .iter()
            .filter(|content| content.size > 0)
            .map(|content| (content.id, content))
            .collect();
        let mut slots = slots(input);
        for slot in &mut slots {
            let start = match input.previous.get(&slot.device.id) {
                Some(previous) => previous.clone(),
                None => slot.device.holds.clone(),
            };
            let mut kept: Vec<&Content> = start.iter().filter_map(|id| contents.get(id).copied()).collect();
            kept.sort_by(|a, b| b.last_lookup_ms.cmp(&a.last_lookup_ms).then(a.id.cmp(&b.id)));
            for content in kept {
                if slot.room() >= content.size {
                    slot.assigned.insert(content.id);
                    slot.disk_used += content.size;
                }
            }
        }
        let mut added: Vec<BTreeSet<ContentId>> = vec![BTreeSet::new(); slots.len()];
        let live = |content: &Content| {
            content.demand_bps > 0.0 && input.now_ms.saturating_sub(content.last_lookup_ms) <= config.on_miss_window_ms
        };
        let mut holders: BTreeMap<ContentId, usize> = BTreeMap::new();
        for slot in &slots {
            for id in &slot.assigned {
                *holders.entry(*id).or_default() += 1;
            }
        }
        let mut missed: Vec<&Content> = contents.values().copied().filter(|content| live(content)).collect();
        missed.sort_by(|a, b| b.demand_bps.total_cmp(&a.demand_bps).then(a.id.cmp(&b.id)));
        for content in missed {
            let mut have = holders.get(&content.id).copied().unwrap_or(0);
            let mut order: Vec<usize> = (0..slots.len())
                .filter(|&index| {
                    !slots[index].assigned.contains(&content.id) && slots[index].device.disk_bytes >= content.size
                })
                .collect();
            order.sort_by(|&a, &b| {
                let busy = |slot: &Slot<'_>| slot.device.upload_bps as f64 / slot.device.upload_capacity_bps as f64;
                busy(&slots[a])
                    .total_cmp(&busy(&slots[b]))
                    .then(added[a].len().cmp(&added[b].len()))
                    .then(slots[a].device.id.cmp(&slots[b].device.id))
            });
            for index in order {
                if have >= config.on_miss_replicas {
                    break;
                }
                let evictable = |victim: &Content| {
                    victim.last_lookup_ms < content.last_lookup_ms
                        && !added[index].contains(&victim.id)
                        && (!live(victim) || holders.get(&victim.id).copied().unwrap_or(0) > config.on_miss_replicas)
                };
                if let Some(evicted) = make_room(&slots[index], content, &contents, evictable) {
                    for victim in evicted {
                        slots[index].assigned.remove(&victim.id);
                        slots[index].disk_used -= victim.size;
                        *holders.entry(victim.id).or_default() -= 1;
                    }
                    let slot = &mut slots[index];
                    slot.assigned.insert(content.id);
                    slot.disk_used += content.size;
                    added[index].insert(content.id);
                    *holders.entry(content.id).or_default() += 1;
                    have += 1;
                }
            }
        }
        into_assignment(slots)
    }
}

/// The least recently looked-up contents (ties by id) `slot` would evict so that `content`
/// fits, among those `evictable` allows; `None` if they do not make room.
fn make_room<'c>(
    slot: &Slot<'_>,
    content: &Content,
    contents: &BTreeMap<ContentId, &'c Content>,
    evictable: impl Fn(&Content) -> bool,
) -> Option<Vec<&'c Content>> {
    if slot.room() >= content.size {
        return Some(Vec::new());
    }
    let mut victims: Vec<&Content> = slot
        .assigned
        .iter()
        .filter_map(|id| contents.get(id).copied())
        .filter(|victim| evictable(victim))
        .collect();
    victims.sort_by(|a, b| a.last_lookup_ms.cmp(&b.last_lookup_ms).then(a.id.cmp(&b.id)));
    let mut freed = 0;
    let mut evict = Vec::new();
    for victim in victims {
        if slot.room() + freed >= content.size {
            break;
        }
        freed += victim.size;
        evict.push(victim);
    }
    (slot.room() + freed >= content.size).then_some(evict)
}
