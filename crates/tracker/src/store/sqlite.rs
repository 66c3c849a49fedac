//! The SQLite store: the registry persisted in one database file (WAL), with an in-memory read
//! model that answers lookups without touching SQLite.
//!
//! One tracker process owns the file. Every write goes to SQLite first and then, under the same
//! writer lock, to the in-memory model, so the model always equals the database; at start the
//! model is loaded from the database, so devices and manifests survive a restart. Lookups read
//! only the model (a read lock and a few hash look-ups), which is what lets one tracker answer
//! tens of thousands of lookups per second on two cores.

use super::nonces::NonceSet;
use super::{Disk, ManifestPut, PlacedDevice, Store, StoreError, encode_contents, ttl_millis};
use crate::StoreLimits;
use crate::model::{Device, Load, Lookup, Registration};
use bytes::Bytes;
use pcdn_core::wire::ContentId;
use registry::{Entry, ManifestMeta, Registry, is_live};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

mod load;
mod registry;

use load::{SCHEMA, load_placement, load_registry, migrate};

/// The database connections and the read model, shared with blocking tasks.
struct Inner {
    /// The one connection that writes; holding its lock serialises every change to the database
    /// and the read model, so both change in the same order.
    writer: Mutex<Connection>,
    /// A second connection for manifest reads, so that they do not wait for writes (WAL lets
    /// readers and the writer proceed together). `None` for an in-memory database, where a
    /// second connection would open a different, empty database.
    reader: Option<Mutex<Connection>>,
    registry: RwLock<Registry>,
    /// Replay keys of recent signed requests. In memory: a restart forgets them, so a request
    /// captured less than the clock window before a restart could be replayed once after it.
    nonces: Mutex<NonceSet>,
    placement: Mutex<Placement>,
}

/// What placement keeps: the popularity log-scores and the assignments (both also in SQLite,
/// so they survive a restart) and the disk reports (in memory: devices resend them every
/// heartbeat).
#[derive(Debug, Default)]
struct Placement {
    scores: HashMap<ContentId, f64>,
    disks: HashMap<String, Disk>,
    assignments: HashMap<String, Vec<ContentId>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock happens only between a committed write and its mirror in
    // the model; the model is still usable, so the tracker keeps serving.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    fn read_registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_registry(&self) -> std::sync::RwLockWriteGuard<'_, Registry> {
        self.registry.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The SQLite store (`sqlite:/path` or `sqlite::memory:`).
pub(crate) struct SqliteStore {
    inner: Arc<Inner>,
    ttl_ms: u64,
    limits: StoreLimits,
}

fn configure(connection: &Connection) -> Result<(), rusqlite::Error> {
    connection.busy_timeout(Duration::from_secs(5))?;
    // WAL: readers never block the writer and a commit costs one append, not a rewrite.
    let _mode: String = connection.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    // NORMAL is durable against a process crash in WAL mode; an OS crash may lose the last
    // heartbeats, which devices resend within one heartbeat interval anyway.
    connection.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(())
}

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, or an in-memory one for `None`, and
    /// loads the read model. Devices whose ttl ran out while the tracker was down are loaded
    /// too: reads see them as expired, and the first sweep deletes and counts them.
    pub(crate) fn open(path: Option<&Path>, ttl: Duration, limits: StoreLimits) -> Result<SqliteStore, StoreError> {
        let ttl_ms = ttl_millis(ttl);
        let writer = match path {
            Some(path) => Connection::open(path)?,
            None => Connection::open_in_memory()?,
        };
        configure(&writer)?;
        writer.execute_batch(SCHEMA)?;
        migrate(&writer)?;
        let registry = load_registry(&writer, limits.spread.min_free_upload_bps)?;
        let placement = load_placement(&writer)?;
        let reader = match path {
            Some(path) => {
                let reader = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
                reader.busy_timeout(Duration::from_secs(5))?;
                Some(Mutex::new(reader))
            }
            None => None,
        };
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                writer: Mutex::new(writer),
                reader,
                registry: RwLock::new(registry),
                nonces: Mutex::new(NonceSet::default()),
                placement: Mutex::new(placement),
            }),
            ttl_ms,
            limits,
        })
    }

    /// Runs `work` on tokio's blocking pool: SQLite calls block on disk I/O.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Inner) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || work(&inner))
            .await
            .map_err(|join| StoreError::Task(join.to_string()))?
    }
}

