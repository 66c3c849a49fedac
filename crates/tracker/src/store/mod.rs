//! The registry's storage behind one async trait: SQLite (the default, one tracker instance) or
//! Redis (several tracker instances acting as one registry).

mod nonces;
pub(crate) mod redis;
pub(crate) mod sqlite;

use crate::model::{Device, Load, Lookup, Registration};
use bytes::Bytes;
use pcdn_core::wire::ContentId;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Wall-clock time in milliseconds since the Unix epoch. Expiry is kept in wall-clock time
/// because it must survive a restart (SQLite) and be shared by several processes (Redis).
pub(crate) fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

/// `ttl` in whole milliseconds, at least 1.
pub(crate) fn ttl_millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The store failed (unreachable, I/O error, corrupt data): the request cannot be answered now.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("redis: {0}")]
    Redis(#[from] ::redis::RedisError),
    #[error("store data is corrupt: {0}")]
    Corrupt(String),
    #[error("store task failed: {0}")]
    Task(String),
}

/// The registry operations the HTTP API needs. Every method takes the current wall-clock time
/// (`unix_millis`) so that expiry is decided in one place per request and tests can reason
/// about it. A device is live while `now_ms < last heard from + ttl`.
pub(crate) trait Store: Send + Sync + 'static {
    /// "sqlite" or "redis", as `/health` reports it.
    fn kind(&self) -> &'static str;

    /// Registers a device, replacing any device with the same id (its announced set included).
    /// Returns the record's registration generation: one more than the id's previous one, kept
    /// across the id's removals, so a device that sees another generation in a heartbeat answer
    /// knows its record was replaced without it.
    fn register(&self, registration: Registration, now_ms: u64)
    -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Records a load report and keeps the device live; the record's registration generation,
    /// or `None` if the device is not live.
    fn heartbeat(
        &self,
        id: &str,
        load: Load,
        now_ms: u64,
    ) -> impl Future<Output = Result<Option<u64>, StoreError>> + Send;

    /// Replaces the device's announced set; `None` if the device is not live.
    fn announce(
        &self,
        id: &str,
        contents: Vec<ContentId>,
        now_ms: u64,
    ) -> impl Future<Output = Result<Option<usize>, StoreError>> + Send;

    /// Removes a device; false if it was not live.
    fn remove(&self, id: &str, now_ms: u64) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// The `public_key` the live device `id` registered; `None` if it is not live or gave none.
    fn public_key(&self, id: &str, now_ms: u64) -> impl Future<Output = Result<Option<[u8; 32]>, StoreError>> + Send;

    /// Revokes `id`: credentials of the id issued before `before_ms` are refused from now on
    /// (a later revocation of the same id only moves the instant forward), and a live
    /// registration of the id is removed at once; returns whether one was.
    fn revoke(&self, id: &str, before_ms: u64, now_ms: u64) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// The instant before which credentials of `id` were revoked, if any.
    fn revoked_before(&self, id: &str) -> impl Future<Output = Result<Option<u64>, StoreError>> + Send;

    /// Records a request's replay key until `forget_at_ms`; false if it was already recorded
    /// (a replay). Shared by every tracker instance on the same store.
    fn remember_nonce(
        &self,
        key: [u8; 32],
        forget_at_ms: u64,
        now_ms: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Stores a verified signed manifest signed by `signer`, replacing an earlier one of the
    /// same content only if the same key signed it (`SignerConflict` otherwise), and unless that
    /// would take the signer over its quota (`StoreLimits`). Atomic across tracker instances.
    fn put_manifest(
        &self,
        content: ContentId,
        signer: [u8; 32],
        bytes: Bytes,
        now_ms: u64,
    ) -> impl Future<Output = Result<ManifestPut, StoreError>> + Send;

    /// The signed manifest of a content, if one was put.
    fn get_manifest(&self, content: ContentId) -> impl Future<Output = Result<Option<Bytes>, StoreError>> + Send;

    /// The best `n` live, healthy, non-origin devices that announced `content`, without those
    /// at their cap when one listed has room (ranked by `model::RankKey`), and the best
    /// `min(n, max_origins)` live origins, reading a bounded number of records whatever the
    /// holders. Charges the servers it lists `charge_bps` between them (an equal share each):
    /// they rank lower in this content's ranking until their next heartbeat (`Spread`).
    fn lookup(
        &self,
        content: ContentId,
        n: usize,
        charge_bps: u64,
        now_ms: u64,
    ) -> impl Future<Output = Result<Lookup, StoreError>> + Send;

    /// The number of live devices.
    fn live_devices(&self, now_ms: u64) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Deletes the devices whose ttl ran out; returns how many this call deleted (each expired
    /// device is counted once, even with several tracker instances sweeping one Redis).
    fn sweep(&self, now_ms: u64) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Deletes the manifests that have been orphans for the grace period (`StoreLimits`): held
    /// by no live device, with no live origin whose key signed them. Marks new orphans and
    /// unmarks manifests held again. Returns how many it deleted.
    fn sweep_manifests(&self, now_ms: u64) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Adds lookups to the contents' decayed counts (`popularity::add`), and forgets the
    /// least popular beyond `StoreLimits::max_tracked_contents`. Shared by every instance.
    fn add_lookups(
        &self,
        counts: Vec<(ContentId, u64)>,
        now_ms: u64,
        half_life_ms: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The `n` contents of highest decayed count with their log-scores (`popularity`), highest
    /// first, ties by content id.
    fn popular(&self, n: usize, now_ms: u64) -> impl Future<Output = Result<Vec<(ContentId, f64)>, StoreError>> + Send;

    /// Records the disk a live device reported in its heartbeat (it expires with the device).
    fn set_disk(&self, id: &str, disk: Disk, now_ms: u64) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Every live device that is not an origin, with what it announced, its disk report and
    /// its current assignment, ordered by id: the input of a placement round.
    fn placement_devices(&self, now_ms: u64) -> impl Future<Output = Result<Vec<PlacedDevice>, StoreError>> + Send;

    /// Replaces every assignment: these devices get these lists, every other device none.
    fn set_assignments(
        &self,
        assignments: Vec<(String, Vec<ContentId>)>,
        now_ms: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The device's assignment from the last placement round that placed it, if any.
    fn assignment(&self, id: &str) -> impl Future<Output = Result<Option<Vec<ContentId>>, StoreError>> + Send;

    /// Records that `reporter` (a client's source address) reported device `id` for corrupt
    /// data at `now_ms` (a reporter counts once per device: its newest report), forgets the
    /// device's reports older than `window_ms` and all but its newest `max_reporters`, and
    /// returns the times (Unix ms) of the device's remaining reports, newest first.
    fn report(
        &self,
        id: &str,
        reporter: &str,
        now_ms: u64,
        window_ms: u64,
        max_reporters: usize,
    ) -> impl Future<Output = Result<Vec<u64>, StoreError>> + Send;

    /// Every reported device with the times of its reports within `window_ms`, newest first.
    fn reports(
        &self,
        now_ms: u64,
        window_ms: u64,
    ) -> impl Future<Output = Result<Vec<(String, Vec<u64>)>, StoreError>> + Send;

    /// Forgets every report of `id` (the operator cleared its quarantine); whether there were any.
    fn clear_reports(&self, id: &str) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Whether this instance runs the placement round starting now: true for at most one
    /// instance per `hold_ms` (a lease in Redis; SQLite has one instance).
    fn lead_round(&self, hold_ms: u64, now_ms: u64) -> impl Future<Output = Result<bool, StoreError>> + Send;
}

/// A device's disk as its heartbeats report it (`cache_bytes`, `free_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Disk {
    pub cache_bytes: u64,
    pub free_bytes: Option<u64>,
}

/// A live device as a placement round sees it.
#[derive(Clone, Debug)]
pub(crate) struct PlacedDevice {
    pub device: Arc<Device>,
    pub contents: Vec<ContentId>,
    pub disk: Option<Disk>,
    pub assignment: Option<Vec<ContentId>>,
}

/// An assignment as stored: the content ids' 32 bytes each, concatenated.
pub(crate) fn encode_contents(contents: &[ContentId]) -> Vec<u8> {
    contents.iter().flat_map(|content| content.0).collect()
}

pub(crate) fn decode_contents(bytes: &[u8]) -> Result<Vec<ContentId>, StoreError> {
    if bytes.len() % 32 != 0 {
        return Err(StoreError::Corrupt(format!(
            "an assignment of {} bytes is not a list of 32-byte content ids",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(32)
        .map(|chunk| ContentId(chunk.try_into().expect("32-byte chunks")))
        .collect())
}

/// What putting a manifest did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ManifestPut {
    Stored,
    /// Refused: the signer already keeps `count` manifests of `bytes` bytes besides this one,
    /// and this one would take it over a quota.
    OverQuota {
        count: u64,
        bytes: u64,
    },
    /// Refused: the content's stored manifest is signed by `stored`, which alone may replace it.
    SignerConflict {
        stored: [u8; 32],
    },
}
