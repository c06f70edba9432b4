-- The ask (ARCHITECTURE.md, "The lease store"): judges one row lease atomically with the Redis
-- server's clock, never the daemon's, and records the refusals it decides in the capped
-- asks stream. An ask it would allow is not recorded here: the lease token and the margin
-- are judged after it, in Rust (store::judge), which records that ask's final verdict
-- (a refusal, or with `?asks=all` an ALLOWED), so the stream never shows an ALLOWED that a
-- token or margin refusal followed. An ALLOWED ask that records nothing writes
-- nothing: it propagates nothing and waits for no AOF fsync, so an ask costs no disk write.
-- It runs with a `#!lua` shebang (redis/mod.rs), which declares it as writing, so Redis
-- itself refuses it, before it reads anything and at no extra cost, on a read-only
-- replica (READONLY) and on a primary with fewer good replicas than its
-- min-replicas-to-write (NOREPLICAS): a primary deposed by a failover stops answering
-- from its old history, whether or not this ask would have written.
-- The rule is the same as `store::judge` in Rust: holder, then generation, then expiry
-- (at or before now). Every name it returns or records comes from the generated prelude
-- (redis/names.rs).
--
-- KEYS[1] the claims hash, KEYS[2] the asks stream, KEYS[3] the meta hash, KEYS[4] the
-- board revision, and, when ARGV[7] names the board, KEYS[5] the document layout's shared
-- hash.
-- ARGV[1] row, ARGV[2] lane, ARGV[3] generation, ARGV[4] action, ARGV[5] session,
-- ARGV[6] the stream's cap (0 records nothing: the heartbeat's probe), ARGV[7] the board
-- ('' = no document check), ARGV[8] '1' for `?asks=all` (read by the caller, which records
-- an ask this script would allow), and
-- only with the location fence on: ARGV[9] location, ARGV[10] epoch, ARGV[11] the fence's
-- verdict and ARGV[12] its reason ('' when it allowed): recorded with the ask, and the
-- fence's verdict is the one the stream shows.
-- Returns {outcome, now_ms, the stored record or '', the board revision or '', the
-- board's document or ''}: the outcome is VERDICT.allowed, a REASON (a refusal, or
-- protocol_error for a row lease it cannot read), or LAYOUT.document (no record, the board
-- not marked as migrated, and a document present for it: returned in the same answer, so
-- the caller judges it without another round trip, and records the ask itself).

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local revision = redis.call('GET', KEYS[4]) or ''
local outcome = VERDICT.allowed

if not raw then
  if ARGV[7] ~= '' then
    local document = redis.call('HGET', KEYS[5], ARGV[7])
    if document then
      local layout = redis.call('HGET', KEYS[3], META.layout)
      if not (layout and string.find(layout, '"v":"' .. LAYOUT.records .. '"', 1, true)) then
        return {LAYOUT.document, now_ms, '', revision, document}
      end
    end
  end
  outcome = REASON.not_held
else
  local ok, record = pcall(cjson.decode, raw)
  local lease = ok and type(record) == 'table' and record.v or nil
  if type(lease) ~= 'table' or type(lease.holder) ~= 'string'
      or not tonumber(lease.generation) or not tonumber(lease.expires_at_ms) then
    outcome = REASON.protocol_error
  elseif lease.holder ~= ARGV[2] then
    outcome = REASON.different_holder
  elseif tonumber(lease.generation) ~= tonumber(ARGV[3]) then
    outcome = REASON.stale_generation
  elseif tonumber(lease.expires_at_ms) <= now_ms then
    outcome = REASON.lease_expired
  end
end

local verdict, reason = VERDICT.refused, outcome
if outcome == VERDICT.allowed then
  verdict, reason = VERDICT.allowed, ''
elseif outcome == REASON.protocol_error then
  verdict = VERDICT.could_not_read
end
if #ARGV >= 12 and ARGV[12] ~= '' then
  verdict, reason = ARGV[11], ARGV[12]
end
if tonumber(ARGV[6]) > 0 and verdict ~= VERDICT.allowed then
  local entry = {'row', ARGV[1], 'lane', ARGV[2], 'generation', ARGV[3], 'verdict', verdict,
    'reason', reason, 'action', ARGV[4], 'session', ARGV[5]}
  if #ARGV >= 12 then
    table.insert(entry, 'location'); table.insert(entry, ARGV[9])
    table.insert(entry, 'epoch'); table.insert(entry, ARGV[10])
  end
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', tonumber(ARGV[6]), '*', unpack(entry))
end
return {outcome, now_ms, raw or '', revision, ''}
