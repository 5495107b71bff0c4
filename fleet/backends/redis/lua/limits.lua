-- The limiters of ctx.limit (contract: fleet/core/capabilities/limits.py).
-- KEYS (built by keys.limit_keys): 1 holders zset (token -> hold end), 2 tat string
-- (the rate's next allowed start). ARGV: op, now, token, then per op:
--   acquire hold interval('' none) concurrency('' none) retry cap -> wait as text ('0': taken)
--   renew hold                                                   -> 1|0
--   release                                                      -> 1|0
-- Times are the client's (ARGV now). The TTLs keep each key only while it matters:
-- the holders until their last hold ends, the tat one interval past its value.
local K_HOLD, K_TAT = KEYS[1], KEYS[2]
local op, now, token = ARGV[1], tonumber(ARGV[2]), ARGV[3]

local function fstr(x)
  return string.format('%.17g', x)
end

local function ms(seconds)
  return math.max(1, math.ceil(seconds * 1000))
end

-- Refresh the holders key's TTL to its last hold end (an empty zset is no key).
local function expire_holders()
  local last = redis.call('ZRANGE', K_HOLD, -1, -1, 'WITHSCORES')
  if last[2] then redis.call('PEXPIRE', K_HOLD, ms(tonumber(last[2]) - now)) end
end

if op == 'acquire' then
  local hold, interval = tonumber(ARGV[4]), tonumber(ARGV[5])
  local cap, retry = tonumber(ARGV[6]), tonumber(ARGV[7])
  redis.call('ZREMRANGEBYSCORE', K_HOLD, '-inf', fstr(now))
  if redis.call('ZSCORE', K_HOLD, token) then
    -- A retried acquire of a place already held: extend it, charge nothing.
    redis.call('ZADD', K_HOLD, fstr(now + hold), token)
    expire_holders()
    return '0'
  end
  local wait = 0
  if cap and redis.call('ZCARD', K_HOLD) >= cap then
    local first = redis.call('ZRANGE', K_HOLD, 0, 0, 'WITHSCORES')
    wait = math.min(tonumber(first[2]) - now, retry)
  end
  local tat = 0
  if interval then
    tat = tonumber(redis.call('GET', K_TAT)) or 0
    if tat - now > wait then wait = tat - now end
  end
  if wait > 0 then return fstr(wait) end
  redis.call('ZADD', K_HOLD, fstr(now + hold), token)
  expire_holders()
  if interval then
    -- fleet.core.flow.next_tat: a start late by less than one interval keeps the schedule.
    local base = tat
    if now - tat >= interval then base = now end
    local new = base + interval
    redis.call('SET', K_TAT, fstr(new), 'PX', ms(new + interval - now))
  end
  return '0'
end
if op == 'renew' then
  local ends = tonumber(redis.call('ZSCORE', K_HOLD, token))
  if not ends or ends <= now then return 0 end
  redis.call('ZADD', K_HOLD, fstr(now + tonumber(ARGV[4])), token)
  expire_holders()
  return 1
end
if op == 'release' then
  local ends = tonumber(redis.call('ZSCORE', K_HOLD, token))
  if not ends then return 0 end
  redis.call('ZREM', K_HOLD, token)
  if ends > now then return 1 end
  return 0
end
return redis.error_reply('unknown op ' .. tostring(op))
