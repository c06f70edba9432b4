-- The ask (DESIGN.md, "The lease store"): judges one row lease atomically with the Redis
-- server's clock, never the daemon's, and appends the verdict to the capped asks stream.
-- The rule is the same as `store::judge` in Rust: holder, then generation, then expiry
-- (at or before now).
--
-- KEYS[1] the claims hash, KEYS[2] the asks stream.
-- ARGV[1] row, ARGV[2] lane, ARGV[3] generation, ARGV[4] action, ARGV[5] session,
-- ARGV[6] the stream's cap.
-- Returns {outcome, now_ms, the stored record or ''}: the outcome is 'allowed', a refusal
-- reason, or 'malformed'.

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local outcome = 'allowed'

if not raw then
  outcome = 'not_held'
else
  local ok, record = pcall(cjson.decode, raw)
  local lease = ok and type(record) == 'table' and record.v or nil
  if type(lease) ~= 'table' or type(lease.holder) ~= 'string'
      or not tonumber(lease.generation) or not tonumber(lease.expires_at_ms) then
    outcome = 'malformed'
  else
    if lease.holder ~= ARGV[2] then
      outcome = 'different_holder'
    elseif tonumber(lease.generation) ~= tonumber(ARGV[3]) then
      outcome = 'stale_generation'
    elseif tonumber(lease.expires_at_ms) <= now_ms then
      outcome = 'lease_expired'
    end
  end
end

local verdict, reason = 'refused', outcome
if outcome == 'allowed' then
  verdict, reason = 'allowed', ''
elseif outcome == 'malformed' then
  verdict, reason = 'could_not_read', 'protocol_error'
end
redis.call('XADD', KEYS[2], 'MAXLEN', tonumber(ARGV[6]), '*',
  'row', ARGV[1], 'lane', ARGV[2], 'generation', ARGV[3], 'verdict', verdict,
  'reason', reason, 'action', ARGV[4], 'session', ARGV[5])
return {outcome, now_ms, raw or ''}