// Integers are stored as SQLite's signed 64-bit INTEGER; u64 values above i64::MAX round-trip
// through the bit-preserving `as` casts.
impl Store for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    async fn register(&self, registration: Registration, now_ms: u64) -> Result<u64, StoreError> {
        self.blocking(move |inner| {
            let mut writer = lock(&inner.writer);
            let generation = inner
                .read_registry()
                .generations
                .get(&registration.id)
                .map_or(1, |last| last.wrapping_add(1));
            let transaction = writer.transaction()?;
            transaction
                .prepare_cached("INSERT OR REPLACE INTO generations (id, generation) VALUES (?1, ?2)")?
                .execute(params![registration.id, generation as i64])?;
            transaction
                .prepare_cached("DELETE FROM device_contents WHERE device_id = ?1")?
                .execute([&registration.id])?;
            transaction
                .prepare_cached(
                    "INSERT OR REPLACE INTO devices
                     (id, addr, origin, upload_capacity_bps, public_key, sessions, upload_bps, healthy, last_seen_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )?
                .execute(params![
                    registration.id,
                    registration.addr.to_string(),
                    registration.origin,
                    registration.upload_capacity_bps as i64,
                    registration.public_key.as_ref().map(|key| &key[..]),
                    Load::FRESH.sessions,
                    Load::FRESH.upload_bps as i64,
                    Load::FRESH.healthy,
                    now_ms as i64,
                ])?;
            transaction.commit()?;
            let mut registry = inner.write_registry();
            registry.generations.insert(registration.id.clone(), generation);
            registry.insert(Entry {
                device: Arc::new(Device::new(registration, Load::FRESH)),
                last_seen_ms: now_ms,
                contents: HashSet::new(),
                generation,
                charged: Default::default(),
            });
            Ok(generation)
        })
        .await
    }

    async fn heartbeat(&self, id: &str, load: Load, now_ms: u64) -> Result<Option<u64>, StoreError> {
        let ttl_ms = self.ttl_ms;
        let id = id.to_owned();
        self.blocking(move |inner| {
            let writer = lock(&inner.writer);
            let Some(generation) = inner
                .read_registry()
                .live_entry(&id, now_ms, ttl_ms)
                .map(|entry| entry.generation)
            else {
                return Ok(None);
            };
            writer
                .prepare_cached(
                    "UPDATE devices SET sessions = ?1, upload_bps = ?2, healthy = ?3, last_seen_ms = ?4 WHERE id = ?5",
                )?
                .execute(params![
                    load.sessions,
                    load.upload_bps as i64,
                    load.healthy,
                    now_ms as i64,
                    id
                ])?;
            inner.write_registry().set_load(&id, load, now_ms);
            Ok(Some(generation))
        })
        .await
    }

    async fn announce(&self, id: &str, contents: Vec<ContentId>, now_ms: u64) -> Result<Option<usize>, StoreError> {
        let ttl_ms = self.ttl_ms;
        let id = id.to_owned();
        self.blocking(move |inner| {
            let mut writer = lock(&inner.writer);
            if inner.read_registry().live_entry(&id, now_ms, ttl_ms).is_none() {
                return Ok(None);
            }
            let contents: HashSet<ContentId> = contents.into_iter().collect();
            let transaction = writer.transaction()?;
            transaction
                .prepare_cached("DELETE FROM device_contents WHERE device_id = ?1")?
                .execute([&id])?;
            {
                let mut insert =
                    transaction.prepare_cached("INSERT INTO device_contents (device_id, content) VALUES (?1, ?2)")?;
                for content in &contents {
                    insert.execute(params![id, &content.0[..]])?;
                }
            }
            transaction.commit()?;
            let count = contents.len();
            inner.write_registry().set_contents(&id, contents);
            Ok(Some(count))
        })
        .await
    }

