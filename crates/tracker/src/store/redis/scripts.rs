//! The Lua scripts the Redis store runs atomically on the server (one round trip each), with
//! the keys and arguments each takes.

/// Lua shared by the scripts that rank devices, after `local MIN_FREE = <bit/s>` (`rank_lua`):
/// the score of a device record in `rank:` and `origin-rank` (lower first), `model::rank_load`
/// with nothing pending: minus the free upload capacity when it is at least `MIN_FREE`,
/// `CAP` minus it when less (at its cap), `2 × CAP` when unhealthy; `nil` for a record that
/// cannot be read. The second result tells whether it is an origin. Lookups add their charges
/// to the scores in `rank:` (`ZINCRBY`); heartbeats set them back.
const RANK_SCORE: &str = r"
local CAP = 4503599627370496
local function rank_score(record)
  if not record then return nil, false end
  local upload, healthy, origin, capacity =
    string.match(record, '^%d+ (%d+) ([01])\n%S+ ([01]) (%d+) ')
  if not upload then return nil, false end
  if healthy ~= '1' then return 2 * CAP, origin == '1' end
  local free = math.min(math.max(tonumber(capacity) - tonumber(upload), 0), CAP - 1)
  if free < MIN_FREE then return CAP - free, origin == '1' end
  return -free, origin == '1'
end
-- The score of a device in its contents' rankings: nil unless it can serve (healthy, not an origin).
local function server_score(record)
  local score, origin = rank_score(record)
  if origin or score == nil or score >= 2 * CAP then return nil end
  return score
end
";

/// `RANK_SCORE` for devices at their cap below `min_free_bps` (`Spread::min_free_upload_bps`).
pub(super) fn rank_lua(min_free_bps: u64) -> String {
    format!("local MIN_FREE = {min_free_bps}\n{RANK_SCORE}")
}

/// KEYS: dev, contents, origins, live, origin-rank, generation, charged. ARGV: id, device text,
/// origin, ttl_ms, deadline_ms, holders prefix, rank prefix. Returns the new registration
/// generation.
pub(super) const REGISTER: &str = r"
local id = ARGV[1]
for _, content in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  redis.call('SREM', ARGV[6] .. content, id)
  redis.call('ZREM', ARGV[7] .. content, id)
end
redis.call('DEL', KEYS[2], KEYS[7])
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])
if ARGV[3] == '1' then
  redis.call('SADD', KEYS[3], id)
  redis.call('ZADD', KEYS[5], (rank_score(ARGV[2])), id)
else
  redis.call('SREM', KEYS[3], id)
  redis.call('ZREM', KEYS[5], id)
end
redis.call('ZADD', KEYS[4], ARGV[5], id)
return redis.call('HINCRBY', KEYS[6], id, 1)
";

