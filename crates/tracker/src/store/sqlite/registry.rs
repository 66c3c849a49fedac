//! The SQLite store's in-memory read model: devices, each content's ranked holders, the ranked
//! origins and the manifests' signers and sizes.

use crate::model::{Device, Load, RankKey};
use pcdn_core::wire::ContentId;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every change under these locks leaves them consistent step by step; keep serving.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn get_mut<T>(mutex: &mut Mutex<T>) -> &mut T {
    mutex.get_mut().unwrap_or_else(PoisonError::into_inner)
}

/// A device in the read model, with when it was last heard from and what it announced.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) device: Arc<Device>,
    pub(super) last_seen_ms: u64,
    pub(super) contents: HashSet<ContentId>,
    /// The registration generation of this record (`Store::register`).
    pub(super) generation: u64,
    /// Contents whose ranking lookups charged this device since its last heartbeat, which
    /// resets them. Locked by lookups, which hold only the registry's read lock.
    pub(super) charged: Mutex<HashSet<ContentId>>,
}

/// A content's serving holders in lookup order (`RankKey`), and what lookups charged them
/// since their last heartbeat (`Spread`). Locked by lookups, which hold only the registry's
/// read lock: lookups of one content take turns, lookups of others do not wait.
#[derive(Debug, Default)]
pub(super) struct Ranking {
    pub(super) keys: BTreeSet<RankKey>,
    /// Device id → bit/s charged since its last heartbeat; absent: nothing.
    pub(super) pending: HashMap<String, u64>,
}

/// The in-memory read model: every device not yet swept, each content's serving holders ranked
/// in lookup order, and the origins ranked the same way (never charged). Expired devices may linger until the
/// next sweep; readers check `last_seen_ms`.
///
/// The rankings are kept sorted as loads change (a heartbeat moves the device in the ranking of
/// each content it announced), so a lookup reads the first `n` of one ranking, plus the few
/// expired entries it skips, however many devices hold the content.
#[derive(Debug, Default)]
pub(super) struct Registry {
    /// Free upload below which a device is at its cap (`Spread::min_free_upload_bps`).
    pub(super) min_free_bps: u64,
    pub(super) devices: HashMap<String, Entry>,
    /// Healthy non-origin devices (`Device::can_serve`) by content, in `RankKey` order.
    pub(super) ranked: HashMap<ContentId, Mutex<Ranking>>,
    /// How many devices (serving or not) announced each content; absent for none.
    pub(super) holders: HashMap<ContentId, u32>,
    /// Every origin, in `RankKey` order (healthy first).
    pub(super) origins: BTreeSet<RankKey>,
    /// What each stored manifest is, and what each signer keeps (the bytes are in SQLite).
    pub(super) manifests: HashMap<ContentId, ManifestMeta>,
    pub(super) usage: HashMap<[u8; 32], Usage>,
    /// Every device id ever registered → its last registration generation. Kept after the
    /// device leaves, so that a new registration of the id never reuses a generation.
    pub(super) generations: HashMap<String, u64>,
    /// Revoked device ids → the instant before which their credentials are refused.
    pub(super) revoked: HashMap<String, u64>,
}

/// A stored manifest's signer, size and since when it has been an orphan (`sweep_manifests`).
#[derive(Debug)]
pub(super) struct ManifestMeta {
    pub(super) signer: [u8; 32],
    pub(super) size: u64,
    pub(super) orphan_since_ms: Option<u64>,
}

/// The manifests one signer keeps.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Usage {
    pub(super) count: u64,
    pub(super) bytes: u64,
}

impl Registry {
    pub(super) fn add_manifest(&mut self, content: ContentId, meta: ManifestMeta) {
        self.forget_manifest(&content);
        let usage = self.usage.entry(meta.signer).or_default();
        usage.count += 1;
        usage.bytes += meta.size;
        self.manifests.insert(content, meta);
    }

    pub(super) fn forget_manifest(&mut self, content: &ContentId) {
        let Some(old) = self.manifests.remove(content) else {
            return;
        };
        if let Some(usage) = self.usage.get_mut(&old.signer) {
            usage.count -= 1;
            usage.bytes -= old.size;
            if usage.count == 0 {
                self.usage.remove(&old.signer);
            }
        }
    }

    /// What `signer` keeps besides the manifest of `content`.
    pub(super) fn usage_besides(&self, signer: &[u8; 32], content: &ContentId) -> Usage {
        let mut usage = self.usage.get(signer).copied().unwrap_or_default();
        if let Some(meta) = self.manifests.get(content).filter(|meta| &meta.signer == signer) {
            usage.count -= 1;
            usage.bytes -= meta.size;
        }
        usage
    }

