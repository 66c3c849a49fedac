//! The tracker's placement loop: counts lookups into the store, and every `--placement-interval`
//! runs the placement engine (crate `pcdn-placement`) on the live devices and the most popular
//! contents, and keeps each device's assignment in the store (docs/fleet.md, "Placement").

use crate::api::AppState;
use crate::popularity;
use crate::store::{PlacedDevice, Store, StoreError, unix_millis};
use pcdn_core::manifest::SignedManifest;
use pcdn_core::wire::ContentId;
use pcdn_placement::{Assignment, Content, Device, Input, PlacementConfig, Policy};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How the tracker places contents on devices (`pcdn tracker --placement ...`).
#[derive(Clone, Debug, PartialEq)]
pub struct PlacementSettings {
    /// A name of `pcdn_placement::POLICIES`; `none` (the default) places nothing.
    pub policy: String,
    /// Time between two placement rounds. Default 10 s: a device learns its assignment at its
    /// next heartbeat (10 s by default), so rounds more often would not reach devices sooner.
    pub interval: Duration,
    /// A round places this many of the most looked-up contents. Default 1,000: with Zipf-like
    /// demand the head of a catalogue carries most lookups, and a round stays cheap (one
    /// manifest decoded per new content).
    pub contents: usize,
    /// The engine's tuning.
    pub engine: PlacementConfig,
}

impl Default for PlacementSettings {
    fn default() -> PlacementSettings {
        PlacementSettings {
            policy: "none".into(),
            interval: Duration::from_secs(10),
            contents: 1_000,
            engine: PlacementConfig::default(),
        }
    }
}

impl PlacementSettings {
    pub(crate) fn validate(&self) -> anyhow::Result<()> {
        if pcdn_placement::policy(&self.policy).is_none() {
            anyhow::bail!(
                "placement policy {:?}: expected one of {}",
                self.policy,
                pcdn_placement::POLICIES.join(", ")
            );
        }
        if self.interval < Duration::from_millis(100) {
            anyhow::bail!("placement interval {:?}: expected at least 100 ms", self.interval);
        }
        if self.contents == 0 {
            anyhow::bail!("placement contents: expected at least 1");
        }
        self.engine.validate().map_err(anyhow::Error::msg)
    }
}

/// A content's size and bitrate, read from its manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ContentInfo {
    pub size: u64,
    /// 0 for a content without video information.
    pub bitrate_bps: u64,
}

/// Most contents whose size and bitrate are remembered; emptied when full. A content id is the
/// hash of its manifest, so an entry never goes stale.
const MAX_CATALOG: usize = 100_000;

/// Sizes and bitrates of contents, decoded once from their manifests.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    infos: Mutex<HashMap<ContentId, ContentInfo>>,
}

impl Catalog {
    /// The content's size and bitrate; `None` if no manifest was put for it.
    pub async fn info<S: Store>(&self, store: &S, content: ContentId) -> Result<Option<ContentInfo>, StoreError> {
        if let Some(info) = self.lock().get(&content) {
            return Ok(Some(*info));
        }
        let Some(bytes) = store.get_manifest(content).await? else {
            return Ok(None);
        };
        let manifest = SignedManifest::decode(&bytes)
            .map_err(|error| StoreError::Corrupt(format!("stored manifest of {}: {error}", hex::encode(content.0))))?
            .manifest;
        Ok(Some(self.remember(content, &manifest)))
    }

    /// Remembers the size and bitrate of `manifest`, the manifest of `content`.
    pub fn remember(&self, content: ContentId, manifest: &pcdn_core::manifest::Manifest) -> ContentInfo {
        let info = ContentInfo {
            size: manifest.length,
            bitrate_bps: manifest.video.as_ref().map_or(0, |video| video.bitrate_bps),
        };
        let mut infos = self.lock();
        if infos.len() >= MAX_CATALOG {
            infos.clear();
        }
        infos.insert(content, info);
        info
    }