/// KEYS: dev, live, contents, origin-rank, generation, charged. ARGV: load line, ttl_ms,
/// deadline_ms, id, rank prefix. Returns the record's registration generation, -1 if there is
/// no record. Replaces the first line (the load) and keeps the second (the registration); moves
/// the device in the rankings it is in when its score changed, else only in those whose
/// lookups charged it since its last heartbeat (`charged`), clearing the charges.
pub(super) const HEARTBEAT: &str = r"
local device = redis.call('GET', KEYS[1])
if not device then return -1 end
local newline = string.find(device, '\n', 1, true)
if not newline then return redis.error_reply('corrupt device record ' .. KEYS[1]) end
local record = ARGV[1] .. string.sub(device, newline)
redis.call('SET', KEYS[1], record, 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
local old, origin = rank_score(device)
local new = rank_score(record)
if old ~= new then
  if origin then
    redis.call('ZADD', KEYS[4], new, ARGV[4])
  else
    local score = server_score(record)
    for _, content in ipairs(redis.call('SMEMBERS', KEYS[3])) do
      if score then
        redis.call('ZADD', ARGV[5] .. content, score, ARGV[4])
      else
        redis.call('ZREM', ARGV[5] .. content, ARGV[4])
      end
    end
  end
elseif not origin then
  local score = server_score(record)
  if score then
    for _, content in ipairs(redis.call('SMEMBERS', KEYS[6])) do
      redis.call('ZADD', ARGV[5] .. content, 'XX', score, ARGV[4])
    end
  end
end
redis.call('DEL', KEYS[6])
return tonumber(redis.call('HGET', KEYS[5], ARGV[4]) or '0')
";

/// KEYS: ranking of the content, origin-rank. ARGV: device prefix, servers wanted, origins
/// wanted, slack, charge bit/s, charged prefix, content hex. Reads each ranking in order until
/// it has the number wanted of live devices or has read that many plus the slack (entries of
/// devices expired since the last sweep); among servers, stops at the first at its cap
/// (score ≥ CAP / 2, `model::RankKey::at_cap`) once one with room is found. Charges each
/// server found an equal share of the charge (`ZINCRBY`) and notes the content in its
/// `charged:{id}` for its next heartbeat to clear. Returns {server ids, their records, their
/// scores before the charge, origin ids, their records, records read}.
pub(super) const LOOKUP: &str = r"
local CAP = 4503599627370496
local read = 0
local function first_live(key, want, servers)
  local ids, records, scores = {}, {}, {}
  if want <= 0 then return ids, records, scores end
  local entries = redis.call('ZRANGE', key, 0, want + tonumber(ARGV[4]) - 1, 'WITHSCORES')
  local room = false
  for i = 1, #entries, 2 do
    local capped = tonumber(entries[i + 1]) >= CAP / 2
    if #ids == want or (servers and room and capped) then break end
    read = read + 1
    local record = redis.call('GET', ARGV[1] .. entries[i])
    if record then
      ids[#ids + 1] = entries[i]
      records[#records + 1] = record
      scores[#scores + 1] = entries[i + 1]
      if not capped then room = true end
    end
  end
  return ids, records, scores
end
local servers, server_records, server_scores = first_live(KEYS[1], tonumber(ARGV[2]), true)
local charge = tonumber(ARGV[5])
if charge > 0 and #servers > 0 then
  local share = math.ceil(charge / #servers)
  for _, id in ipairs(servers) do
    redis.call('ZINCRBY', KEYS[1], share, id)
    redis.call('SADD', ARGV[6] .. id, ARGV[7])
  end
end
local origins, origin_records = first_live(KEYS[2], tonumber(ARGV[3]), false)
return {servers, server_records, server_scores, origins, origin_records, read}
";

/// KEYS: dev, contents, charged. ARGV: id, holders prefix, rank prefix, content hex ids...
/// The device enters its contents' rankings uncharged.
pub(super) const ANNOUNCE: &str = r"
local device = redis.call('GET', KEYS[1])
if not device then return -1 end
local id = ARGV[1]
for _, content in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  redis.call('SREM', ARGV[2] .. content, id)
  redis.call('ZREM', ARGV[3] .. content, id)
end
redis.call('DEL', KEYS[2], KEYS[3])
local score = server_score(device)
for i = 4, #ARGV do
  redis.call('SADD', KEYS[2], ARGV[i])
  redis.call('SADD', ARGV[2] .. ARGV[i], id)
  if score then redis.call('ZADD', ARGV[3] .. ARGV[i], score, id) end
end
return #ARGV - 3
";

/// KEYS: dev, contents, origins, live, origin-rank, charged. ARGV: id, holders prefix, rank
/// prefix.
pub(super) const REMOVE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local id = ARGV[1]
for _, content in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  redis.call('SREM', ARGV[2] .. content, id)
  redis.call('ZREM', ARGV[3] .. content, id)
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[6])
redis.call('SREM', KEYS[3], id)
redis.call('ZREM', KEYS[4], id)
redis.call('ZREM', KEYS[5], id)
return 1
";

/// KEYS: live, origins, origin-rank. ARGV: now_ms, device prefix, contents prefix, holders
/// prefix, batch, rank prefix, charged prefix.
/// Cleans up the devices whose deadline passed and whose `dev:` key Redis has expired; returns
/// {cleaned, examined}. A device whose key still exists (the deadline was written by an instance
/// whose clock runs ahead) gets its deadline moved to when Redis will expire it, so it does not
/// block the batch.
pub(super) const SWEEP: &str = r"
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[5]))
local cleaned = 0
for _, id in ipairs(ids) do
  local ttl = redis.call('PTTL', ARGV[2] .. id)
  if ttl == -2 then
    local contents = ARGV[3] .. id
    for _, content in ipairs(redis.call('SMEMBERS', contents)) do
      redis.call('SREM', ARGV[4] .. content, id)
      redis.call('ZREM', ARGV[6] .. content, id)
    end
    redis.call('DEL', contents, ARGV[7] .. id)
    redis.call('SREM', KEYS[2], id)
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZREM', KEYS[3], id)
    cleaned = cleaned + 1
  else
    redis.call('ZADD', KEYS[1], tonumber(ARGV[1]) + math.max(ttl, 1), id)
  end
end
return {cleaned, #ids}
";

/// KEYS: revoked. ARGV: id, before_ms. Records the revocation, never moving it back.
pub(super) const REVOKE: &str = r"
local previous = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) > previous then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 1
";

/// KEYS: manifest, manifest-signer, signed:{signer}, signed-bytes, orphan-since. ARGV: content
/// hex, signer hex, size, max count, max bytes, manifest bytes, signed prefix. Stores the
/// manifest unless another signer's is stored (returns {2, 0, 0}) or the signer's quota would
/// be passed (returns {0, count, bytes}); else returns {1, count, bytes}, the signer's manifests
/// and bytes besides this one.
pub(super) const PUT_MANIFEST: &str = r"
local cid, signer, size = ARGV[1], ARGV[2], tonumber(ARGV[3])
local previous = redis.call('HGET', KEYS[2], cid)
if previous and previous ~= signer then return {2, 0, 0} end
local count = redis.call('ZCARD', KEYS[3])
local used = tonumber(redis.call('HGET', KEYS[4], signer) or '0')
local same = redis.call('ZSCORE', KEYS[3], cid)
if same then
  count = count - 1
  used = used - tonumber(same)
end
if count + 1 > tonumber(ARGV[4]) or used + size > tonumber(ARGV[5]) then return {0, count, used} end
redis.call('ZADD', KEYS[3], size, cid)
redis.call('HSET', KEYS[4], signer, used + size)
redis.call('HSET', KEYS[2], cid, signer)
redis.call('HDEL', KEYS[5], cid)
redis.call('SET', KEYS[1], ARGV[6])
return {1, count, used}
";

/// KEYS: manifest-signer, orphan-since, signed-bytes. ARGV: cursor, batch, now_ms, grace_ms,
/// holders prefix, manifest prefix, signed prefix, then the key hex of every live origin.
/// One `HSCAN` step over the manifests: unmarks the held ones (a device announced it, or a
/// live origin has the signer's key), marks new orphans, deletes orphans older than the grace.
/// Returns {next cursor, deleted}.
pub(super) const SWEEP_MANIFESTS: &str = r"
local live = {}
for i = 8, #ARGV do live[ARGV[i]] = true end
local scan = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', tonumber(ARGV[2]))
local entries = scan[2]
local now, deleted = tonumber(ARGV[3]), 0
for i = 1, #entries, 2 do
  local cid, signer = entries[i], entries[i + 1]
  if live[signer] or redis.call('SCARD', ARGV[5] .. cid) > 0 then
    redis.call('HDEL', KEYS[2], cid)
  else
    local since = redis.call('HGET', KEYS[2], cid)
    if not since then
      redis.call('HSET', KEYS[2], cid, ARGV[3])
    elseif now - tonumber(since) >= tonumber(ARGV[4]) then
      redis.call('DEL', ARGV[6] .. cid)
      redis.call('HDEL', KEYS[1], cid)
      redis.call('HDEL', KEYS[2], cid)
      local size = redis.call('ZSCORE', ARGV[7] .. signer, cid)
      redis.call('ZREM', ARGV[7] .. signer, cid)
      if size then redis.call('HINCRBY', KEYS[3], signer, -tonumber(size)) end
      deleted = deleted + 1
    end
  end
end
return {scan[1], deleted}
";

/// KEYS: popularity. ARGV: now_ms, half_life_ms, max tracked, then content hex and count
/// pairs. Adds the counts to the log-scores (`popularity::add`, the same formula), then drops
/// the lowest scores beyond the maximum.
pub(super) const ADD_LOOKUPS: &str = r"
local clock = tonumber(ARGV[1]) / tonumber(ARGV[2])
for i = 4, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  local value = tonumber(ARGV[i + 1])
  if score then value = value + 2 ^ (tonumber(score) - clock) end
  redis.call('ZADD', KEYS[1], string.format('%.17g', math.log(value) / math.log(2) + clock), ARGV[i])
end
local extra = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[3])
if extra > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, extra - 1) end
return 1
";

/// KEYS: assigned. ARGV: assign prefix, ttl_ms, then device id and assignment pairs. Replaces
/// every assignment: deletes those of devices not listed.
pub(super) const SET_ASSIGNMENTS: &str = r"
local listed = {}
for i = 3, #ARGV, 2 do listed[ARGV[i]] = true end
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if not listed[id] then redis.call('DEL', ARGV[1] .. id) end
end
redis.call('DEL', KEYS[1])
for i = 3, #ARGV, 2 do
  redis.call('SET', ARGV[1] .. ARGV[i], ARGV[i + 1], 'PX', ARGV[2])
  redis.call('SADD', KEYS[1], ARGV[i])
end
return 1
";