    pub(super) fn live_entry(&self, id: &str, now_ms: u64, ttl_ms: u64) -> Option<&Entry> {
        self.devices
            .get(id)
            .filter(|entry| is_live(entry.last_seen_ms, now_ms, ttl_ms))
    }

    pub(super) fn insert(&mut self, entry: Entry) {
        let id = entry.device.registration.id.clone();
        self.remove(&id);
        self.index_contents(&entry.device, &entry.contents);
        if entry.device.registration.origin {
            self.origins.insert(RankKey::of(&entry.device, 0, self.min_free_bps));
        }
        self.devices.insert(id, entry);
    }

    pub(super) fn remove(&mut self, id: &str) -> Option<Entry> {
        let entry = self.devices.remove(id)?;
        self.unindex_contents(&entry.device, &entry.contents);
        self.origins.remove(&RankKey::of(&entry.device, 0, self.min_free_bps));
        Some(entry)
    }

    pub(super) fn index_contents(&mut self, device: &Device, contents: &HashSet<ContentId>) {
        let key = device.can_serve().then(|| RankKey::of(device, 0, self.min_free_bps));
        for content in contents {
            *self.holders.entry(*content).or_default() += 1;
            if let Some(key) = &key {
                get_mut(self.ranked.entry(*content).or_default())
                    .keys
                    .insert(key.clone());
            }
        }
    }

    pub(super) fn unindex_contents(&mut self, device: &Device, contents: &HashSet<ContentId>) {
        for content in contents {
            if let Some(count) = self.holders.get_mut(content) {
                *count -= 1;
                if *count == 0 {
                    self.holders.remove(content);
                }
            }
            if device.can_serve() {
                self.unrank(content, device);
            }
        }
    }

    /// Takes `device` out of the ranking of `content`, with its pending charge.
    fn unrank(&mut self, content: &ContentId, device: &Device) {
        let Some(ranking) = self.ranked.get_mut(content) else {
            return;
        };
        let ranking = get_mut(ranking);
        let pending = ranking.pending.remove(&device.registration.id).unwrap_or(0);
        ranking.keys.remove(&RankKey::of(device, pending, self.min_free_bps));
        if ranking.keys.is_empty() {
            self.ranked.remove(content);
        }
    }

    pub(super) fn set_contents(&mut self, id: &str, contents: HashSet<ContentId>) {
        let Some(entry) = self.devices.get_mut(id) else { return };
        let old = std::mem::replace(&mut entry.contents, contents);
        let device = Arc::clone(&entry.device);
        self.unindex_contents(&device, &old);
        let contents = std::mem::take(&mut self.devices.get_mut(id).expect("present above").contents);
        self.index_contents(&device, &contents);
        self.devices.get_mut(id).expect("present above").contents = contents;
    }

    /// Records a load report: moves the device within the rankings it is in and clears what
    /// lookups charged it. Costs O(announced contents × log holders) when its rank changes,
    /// O(charged contents × log holders) otherwise.
    pub(super) fn set_load(&mut self, id: &str, load: Load, now_ms: u64) {
        let min_free = self.min_free_bps;
        let Some(entry) = self.devices.get_mut(id) else { return };
        let updated = Arc::new(Device::new(entry.device.registration.clone(), load));
        let old = std::mem::replace(&mut entry.device, updated);
        entry.last_seen_ms = now_ms;
        let charged = std::mem::take(get_mut(&mut entry.charged));
        let new = Arc::clone(&entry.device);
        let (old_key, new_key) = (RankKey::of(&old, 0, min_free), RankKey::of(&new, 0, min_free));
        let moved = old_key != new_key || old.can_serve() != new.can_serve();
        if new.registration.origin {
            if moved {
                self.origins.remove(&old_key);
                self.origins.insert(new_key);
            }
            return;
        }
        let contents = std::mem::take(&mut self.devices.get_mut(id).expect("present above").contents);
        let rerank: Box<dyn Iterator<Item = &ContentId>> = if moved {
            Box::new(contents.iter())
        } else {
            Box::new(charged.iter().filter(|content| contents.contains(content)))
        };
        for content in rerank {
            if old.can_serve() {
                self.unrank(content, &old);
            }
            if new.can_serve() {
                get_mut(self.ranked.entry(*content).or_default())
                    .keys
                    .insert(new_key.clone());
            }
        }
        self.devices.get_mut(id).expect("present above").contents = contents;
    }

