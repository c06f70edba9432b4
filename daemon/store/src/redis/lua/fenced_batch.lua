-- The fenced batch (ARCHITECTURE.md, "The lease store"; the fencing-records source): the lease
-- fence, the expected revisions, then all writes or none. Redis runs a script atomically
-- but does not roll one back, so every check that can fail runs before the first write:
-- the fence, the revisions, the key types, the revision counter, the log stream's room for
-- one more ID and the user's permissions. A refusal leaves every key unchanged.
-- It is built with a `#!lua` shebang and `write_checks.lua` in front (redis/mod.rs): the
-- shebang declares it as writing, so Redis itself refuses it before it runs on a replica
-- (READONLY), on a primary short of min-replicas-to-write (NOREPLICAS) and under maxmemory
-- (OOM).
--
-- KEYS[1] meta hash, KEYS[2] revision counter, KEYS[3] log stream, KEYS[4] the set of the
-- board's section names, then the section hashes the writes name and, on standalone Redis
-- only, the document layout's shared hash (stamped so its watchers see records writes).
-- ARGV[1] header: a JSON object {"fence": {"owner","epoch","now_ms"} | absent,
--         "expected_revision": n | absent, "owner": "<fence owner or ''>", "log_cap": n,
--         "stamp": {"key": <index into KEYS>, "field": "<board>:records"} | absent,
--         "route": "<board>" | absent, "min_revision": n | absent,
--         "document": {"field": "<board>", "value": "<document JSON>"} | absent}
--         With "route", a board that has a document in the stamped hash and is not marked
--         as migrated is refused with FENCE_DOCUMENT (nothing written): the Redis store
--         then writes the document instead. The migration's own batch carries no "route".
-- ARGV[2..] five per write: kind (put|delete|check), index into KEYS of its section,
--         field, expected revision (EXPECT_BLIND = skip the check, 0 = absent, n = at
--         revision n; from `Expected` in Rust), value JSON (put only).
--         With "min_revision", the batch commits at max(revision + 1, min_revision).
--         With "document" (a migration), that document is written to the stamped hash's
--         field in the same script, so the records and the moved document commit together.
-- Returns the revision the batch committed at; errors FENCE_STALE <why>,
-- FENCE_CONFLICT <section/key>, FENCE_CORRUPT <why> (a key row-fence did not write) or
-- NOPERM <why> (the user may not run a write the batch needs), all before any write.

local header = cjson.decode(ARGV[1])

-- The revision of a stored record: row-fence writes {"r":<n>,"v":...}, so a pattern match
-- avoids decoding a large value; anything else is decoded.
local function revision_of(raw)
  if not raw then return 0 end
  local r = string.match(raw, '^{"r":(%d+),')
  if r then return tonumber(r) end
  local ok, decoded = pcall(cjson.decode, raw)
  if ok and type(decoded) == 'table' and tonumber(decoded.r) then return tonumber(decoded.r) end
  return -2 -- never equal to an expected revision: a malformed record always conflicts
end

local function section_of(key)
  return string.match(key, ':fence:([^:]+)$') or key
end

local function marked_records()
  local layout = redis.call('HGET', KEYS[1], META.layout)
  return layout and string.find(layout, '"v":"' .. LAYOUT.records .. '"', 1, true)
end

if type(header.route) == 'string' and type(header.stamp) == 'table' then
  if redis.call('HEXISTS', KEYS[tonumber(header.stamp.key)], header.route) == 1 and not marked_records() then
    return redis.error_reply('FENCE_DOCUMENT the board is in the document layout')
  end
end

local fence = header.fence
if type(fence) == 'table' then
  local raw = redis.call('HGET', KEYS[1], META.lease)
  if not raw then return redis.error_reply('FENCE_STALE the board has no controller lease') end
  local ok, record = pcall(cjson.decode, raw)
  local lease = ok and type(record) == 'table' and record.v or nil
  if type(lease) ~= 'table' then return redis.error_reply('FENCE_STALE the controller lease is malformed') end
  if fence.owner ~= '' and lease.owner ~= fence.owner then
    return redis.error_reply('FENCE_STALE the controller lease is held by ' .. tostring(lease.owner))
  end
  if tonumber(lease.epoch) ~= tonumber(fence.epoch) then
    return redis.error_reply('FENCE_STALE the controller lease is at epoch ' .. tostring(lease.epoch))
  end
  if tonumber(lease.expires_at_ms) <= tonumber(fence.now_ms) then
    return redis.error_reply('FENCE_STALE the controller lease expired')
  end
