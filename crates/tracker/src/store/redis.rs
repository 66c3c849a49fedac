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
//! - `origins`: set of origin device ids.
//! - `live`: sorted set of device id → expiry deadline (Unix ms), used only to find expired
//!   devices to clean up and to count live devices.
//! - `manifest:{content hex}`: the signed manifest bytes.
//!
//! Every operation that touches several keys is one Lua script, atomic across instances. A
//! lookup is one script, so one round trip: the holders and origins and an `MGET` of their
//! devices; the tracker ranks them and renders only the `n` it returns.

use super::{Store, StoreError, ttl_millis};
use crate::model::{Device, Load, Lookup, Registration, content_hex, top_servers};
use bytes::Bytes;
use pcdn_core::wire::ContentId;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, Script};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

const DEVICE_PREFIX: &str = "pcdn:dev:";
const CONTENTS_PREFIX: &str = "pcdn:contents:";
const HOLDERS_PREFIX: &str = "pcdn:holders:";
const MANIFEST_PREFIX: &str = "pcdn:manifest:";
const ORIGINS_KEY: &str = "pcdn:origins";
const LIVE_KEY: &str = "pcdn:live";
/// Devices one sweep script examines; the sweep loops until a batch comes back short.
const SWEEP_BATCH: usize = 500;
/// Most keys one `MGET` inside a script asks for (Lua's `unpack` has a stack limit).
const MGET_BATCH: usize = 1000;

/// KEYS: dev, contents, origins, live. ARGV: id, device text, origin, ttl_ms, deadline_ms,
/// holders prefix.
const REGISTER: &str = r"
local id = ARGV[1]
for _, content in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  redis.call('SREM', ARGV[6] .. content, id)
end
redis.call('DEL', KEYS[2])
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])
if ARGV[3] == '1' then redis.call('SADD', KEYS[3], id) else redis.call('SREM', KEYS[3], id) end
redis.call('ZADD', KEYS[4], ARGV[5], id)
return 1
";