    /// The first `want` live devices of the ranking of `content`, reading at most `want + slack`
    /// entries (the slack skips devices that expired since the last sweep) and no device at its
    /// cap once one with room is found; also returns how many it read. Charges each device it
    /// returns an equal share of `charge_bps` (a client downloads from every server listed at
    /// once), which moves it down in this ranking until its next heartbeat.
    pub(super) fn first_servers(
        &self,
        content: &ContentId,
        want: usize,
        slack: usize,
        now_ms: u64,
        ttl_ms: u64,
        charge_bps: u64,
    ) -> (Vec<Arc<Device>>, usize) {
        let Some(ranking) = self.ranked.get(content) else {
            return (Vec::new(), 0);
        };
        let mut ranking = lock(ranking);
        let mut found = Vec::with_capacity(want);
        let mut pending = Vec::with_capacity(want);
        let (mut read, mut room) = (0, false);
        for key in ranking.keys.iter().take(want.saturating_add(slack)) {
            if found.len() == want || (room && key.at_cap()) {
                break;
            }
            read += 1;
            if let Some(entry) = self.live_entry(&key.id, now_ms, ttl_ms) {
                room |= !key.at_cap();
                found.push(Arc::clone(&entry.device));
                pending.push(entry);
            }
        }
        if charge_bps > 0 && !found.is_empty() {
            let share = charge_bps.div_ceil(found.len() as u64);
            for entry in pending {
                let device = &entry.device;
                let id = &device.registration.id;
                let charged = ranking.pending.get(id).copied().unwrap_or(0);
                ranking.keys.remove(&RankKey::of(device, charged, self.min_free_bps));
                let charged = charged.saturating_add(share);
                ranking.pending.insert(id.clone(), charged);
                ranking.keys.insert(RankKey::of(device, charged, self.min_free_bps));
                lock(&entry.charged).insert(*content);
            }
        }
        (found, read)
    }

    /// The first `want` live devices of `ranking`, reading at most `want + slack` entries (the
    /// slack skips devices that expired since the last sweep); also returns how many it read.
    pub(super) fn first_live<'a>(
        &'a self,
        ranking: impl Iterator<Item = &'a RankKey>,
        want: usize,
        slack: usize,
        now_ms: u64,
        ttl_ms: u64,
    ) -> (Vec<Arc<Device>>, usize) {
        let mut found = Vec::with_capacity(want);
        let mut read = 0;
        for key in ranking.take(want.saturating_add(slack)) {
            if found.len() == want {
                break;
            }
            read += 1;
            if let Some(entry) = self.live_entry(&key.id, now_ms, ttl_ms) {
                found.push(Arc::clone(&entry.device));
            }
        }
        (found, read)
    }
}

pub(super) fn is_live(last_seen_ms: u64, now_ms: u64, ttl_ms: u64) -> bool {
    now_ms < last_seen_ms.saturating_add(ttl_ms)
}

/// What one manifest sweep changes: orphans to mark, manifests held again, and orphans to delete.
#[derive(Default)]
pub(super) struct OrphanChanges {
    pub(super) marked: Vec<ContentId>,
    pub(super) unmarked: Vec<ContentId>,
    pub(super) deleted: Vec<ContentId>,
}

impl Registry {
    /// Decides each manifest's fate at `now_ms`: held by a live device (announced, whatever its
    /// health) or signed by the key of a live origin, it is not an orphan; otherwise it becomes
    /// one, and is deleted once it has been one for `grace_ms`.
    pub(super) fn orphan_changes(&self, now_ms: u64, ttl_ms: u64, grace_ms: u64) -> OrphanChanges {
        let live_keys: HashSet<[u8; 32]> = self
            .origins
            .iter()
            .filter_map(|origin| self.live_entry(&origin.id, now_ms, ttl_ms))
            .filter_map(|entry| entry.device.registration.public_key)
            .collect();
        let mut changes = OrphanChanges::default();
        for (content, meta) in &self.manifests {
            let held = self.holders.contains_key(content) || live_keys.contains(&meta.signer);
            match (held, meta.orphan_since_ms) {
                (true, Some(_)) => changes.unmarked.push(*content),
                (false, None) => changes.marked.push(*content),
                (false, Some(since)) if now_ms.saturating_sub(since) >= grace_ms => changes.deleted.push(*content),
                _ => {}
            }
        }
        changes
    }
}
