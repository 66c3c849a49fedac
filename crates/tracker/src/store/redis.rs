//! The Redis store: the registry kept in one Redis server, so that several tracker instances
//! pointed at it act as one registry.
//!
//! Keys (all under `pcdn:`):
//! - `dev:{id}`: the device's load and registration as two text lines (`encode_device`), with
//!   a TTL of the tracker's ttl, renewed by every heartbeat. Its existence is what makes a
//!   device live, so expiry is decided by Redis and is the same for every instance. One string
//!   rather than a hash so that a lookup reads every candidate with one `MGET`.
//! - `contents:{id}` (set of content hex ids) and `holders:{content hex}` (set of device ids):
//!   the announced sets, both directions. Every script that changes one changes the other, so
//!   `id ∈ holders:c ⇔ c ∈ contents:id` always holds.
//! - `rank:{content hex}`: sorted set of the content's serving holders (healthy, not origins),
//!   scored by `model::rank_load` (minus their free upload capacity, or past a mark when at
//!   their cap), kept current by every script that changes a record or an announced set;
//!   `origin-rank`: the same over every origin (unhealthy ones scored after the healthy). A
//!   lookup reads the first entries of these, not every holder, and adds its charge to the
//!   scores of the servers it lists.
//! - `charged:{id}`: set of the contents whose `rank:` lookups charged the device since its last
//!   heartbeat, which sets those scores back and deletes it.
//! - `origins`: set of origin device ids.
//! - `live`: sorted set of device id → expiry deadline (Unix ms), used only to find expired
//!   devices to clean up and to count live devices.
//! - `manifest:{content hex}`: the signed manifest bytes; `manifest-signer`: hash of content hex
//!   → signer key hex, every stored manifest; `signed:{signer hex}`: sorted set of the contents
//!   a signer keeps scored by manifest size, and `signed-bytes`: hash of signer → bytes kept
//!   (the quota); `orphan-since`: hash of content hex → when the manifest became an orphan.
//!   Only a stored manifest's own signer may replace it.
//! - `generation`: hash of device id → its last registration generation, bumped by every
//!   registration and kept after the device leaves.
//! - `revoked`: hash of revoked device id → the instant (Unix ms) before which its credentials
//!   are refused.
//! - `popularity`: sorted set of content hex → the log-score of its decayed lookup count
//!   (`popularity`), at most `max_tracked_contents` entries.
//! - `disk:{id}`: the device's last disk report (`cache free`, `-` for no free figure), expiring
//!   with the device; `assign:{id}`: its assignment (32-byte content ids concatenated), and
//!   `assigned`: the set of devices that have one; `placement-lead`: the lease of the instance
//!   that runs the current placement round.
//! - `reports:{id}`: sorted set of the client addresses that reported the device for corrupt
//!   data → when (Unix ms), at most `max_reporters`, expiring a window after the last report;
//!   `reported`: sorted set of reported device ids → their last report (smart-ban quarantine).
//! - `nonce:{replay key hex}`: a signed request seen recently, expiring when its timestamp
//!   leaves the clock window; `SET NX` makes "first to see it" atomic across instances.
//!
//! Every operation that touches several keys is one Lua script, atomic across instances. A
//! lookup is one script, so one round trip: the first live entries of the content's ranking and
//! of the origins' (`ZRANGE` with a bound) with their records and scores, and the charges; the
//! tracker orders those exactly (`model::RankKey`, whose ties on score the scores cannot break)
//! and renders them.

use super::{Disk, ManifestPut, PlacedDevice, Store, StoreError, decode_contents, encode_contents, ttl_millis};
use crate::StoreLimits;
use crate::model::{Device, Load, Lookup, RankKey, Registration, content_hex};
use bytes::Bytes;
use pcdn_core::wire::ContentId;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, Script};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

mod scripts;
use scripts::*;

