//! The SQLite store's in-memory read model: devices, each content's ranked holders, the ranked
//! origins and the manifests' signers and sizes.

use crate::model::{Device, Load, RankKey};
use pcdn_core::wire::ContentId;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// A device in the read model, with when it was last heard from and what it announced.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) device: Arc<Device>,
    pub(super) last_seen_ms: u64,
    pub(super) contents: HashSet<ContentId>,
    /// The registration generation of this record (`Store::register`).
    pub(super) generation: u64,
}

/// The in-memory read model: every device not yet swept, each content's serving holders ranked
/// in lookup order, and the origins ranked the same way. Expired devices may linger until the
/// next sweep; readers check `last_seen_ms`.
///
/// The rankings are kept sorted as loads change (a heartbeat moves the device in the ranking of
/// each content it announced), so a lookup reads the first `n` of one ranking, plus the few
/// expired entries it skips, however many devices hold the content.
#[derive(Debug, Default)]
pub(super) struct Registry {
    pub(super) devices: HashMap<String, Entry>,
    /// Healthy non-origin devices (`Device::can_serve`) by content, in `server_order`.
    pub(super) ranked: HashMap<ContentId, BTreeSet<RankKey>>,
    /// How many devices (serving or not) announced each content; absent for none.
    pub(super) holders: HashMap<ContentId, u32>,
    /// Every origin, healthy first, then in `server_order`.
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
            self.origins.insert(RankKey::of(&entry.device));
        }
        self.devices.insert(id, entry);
    }

    pub(super) fn remove(&mut self, id: &str) -> Option<Entry> {
        let entry = self.devices.remove(id)?;
        self.unindex_contents(&entry.device, &entry.contents);
        self.origins.remove(&RankKey::of(&entry.device));
        Some(entry)
    }

    pub(super) fn index_contents(&mut self, device: &Device, contents: &HashSet<ContentId>) {
        let key = device.can_serve().then(|| RankKey::of(device));
        for content in contents {
            *self.holders.entry(*content).or_default() += 1;
            if let Some(key) = &key {
                self.ranked.entry(*content).or_default().insert(key.clone());
            }
        }
    }

    pub(super) fn unindex_contents(&mut self, device: &Device, contents: &HashSet<ContentId>) {
        let key = device.can_serve().then(|| RankKey::of(device));
        for content in contents {
            if let Some(count) = self.holders.get_mut(content) {
                *count -= 1;
                if *count == 0 {
                    self.holders.remove(content);
                }
            }
            if let Some(key) = &key
                && let Some(ranked) = self.ranked.get_mut(content)
            {
                ranked.remove(key);
                if ranked.is_empty() {
                    self.ranked.remove(content);
                }
            }
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

    /// Records a load report: moves the device within the rankings it is in. Costs
    /// O(announced contents × log holders) when its rank changes, nothing more otherwise.
    pub(super) fn set_load(&mut self, id: &str, load: Load, now_ms: u64) {
        let Some(entry) = self.devices.get_mut(id) else { return };
        let updated = Arc::new(Device::new(entry.device.registration.clone(), load));
        let old = std::mem::replace(&mut entry.device, updated);
        entry.last_seen_ms = now_ms;
        let new = Arc::clone(&entry.device);
        let (old_key, new_key) = (RankKey::of(&old), RankKey::of(&new));
        if old_key == new_key && old.can_serve() == new.can_serve() {
            return;
        }
        if new.registration.origin {
            self.origins.remove(&old_key);
            self.origins.insert(new_key);
            return;
        }
        let contents = std::mem::take(&mut self.devices.get_mut(id).expect("present above").contents);
        for content in &contents {
            let ranked = self.ranked.entry(*content).or_default();
            if old.can_serve() {
                ranked.remove(&old_key);
            }
            if new.can_serve() {
                ranked.insert(new_key.clone());
            }
            if ranked.is_empty() {
                self.ranked.remove(content);
            }
        }
        self.devices.get_mut(id).expect("present above").contents = contents;
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