    /// The content's size and bitrate if this instance already decoded its manifest (no store
    /// access: lookups ask this).
    pub fn cached(&self, content: &ContentId) -> Option<ContentInfo> {
        self.lock().get(content).copied()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ContentId, ContentInfo>> {
        self.infos.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A content's popularity as the API and the placement show it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Popular {
    pub content: ContentId,
    pub lookups_per_s: f64,
    pub info: Option<ContentInfo>,
    /// The time (ms) at which its decayed count falls to one lookup: its last lookup for a
    /// content looked up once, later for one looked up often (recency and frequency in one
    /// number, as LRFU's combined value: Lee et al., "LRFU: A Spectrum of Policies that
    /// Subsumes the Least Recently Used and Least Frequently Used Policies", IEEE Trans.
    /// Computers 2001).
    pub last_use_ms: u64,
}

impl Popular {
    /// Upload its viewers need, bit/s: lookups/s × size × 8. By Little's law the downloads in
    /// progress are arrival rate × download time, each moving size ÷ download time: together
    /// rate × size, whatever their speed (rate × bitrate alone would not be a rate of bits).
    pub fn demand_bps(&self) -> Option<f64> {
        self.info.map(|info| self.lookups_per_s * info.size as f64 * 8.0)
    }
}

/// The `n` most looked-up contents now, with their rates and (when their manifest is known)
/// sizes and bitrates.
pub(crate) async fn popular<S: Store>(state: &AppState<S>, n: usize, now_ms: u64) -> Result<Vec<Popular>, StoreError> {
    let half_life_ms = state.half_life_ms;
    let mut list = Vec::new();
    for (content, score) in state.store.popular(n, now_ms).await? {
        let count = popularity::count(score, now_ms, half_life_ms);
        list.push(Popular {
            content,
            lookups_per_s: popularity::per_second(count, half_life_ms),
            info: state.catalog.info(&state.store, content).await?,
            last_use_ms: (score * half_life_ms as f64).max(0.0) as u64,
        });
    }
    Ok(list)
}

/// Moves the lookups counted since the last flush into the store.
pub(crate) async fn flush<S: Store>(state: &AppState<S>, now_ms: u64) -> Result<(), StoreError> {
    let counts = state.tally.take();
    if counts.is_empty() {
        return Ok(());
    }
    state.store.add_lookups(counts, now_ms, state.half_life_ms).await
}

/// Flushes the lookup counts every second.
pub(crate) async fn count_forever<S: Store>(state: Arc<AppState<S>>) {
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if let Err(error) = flush(&state, unix_millis()).await {
            tracing::warn!(%error, "counting lookups failed");
        }
    }
}

/// Runs a placement round every interval (only in the instance holding the round's lease).
pub(crate) async fn place_forever<S: Store>(state: Arc<AppState<S>>) {
    let Some(policy) = pcdn_placement::policy(&state.placement.policy).filter(|policy| policy.places()) else {
        return;
    };
    let interval = state.placement.interval;
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let now = unix_millis();
        let hold_ms = u64::try_from(interval.as_millis() / 2).unwrap_or(u64::MAX);
        match state.store.lead_round(hold_ms, now).await {
            Ok(true) => {}
            Ok(false) => continue,
            Err(error) => {
                tracing::warn!(%error, "placement round: store unavailable");
                continue;
            }
        }
        match round(&state, policy.as_ref(), now).await {
            Ok(report) => {
                state.metrics.count_placement(report.moves, report.devices);
                tracing::debug!(?report, "placement round");
            }
            Err(error) => tracing::warn!(%error, "placement round failed"),
        }
    }
}

/// What one round did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RoundReport {
    /// Devices given an assignment.
    pub devices: usize,
    /// (device, content) pairs added or removed since the previous round.
    pub moves: usize,
}

/// One placement round: reads devices and popularity from the store, runs `policy`, stores
/// every assignment.
pub(crate) async fn round<S: Store>(
    state: &AppState<S>,
    policy: &dyn Policy,
    now_ms: u64,
) -> Result<RoundReport, StoreError> {
    flush(state, now_ms).await?;
    let popular = popular(state, state.placement.contents, now_ms).await?;
    let sizes: HashMap<ContentId, u64> = popular
        .iter()
        .filter_map(|entry| entry.info.map(|info| (entry.content, info.size)))
        .collect();
    let contents: Vec<Content> = popular
        .iter()
        .filter_map(|entry| {
            let info = entry.info?;
            Some(Content {
                id: entry.content,
                size: info.size,
                bitrate_bps: info.bitrate_bps,
                demand_bps: entry.demand_bps()?,
                last_lookup_ms: entry.last_use_ms,
            })
        })
        .collect();
    let placed = state.store.placement_devices(now_ms).await?;
    let previous: Assignment = placed
        .iter()
        .filter_map(|device| {
            let assignment = device.assignment.as_ref()?;
            Some((
                device.device.registration.id.clone(),
                assignment.iter().copied().collect(),
            ))
        })
        .collect();
    let input = Input {
        devices: placed.iter().map(|device| engine_device(device, &sizes)).collect(),
        contents,
        previous,
        now_ms,
    };
    let mut assignment = policy.place(&input, &state.placement.engine);
    let report = RoundReport {
        devices: assignment.len(),
        moves: pcdn_placement::moves(&input.previous, &assignment),
    };
    // A device that has not reported its disk since this tracker started (disk reports are
    // not persisted) keeps its assignment until it does, rather than losing it to a restart.
    for device in placed.iter().filter(|device| device.disk.is_none()) {
        if let Some(previous) = input.previous.get(&device.device.registration.id) {
            assignment.insert(device.device.registration.id.clone(), previous.clone());
        }
    }
    let list = assignment
        .into_iter()
        .map(|(id, contents)| (id, contents.into_iter().collect()))
        .collect();
    state.store.set_assignments(list, now_ms).await?;
    Ok(report)
}

/// A device as the engine sees it. Its disk budget is its cache size, and at most its free
/// disk plus what it holds of the contents placed (those bytes are on its disk already).
fn engine_device(placed: &PlacedDevice, sizes: &HashMap<ContentId, u64>) -> Device {
    let device = &placed.device;
    let holds: BTreeSet<ContentId> = placed.contents.iter().copied().collect();
    let disk_bytes = match placed.disk {
        None => 0,
        Some(disk) => match disk.free_bytes {
            None => disk.cache_bytes,
            Some(free) => {
                let held: u64 = holds.iter().filter_map(|content| sizes.get(content)).sum();
                disk.cache_bytes.min(free.saturating_add(held))
            }
        },
    };
    Device {
        id: device.registration.id.clone(),
        upload_capacity_bps: device.registration.upload_capacity_bps,
        upload_bps: device.load.upload_bps,
        disk_bytes,
        healthy: device.load.healthy,
        region: None,
        holds,
    }
}