const DEVICE_PREFIX: &str = "pcdn:dev:";
const REPORTS_PREFIX: &str = "pcdn:reports:";
const REPORTED_KEY: &str = "pcdn:reported";
const CONTENTS_PREFIX: &str = "pcdn:contents:";
const HOLDERS_PREFIX: &str = "pcdn:holders:";
const MANIFEST_PREFIX: &str = "pcdn:manifest:";
const RANK_PREFIX: &str = "pcdn:rank:";
const CHARGED_PREFIX: &str = "pcdn:charged:";
const ORIGINS_KEY: &str = "pcdn:origins";
const ORIGIN_RANK_KEY: &str = "pcdn:origin-rank";
const LIVE_KEY: &str = "pcdn:live";
const MANIFEST_SIGNER_KEY: &str = "pcdn:manifest-signer";
const SIGNED_PREFIX: &str = "pcdn:signed:";
const SIGNED_BYTES_KEY: &str = "pcdn:signed-bytes";
const ORPHAN_SINCE_KEY: &str = "pcdn:orphan-since";
const REVOKED_KEY: &str = "pcdn:revoked";
const GENERATION_KEY: &str = "pcdn:generation";
const NONCE_PREFIX: &str = "pcdn:nonce:";
const POPULARITY_KEY: &str = "pcdn:popularity";
const DISK_PREFIX: &str = "pcdn:disk:";
const ASSIGN_PREFIX: &str = "pcdn:assign:";
const ASSIGNED_KEY: &str = "pcdn:assigned";
const LEAD_KEY: &str = "pcdn:placement-lead";
/// Manifests one orphan-sweep script examines (`HSCAN` count); the sweep loops over the index.
const MANIFEST_SWEEP_BATCH: usize = 500;
/// Devices one sweep script examines; the sweep loops until a batch comes back short.
const SWEEP_BATCH: usize = 500;

/// How long an assignment lasts in Redis without a round rewriting it: a day, so that a
/// tracker fleet stopped overnight does not leave assignments behind forever, while a round
/// every few seconds rewrites them long before.
const ASSIGNMENT_TTL_MS: u64 = 24 * 3600 * 1000;

/// The Redis store (`redis://host:port/db`).
pub(crate) struct RedisStore {
    connection: ConnectionManager,
    ttl_ms: u64,
    limits: StoreLimits,
    register: Script,
    heartbeat: Script,
    announce: Script,
    remove: Script,
    revoke: Script,
    sweep: Script,
    lookup: Script,
    put_manifest: Script,
    sweep_manifests: Script,
    add_lookups: Script,
    set_assignments: Script,
}

fn device_key(id: &str) -> String {
    format!("{DEVICE_PREFIX}{id}")
}

fn rank_key(content: &ContentId) -> String {
    format!("{RANK_PREFIX}{}", content_hex(content))
}

fn contents_key(id: &str) -> String {
    format!("{CONTENTS_PREFIX}{id}")
}

fn charged_key(id: &str) -> String {
    format!("{CHARGED_PREFIX}{id}")
}

fn flag(value: bool) -> &'static str {
    if value { "1" } else { "0" }
}

fn corrupt(id: &str, record: &str) -> StoreError {
    StoreError::Corrupt(format!(
        "redis key {DEVICE_PREFIX}{id} holds {record:?}, not a device record"
    ))
}

/// The first line of a device record: `sessions upload_bps healthy`.
fn encode_load(load: Load) -> String {
    format!("{} {} {}", load.sessions, load.upload_bps, flag(load.healthy))
}

/// A device record: the load line, then `addr origin upload_capacity_bps public_key` (`-` for
/// none). No field contains a space or a newline.
fn encode_device(registration: &Registration, load: Load) -> String {
    let public_key = registration.public_key.map_or_else(|| "-".to_owned(), hex::encode);
    format!(
        "{}\n{} {} {} {}",
        encode_load(load),
        registration.addr,
        flag(registration.origin),
        registration.upload_capacity_bps,
        public_key
    )
}

fn decode_device(id: &str, record: &str) -> Result<Device, StoreError> {
    let parse = || -> Option<Device> {
        let (load, registration) = record.split_once('\n')?;
        let mut load = load.split(' ');
        let mut registration = registration.split(' ');
        let load = Load {
            sessions: load.next()?.parse().ok()?,
            upload_bps: load.next()?.parse().ok()?,
            healthy: load.next()? == "1",
        };
        let registration = Registration {
            id: id.to_owned(),
            addr: registration.next()?.parse().ok()?,
            origin: registration.next()? == "1",
            upload_capacity_bps: registration.next()?.parse().ok()?,
            public_key: match registration.next()? {
                "-" => None,
                text => Some(crate::model::parse_public_key(text).ok()?),
            },
        };
        Some(Device::new(registration, load))
    };
    parse().ok_or_else(|| corrupt(id, record))
}