    async fn remove(&self, id: &str, now_ms: u64) -> Result<bool, StoreError> {
        let ttl_ms = self.ttl_ms;
        let id = id.to_owned();
        self.blocking(move |inner| {
            let mut writer = lock(&inner.writer);
            if inner.read_registry().live_entry(&id, now_ms, ttl_ms).is_none() {
                return Ok(false);
            }
            delete_devices(&mut writer, std::slice::from_ref(&id))?;
            inner.write_registry().remove(&id);
            Ok(true)
        })
        .await
    }

    async fn public_key(&self, id: &str, now_ms: u64) -> Result<Option<[u8; 32]>, StoreError> {
        let registry = self.inner.read_registry();
        Ok(registry
            .live_entry(id, now_ms, self.ttl_ms)
            .and_then(|entry| entry.device.registration.public_key))
    }

    async fn revoke(&self, id: &str, before_ms: u64, now_ms: u64) -> Result<bool, StoreError> {
        let ttl_ms = self.ttl_ms;
        let id = id.to_owned();
        self.blocking(move |inner| {
            let mut writer = lock(&inner.writer);
            writer
                .prepare_cached(
                    "INSERT INTO revocations (id, before_ms) VALUES (?1, ?2)
                     ON CONFLICT (id) DO UPDATE SET before_ms = max(before_ms, excluded.before_ms)",
                )?
                .execute(params![id, before_ms as i64])?;
            let live = inner.read_registry().live_entry(&id, now_ms, ttl_ms).is_some();
            delete_devices(&mut writer, std::slice::from_ref(&id))?;
            let mut registry = inner.write_registry();
            registry.remove(&id);
            let revoked = registry.revoked.entry(id).or_insert(before_ms);
            *revoked = (*revoked).max(before_ms);
            Ok(live)
        })
        .await
    }

    async fn revoked_before(&self, id: &str) -> Result<Option<u64>, StoreError> {
        Ok(self.inner.read_registry().revoked.get(id).copied())
    }

    async fn remember_nonce(&self, key: [u8; 32], forget_at_ms: u64, now_ms: u64) -> Result<bool, StoreError> {
        Ok(lock(&self.inner.nonces).insert(key, forget_at_ms, now_ms))
    }

    async fn put_manifest(
        &self,
        content: ContentId,
        signer: [u8; 32],
        bytes: Bytes,
        _now_ms: u64,
    ) -> Result<ManifestPut, StoreError> {
        let (max_count, max_bytes) = (self.limits.manifests_per_origin, self.limits.manifest_bytes_per_origin);
        self.blocking(move |inner| {
            let writer = lock(&inner.writer);
            if let Some(stored) = inner.read_registry().manifests.get(&content)
                && stored.signer != signer
            {
                return Ok(ManifestPut::SignerConflict { stored: stored.signer });
            }
            let usage = inner.read_registry().usage_besides(&signer, &content);
            let size = bytes.len() as u64;
            if usage.count + 1 > max_count || usage.bytes.saturating_add(size) > max_bytes {
                return Ok(ManifestPut::OverQuota {
                    count: usage.count,
                    bytes: usage.bytes,
                });
            }
            writer
                .prepare_cached(
                    "INSERT OR REPLACE INTO manifests (content, bytes, signer, orphan_since_ms) VALUES (?1, ?2, ?3, NULL)",
                )?
                .execute(params![&content.0[..], &bytes[..], &signer[..]])?;
            let meta = ManifestMeta {
                signer,
                size,
                orphan_since_ms: None,
            };
            inner.write_registry().add_manifest(content, meta);
            Ok(ManifestPut::Stored)
        })
        .await
    }

    async fn get_manifest(&self, content: ContentId) -> Result<Option<Bytes>, StoreError> {
        self.blocking(move |inner| {
            let connection = lock(inner.reader.as_ref().unwrap_or(&inner.writer));
            let bytes: Option<Vec<u8>> = connection
                .prepare_cached("SELECT bytes FROM manifests WHERE content = ?1")?
                .query_row([&content.0[..]], |row| row.get(0))
                .optional()?;
            Ok(bytes.map(Bytes::from))
        })
        .await
    }

