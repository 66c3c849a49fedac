//! An edge's cache (`pcdn serve --cache-size`): the store with a disk budget, filled with the
//! contents the tracker assigns (placement), least recently served evicted (docs/net.md,
//! "The cache").
//!
//! Which contents the cache owns is kept in an index beside the store (`DIR/cache.json`,
//! written atomically); every other content of the store was added by hand (`pcdn add`) and is
//! pinned: it counts against the budget but is never evicted. Fills run in [`fill`].

use std::collections::{BTreeMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use pcdn_core::wire::ContentId;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::store::{Store, StoreSource, content_id_hex, parse_content_id};

pub mod fill;

/// File name of the cache's index inside the store directory.
pub const INDEX_FILE: &str = "cache.json";

/// How an edge's cache behaves.
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// Disk budget for every content of the store, pinned ones and fills in progress included
    /// (`--cache-size`), bytes.
    pub cache_bytes: u64,
    /// Cap on the fill downloads, bits per second (`--fill-rate`).
    pub fill_rate_bps: u64,
    /// Wait before a failed fill of a content is tried again. 10 s: about a heartbeat, so a
    /// fill that failed because the origin was away is retried as soon as the tracker could
    /// know better, and a content nobody can serve costs one lookup per 10 s.
    pub retry_after: Duration,
    /// How often the last-served times are written to the index. 30 s: a crash loses at most
    /// 30 s of recency, which only shifts the eviction order among contents served that
    /// recently; writing per HELLO would cost a file write per session.
    pub index_every: Duration,
}

impl CacheConfig {
    /// Default `--fill-rate`: 20 Mbit/s, a fifth of a 100 Mbit/s home downlink, so filling
    /// leaves the household's own downloads most of the line.
    pub const DEFAULT_FILL_RATE_BPS: u64 = 20_000_000;

    /// A cache of `cache_bytes` with the default fill rate and timings.
    pub fn new(cache_bytes: u64) -> CacheConfig {
        CacheConfig {
            cache_bytes,
            fill_rate_bps: Self::DEFAULT_FILL_RATE_BPS,
            retry_after: Duration::from_secs(10),
            index_every: Duration::from_secs(30),
        }
    }
}

/// A content the cache owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub length: u64,
    /// When it was last asked for (or filled, if never since), ms since the Unix epoch.
    pub last_served_ms: u64,
}

/// What the cache's completed fills downloaded since the device started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FillStats {
    /// Contents filled.
    pub contents: u64,
    /// Payload bytes received by those fills, duplicates included.
    pub bytes: u64,
    /// The part of `bytes` that came from origins (the CDN).
    pub origin_bytes: u64,
}

/// The index on disk.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct IndexFile {
    version: u32,
    contents: Vec<IndexEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct IndexEntry {
    id: String,
    length: u64,
    last_served_ms: u64,
}

const INDEX_VERSION: u32 = 1;

/// The cache of one serving device: shared by its tracker presence (disk figures in, the
/// assignment out) and its fill task.
#[derive(Debug)]
pub struct Cache {
    store: Store,
    source: StoreSource,
    config: CacheConfig,
    entries: Mutex<BTreeMap<ContentId, Entry>>,
    assignment: watch::Sender<Option<Vec<ContentId>>>,
    fills: Mutex<FillStats>,
}

fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Cache {
    /// The cache over `source`'s store: reads its index (a missing index is an empty cache;
    /// an unreadable one is an error naming the file) and forgets entries whose content is
    /// gone.
    pub fn open(source: StoreSource, config: CacheConfig) -> anyhow::Result<Arc<Cache>> {
        let store = source.store().clone();
        let path = index_path(&store);
        let mut entries = read_index(&path)?;
        entries.retain(|id, _| store.content_dir(id).is_dir());
        let cache = Cache {
            store,
            source,
            config,
            entries: Mutex::new(entries),
            assignment: watch::channel(None).0,
            fills: Mutex::new(FillStats::default()),
        };
        cache.save()?;
        Ok(Arc::new(cache))
    }

    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The contents the cache owns, with their lengths and last-served times.
    pub fn entries(&self) -> BTreeMap<ContentId, Entry> {
        self.entries.lock().expect("cache lock").clone()
    }

    /// The contents of the store the cache does not own: added by hand, never evicted.
    pub fn pinned(&self) -> anyhow::Result<Vec<ContentId>> {
        let entries = self.entries.lock().expect("cache lock");
        Ok(self
            .store
            .list()?
            .into_iter()
            .filter(|id| !entries.contains_key(id))
            .collect())
    }

    /// Bytes on disk: every content of the store and every fill's partial file.
    pub fn used_bytes(&self) -> u64 {
        self.held_bytes() + self.store.fills().iter().map(|id| self.fill_bytes(id)).sum::<u64>()
    }

    /// Bytes of the store's complete contents.
    fn held_bytes(&self) -> u64 {
        self.store
            .list()
            .unwrap_or_default()
            .iter()
            .filter_map(|id| self.store.data_length(id))
            .sum()
    }

    /// Bytes a fill of `id` holds on disk so far (its partial file is sized to the content).
    pub(crate) fn fill_bytes(&self, id: &ContentId) -> u64 {
        let dir = self.store.fill_dir(id);
        ["data", "data.pcdn-partial"]
            .iter()
            .filter_map(|name| std::fs::metadata(dir.join(name)).ok())
            .map(|m| m.len())
            .sum()
    }

    /// The heartbeat's disk figures: the budget, and the bytes of it still free (never more
    /// than the file system has). A fill under way of an assigned content counts as free: the
    /// tracker counts that content against the budget already, and counting its partial file
    /// too shrank the budget by every fill under way, so rounds took contents away mid-fill
    /// and edges refilled over and over (seen in `pcdn demo --fleet`: 5 to 9 fills per edge
    /// for 1 or 2 contents held at the end).
    pub fn disk(&self) -> (u64, u64) {
        let assigned: HashSet<ContentId> = self.assignment.borrow().iter().flatten().copied().collect();
        let unassigned_fills: u64 = self
            .store
            .fills()
            .iter()
            .filter(|id| !assigned.contains(id))
            .map(|id| self.fill_bytes(id))
            .sum();
        let free = self
            .config
            .cache_bytes
            .saturating_sub(self.held_bytes() + unassigned_fills);
        (
            self.config.cache_bytes,
            free.min(fs_available(self.store.dir()).unwrap_or(u64::MAX)),
        )
    }

    /// Sets the contents the device should hold (from the tracker's heartbeat answer); the
    /// fill task acts on a change.
    pub fn assign(&self, assignment: Option<Vec<ContentId>>) {
        self.assignment.send_if_modified(|current| {
            let changed = *current != assignment;
            *current = assignment;
            changed
        });
    }

    /// The assignment, watched.
    pub fn assignment(&self) -> watch::Receiver<Option<Vec<ContentId>>> {
        self.assignment.subscribe()
    }

    /// Takes the server's last-served times into the entries; true if any moved.
    pub(crate) fn note_served(&self) -> bool {
        let mut entries = self.entries.lock().expect("cache lock");
        let mut moved = false;
        for (id, at) in self.source.last_served() {
            if let Some(entry) = entries.get_mut(&id) {
                let ms = unix_ms(at);
                if ms > entry.last_served_ms {
                    entry.last_served_ms = ms;
                    moved = true;
                }
            }
        }
        moved
    }

    /// What the completed fills downloaded so far.
    pub fn fill_stats(&self) -> FillStats {
        *self.fills.lock().expect("cache lock")
    }

    /// Counts a completed fill's download: `bytes` received, `origin_bytes` of them from origins.
    pub(crate) fn count_fill(&self, bytes: u64, origin_bytes: u64) {
        let mut fills = self.fills.lock().expect("cache lock");
        fills.contents += 1;
        fills.bytes += bytes;
        fills.origin_bytes += origin_bytes;
    }

    /// Records a completed fill.
    pub(crate) fn insert(&self, id: ContentId, length: u64) -> anyhow::Result<()> {
        let entry = Entry {
            length,
            last_served_ms: unix_ms(SystemTime::now()),
        };
        self.entries.lock().expect("cache lock").insert(id, entry);
        self.save()
    }

    /// Frees at least `need` bytes by evicting contents the cache owns that are not in
    /// `assigned`, least recently served first. Evicts nothing and returns false when that
    /// cannot free enough.
    pub(crate) fn make_room(&self, need: u64, assigned: &HashSet<ContentId>) -> anyhow::Result<bool> {
        if need == 0 {
            return Ok(true);
        }
        self.note_served();
        let victims = {
            let entries = self.entries.lock().expect("cache lock");
            match plan_eviction(&entries, assigned, need) {
                Some(victims) => victims,
                None => return Ok(false),
            }
        };
        for id in victims {
            self.store.remove(&id)?;
            self.source.forget(&id);
            self.entries.lock().expect("cache lock").remove(&id);
            tracing::info!(content = %content_id_hex(&id), "evicted (not assigned, least recently served)");
        }
        self.save()?;
        Ok(true)
    }

    /// Writes the index: a temporary file beside it, synced, renamed over it.
    pub(crate) fn save(&self) -> anyhow::Result<()> {
        let file = IndexFile {
            version: INDEX_VERSION,
            contents: self
                .entries
                .lock()
                .expect("cache lock")
                .iter()
                .map(|(id, e)| IndexEntry {
                    id: content_id_hex(id),
                    length: e.length,
                    last_served_ms: e.last_served_ms,
                })
                .collect(),
        };
        let path = index_path(&self.store);
        let dir = self.store.dir();
        let write = || -> std::io::Result<()> {
            let mut temp = tempfile::NamedTempFile::new_in(dir)?;
            temp.write_all(&serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?)?;
            temp.as_file().sync_all()?;
            temp.persist(&path).map_err(|e| e.error)?;
            std::fs::File::open(dir)?.sync_all()
        };
        write().map_err(|e| anyhow::anyhow!("writing the cache index {}: {e}", path.display()))
    }
}

