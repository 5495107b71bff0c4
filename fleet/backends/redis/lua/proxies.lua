-- Proxy health of ctx.proxy (contract: fleet/core/capabilities/proxies.py).
-- Keys are built by keys.py (proxy_keys, PROXIES, proxy_sticky); per proxy a stats hash
-- (uses oks failures score cooling_until reason bad_at) and a places zset (token -> hold
-- end); the index zset PROXIES holds every proxy -> the time it is forgotten. ARGV[1] op,
-- ARGV[2] now (the client's clock), then per op:
--   take    KEYS index, sticky ('' none), held places ('' none), the type's groups meta
--           ('' none), then (stats, places) per candidate
--           ARGV token hold cap('' none) sticky('' none) sticky_seconds retry forget
--                spread(1|0) names of the candidates... -> {picked name or '', cooling 0|1, wait}
--   renew   KEYS index, stats, places; ARGV token hold forget name   -> 1|0
--   release KEYS places; ARGV token                                   -> 1|0
--   report  KEYS index, stats, places, the type's groups meta ('' none);
--           ARGV ok(1|0) threshold cooldown reason forget name
--                                              -> the cool-down's end, or '' if not cooling
-- The type's proxy policy, stored in its groups meta hash (pb pc pm, written with its
-- group limits by groups.lua 'defaults'), wins over the threshold, cool-down and cap
-- the caller passes: one value for the fleet, whatever config each worker applied.
--   list    KEYS index; ARGV limit prefix stats-suffix places-suffix
--                                              -> 9 values per proxy, by name
-- TTLs keep each key only while it matters: a stats hash until it is forgotten, a places
-- zset until its last hold ends, a sticky choice sticky_seconds past its last use.
local op, now = ARGV[1], tonumber(ARGV[2])

local function fstr(x)
  return string.format('%.17g', x)
end

local function ms(seconds)
  return math.max(1, math.ceil(seconds * 1000))
end

-- The stored policy of the caller's type: {threshold, cooldown, cap or nil}, or nil.
local function stored_policy(meta)
  if meta == '' then return nil end
  local p = redis.call('HMGET', meta, 'pb', 'pc', 'pm')
  if not p[1] then return nil end
  return {tonumber(p[1]), tonumber(p[2]), p[3] and tonumber(p[3]) or nil}
end

local function cooling_until(stats)
  return tonumber(redis.call('HGET', stats, 'cooling_until')) or 0
end

-- The end of the latest hold (now when none), after refreshing the places key's TTL.
local function last_hold(places)
  local last = redis.call('ZRANGE', places, -1, -1, 'WITHSCORES')
  if last[2] then
    local ends = tonumber(last[2])
    redis.call('PEXPIRE', places, ms(ends - now))
    return ends
  end
  return now
end

-- Push the proxy's forget time past its last activity: now, its cool-down, its places.
local function touch(index, stats, places, name, forget)
  local last = math.max(now, cooling_until(stats), last_hold(places))
  redis.call('PEXPIRE', stats, ms(last + forget - now))
  redis.call('ZADD', index, fstr(last + forget), name)
end