    async fn lookup(&self, content: ContentId, n: usize, charge_bps: u64, now_ms: u64) -> Result<Lookup, StoreError> {
        let registry = self.inner.read_registry();
        let (slack, ttl_ms) = (self.limits.lookup_slack, self.ttl_ms);
        let (servers, servers_read) = registry.first_servers(&content, n, slack, now_ms, ttl_ms, charge_bps);
        let want_origins = n.min(self.limits.max_origins);
        let (origins, origins_read) = registry.first_live(registry.origins.iter(), want_origins, slack, now_ms, ttl_ms);
        Ok(Lookup {
            servers,
            origins,
            records_read: servers_read + origins_read,
        })
    }

    async fn live_devices(&self, now_ms: u64) -> Result<u64, StoreError> {
        let registry = self.inner.read_registry();
        let live = registry
            .devices
            .values()
            .filter(|entry| is_live(entry.last_seen_ms, now_ms, self.ttl_ms))
            .count();
        Ok(live as u64)
    }

    async fn sweep(&self, now_ms: u64) -> Result<u64, StoreError> {
        let ttl_ms = self.ttl_ms;
        self.blocking(move |inner| {
            let mut writer = lock(&inner.writer);
            let expired: Vec<String> = inner
                .read_registry()
                .devices
                .iter()
                .filter(|(_, entry)| !is_live(entry.last_seen_ms, now_ms, ttl_ms))
                .map(|(id, _)| id.clone())
                .collect();
            if expired.is_empty() {
                return Ok(0);
            }
            delete_devices(&mut writer, &expired)?;
            let mut registry = inner.write_registry();
            for id in &expired {
                registry.remove(id);
            }
            Ok(expired.len() as u64)
        })
        .await
    }

    async fn sweep_manifests(&self, now_ms: u64) -> Result<u64, StoreError> {
        let (ttl_ms, grace_ms) = (self.ttl_ms, ttl_millis(self.limits.orphan_grace));
        self.blocking(move |inner| {
            let mut writer = lock(&inner.writer);
            let changes = inner.read_registry().orphan_changes(now_ms, ttl_ms, grace_ms);
            if changes.marked.is_empty() && changes.unmarked.is_empty() && changes.deleted.is_empty() {
                return Ok(0);
            }
            let transaction = writer.transaction()?;
            {
                let mut mark =
                    transaction.prepare_cached("UPDATE manifests SET orphan_since_ms = ?1 WHERE content = ?2")?;
                for content in &changes.marked {
                    mark.execute(params![now_ms as i64, &content.0[..]])?;
                }
                for content in &changes.unmarked {
                    mark.execute(params![None::<i64>, &content.0[..]])?;
                }
                let mut delete = transaction.prepare_cached("DELETE FROM manifests WHERE content = ?1")?;
                for content in &changes.deleted {
                    delete.execute([&content.0[..]])?;
                }
            }
            transaction.commit()?;
            let mut registry = inner.write_registry();
            for (contents, since) in [(&changes.marked, Some(now_ms)), (&changes.unmarked, None)] {
                for content in contents {
                    if let Some(meta) = registry.manifests.get_mut(content) {
                        meta.orphan_since_ms = since;
                    }
                }
            }
            for content in &changes.deleted {
                registry.forget_manifest(content);
            }
            Ok(changes.deleted.len() as u64)
        })
        .await
    }

    async fn add_lookups(
        &self,
        counts: Vec<(ContentId, u64)>,
        now_ms: u64,
        half_life_ms: u64,
    ) -> Result<(), StoreError> {
        let max = self.limits.max_tracked_contents;
        self.blocking(move |inner| {
            let mut writer = lock(&inner.writer);
            let mut placement = lock(&inner.placement);
            let scores = &mut placement.scores;
            let mut changed: Vec<(ContentId, f64)> = Vec::with_capacity(counts.len());
            for (content, count) in counts {
                let score = crate::popularity::add(scores.get(&content).copied(), count as f64, now_ms, half_life_ms);
                changed.push((content, score));
            }
            let mut forgotten = Vec::new();
            let extra = (scores.len() + changed.len()).saturating_sub(max);
            if extra > 0 {
                let mut all: Vec<(ContentId, f64)> = scores.iter().map(|(c, s)| (*c, *s)).collect();
                all.extend(changed.iter().copied());
                all.sort_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
                all.dedup_by_key(|entry| entry.0);
                let extra = all.len().saturating_sub(max);
                forgotten.extend(all.into_iter().take(extra).map(|entry| entry.0));
            }
            let transaction = writer.transaction()?;
            {
                let mut upsert =
                    transaction.prepare_cached("INSERT OR REPLACE INTO popularity (content, score) VALUES (?1, ?2)")?;
                for (content, score) in &changed {
                    upsert.execute(params![&content.0[..], score])?;
                }
                let mut delete = transaction.prepare_cached("DELETE FROM popularity WHERE content = ?1")?;
                for content in &forgotten {
                    delete.execute([&content.0[..]])?;
                }
            }
            transaction.commit()?;
            scores.extend(changed);
            for content in &forgotten {
                scores.remove(content);
            }
            Ok(())
        })
        .await
    }