/// A disk report as `set_disk` writes it: `cache free` (`-` for no free figure).
fn decode_disk(id: &str, text: &str) -> Result<Disk, StoreError> {
    let parse = || -> Option<Disk> {
        let (cache, free) = text.split_once(' ')?;
        Some(Disk {
            cache_bytes: cache.parse().ok()?,
            free_bytes: match free {
                "-" => None,
                free => Some(free.parse().ok()?),
            },
        })
    };
    parse().ok_or_else(|| StoreError::Corrupt(format!("redis key {DISK_PREFIX}{id} holds {text:?}")))
}

/// The live devices among `ids`, whose records (`None` once expired) are `records`.
fn decode_devices(ids: &[String], records: Vec<Option<String>>) -> Result<Vec<Arc<Device>>, StoreError> {
    ids.iter()
        .zip(records)
        .filter_map(|(id, record)| record.map(|record| decode_device(id, &record).map(Arc::new)))
        .collect()
}

impl RedisStore {
    /// Connects to the Redis server at `url`; fails if it cannot be reached within a few seconds.
    pub(crate) async fn connect(url: &str, ttl: Duration, limits: StoreLimits) -> Result<RedisStore, StoreError> {
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(5)))
            .set_number_of_retries(2);
        let mut connection = ConnectionManager::new_with_config(client, config).await?;
        let _: String = redis::cmd("PING").query_async(&mut connection).await?;
        let rank = rank_lua(limits.spread.min_free_upload_bps);
        Ok(RedisStore {
            connection,
            ttl_ms: ttl_millis(ttl),
            limits,
            register: Script::new(&format!("{rank}{REGISTER}")),
            heartbeat: Script::new(&format!("{rank}{HEARTBEAT}")),
            announce: Script::new(&format!("{rank}{ANNOUNCE}")),
            remove: Script::new(REMOVE),
            revoke: Script::new(REVOKE),
            sweep: Script::new(SWEEP),
            lookup: Script::new(LOOKUP),
            put_manifest: Script::new(PUT_MANIFEST),
            sweep_manifests: Script::new(SWEEP_MANIFESTS),
            add_lookups: Script::new(ADD_LOOKUPS),
            set_assignments: Script::new(SET_ASSIGNMENTS),
        })
    }

    /// The `ConnectionManager` multiplexes every request over one connection, pipelining them;
    /// a clone is a cheap handle to it.
    fn connection(&self) -> ConnectionManager {
        self.connection.clone()
    }
}

impl RedisStore {
    /// The public keys of the live origins.
    async fn live_origin_keys(&self) -> Result<HashSet<[u8; 32]>, StoreError> {
        let ids: Vec<String> = self.connection().smembers(ORIGINS_KEY).await?;
        if ids.is_empty() {
            return Ok(HashSet::new());
        }
        let keys: Vec<String> = ids.iter().map(|id| device_key(id)).collect();
        let records: Vec<Option<String>> = self.connection().mget(keys).await?;
        Ok(decode_devices(&ids, records)?
            .iter()
            .filter(|device| device.registration.origin)
            .filter_map(|device| device.registration.public_key)
            .collect())
    }
}