end

-- JSON null decodes to cjson.null, which is truthy: read optional numbers with tonumber.
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
local expected_revision = tonumber(header.expected_revision)
if expected_revision and expected_revision ~= current then
  return redis.error_reply('FENCE_CONFLICT revision')
end

local count = (#ARGV - 1) / 5
for i = 0, count - 1 do
  local base = 2 + i * 5
  local expected = tonumber(ARGV[base + 3])
  if expected ~= EXPECT_BLIND then
    local section_key = KEYS[tonumber(ARGV[base + 1])]
    local have = revision_of(redis.call('HGET', section_key, ARGV[base + 2]))
    if have ~= expected then
      return redis.error_reply('FENCE_CONFLICT ' .. section_of(section_key) .. '/' .. ARGV[base + 2])
    end
  end
end

local failed = expect_type(KEYS[2], 'string') or expect_type(KEYS[3], 'stream')
  or expect_type(KEYS[4], 'set') or may('INCR', KEYS[2]) or may('SET', KEYS[2], '1')
  or may('XADD', KEYS[3], 'MAXLEN', '1', '*', 'f', 'v') or may('SADD', KEYS[4], 'm')
if failed then return failed end
for i = 0, count - 1 do
  local base = 2 + i * 5
  local section_key = KEYS[tonumber(ARGV[base + 1])]
  failed = expect_type(section_key, 'hash') or may('HSET', section_key, 'f', 'v')
    or may('HDEL', section_key, 'f')
  if failed then return failed end
end
if type(header.stamp) == 'table' then
  local stamp_key = KEYS[tonumber(header.stamp.key)]
  failed = expect_type(stamp_key, 'hash') or may('HSET', stamp_key, 'f', 'v')
  if failed then return failed end
end
local raw_revision = redis.call('GET', KEYS[2])
if raw_revision and not string.match(raw_revision, '^%d+$') then
  return redis.error_reply('FENCE_CORRUPT the board revision is ' .. raw_revision)
end
-- Lua prints numbers with 14 significant digits: a revision must stay below 10^14 to be
-- written back exactly (into records, the log and the counter itself).
if current >= 99999999999999 or (tonumber(header.min_revision) or 0) >= 99999999999999 then
  return redis.error_reply('FENCE_CORRUPT the board revision ' .. raw_revision .. ' is at its limit')
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[3])
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' and info[i + 1] == '18446744073709551615-18446744073709551615' then
      return redis.error_reply('FENCE_CORRUPT the fence log stream ' .. KEYS[3] .. ' has used its last possible ID; trim or delete it')
    end
  end
end

local revision
local min_revision = tonumber(header.min_revision)
if min_revision and min_revision > current + 1 then
  redis.call('SET', KEYS[2], min_revision)
  revision = min_revision
else
  revision = redis.call('INCR', KEYS[2])
end
for i = 0, count - 1 do
  local base = 2 + i * 5
  local kind = ARGV[base]
  local section_key = KEYS[tonumber(ARGV[base + 1])]
  if kind == 'put' then
    redis.call('HSET', section_key, ARGV[base + 2], '{"r":' .. revision .. ',"v":' .. ARGV[base + 4] .. '}')
    redis.call('SADD', KEYS[4], section_of(section_key))
  elseif kind == 'delete' then
    redis.call('HDEL', section_key, ARGV[base + 2])
  end
end
if type(header.stamp) == 'table' then
  redis.call('HSET', KEYS[tonumber(header.stamp.key)], header.stamp.field, revision)
  if type(header.document) == 'table' then
    redis.call('HSET', KEYS[tonumber(header.stamp.key)], header.document.field, header.document.value)
  end
end
redis.call('XADD', KEYS[3], 'MAXLEN', tonumber(header.log_cap), '*',
  'revision', revision, 'owner', header.owner or '', 'records', count)
return revision
