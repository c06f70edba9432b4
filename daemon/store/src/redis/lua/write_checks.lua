-- Checks every writing script runs before its first write (Redis does not roll a script
-- back): a key holds the type row-fence keeps in it, and the store's user may run a
-- command on it (`redis.acl_check_cmd`, Redis 7.0+). Each returns an error reply to
-- return, or nil when the check passes.

local function expect_type(key, want)
  local have = redis.call('TYPE', key)['ok']
  if have ~= 'none' and have ~= want then
    return redis.error_reply('FENCE_CORRUPT ' .. key .. ' is a ' .. have .. ', not a ' .. want)
  end
end

local function may(...)
  if redis.acl_check_cmd and not redis.acl_check_cmd(...) then
    local args = {...}
    return redis.error_reply('NOPERM the store user may not run ' .. args[1] .. ' on ' .. tostring(args[2]))
  end
end