/// KEYS: dev, live. ARGV: load line, ttl_ms, deadline_ms, id. Replaces the first line (the
/// load) and keeps the second (the registration).
const HEARTBEAT: &str = r"
local device = redis.call('GET', KEYS[1])
if not device then return 0 end
local newline = string.find(device, '\n', 1, true)
if not newline then return redis.error_reply('corrupt device record ' .. KEYS[1]) end
redis.call('SET', KEYS[1], ARGV[1] .. string.sub(device, newline), 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
return 1
";

/// KEYS: holders of the content, origins. ARGV: device prefix, MGET batch.
/// Returns {holder ids, their device records, origin ids, their device records}; a record is
/// nil where the device expired.
const LOOKUP: &str = r"
local function devices(ids)
  local records = {}
  local batch = tonumber(ARGV[2])
  for first = 1, #ids, batch do
    local keys = {}
    for i = first, math.min(first + batch - 1, #ids) do keys[#keys + 1] = ARGV[1] .. ids[i] end
    for _, record in ipairs(redis.call('MGET', unpack(keys))) do records[#records + 1] = record end
  end
  return records
end
local holders = redis.call('SMEMBERS', KEYS[1])
local origins = redis.call('SMEMBERS', KEYS[2])
return {holders, devices(holders), origins, devices(origins)}
";

/// KEYS: dev, contents. ARGV: id, holders prefix, content hex ids...
const ANNOUNCE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local id = ARGV[1]
for _, content in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  redis.call('SREM', ARGV[2] .. content, id)
end
redis.call('DEL', KEYS[2])
for i = 3, #ARGV do
  redis.call('SADD', KEYS[2], ARGV[i])
  redis.call('SADD', ARGV[2] .. ARGV[i], id)
end
return #ARGV - 2
";

/// KEYS: dev, contents, origins, live. ARGV: id, holders prefix.
const REMOVE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local id = ARGV[1]
for _, content in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  redis.call('SREM', ARGV[2] .. content, id)
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SREM', KEYS[3], id)
redis.call('ZREM', KEYS[4], id)
return 1
";

/// KEYS: live, origins. ARGV: now_ms, device prefix, contents prefix, holders prefix, batch.
/// Cleans up the devices whose deadline passed and whose `dev:` key Redis has expired; returns
/// {cleaned, examined}. A device whose key still exists (the deadline was written by an instance
/// whose clock runs ahead) gets its deadline moved to when Redis will expire it, so it does not
/// block the batch.
const SWEEP: &str = r"
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[5]))
local cleaned = 0
for _, id in ipairs(ids) do
  local ttl = redis.call('PTTL', ARGV[2] .. id)
  if ttl == -2 then
    local contents = ARGV[3] .. id
    for _, content in ipairs(redis.call('SMEMBERS', contents)) do
      redis.call('SREM', ARGV[4] .. content, id)
    end
    redis.call('DEL', contents)
    redis.call('SREM', KEYS[2], id)
    redis.call('ZREM', KEYS[1], id)
    cleaned = cleaned + 1
  else
    redis.call('ZADD', KEYS[1], tonumber(ARGV[1]) + math.max(ttl, 1), id)
  end
end
return {cleaned, #ids}
";

/// The Redis store (`redis://host:port/db`).
pub(crate) struct RedisStore {
    connection: ConnectionManager,
    ttl_ms: u64,
    register: Script,
    heartbeat: Script,
    announce: Script,
    remove: Script,
    sweep: Script,
    lookup: Script,
}

fn device_key(id: &str) -> String {
    format!("{DEVICE_PREFIX}{id}")
}

fn contents_key(id: &str) -> String {
    format!("{CONTENTS_PREFIX}{id}")
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

/// The live devices among `ids`, whose records (`None` once expired) are `records`.
fn decode_devices(ids: &[String], records: Vec<Option<String>>) -> Result<Vec<Arc<Device>>, StoreError> {
    ids.iter()
        .zip(records)
        .filter_map(|(id, record)| record.map(|record| decode_device(id, &record).map(Arc::new)))
        .collect()
}

impl RedisStore {
    /// Connects to the Redis server at `url`; fails if it cannot be reached within a few seconds.
    pub(crate) async fn connect(url: &str, ttl: Duration) -> Result<RedisStore, StoreError> {
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(5)))
            .set_number_of_retries(2);
        let mut connection = ConnectionManager::new_with_config(client, config).await?;
        let _: String = redis::cmd("PING").query_async(&mut connection).await?;
        Ok(RedisStore {
            connection,
            ttl_ms: ttl_millis(ttl),
            register: Script::new(REGISTER),
            heartbeat: Script::new(HEARTBEAT),
            announce: Script::new(ANNOUNCE),
            remove: Script::new(REMOVE),
            sweep: Script::new(SWEEP),
            lookup: Script::new(LOOKUP),
        })
    }

    /// The `ConnectionManager` multiplexes every request over one connection, pipelining them;
    /// a clone is a cheap handle to it.
    fn connection(&self) -> ConnectionManager {
        self.connection.clone()
    }

    /// The holders of `content` and every origin, live ones only, in one round trip.
    async fn holders_and_origins(
        &self,
        content: &ContentId,
    ) -> Result<(Vec<Arc<Device>>, Vec<Arc<Device>>), StoreError> {
        type Reply = (Vec<String>, Vec<Option<String>>, Vec<String>, Vec<Option<String>>);
        let (holders, holder_records, origins, origin_records): Reply = self
            .lookup
            .key(format!("{HOLDERS_PREFIX}{}", content_hex(content)))
            .key(ORIGINS_KEY)
            .arg(DEVICE_PREFIX)
            .arg(MGET_BATCH)
            .invoke_async(&mut self.connection())
            .await?;
        Ok((
            decode_devices(&holders, holder_records)?,
            decode_devices(&origins, origin_records)?,
        ))
    }
}

impl Store for RedisStore {
    fn kind(&self) -> &'static str {
        "redis"
    }

    async fn register(&self, registration: Registration, now_ms: u64) -> Result<(), StoreError> {
        let id = &registration.id;
        let _: i64 = self
            .register
            .key(device_key(id))
            .key(contents_key(id))
            .key(ORIGINS_KEY)
            .key(LIVE_KEY)
            .arg(id)
            .arg(encode_device(&registration, Load::FRESH))
            .arg(flag(registration.origin))
            .arg(self.ttl_ms)
            .arg(now_ms.saturating_add(self.ttl_ms))
            .arg(HOLDERS_PREFIX)
            .invoke_async(&mut self.connection())
            .await?;
        Ok(())
    }

    async fn heartbeat(&self, id: &str, load: Load, now_ms: u64) -> Result<bool, StoreError> {
        let found: i64 = self
            .heartbeat
            .key(device_key(id))
            .key(LIVE_KEY)
            .arg(encode_load(load))
            .arg(self.ttl_ms)
            .arg(now_ms.saturating_add(self.ttl_ms))
            .arg(id)
            .invoke_async(&mut self.connection())
            .await?;
        Ok(found == 1)
    }

    async fn announce(&self, id: &str, contents: Vec<ContentId>, _now_ms: u64) -> Result<Option<usize>, StoreError> {
        let unique: HashSet<ContentId> = contents.into_iter().collect();
        let mut invocation = self.announce.key(device_key(id));
        invocation.key(contents_key(id)).arg(id).arg(HOLDERS_PREFIX);
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
            .arg(id)
            .arg(HOLDERS_PREFIX)
            .invoke_async(&mut self.connection())
            .await?;
        Ok(removed == 1)
    }

    async fn is_origin_key(&self, key: &[u8; 32], _now_ms: u64) -> Result<bool, StoreError> {
        let ids: Vec<String> = self.connection().smembers(ORIGINS_KEY).await?;
        if ids.is_empty() {
            return Ok(false);
        }
        let keys: Vec<String> = ids.iter().map(|id| device_key(id)).collect();
        let records: Vec<Option<String>> = self.connection().mget(keys).await?;
        Ok(decode_devices(&ids, records)?
            .iter()
            .any(|device| device.registration.origin && device.registration.public_key.as_ref() == Some(key)))
    }

    async fn put_manifest(&self, content: ContentId, bytes: Bytes) -> Result<(), StoreError> {
        let key = format!("{MANIFEST_PREFIX}{}", content_hex(&content));
        let () = self.connection().set(key, &bytes[..]).await?;
        Ok(())
    }

    async fn get_manifest(&self, content: ContentId) -> Result<Option<Bytes>, StoreError> {
        let key = format!("{MANIFEST_PREFIX}{}", content_hex(&content));
        let bytes: Option<Vec<u8>> = self.connection().get(key).await?;
        Ok(bytes.map(Bytes::from))
    }

    async fn lookup(&self, content: ContentId, n: usize, _now_ms: u64) -> Result<Lookup, StoreError> {
        let (holders, mut origins) = self.holders_and_origins(&content).await?;
        origins.sort_unstable_by(|a, b| a.registration.id.cmp(&b.registration.id));
        let servers = top_servers(holders.iter().filter(|device| device.can_serve()), n);
        Ok(Lookup { servers, origins })
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
                .arg(now_ms)
                .arg(DEVICE_PREFIX)
                .arg(CONTENTS_PREFIX)
                .arg(HOLDERS_PREFIX)
                .arg(SWEEP_BATCH)
                .invoke_async(&mut self.connection())
                .await?;
            total += cleaned;
            if examined < SWEEP_BATCH {
                return Ok(total);
            }
        }
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
