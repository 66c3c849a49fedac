//! `popularity`: replicas follow demand ÷ device upload, within each device's disk budget, with
//! hysteresis (the pre-allocation of Wei et al., IEEE JSAC 2025, §II-A).

use crate::{Assignment, Content, Input, PlacementConfig, Policy, Slot, into_assignment, slots};
use std::collections::BTreeMap;

/// The `popularity` policy.
///
/// 1. Contents with demand are taken in order of demand (× (1 + hysteresis) for a content some
///    device has now), highest first, ties by id: the most demanded win disk.
/// 2. A content's replica target is `max(min_replicas, ⌈demand ÷ (mean capacity ×
///    target_utilization)⌉, ⌈bitrate ÷ mean capacity⌉)`, at most one per device. If the devices
///    that have it now number `k ≥ min_replicas` and the target is within a factor (1 +
///    hysteresis) of `k`, the target is `k`.
/// 3. Each replica goes to a device with room for it that has it now, else to the one whose
///    region holds the fewest replicas of it, then the least planned utilization, then the
///    smallest id; the content's demand is shared equally by its replicas' planned load.
#[derive(Clone, Copy, Debug, Default)]
pub struct Popularity;

impl Policy for Popularity {
    fn name(&self) -> &'static str {
        "popularity"
    }

    fn place(&self, input: &Input, config: &PlacementConfig) -> Assignment {
        let mut slots = slots(input);
        if slots.is_empty() {
            return Assignment::new();
        }
        let mean_capacity = slots
            .iter()
            .map(|slot| slot.device.upload_capacity_bps as f64)
            .sum::<f64>()
            / slots.len() as f64;
        let boost = 1.0 + config.hysteresis;
        let mut order: Vec<(f64, &Content)> = input
            .contents
            .iter()
            .filter(|content| content.demand_bps.is_finite() && content.demand_bps > 0.0 && content.size > 0)
            .map(|content| {
                let held = slots.iter().any(|slot| slot.has_now(&content.id, &input.previous));
                (
                    if held {
                        content.demand_bps * boost
                    } else {
                        content.demand_bps
                    },
                    content,
                )
            })
            .collect();
        order.sort_by(|(a, x), (b, y)| b.total_cmp(a).then(x.id.cmp(&y.id)));
        let mut seen = std::collections::BTreeSet::new();
        for (_, content) in order {
            if seen.insert(content.id) {
                place_one(&mut slots, content, input, config, mean_capacity);
            }
        }
        into_assignment(slots)
    }
}

fn replica_target(
    content: &Content,
    have: usize,
    devices: usize,
    config: &PlacementConfig,
    mean_capacity: f64,
) -> usize {
    let by_demand = (content.demand_bps / (mean_capacity * config.target_utilization)).ceil();
    let by_bitrate = (content.bitrate_bps as f64 / mean_capacity).ceil();
    let target = by_demand.max(by_bitrate).min(devices as f64) as usize;
    let target = target.max(config.min_replicas);
    let band = 1.0 + config.hysteresis;
    let kept =
        have >= config.min_replicas && (have as f64) * band >= target as f64 && (have as f64) <= target as f64 * band;
    (if kept { have } else { target }).min(devices)
}

fn place_one(slots: &mut [Slot<'_>], content: &Content, input: &Input, config: &PlacementConfig, mean_capacity: f64) {
    let have = slots
        .iter()
        .filter(|slot| slot.has_now(&content.id, &input.previous))
        .count();
    let target = replica_target(content, have, slots.len(), config, mean_capacity);
    let mut regions: BTreeMap<Option<&str>, usize> = BTreeMap::new();
    let mut chosen = Vec::with_capacity(target);
    for _ in 0..target {
        let best = slots
            .iter()
            .enumerate()
            .filter(|(index, slot)| !chosen.contains(index) && slot.room() >= content.size)
            .min_by(|(_, a), (_, b)| {
                let keeps = |slot: &Slot<'_>| slot.has_now(&content.id, &input.previous);
                let region = |slot: &Slot<'_>| regions.get(&slot.device.region.as_deref()).copied().unwrap_or(0);
                keeps(b)
                    .cmp(&keeps(a))
                    .then(region(a).cmp(&region(b)))
                    .then(a.utilization().total_cmp(&b.utilization()))
                    .then(a.device.id.cmp(&b.device.id))
            })
            .map(|(index, _)| index);
        let Some(index) = best else { break };
        chosen.push(index);
        *regions.entry(slots[index].device.region.as_deref()).or_default() += 1;
    }
    if chosen.is_empty() {
        return;
    }
    let share = content.demand_bps / chosen.len() as f64;
    for index in chosen {
        let slot = &mut slots[index];
        slot.assigned.insert(content.id);
        slot.disk_used += content.size;
        slot.load_bps += share;
    }
}
