//! The placement engine: which edge device should cache which content (docs/fleet.md, "Placement").
//!
//! Sans-I/O and deterministic: no clock (`now_ms` is an input), no randomness, no I/O; ties are
//! broken by ids, so the same input gives the same assignment on every tracker instance and in
//! the simulator's virtual time. The tracker (`pcdn tracker --placement`) and the fleet
//! simulator run this same code.
//!
//! Policies, by name ([`policy`]): `none` (the operator places content by hand), `popularity`
//! (the tracker's pre-allocation of Wei et al., "QoE-Optimized MultiPath Scheduling for Video
//! Services in Large-Scale Peer-to-Peer CDNs", IEEE JSAC 2025, §II-A: replicas follow demand)
//! and `on-miss` (a content viewers look up that too few devices hold goes to the least loaded
//! devices, least recently used evicted).

mod on_miss;
mod popularity;

use pcdn_wire::ContentId;
use std::collections::{BTreeMap, BTreeSet};

pub use on_miss::OnMiss;
pub use popularity::Popularity;

/// One device as the placement sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Device {
    pub id: String,
    /// Upload capacity it advertises, bit/s.
    pub upload_capacity_bps: u64,
    /// Upload it reported in use at its last heartbeat, bit/s.
    pub upload_bps: u64,
    /// Bytes of contents it may be assigned (its cache budget, bounded by its free disk); 0:
    /// not a cache, never assigned anything.
    pub disk_bytes: u64,
    /// Unhealthy devices are assigned nothing.
    pub healthy: bool,
    /// Replicas of one content are spread over regions first (`None` is a region of its own).
    pub region: Option<String>,
    /// What it holds now (announced): placing a content where it already is costs no transfer.
    pub holds: BTreeSet<ContentId>,
}

impl Device {
    fn eligible(&self) -> bool {
        self.healthy && self.disk_bytes > 0 && self.upload_capacity_bps > 0
    }
}

/// One content as the placement sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Content {
    pub id: ContentId,
    /// Bytes.
    pub size: u64,
    /// Playback bitrate, bit/s (0 if unknown): a viewer needs at least this much upload from
    /// the devices it downloads from together.
    pub bitrate_bps: u64,
    /// Upload this content's viewers need, bit/s (lookups/s × size × 8 in the tracker).
    pub demand_bps: f64,
    /// When it was last looked up (ms, the caller's clock): `on-miss` evicts the least recent.
    pub last_lookup_ms: u64,
}

/// Each device's assignment: every content it should hold, ordered by id. Only devices that
/// can hold something (healthy, with a disk budget) have an entry.
pub type Assignment = BTreeMap<String, BTreeSet<ContentId>>;

/// Everything one placement round looks at.
#[derive(Clone, Debug, Default)]
pub struct Input {
    pub devices: Vec<Device>,
    pub contents: Vec<Content>,
    /// The previous round's assignment (empty on the first round).
    pub previous: Assignment,
    /// The caller's clock, ms; compared only with `Content::last_lookup_ms`.
    pub now_ms: u64,
}

/// Tuning of the policies. Each constant says where its value comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct PlacementConfig {
    /// Share of a device's advertised upload the placement plans to use: replicas of a content
    /// = demand ÷ (capacity × this). 0.5: an edge's upload is small and unstable (Wei et al.
    /// 2025, §II-A), and viewers that download from several devices at once need spare upload
    /// on each to absorb another's dip.
    pub target_utilization: f64,
    /// Fewest replicas of a content with demand: 2, so that one edge leaving or failing never
    /// leaves a watched content to the origin alone.
    pub min_replicas: usize,
    /// Hysteresis: a content's replica count stays while the target is within a factor
    /// (1 + this) of it, and a content devices hold already competes for disk with its demand
    /// × (1 + this). 0.25: demand estimates with a 10 min half-life move by a few % per minute
    /// at steady popularity, well inside 25 %, so steady rounds move nothing.
    pub hysteresis: f64,
    /// `on-miss`: a looked-up content held by fewer devices than this is assigned to more. 2,
    /// as `min_replicas`.
    pub on_miss_replicas: usize,
    /// `on-miss`: a content looked up within this long (ms) is live: missing, it is placed, and
    /// it is evicted only from devices beyond `on_miss_replicas`. 60 s: six of the tracker's
    /// default 10 s rounds, so every lookup is seen by several rounds.
    pub on_miss_window_ms: u64,
}

impl Default for PlacementConfig {
    fn default() -> PlacementConfig {
        PlacementConfig {
            target_utilization: 0.5,
            min_replicas: 2,
            hysteresis: 0.25,
            on_miss_replicas: 2,
            on_miss_window_ms: 60_000,
        }
    }
}

