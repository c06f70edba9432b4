-- A consistent read of some sections of a board with the board revision and the server's
-- clock, in one round trip (the change → batch engine's read). Read only.
--
-- KEYS[1] the revision counter, KEYS[2] the meta hash, KEYS[3..] section hashes, and, when
-- ARGV[1] names the board, last the document layout's shared hash: a board that has a
-- document there and is not marked as migrated is not served from records.
-- Returns {seconds, microseconds, revision or '', HGETALL of each section...}, or
-- {LAYOUT.document} when the board is to be read from its document.

local last = #KEYS
if ARGV[1] and ARGV[1] ~= '' then
  if redis.call('HEXISTS', KEYS[last], ARGV[1]) == 1 then
    local layout = redis.call('HGET', KEYS[2], META.layout)
    if not (layout and string.find(layout, '"v":"' .. LAYOUT.records .. '"', 1, true)) then
      return {LAYOUT.document}
    end
  end
  last = last - 1
end
local time = redis.call('TIME')
local out = {time[1], time[2], redis.call('GET', KEYS[1]) or ''}
for i = 3, last do
  out[#out + 1] = redis.call('HGETALL', KEYS[i])
end
return out
