-- The document layout's compare-and-set: writes a board's whole document only if it is
-- still the one the writer read (compared by SHA-1), and keeps the previous copy in the
-- board's history list. A concurrent document write surfaces as FENCE_CONFLICT document.
-- Every check that can fail (key types, permissions: `write_checks.lua`, put in front of
-- it in redis/mod.rs with a `#!lua` shebang) runs before the first write; the shebang makes
-- Redis refuse the script on a replica, short of replicas, or out of memory.
--
-- KEYS[1] the shared current hash, KEYS[2] the board's history list.
-- ARGV[1] the board's field, ARGV[2] SHA-1 (hex) of the document read ('' = absent),
-- ARGV[3] the new document, ARGV[4] how many previous copies to keep.

local old = redis.call('HGET', KEYS[1], ARGV[1])
local have = ''
if old then have = redis.sha1hex(old) end
if have ~= ARGV[2] then
  return redis.error_reply('FENCE_CONFLICT document')
end
local failed = expect_type(KEYS[2], 'list') or may('HSET', KEYS[1], 'f', 'v')
  or may('LPUSH', KEYS[2], 'v') or may('LTRIM', KEYS[2], '0', '1')
if failed then return failed end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
if old then
  redis.call('LPUSH', KEYS[2], old)
  redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[4]) - 1)
end
return 1