impl PlacementConfig {
    /// Checks the values; the error names the field and what was expected.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.target_utilization > 0.0 && self.target_utilization <= 1.0) {
            return Err(format!(
                "target_utilization: expected a share in (0, 1], got {}",
                self.target_utilization
            ));
        }
        if !(self.hysteresis >= 0.0 && self.hysteresis.is_finite()) {
            return Err(format!(
                "hysteresis: expected a finite factor ≥ 0, got {}",
                self.hysteresis
            ));
        }
        if self.min_replicas == 0 || self.on_miss_replicas == 0 {
            return Err("min_replicas and on_miss_replicas: expected at least 1".into());
        }
        Ok(())
    }
}

/// A placement policy: a pure function of the input.
pub trait Policy: Send + Sync {
    /// Its name, as `--placement` takes it.
    fn name(&self) -> &'static str;
    /// Whether it places anything (`none` does not: the tracker then sends no assignment).
    fn places(&self) -> bool {
        true
    }
    /// Each eligible device's assignment.
    fn place(&self, input: &Input, config: &PlacementConfig) -> Assignment;
}

/// `none`: the operator places content by hand; no device is assigned anything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoPlacement;

impl Policy for NoPlacement {
    fn name(&self) -> &'static str {
        "none"
    }
    fn places(&self) -> bool {
        false
    }
    fn place(&self, _input: &Input, _config: &PlacementConfig) -> Assignment {
        Assignment::new()
    }
}

/// Every policy's name, in the order `--help` lists them.
pub const POLICIES: &[&str] = &["none", "popularity", "on-miss"];

/// The policy of this name (see [`POLICIES`]).
pub fn policy(name: &str) -> Option<Box<dyn Policy>> {
    match name {
        "none" => Some(Box::new(NoPlacement)),
        "popularity" => Some(Box::new(Popularity)),
        "on-miss" => Some(Box::new(OnMiss)),
        _ => None,
    }
}

/// How many (device, content) pairs differ between two assignments: what a round moves.
pub fn moves(before: &Assignment, after: &Assignment) -> usize {
    let empty = BTreeSet::new();
    let ids: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    ids.into_iter()
        .map(|id| {
            let (a, b) = (before.get(id).unwrap_or(&empty), after.get(id).unwrap_or(&empty));
            a.symmetric_difference(b).count()
        })
        .sum()
}

/// Per-device bookkeeping while a policy fills assignments.
#[derive(Clone, Debug)]
pub(crate) struct Slot<'a> {
    pub device: &'a Device,
    pub assigned: BTreeSet<ContentId>,
    pub disk_used: u64,
    /// Planned upload, bit/s: the demand share of every content assigned here.
    pub load_bps: f64,
}

impl<'a> Slot<'a> {
    pub fn new(device: &'a Device) -> Slot<'a> {
        Slot {
            device,
            assigned: BTreeSet::new(),
            disk_used: 0,
            load_bps: 0.0,
        }
    }

    pub fn room(&self) -> u64 {
        self.device.disk_bytes.saturating_sub(self.disk_used)
    }

    /// Planned load as a share of capacity.
    pub fn utilization(&self) -> f64 {
        self.load_bps / self.device.upload_capacity_bps as f64
    }

    /// Whether the device has it now: held (announced) or assigned last round.
    pub fn has_now(&self, content: &ContentId, previous: &Assignment) -> bool {
        self.device.holds.contains(content)
            || previous
                .get(&self.device.id)
                .is_some_and(|assigned| assigned.contains(content))
    }
}

/// The eligible devices, ordered by id.
pub(crate) fn slots(input: &Input) -> Vec<Slot<'_>> {
    let mut slots: Vec<Slot<'_>> = input
        .devices
        .iter()
        .filter(|device| device.eligible())
        .map(Slot::new)
        .collect();
    slots.sort_by(|a, b| a.device.id.cmp(&b.device.id));
    slots.dedup_by(|a, b| a.device.id == b.device.id);
    slots
}

pub(crate) fn into_assignment(slots: Vec<Slot<'_>>) -> Assignment {
    slots
        .into_iter()
        .map(|slot| (slot.device.id.clone(), slot.assigned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_knows_every_policy_and_nothing_else() {
        for name in POLICIES {
            assert_eq!(policy(name).unwrap().name(), *name);
        }
        assert!(policy("random").is_none());
        assert!(!policy("none").unwrap().places());
    }

    #[test]
    fn config_validation_names_the_field() {
        assert!(PlacementConfig::default().validate().is_ok());
        let bad = PlacementConfig {
            target_utilization: 0.0,
            ..PlacementConfig::default()
        };
        assert!(bad.validate().unwrap_err().contains("target_utilization"));
    }
}
