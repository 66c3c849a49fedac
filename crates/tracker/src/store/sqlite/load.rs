//! The SQLite store's schema, its migration from older files, and the in-memory model loaded
//! from the file at start.

use super::registry::{Entry, ManifestMeta, Registry};
use super::{Placement, corrupt};
use crate::model::{Device, Load, Registration};
use crate::store::{StoreError, decode_contents};
use pcdn_core::wire::ContentId;
use rusqlite::Connection;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS devices (
    id TEXT PRIMARY KEY NOT NULL,
    addr TEXT NOT NULL,
    origin INTEGER NOT NULL,
    upload_capacity_bps INTEGER NOT NULL,
    public_key BLOB,
    sessions INTEGER NOT NULL,
    upload_bps INTEGER NOT NULL,
    healthy INTEGER NOT NULL,
    last_seen_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS device_contents (
    device_id TEXT NOT NULL,
    content BLOB NOT NULL,
    PRIMARY KEY (device_id, content)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS generations (
    id TEXT PRIMARY KEY NOT NULL,
    generation INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS reports (
    device TEXT NOT NULL,
    reporter TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    PRIMARY KEY (device, reporter)
);
CREATE INDEX IF NOT EXISTS reports_at ON reports (at_ms);
CREATE TABLE IF NOT EXISTS revocations (
    id TEXT PRIMARY KEY NOT NULL,
    before_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS popularity (
    content BLOB PRIMARY KEY NOT NULL,
    score REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS assignments (
    device_id TEXT PRIMARY KEY NOT NULL,
    contents BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS manifests (
    content BLOB PRIMARY KEY NOT NULL,
    bytes BLOB NOT NULL,
    signer BLOB,
    orphan_since_ms INTEGER
);
";

/// Columns added to `manifests` after its first version, added to older files at start. The
/// signer of a manifest stored before is its bytes' trailer: signer (32) then signature (64).
pub(super) const MANIFEST_MIGRATION: &[(&str, &str)] = &[
    (
        "signer",
        "ALTER TABLE manifests ADD COLUMN signer BLOB;
         UPDATE manifests SET signer = substr(bytes, length(bytes) - 95, 32);",
    ),
    (
        "orphan_since_ms",
        "ALTER TABLE manifests ADD COLUMN orphan_since_ms INTEGER;",
    ),
];

/// Adds the columns of `MANIFEST_MIGRATION` a file made by an older tracker lacks.
pub(super) fn migrate(connection: &Connection) -> Result<(), StoreError> {
    let mut columns = HashSet::new();
    let mut info = connection.prepare("PRAGMA table_info(manifests)")?;
    let mut rows = info.query([])?;
    while let Some(row) = rows.next()? {
        columns.insert(row.get::<_, String>(1)?);
    }
    for (column, statements) in MANIFEST_MIGRATION {
        if !columns.contains(*column) {
            connection.execute_batch(&format!("BEGIN; {statements} COMMIT;"))?;
        }
    }
    Ok(())
}

pub(super) fn load_placement(connection: &Connection) -> Result<Placement, StoreError> {
    let mut placement = Placement::default();
    let mut scores = connection.prepare("SELECT content, score FROM popularity")?;
    let mut rows = scores.query([])?;
    while let Some(row) = rows.next()? {
        let content: Vec<u8> = row.get(0)?;
        let content = ContentId(
            content
                .try_into()
                .map_err(|_| corrupt("a popularity row has a content id that is not 32 bytes"))?,
        );
        placement.scores.insert(content, row.get(1)?);
    }
    let mut assignments = connection.prepare("SELECT device_id, contents FROM assignments")?;
    let mut rows = assignments.query([])?;
    while let Some(row) = rows.next()? {
        let contents: Vec<u8> = row.get(1)?;
        placement.assignments.insert(row.get(0)?, decode_contents(&contents)?);
    }
    Ok(placement)
}

pub(super) fn load_registry(connection: &Connection, min_free_bps: u64) -> Result<Registry, StoreError> {
    let mut registry = Registry {
        min_free_bps,
        ..Registry::default()
    };
    let mut generations = connection.prepare("SELECT id, generation FROM generations")?;
    let mut rows = generations.query([])?;
    while let Some(row) = rows.next()? {
        registry.generations.insert(row.get(0)?, row.get::<_, i64>(1)? as u64);
    }
    let mut devices = connection.prepare(
        "SELECT id, addr, origin, upload_capacity_bps, public_key, sessions, upload_bps, healthy, last_seen_ms
         FROM devices",
    )?;
    let mut rows = devices.query([])?;
    while let Some(row) = rows.next()? {
        let id: String = row.get(0)?;
        let addr: String = row.get(1)?;
        let public_key: Option<Vec<u8>> = row.get(4)?;
        let registration = Registration {
            addr: addr
                .parse()
                .map_err(|_| corrupt(format!("device {id:?} has address {addr:?}")))?,
            origin: row.get(2)?,
            upload_capacity_bps: row.get::<_, i64>(3)? as u64,
            public_key: public_key
                .map(|key| key.try_into())
                .transpose()
                .map_err(|_| corrupt(format!("device {id:?} has a public key that is not 32 bytes")))?,
            id,
        };
        let load = Load {
            sessions: row.get(5)?,
            upload_bps: row.get::<_, i64>(6)? as u64,
            healthy: row.get(7)?,
        };
        let generation = registry.generations.get(&registration.id).copied().unwrap_or(0);
        registry.insert(Entry {
            device: Arc::new(Device::new(registration, load)),
            last_seen_ms: row.get::<_, i64>(8)? as u64,
            contents: HashSet::new(),
            generation,
            charged: Default::default(),
        });
    }
    let mut contents = connection.prepare("SELECT device_id, content FROM device_contents")?;
    let mut rows = contents.query([])?;
    let mut announced: HashMap<String, HashSet<ContentId>> = HashMap::new();
    while let Some(row) = rows.next()? {
        let id: String = row.get(0)?;
        let content: Vec<u8> = row.get(1)?;
        let content = ContentId(
            content
                .try_into()
                .map_err(|_| corrupt(format!("device {id:?} announced a content id that is not 32 bytes")))?,
        );
        announced.entry(id).or_default().insert(content);
    }
    for (id, contents) in announced {
        registry.set_contents(&id, contents);
    }
    let mut manifests = connection.prepare("SELECT content, signer, length(bytes), orphan_since_ms FROM manifests")?;
    let mut rows = manifests.query([])?;
    while let Some(row) = rows.next()? {
        let content: Vec<u8> = row.get(0)?;
        let signer: Option<Vec<u8>> = row.get(1)?;
        let bad = || {
            corrupt(format!(
                "manifest {} has a content id or signer that is not 32 bytes",
                hex::encode(&content)
            ))
        };
        let meta = ManifestMeta {
            signer: signer.and_then(|key| key.try_into().ok()).ok_or_else(bad)?,
            size: row.get::<_, i64>(2)? as u64,
            orphan_since_ms: row.get::<_, Option<i64>>(3)?.map(|ms| ms as u64),
        };
        let content = ContentId(content.as_slice().try_into().map_err(|_| bad())?);
        registry.add_manifest(content, meta);
    }
    let mut revocations = connection.prepare("SELECT id, before_ms FROM revocations")?;
    let mut rows = revocations.query([])?;
    while let Some(row) = rows.next()? {
        registry.revoked.insert(row.get(0)?, row.get::<_, i64>(1)? as u64);
    }
    Ok(registry)
}
