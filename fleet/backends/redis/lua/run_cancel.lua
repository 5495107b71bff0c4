-- KEYS: fleet:run:<id>. ARGV: now, ttl in milliseconds. Ends a running (or paused) run
-- 'cancelled' (no on_complete): its unique keys go, it expires ttl from now. Returns nil for an
-- unknown run, else {state before, live task members "<type>|<id>"...}; the caller
-- cancels each live task with cancel.lua (which moves the run's counters).
local key = KEYS[1]
local st = redis.call('HGET', key, 'state')
if not st then return nil end
if st ~= 'running' and st ~= 'paused' then return {st} end
redis.call('HSET', key, 'state', 'cancelled', 'finished_at', ARGV[1])
redis.call('HDEL', key, 'pr', 'pa')
-- The bodies a pause set aside: each task is cancelled below (by its record).
for _, t in ipairs(redis.call('SMEMBERS', key .. ':parked')) do
  redis.call('DEL', key .. ':parked:' .. t)
end
redis.call('DEL', key .. ':parked')
local levels = tonumber(redis.call('HGET', key, 'kl')) or 0
for i = 0, levels - 1 do redis.call('DEL', key .. ':keys:' .. i) end
redis.call('PEXPIRE', key, ARGV[2])
redis.call('PEXPIRE', key .. ':live', ARGV[2])
local out = {st}
for _, m in ipairs(redis.call('SMEMBERS', key .. ':live')) do out[#out + 1] = m end
return out
