-- A consistent read of some sections of a board — each whole, or only some of its
-- keys — with the board revision and the server's clock, in one round trip (the change
-- → batch engine's read). Read only.
--
-- KEYS[1] the revision counter, KEYS[2] the meta hash, KEYS[3..] section hashes, and, when
-- ARGV[1] names the board, last the document layout's shared hash: a board that has a
-- document there and is not marked as migrated is not served from records.
-- ARGV[2], when given, is a JSON array with one item per section hash: "*" reads the
-- section whole (HGETALL), an array of fields reads only those (HMGET). Without it every
-- section is read whole.
-- Returns {seconds, microseconds, revision or '', per section: HGETALL's flat list, or
-- HMGET's values in the order of its fields (false for an absent one)...}, or
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
local spec = {}
if ARGV[2] and ARGV[2] ~= '' then
  spec = cjson.decode(ARGV[2])
end
-- HMGET takes its fields as arguments: a long list goes in chunks (Lua's unpack has a
-- limit of a few thousand values).
local CHUNK = 1000
local function hmget(key, fields)
  local values = {}
  for first = 1, #fields, CHUNK do
    local part = redis.call('HMGET', key, unpack(fields, first, math.min(first + CHUNK - 1, #fields)))
    for _, v in ipairs(part) do
      values[#values + 1] = v
    end
  end
  return values
end
local time = redis.call('TIME')
local out = {time[1], time[2], redis.call('GET', KEYS[1]) or ''}
for i = 3, last do
  local fields = spec[i - 2]
  if type(fields) == 'table' then
    out[#out + 1] = hmget(KEYS[i], fields)
  else
    out[#out + 1] = redis.call('HGETALL', KEYS[i])
  end
end
return out
