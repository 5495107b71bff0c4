-- KEYS: fleet:run:<id>. ARGV: the operation, now, then
--   pause:  the reason. A running run pauses (state paused, pr the reason, pa when);
--           returns {state before, 1 if it paused}.
--   resume: the budget JSON ('' keeps it). A paused or running run runs (with that
--           budget); returns {state before, types with parked tasks...} for the caller
--           to move them back (run_unpark.lua, per type).
-- Nil for an unknown run; a run that ended is answered {state}.
local key, op, now = KEYS[1], ARGV[1], ARGV[2]
local st = redis.call('HGET', key, 'state')
if not st then return nil end
if op == 'pause' then
  if st ~= 'running' then return {st} end
  redis.call('HSET', key, 'state', 'paused', 'pr', ARGV[3], 'pa', now)
  return {st, 1}
end
if op ~= 'resume' then return redis.error_reply('ERR run_pause: unknown operation') end
if st ~= 'running' and st ~= 'paused' then return {st} end
redis.call('HSET', key, 'state', 'running')
redis.call('HDEL', key, 'pr', 'pa')
if ARGV[3] ~= '' then redis.call('HSET', key, 'bg', ARGV[3]) end
local out = {st}
if st == 'paused' then
  for _, t in ipairs(redis.call('SMEMBERS', key .. ':parked')) do out[#out + 1] = t end
end
return out
