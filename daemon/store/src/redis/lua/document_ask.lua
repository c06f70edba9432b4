-- The document adapter's ask on a board in the document layout: the server's clock and
-- the board's document in one call, judged by the caller. It runs with a `#!lua` shebang
-- (redis/mod.rs) although it writes nothing, for the same reason as `ask.lua`: Redis then
-- refuses it on a read-only replica (READONLY) and on a primary short of replicas
-- (NOREPLICAS), so a deposed primary never answers an ask from its old history.
--
-- KEYS[1] the document layout's shared hash. ARGV[1] the board.
-- Returns {seconds, microseconds, the board's document or ''}.

local time = redis.call('TIME')
return {time[1], time[2], redis.call('HGET', KEYS[1], ARGV[1]) or ''}