    async fn popular(&self, n: usize, _now_ms: u64) -> Result<Vec<(ContentId, f64)>, StoreError> {
        let placement = lock(&self.inner.placement);
        let mut all: Vec<(ContentId, f64)> = placement.scores.iter().map(|(c, s)| (*c, *s)).collect();
        drop(placement);
        let order = |a: &(ContentId, f64), b: &(ContentId, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if n == 0 {
            return Ok(Vec::new());
        }
        if all.len() > n {
            all.select_nth_unstable_by(n - 1, order);
            all.truncate(n);
        }
        all.sort_unstable_by(order);
        Ok(all)
    }

    async fn set_disk(&self, id: &str, disk: Disk, _now_ms: u64) -> Result<(), StoreError> {
        lock(&self.inner.placement).disks.insert(id.to_owned(), disk);
        Ok(())
    }

    async fn placement_devices(&self, now_ms: u64) -> Result<Vec<PlacedDevice>, StoreError> {
        let registry = self.inner.read_registry();
        let mut placement = lock(&self.inner.placement);
        // Forget the disk reports of devices gone since.
        placement
            .disks
            .retain(|id, _| registry.live_entry(id, now_ms, self.ttl_ms).is_some());
        let mut devices: Vec<PlacedDevice> = registry
            .devices
            .values()
            .filter(|entry| is_live(entry.last_seen_ms, now_ms, self.ttl_ms) && !entry.device.registration.origin)
            .map(|entry| {
                let id = &entry.device.registration.id;
                let mut contents: Vec<ContentId> = entry.contents.iter().copied().collect();
                contents.sort_unstable();
                PlacedDevice {
                    device: Arc::clone(&entry.device),
                    contents,
                    disk: placement.disks.get(id).copied(),
                    assignment: placement.assignments.get(id).cloned(),
                }
            })
            .collect();
        devices.sort_by(|a, b| a.device.registration.id.cmp(&b.device.registration.id));
        Ok(devices)
    }

    async fn set_assignments(
        &self,
        assignments: Vec<(String, Vec<ContentId>)>,
        _now_ms: u64,
    ) -> Result<(), StoreError> {
        self.blocking(move |inner| {
            let mut writer = lock(&inner.writer);
            let transaction = writer.transaction()?;
            transaction.execute("DELETE FROM assignments", [])?;
            {
                let mut insert =
                    transaction.prepare_cached("INSERT INTO assignments (device_id, contents) VALUES (?1, ?2)")?;
                for (id, contents) in &assignments {
                    insert.execute(params![id, encode_contents(contents)])?;
                }
            }
            transaction.commit()?;
            lock(&inner.placement).assignments = assignments.into_iter().collect();
            Ok(())
        })
        .await
    }

    async fn assignment(&self, id: &str) -> Result<Option<Vec<ContentId>>, StoreError> {
        Ok(lock(&self.inner.placement).assignments.get(id).cloned())
    }

    async fn report(
        &self,
        id: &str,
        reporter: &str,
        now_ms: u64,
        window_ms: u64,
        max_reporters: usize,
    ) -> Result<Vec<u64>, StoreError> {
        let (id, reporter) = (id.to_owned(), reporter.to_owned());
        self.blocking(move |inner| {
            let writer = lock(&inner.writer);
            let since = now_ms.saturating_sub(window_ms) as i64;
            writer
                .prepare_cached("DELETE FROM reports WHERE at_ms <= ?1")?
                .execute(params![since])?;
            writer
                .prepare_cached(
                    "INSERT INTO reports (device, reporter, at_ms) VALUES (?1, ?2, ?3)
                     ON CONFLICT (device, reporter) DO UPDATE SET at_ms = excluded.at_ms",
                )?
                .execute(params![id, reporter, now_ms as i64])?;
            writer
                .prepare_cached(
                    "DELETE FROM reports WHERE device = ?1 AND reporter NOT IN
                     (SELECT reporter FROM reports WHERE device = ?1 ORDER BY at_ms DESC LIMIT ?2)",
                )?
                .execute(params![id, max_reporters as i64])?;
            let times = writer
                .prepare_cached("SELECT at_ms FROM reports WHERE device = ?1 ORDER BY at_ms DESC")?
                .query_map(params![id], |row| row.get::<_, i64>(0))?
                .map(|at| at.map(|at| at as u64))
                .collect::<Result<Vec<u64>, _>>()?;
            Ok(times)
        })
        .await
    }

    async fn reports(&self, now_ms: u64, window_ms: u64) -> Result<Vec<(String, Vec<u64>)>, StoreError> {
        self.blocking(move |inner| {
            let writer = lock(&inner.writer);
            let since = now_ms.saturating_sub(window_ms) as i64;
            let rows = writer
                .prepare_cached("SELECT device, at_ms FROM reports WHERE at_ms > ?1 ORDER BY device, at_ms DESC")?
                .query_map(params![since], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)? as u64))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            let mut reports: Vec<(String, Vec<u64>)> = Vec::new();
            for (device, at) in rows {
                match reports.last_mut() {
                    Some((last, times)) if *last == device => times.push(at),
                    _ => reports.push((device, vec![at])),
                }
            }
            Ok(reports)
        })
        .await
    }

    async fn clear_reports(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.blocking(move |inner| {
            let writer = lock(&inner.writer);
            Ok(writer
                .prepare_cached("DELETE FROM reports WHERE device = ?1")?
                .execute(params![id])?
                > 0)
        })
        .await
    }

    async fn lead_round(&self, _hold_ms: u64, _now_ms: u64) -> Result<bool, StoreError> {
        // One SQLite file belongs to one tracker process.
        Ok(true)
    }
}