impl Store for RedisStore {
    fn kind(&self) -> &'static str {
        "redis"
    }

    async fn register(&self, registration: Registration, now_ms: u64) -> Result<u64, StoreError> {
        let id = &registration.id;
        let generation: u64 = self
            .register
            .key(device_key(id))
            .key(contents_key(id))
            .key(ORIGINS_KEY)
            .key(LIVE_KEY)
            .key(ORIGIN_RANK_KEY)
            .key(GENERATION_KEY)
            .key(charged_key(id))
            .arg(id)
            .arg(encode_device(&registration, Load::FRESH))
            .arg(flag(registration.origin))
            .arg(self.ttl_ms)
            .arg(now_ms.saturating_add(self.ttl_ms))
            .arg(HOLDERS_PREFIX)
            .arg(RANK_PREFIX)
            .invoke_async(&mut self.connection())
            .await?;
        Ok(generation)
    }

    async fn heartbeat(&self, id: &str, load: Load, now_ms: u64) -> Result<Option<u64>, StoreError> {
        let generation: i64 = self
            .heartbeat
            .key(device_key(id))
            .key(LIVE_KEY)
            .key(contents_key(id))
            .key(ORIGIN_RANK_KEY)
            .key(GENERATION_KEY)
            .key(charged_key(id))
            .arg(encode_load(load))
            .arg(self.ttl_ms)
            .arg(now_ms.saturating_add(self.ttl_ms))
            .arg(id)
            .arg(RANK_PREFIX)
            .invoke_async(&mut self.connection())
            .await?;
        Ok(u64::try_from(generation).ok())
    }

    async fn announce(&self, id: &str, contents: Vec<ContentId>, _now_ms: u64) -> Result<Option<usize>, StoreError> {
        let unique: HashSet<ContentId> = contents.into_iter().collect();
        let mut invocation = self.announce.key(device_key(id));
        invocation
            .key(contents_key(id))
            .key(charged_key(id))
            .arg(id)
            .arg(HOLDERS_PREFIX)
            .arg(RANK_PREFIX);
        for content in &unique {
            invocation.arg(content_hex(content));
        }
        let count: i64 = invocation.invoke_async(&mut self.connection()).await?;
        Ok(usize::try_from(count).ok())
    }

    async fn remove(&self, id: &str, _now_ms: u64) -> Result<bool, StoreError> {
        let removed: i64 = self
            .remove
            .key(device_key(id))
            .key(contents_key(id))
            .key(ORIGINS_KEY)
            .key(LIVE_KEY)
            .key(ORIGIN_RANK_KEY)
            .key(charged_key(id))
            .arg(id)
            .arg(HOLDERS_PREFIX)
            .arg(RANK_PREFIX)
            .invoke_async(&mut self.connection())
            .await?;
        Ok(removed == 1)
    }

    async fn public_key(&self, id: &str, _now_ms: u64) -> Result<Option<[u8; 32]>, StoreError> {
        let record: Option<String> = self.connection().get(device_key(id)).await?;
        match record {
            Some(record) => Ok(decode_device(id, &record)?.registration.public_key),
            None => Ok(None),
        }
    }

    async fn revoke(&self, id: &str, before_ms: u64, now_ms: u64) -> Result<bool, StoreError> {
        // Recorded first: from here on the device's requests are refused, so it cannot
        // register again between the two steps.
        let _: i64 = self
            .revoke
            .key(REVOKED_KEY)
            .arg(id)
            .arg(before_ms)
            .invoke_async(&mut self.connection())
            .await?;
        self.remove(id, now_ms).await
    }

    async fn revoked_before(&self, id: &str) -> Result<Option<u64>, StoreError> {
        Ok(self.connection().hget(REVOKED_KEY, id).await?)
    }

    async fn remember_nonce(&self, key: [u8; 32], forget_at_ms: u64, now_ms: u64) -> Result<bool, StoreError> {
        let ttl_ms = forget_at_ms.saturating_sub(now_ms).max(1);
        let set: Option<String> = redis::cmd("SET")
            .arg(format!("{NONCE_PREFIX}{}", hex::encode(key)))
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms)
            .query_async(&mut self.connection())
            .await?;
        Ok(set.is_some())
    }

    async fn put_manifest(
        &self,
        content: ContentId,
        signer: [u8; 32],
        bytes: Bytes,
        _now_ms: u64,
    ) -> Result<ManifestPut, StoreError> {
        let (cid, signer) = (content_hex(&content), hex::encode(signer));
        let (stored, count, used): (i64, u64, u64) = self
            .put_manifest
            .key(format!("{MANIFEST_PREFIX}{cid}"))
            .key(MANIFEST_SIGNER_KEY)
            .key(format!("{SIGNED_PREFIX}{signer}"))
            .key(SIGNED_BYTES_KEY)
            .key(ORPHAN_SINCE_KEY)
            .arg(&cid)
            .arg(&signer)
            .arg(bytes.len())
            .arg(self.limits.manifests_per_origin)
            .arg(self.limits.manifest_bytes_per_origin)
            .arg(&bytes[..])
            .arg(SIGNED_PREFIX)
            .invoke_async(&mut self.connection())
            .await?;
        Ok(match stored {
            1 => ManifestPut::Stored,
            2 => {
                let stored: String = self.connection().hget(MANIFEST_SIGNER_KEY, &cid).await?;
                ManifestPut::SignerConflict {
                    stored: crate::model::parse_public_key(&stored).map_err(|_| {
                        StoreError::Corrupt(format!("redis hash {MANIFEST_SIGNER_KEY} holds {stored:?} for {cid}"))
                    })?,
                }
            }
            _ => ManifestPut::OverQuota { count, bytes: used },
        })
    }

    async fn get_manifest(&self, content: ContentId) -> Result<Option<Bytes>, StoreError> {
        let key = format!("{MANIFEST_PREFIX}{}", content_hex(&content));
        let bytes: Option<Vec<u8>> = self.connection().get(key).await?;
        Ok(bytes.map(Bytes::from))
    }

    async fn lookup(&self, content: ContentId, n: usize, charge_bps: u64, _now_ms: u64) -> Result<Lookup, StoreError> {
        type Reply = (Vec<String>, Vec<String>, Vec<String>, Vec<String>, Vec<String>, usize);
        let (server_ids, server_records, server_scores, origin_ids, origin_records, records_read): Reply = self
            .lookup
            .key(rank_key(&content))
            .key(ORIGIN_RANK_KEY)
            .arg(DEVICE_PREFIX)
            .arg(n)
            .arg(n.min(self.limits.max_origins))
            .arg(self.limits.lookup_slack)
            .arg(charge_bps)
            .arg(CHARGED_PREFIX)
            .arg(content_hex(&content))
            .invoke_async(&mut self.connection())
            .await?;
        let mut servers = Vec::with_capacity(server_ids.len());
        for ((id, record), score) in server_ids.iter().zip(&server_records).zip(&server_scores) {
            let device = decode_device(id, record)?;
            let score: f64 = score
                .parse()
                .map_err(|_| StoreError::Corrupt(format!("redis key {} scores {id} {score:?}", rank_key(&content))))?;
            // Scores are whole numbers below 2^53 (`model::CAP_MARK`): exact as i64.
            let key = RankKey::at(&device, score as i64);
            if device.can_serve() {
                servers.push((key, Arc::new(device)));
            }
        }
        // The scores order by rank only; the exact order breaks their ties.
        servers.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let min_free = self.limits.spread.min_free_upload_bps;
        let mut origins: Vec<(RankKey, Arc<Device>)> = origin_ids
            .iter()
            .zip(&origin_records)
            .map(|(id, record)| {
                let device = decode_device(id, record)?;
                Ok((RankKey::of(&device, 0, min_free), Arc::new(device)))
            })
            .collect::<Result<_, StoreError>>()?;
        origins.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(Lookup {
            servers: servers.into_iter().map(|(_, device)| device).collect(),
            origins: origins.into_iter().map(|(_, device)| device).collect(),
            records_read,
        })
    }

    async fn live_devices(&self, now_ms: u64) -> Result<u64, StoreError> {
        let count: u64 = self.connection().zcount(LIVE_KEY, format!("({now_ms}"), "+inf").await?;
        Ok(count)
    }

    async fn sweep(&self, now_ms: u64) -> Result<u64, StoreError> {
        let mut total = 0;
        loop {
            let (cleaned, examined): (u64, usize) = self
                .sweep
                .key(LIVE_KEY)
                .key(ORIGINS_KEY)
                .key(ORIGIN_RANK_KEY)
                .arg(now_ms)
                .arg(DEVICE_PREFIX)
                .arg(CONTENTS_PREFIX)
                .arg(HOLDERS_PREFIX)
                .arg(SWEEP_BATCH)
                .arg(RANK_PREFIX)
                .arg(CHARGED_PREFIX)
                .invoke_async(&mut self.connection())
                .await?;
            total += cleaned;
            if examined < SWEEP_BATCH {
                return Ok(total);
            }
        }
    }

    async fn sweep_manifests(&self, now_ms: u64) -> Result<u64, StoreError> {
        let live: Vec<String> = self.live_origin_keys().await?.iter().map(hex::encode).collect();
        let (mut cursor, mut total) = (0u64, 0u64);
        loop {
            let mut invocation = self.sweep_manifests.key(MANIFEST_SIGNER_KEY);
            invocation
                .key(ORPHAN_SINCE_KEY)
                .key(SIGNED_BYTES_KEY)
                .arg(cursor)
                .arg(MANIFEST_SWEEP_BATCH)
                .arg(now_ms)
                .arg(ttl_millis(self.limits.orphan_grace))
                .arg(HOLDERS_PREFIX)
                .arg(MANIFEST_PREFIX)
                .arg(SIGNED_PREFIX);
            for key in &live {
                invocation.arg(key);
            }
            let (next, deleted): (u64, u64) = invocation.invoke_async(&mut self.connection()).await?;
            total += deleted;
            if next == 0 {
                return Ok(total);
            }
            cursor = next;
        }
    }

    async fn add_lookups(
        &self,
        counts: Vec<(ContentId, u64)>,
        now_ms: u64,
        half_life_ms: u64,
    ) -> Result<(), StoreError> {
        if counts.is_empty() {
            return Ok(());
        }
        let mut invocation = self.add_lookups.key(POPULARITY_KEY);
        invocation
            .arg(now_ms)
            .arg(half_life_ms)
            .arg(self.limits.max_tracked_contents);
        for (content, count) in &counts {
            invocation.arg(content_hex(content)).arg(*count);
        }
        let _: i64 = invocation.invoke_async(&mut self.connection()).await?;
        Ok(())
    }

    async fn popular(&self, n: usize, _now_ms: u64) -> Result<Vec<(ContentId, f64)>, StoreError> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let entries: Vec<(String, f64)> = self
            .connection()
            .zrevrange_withscores(POPULARITY_KEY, 0, isize::try_from(n - 1).unwrap_or(isize::MAX))
            .await?;
        let mut popular = entries
            .into_iter()
            .map(|(hex, score)| {
                crate::model::parse_content_id(&hex)
                    .map(|content| (content, score))
                    .map_err(|_| StoreError::Corrupt(format!("redis key {POPULARITY_KEY} holds {hex:?}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        popular.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(popular)
    }

    async fn set_disk(&self, id: &str, disk: Disk, _now_ms: u64) -> Result<(), StoreError> {
        let free = disk.free_bytes.map_or_else(|| "-".to_owned(), |free| free.to_string());
        let _: () = self
            .connection()
            .pset_ex(
                format!("{DISK_PREFIX}{id}"),
                format!("{} {free}", disk.cache_bytes),
                self.ttl_ms,
            )
            .await?;
        Ok(())
    }

    async fn placement_devices(&self, now_ms: u64) -> Result<Vec<PlacedDevice>, StoreError> {
        let mut ids: Vec<String> = self
            .connection()
            .zrangebyscore(LIVE_KEY, format!("({now_ms}"), "+inf")
            .await?;
        ids.sort_unstable();
        let mut devices = Vec::with_capacity(ids.len());
        // In batches, so that one pipeline stays a few hundred commands.
        for batch in ids.chunks(SWEEP_BATCH) {
            let mut pipe = redis::pipe();
            for id in batch {
                pipe.get(device_key(id))
                    .smembers(contents_key(id))
                    .get(format!("{DISK_PREFIX}{id}"))
                    .get(format!("{ASSIGN_PREFIX}{id}"));
            }
            type Row = (Option<String>, Vec<String>, Option<String>, Option<Vec<u8>>);
            let rows: Vec<Row> = pipe.query_async(&mut self.connection()).await?;
            for (id, (record, contents, disk, assignment)) in batch.iter().zip(rows) {
                let Some(record) = record else { continue };
                let device = decode_device(id, &record)?;
                if device.registration.origin {
                    continue;
                }
                let mut contents = contents
                    .iter()
                    .map(|hex| {
                        crate::model::parse_content_id(hex)
                            .map_err(|_| StoreError::Corrupt(format!("redis set {CONTENTS_PREFIX}{id} holds {hex:?}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                contents.sort_unstable();
                devices.push(PlacedDevice {
                    device: Arc::new(device),
                    contents,
                    disk: disk.as_deref().map(|text| decode_disk(id, text)).transpose()?,
                    assignment: assignment.as_deref().map(decode_contents).transpose()?,
                });
            }
        }
        Ok(devices)
    }

    async fn set_assignments(
        &self,
        assignments: Vec<(String, Vec<ContentId>)>,
        _now_ms: u64,
    ) -> Result<(), StoreError> {
        let mut invocation = self.set_assignments.key(ASSIGNED_KEY);
        invocation.arg(ASSIGN_PREFIX).arg(ASSIGNMENT_TTL_MS);
        for (id, contents) in &assignments {
            invocation.arg(id).arg(encode_contents(contents));
        }
        let _: i64 = invocation.invoke_async(&mut self.connection()).await?;
        Ok(())
    }

    async fn assignment(&self, id: &str) -> Result<Option<Vec<ContentId>>, StoreError> {
        let bytes: Option<Vec<u8>> = self.connection().get(format!("{ASSIGN_PREFIX}{id}")).await?;
        bytes.as_deref().map(decode_contents).transpose()
    }

    async fn report(
        &self,
        id: &str,
        reporter: &str,
        now_ms: u64,
        window_ms: u64,
        max_reporters: usize,
    ) -> Result<Vec<u64>, StoreError> {
        let key = format!("{REPORTS_PREFIX}{id}");
        let since = now_ms.saturating_sub(window_ms);
        let (times,): (Vec<(String, u64)>,) = redis::pipe()
            .atomic()
            .zadd(&key, reporter, now_ms)
            .ignore()
            .zrembyscore(&key, "-inf", since)
            .ignore()
            .zremrangebyrank(&key, 0, -(max_reporters.max(1) as isize) - 1)
            .ignore()
            .pexpire(&key, window_ms.max(1) as i64)
            .ignore()
            .zadd(REPORTED_KEY, id, now_ms)
            .ignore()
            .zrembyscore(REPORTED_KEY, "-inf", since)
            .ignore()
            .zrevrange_withscores(&key, 0, -1)
            .query_async(&mut self.connection())
            .await?;
        Ok(times.into_iter().map(|(_, at)| at).collect())
    }

    async fn reports(&self, now_ms: u64, window_ms: u64) -> Result<Vec<(String, Vec<u64>)>, StoreError> {
        let since = now_ms.saturating_sub(window_ms);
        let mut connection = self.connection();
        let ids: Vec<String> = connection
            .zrangebyscore(REPORTED_KEY, format!("({since}"), "+inf")
            .await?;
        let mut reports = Vec::with_capacity(ids.len());
        for id in ids {
            let times: Vec<(String, u64)> = connection
                .zrevrangebyscore_withscores(format!("{REPORTS_PREFIX}{id}"), "+inf", format!("({since}"))
                .await?;
            if !times.is_empty() {
                reports.push((id, times.into_iter().map(|(_, at)| at).collect()));
            }
        }
        reports.sort();
        Ok(reports)
    }

    async fn clear_reports(&self, id: &str) -> Result<bool, StoreError> {
        let (deleted,): (u64,) = redis::pipe()
            .atomic()
            .del(format!("{REPORTS_PREFIX}{id}"))
            .zrem(REPORTED_KEY, id)
            .ignore()
            .query_async(&mut self.connection())
            .await?;
        Ok(deleted > 0)
    }

    async fn lead_round(&self, hold_ms: u64, _now_ms: u64) -> Result<bool, StoreError> {
        let set: Option<String> = redis::cmd("SET")
            .arg(LEAD_KEY)
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(hold_ms.max(1))
            .query_async(&mut self.connection())
            .await?;
        Ok(set.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_records_round_trip() {
        let load = Load {
            sessions: 3,
            upload_bps: u64::MAX,
            healthy: false,
        };
        for (addr, origin, public_key) in [
            ("127.0.0.1:7901", false, None),
            ("[2001:db8::1]:7901", true, Some([9; 32])),
        ] {
            let registration = Registration {
                id: "edge-1".into(),
                addr: addr.parse().unwrap(),
                origin,
                upload_capacity_bps: 4_000_000,
                public_key,
            };
            let record = encode_device(&registration, load);
            assert_eq!(
                decode_device("edge-1", &record).unwrap(),
                Device::new(registration, load)
            );
        }
        for bad in [
            "",
            "1 2 1",
            "1 2 1\n127.0.0.1:1 0 x -",
            "x 2 1\n127.0.0.1:1 0 5 -",
            "1 2 1\nnot-an-addr 0 5 -",
        ] {
            let error = decode_device("edge-1", bad).unwrap_err().to_string();
            assert!(error.contains("pcdn:dev:edge-1"), "{error}");
        }
    }
}