if op == 'take' then
  local token, hold, cap = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
  local policy = stored_policy(KEYS[4])
  if policy then cap = policy[3] end
  local sticky, sticky_seconds, retry, forget = ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
  local spread = ARGV[10] == '1' and sticky == ''
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', fstr(now))
  local names, order, seen = {}, {}, {}
  for i = 11, #ARGV do
    local name = ARGV[i]
    local j = i - 10
    if not seen[name] then
      seen[name] = j
      order[#order + 1] = j
    end
    names[j] = name
  end
  local cool, count, mine, first = {}, {}, {}, {}
  for _, j in ipairs(order) do
    local stats, places = KEYS[3 + 2 * j], KEYS[4 + 2 * j]
    redis.call('ZREMRANGEBYSCORE', places, '-inf', fstr(now))
    cool[j] = cooling_until(stats)
    count[j] = redis.call('ZCARD', places)
    mine[j] = redis.call('ZSCORE', places, token) ~= false
    local f = redis.call('ZRANGE', places, 0, 0, 'WITHSCORES')
    first[j] = f[2] and tonumber(f[2]) or nil
  end
  if sticky ~= '' then
    local chosen = redis.call('GET', KEYS[2])
    if chosen and seen[chosen] and cool[seen[chosen]] <= now then
      order = {seen[chosen]}
    end
  end
  local function free(j)
    return (not cap) or mine[j] or count[j] < cap
  end
  local picked, fell_back, healthy = nil, 0, 0
  for _, j in ipairs(order) do
    if cool[j] <= now then
      healthy = healthy + 1
      if not picked and free(j) then picked = j end
    end
  end
  if spread and healthy > 0 then
    -- spread_choice (fleet/core/capabilities/proxies.py), which this mirrors: stay on
    -- the first candidate while total > its load * n, else the least-used free one.
    local load, total, cur = {}, 1, order[1]
    for _, j in ipairs(order) do
      if cool[j] <= now then
        load[j] = count[j] - (mine[j] and 1 or 0)
        total = total + load[j]
      end
    end
    picked = nil
    if load[cur] and free(cur) and total > load[cur] * healthy then
      picked = cur
    else
      for _, j in ipairs(order) do
        if load[j] and free(j) and (not picked or load[j] < load[picked]) then picked = j end
      end
    end
  end
  if not picked and healthy == 0 then
    for _, j in ipairs(order) do
      if free(j) and (not picked or cool[j] < cool[picked]) then picked = j end
    end
    if picked then fell_back = 1 end
  end
  if not picked then
    local soonest = now + retry
    for _, j in ipairs(order) do
      if first[j] and first[j] < soonest then soonest = first[j] end
    end
    return {'', 0, fstr(math.max(math.min(soonest - now, retry), 0.001))}
  end
  local stats, places, name = KEYS[3 + 2 * picked], KEYS[4 + 2 * picked], names[picked]
  redis.call('ZADD', places, fstr(now + hold), token)
  redis.call('HINCRBY', stats, 'uses', 1)
  touch(KEYS[1], stats, places, name, forget)
  if KEYS[3] ~= '' and KEYS[3] ~= places then
    redis.call('ZREM', KEYS[3], token)
  end
  if sticky ~= '' then
    redis.call('SET', KEYS[2], name, 'PX', ms(sticky_seconds))
  end
  return {name, fell_back, '0'}
end
if op == 'renew' then
  local token, hold, forget, name = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
  local ends = tonumber(redis.call('ZSCORE', KEYS[3], token))
  if not ends or ends <= now then return 0 end
  redis.call('ZADD', KEYS[3], fstr(now + hold), token)
  touch(KEYS[1], KEYS[2], KEYS[3], name, forget)
  return 1
end
if op == 'release' then
  local ends = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[3]))
  if not ends then return 0 end
  redis.call('ZREM', KEYS[1], ARGV[3])
  if ends > now then return 1 end
  return 0
end
if op == 'report' then
  local ok, threshold, cooldown = ARGV[3] == '1', tonumber(ARGV[4]), tonumber(ARGV[5])
  local policy = (not ok) and stored_policy(KEYS[4] or '') or nil
  if policy then threshold, cooldown = policy[1], policy[2] end
  local reason, forget, name = ARGV[6], tonumber(ARGV[7]), ARGV[8]
  local stats = KEYS[2]
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', fstr(now))
  if not redis.call('ZSCORE', KEYS[1], name) then
    redis.call('DEL', stats)  -- forgotten (or never seen): its counters start again
  end
  if ok then
    redis.call('HINCRBY', stats, 'oks', 1)
    redis.call('HSET', stats, 'score', 0)
  else
    redis.call('HINCRBY', stats, 'failures', 1)
    redis.call('HSET', stats, 'reason', reason, 'bad_at', fstr(now))
    if cooling_until(stats) <= now then
      local score = redis.call('HINCRBY', stats, 'score', 1)
      if score >= threshold then
        redis.call('HSET', stats, 'cooling_until', fstr(now + cooldown))
      end
    end
  end
  touch(KEYS[1], stats, KEYS[3], name, forget)
  local ends = cooling_until(stats)
  if ends > now then return fstr(ends) end
  return ''
end
if op == 'list' then
  local limit, prefix, s_stats, s_places = tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', fstr(now))
  local members = redis.call('ZRANGE', KEYS[1], 0, -1)
  table.sort(members)
  local out = {}
  for i = 1, math.min(limit, #members) do
    local name = members[i]
    local stats = prefix .. name .. s_stats
    local h = redis.call('HMGET', stats, 'uses', 'oks', 'failures', 'score', 'cooling_until', 'reason', 'bad_at')
    local in_use = redis.call('ZCOUNT', prefix .. name .. s_places, '(' .. fstr(now), '+inf')
    out[#out + 1] = name
    for k = 1, 7 do out[#out + 1] = h[k] or '' end
    out[#out + 1] = in_use
  end
  return out
end
return redis.error_reply('unknown op ' .. tostring(op))
