#!lua
-- The ask (DESIGN.md, "The lease store"): judges one row lease atomically with the Redis
-- server's clock, never the daemon's, and appends the verdict to the capped asks stream.
-- The shebang declares the script as writing, so Redis itself refuses it, before it reads
-- anything and at no extra cost, on a read-only replica (READONLY) and on a primary with
-- fewer good replicas than its min-replicas-to-write (NOREPLICAS): a primary deposed by a
-- failover stops answering from its old history.
-- The rule is the same as `store::judge` in Rust: holder, then generation, then expiry
-- (at or before now).
--
-- KEYS[1] the claims hash, KEYS[2] the asks stream, KEYS[3] the meta hash, KEYS[4] the
-- board revision, and, when ARGV[7] names the board, KEYS[5] the document layout's shared
-- hash.
-- ARGV[1] row, ARGV[2] lane, ARGV[3] generation, ARGV[4] action, ARGV[5] session,
-- ARGV[6] the stream's cap (0 records nothing: the heartbeat's probe), ARGV[7] the board ('' = no document check), and only with
-- the location fence on: ARGV[8] location, ARGV[9] epoch, ARGV[10] the fence's verdict
-- and ARGV[11] its reason ('' when it allowed): recorded with the ask, and the fence's
-- verdict is the one the stream shows.
-- Returns {outcome, now_ms, the stored record or '', the board revision or ''}: the
-- outcome is 'allowed', a refusal
-- reason, 'malformed', or 'unrouted' (no record, the board not marked as migrated, and a
-- document present for it: the caller judges the document and records the ask itself).

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local revision = redis.call('GET', KEYS[4]) or ''
local outcome = 'allowed'

if not raw then
  if ARGV[7] and ARGV[7] ~= '' and redis.call('HEXISTS', KEYS[5], ARGV[7]) == 1 then
    local layout = redis.call('HGET', KEYS[3], 'layout')
    if not (layout and string.find(layout, '"v":"records"', 1, true)) then
      return {'unrouted', now_ms, '', revision}
    end
  end
  outcome = 'not_held'
else
  local ok, record = pcall(cjson.decode, raw)
  local lease = ok and type(record) == 'table' and record.v or nil
  if type(lease) ~= 'table' or type(lease.holder) ~= 'string'
      or not tonumber(lease.generation) or not tonumber(lease.expires_at_ms) then
    outcome = 'malformed'
  elseif lease.holder ~= ARGV[2] then
    outcome = 'different_holder'
  elseif tonumber(lease.generation) ~= tonumber(ARGV[3]) then
    outcome = 'stale_generation'
  elseif tonumber(lease.expires_at_ms) <= now_ms then
    outcome = 'lease_expired'
  end
end

local verdict, reason = 'refused', outcome
if outcome == 'allowed' then
  verdict, reason = 'allowed', ''
elseif outcome == 'malformed' then
  verdict, reason = 'could_not_read', 'protocol_error'
end
local entry = {'row', ARGV[1], 'lane', ARGV[2], 'generation', ARGV[3], 'verdict', verdict,
  'reason', reason, 'action', ARGV[4], 'session', ARGV[5]}
if #ARGV >= 11 then
  if ARGV[11] ~= '' then
    entry[8], entry[10] = ARGV[10], ARGV[11]
  end
  table.insert(entry, 'location'); table.insert(entry, ARGV[8])
  table.insert(entry, 'epoch'); table.insert(entry, ARGV[9])
end
if tonumber(ARGV[6]) > 0 then
  redis.call('XADD', KEYS[2], 'MAXLEN', tonumber(ARGV[6]), '*', unpack(entry))
end
return {outcome, now_ms, raw or '', revision}