fn delete_devices(connection: &mut Connection, ids: &[String]) -> Result<(), StoreError> {
    let transaction = connection.transaction()?;
    {
        let mut contents = transaction.prepare_cached("DELETE FROM device_contents WHERE device_id = ?1")?;
        let mut devices = transaction.prepare_cached("DELETE FROM devices WHERE id = ?1")?;
        for id in ids {
            contents.execute([id])?;
            devices.execute([id])?;
        }
    }
    transaction.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(30);

    fn registration(id: &str, origin: bool) -> Registration {
        Registration {
            id: id.into(),
            addr: "127.0.0.1:7801".parse().unwrap(),
            origin,
            upload_capacity_bps: 1_000,
            public_key: origin.then_some([7; 32]),
        }
    }

    fn ids(devices: &[Arc<Device>]) -> Vec<&str> {
        devices.iter().map(|d| d.registration.id.as_str()).collect()
    }

    #[tokio::test]
    async fn expiry_is_decided_by_timestamps_and_sweeping_deletes() {
        let store = SqliteStore::open(None, TTL, StoreLimits::default()).unwrap();
        let content = ContentId([1; 32]);
        store.register(registration("edge", false), 1_000).await.unwrap();
        store.register(registration("origin", true), 1_000).await.unwrap();
        assert_eq!(
            store.announce("edge", vec![content, content], 1_000).await.unwrap(),
            Some(1)
        );
        let live_at = 1_000 + 29_999;
        let found = store.lookup(content, 8, 0, live_at).await.unwrap();
        assert_eq!(
            (ids(&found.servers), ids(&found.origins)),
            (vec!["edge"], vec!["origin"])
        );
        assert_eq!(store.public_key("origin", live_at).await.unwrap(), Some([7; 32]));
        assert_eq!(store.public_key("edge", live_at).await.unwrap(), None);

        let expired_at = 1_000 + 30_000;
        let found = store.lookup(content, 8, 0, expired_at).await.unwrap();
        assert!(found.servers.is_empty() && found.origins.is_empty(), "{found:?}");
        assert_eq!(store.heartbeat("edge", Load::FRESH, expired_at).await.unwrap(), None);
        assert_eq!(store.announce("edge", vec![], expired_at).await.unwrap(), None);
        assert_eq!(store.public_key("origin", expired_at).await.unwrap(), None);
        assert_eq!(store.live_devices(expired_at).await.unwrap(), 0);
        assert_eq!(store.sweep(expired_at).await.unwrap(), 2);
        assert_eq!(store.sweep(expired_at).await.unwrap(), 0);
        let registry = store.inner.read_registry();
        assert!(registry.devices.is_empty() && registry.holders.is_empty() && registry.origins.is_empty());
    }

    #[tokio::test]
    async fn re_registering_clears_the_announced_set() {
        let store = SqliteStore::open(None, TTL, StoreLimits::default()).unwrap();
        let content = ContentId([1; 32]);
        store.register(registration("edge", false), 0).await.unwrap();
        store.announce("edge", vec![content], 0).await.unwrap();
        store.register(registration("edge", false), 1).await.unwrap();
        assert!(store.lookup(content, 8, 0, 1).await.unwrap().servers.is_empty());
        assert!(store.inner.read_registry().holders.is_empty());
    }

    #[tokio::test]
    async fn manifests_of_an_older_file_get_their_signer_from_their_trailer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let mut bytes = vec![1u8; 200];
        bytes[200 - 96..200 - 64].copy_from_slice(&[9; 32]);
        {
            let old = Connection::open(&path).unwrap();
            old.execute_batch("CREATE TABLE manifests (content BLOB PRIMARY KEY NOT NULL, bytes BLOB NOT NULL);")
                .unwrap();
            old.execute("INSERT INTO manifests VALUES (?1, ?2)", params![&[5u8; 32][..], &bytes])
                .unwrap();
        }
        let limits = StoreLimits {
            manifests_per_origin: 1,
            ..StoreLimits::default()
        };
        let store = SqliteStore::open(Some(&path), TTL, limits).unwrap();
        let other = ContentId([6; 32]);
        let put = store
            .put_manifest(other, [9; 32], Bytes::from_static(b"x"), 0)
            .await
            .unwrap();
        assert_eq!(put, ManifestPut::OverQuota { count: 1, bytes: 200 });
        let got = store.get_manifest(ContentId([5; 32])).await.unwrap().unwrap();
        assert_eq!(&got[..], &bytes[..]);
    }

    #[tokio::test]
    async fn a_lookup_reads_at_most_n_plus_the_slack_past_expired_holders() {
        let store = SqliteStore::open(None, TTL, StoreLimits::default()).unwrap();
        let content = ContentId([1; 32]);
        // 500 holders heard from at 0 and ranked first (more capacity), 3 heard from later.
        for i in 0..503u64 {
            let mut edge = registration(&format!("edge-{i}"), false);
            edge.upload_capacity_bps = if i < 500 { 1_000_000 + i } else { i };
            let heard = if i < 500 { 0 } else { 20_000 };
            store.register(edge, heard).await.unwrap();
            store
                .announce(&format!("edge-{i}"), vec![content], heard)
                .await
                .unwrap();
        }
        let found = store.lookup(content, 8, 0, 1_000).await.unwrap();
        assert_eq!(found.servers.len(), 8);
        assert_eq!(found.records_read, 8);
        // At 30 s the first 500 expired but are not swept yet: the lookup reads 8 + 64 of them,
        // not 500, and finds none; after the sweep it finds the 3 live ones.
        let found = store.lookup(content, 8, 0, 30_000).await.unwrap();
        assert_eq!((found.servers.len(), found.records_read), (0, 72));
        assert_eq!(store.sweep(30_000).await.unwrap(), 500);
        let found = store.lookup(content, 8, 0, 30_000).await.unwrap();
        assert_eq!(ids(&found.servers), ["edge-502", "edge-501", "edge-500"]);
        assert_eq!(found.records_read, 3);
    }
}