fn index_path(store: &Store) -> PathBuf {
    store.dir().join(INDEX_FILE)
}

fn read_index(path: &Path) -> anyhow::Result<BTreeMap<ContentId, Entry>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => anyhow::bail!("reading the cache index {}: {e}", path.display()),
    };
    let file: IndexFile = serde_json::from_slice(&bytes).map_err(|e| {
        anyhow::anyhow!(
            "the cache index {}: {e} (expected {{\"version\": {INDEX_VERSION}, \"contents\": [{{\"id\", \"length\", \"last_served_ms\"}}]}}; delete it to start the cache afresh)",
            path.display()
        )
    })?;
    anyhow::ensure!(
        file.version == INDEX_VERSION,
        "the cache index {}: version {}, expected {INDEX_VERSION}",
        path.display(),
        file.version
    );
    let mut entries = BTreeMap::new();
    for (n, entry) in file.contents.iter().enumerate() {
        let id = parse_content_id(&entry.id)
            .map_err(|e| anyhow::anyhow!("the cache index {}: contents[{n}].id: {e}", path.display()))?;
        entries.insert(
            id,
            Entry {
                length: entry.length,
                last_served_ms: entry.last_served_ms,
            },
        );
    }
    Ok(entries)
}

/// The contents to evict to free `need` bytes: those of `entries` not in `assigned`, least
/// recently served first (ties by id, so the choice is deterministic); `None` if they do not
/// free enough.
pub fn plan_eviction(
    entries: &BTreeMap<ContentId, Entry>,
    assigned: &HashSet<ContentId>,
    need: u64,
) -> Option<Vec<ContentId>> {
    let mut candidates: Vec<(&ContentId, &Entry)> = entries.iter().filter(|(id, _)| !assigned.contains(id)).collect();
    candidates.sort_by_key(|(id, e)| (e.last_served_ms, **id));
    let mut freed = 0u64;
    let mut victims = Vec::new();
    for (id, entry) in candidates {
        if freed >= need {
            break;
        }
        freed += entry.length;
        victims.push(*id);
    }
    (freed >= need).then_some(victims)
}

/// Bytes available to unprivileged users on the file system holding `dir`.
fn fs_available(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt as _;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string and `stats` a valid out-pointer for the call.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stats) } != 0 {
        return None;
    }
    Some((stats.f_bavail as u64).saturating_mul(stats.f_frsize as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> ContentId {
        ContentId([n; 32])
    }

    fn entry(length: u64, last_served_ms: u64) -> Entry {
        Entry { length, last_served_ms }
    }

    #[test]
    fn eviction_takes_the_least_recently_served_unassigned_contents() {
        let entries = BTreeMap::from([
            (id(1), entry(100, 50)),
            (id(2), entry(100, 10)),
            (id(3), entry(100, 5)),
            (id(4), entry(100, 30)),
        ]);
        // id 3 is the oldest but assigned: kept.
        let assigned = HashSet::from([id(3)]);
        assert_eq!(plan_eviction(&entries, &assigned, 1), Some(vec![id(2)]));
        assert_eq!(plan_eviction(&entries, &assigned, 150), Some(vec![id(2), id(4)]));
        assert_eq!(plan_eviction(&entries, &assigned, 300), Some(vec![id(2), id(4), id(1)]));
        assert_eq!(plan_eviction(&entries, &assigned, 301), None);
        assert_eq!(plan_eviction(&entries, &assigned, 0), Some(vec![]));
    }

    #[test]
    fn a_fill_under_way_counts_as_free_only_while_its_content_is_assigned() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let cache = Cache::open(store.source(1200), CacheConfig::new(10_000)).unwrap();
        let fill = cache.store().fill_dir(&id(7));
        std::fs::create_dir_all(&fill).unwrap();
        std::fs::write(fill.join("data.pcdn-partial"), vec![0u8; 4_000]).unwrap();
        assert_eq!(cache.used_bytes(), 4_000);
        assert_eq!(cache.disk(), (10_000, 6_000));
        cache.assign(Some(vec![id(7)]));
        assert_eq!(cache.disk(), (10_000, 10_000));
        cache.assign(Some(vec![id(8)]));
        assert_eq!(cache.disk(), (10_000, 6_000));
    }

    #[test]
    fn a_bad_index_names_the_file_and_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(INDEX_FILE);
        std::fs::write(
            &path,
            r#"{"version": 1, "contents": [{"id": "zz", "length": 1, "last_served_ms": 0}]}"#,
        )
        .unwrap();
        let e = read_index(&path).unwrap_err().to_string();
        assert!(e.contains("cache.json") && e.contains("contents[0].id"), "{e}");
        std::fs::write(&path, r#"{"version": 1, "contents": [{"id": 5}]}"#).unwrap();
        let e = read_index(&path).unwrap_err().to_string();
        assert!(e.contains("cache.json") && e.contains("invalid type"), "{e}");
        assert!(read_index(&dir.path().join("absent.json")).unwrap().is_empty());
    }
}
