-- Meters (fleet/backends/redis/meters.py). The rule of a scope's add is
-- fleet/core/meters.py's `added`, written again here and held to it by
-- tests/conformance/test_differential_meters.py; what a stored value reads as is
-- fleet/core/meter_store.py's `stored_value` (a finite number, else 0).
-- KEYS: 1 fleet:meter-scopes zset scope -> 0 (the listed scopes, by name),
--   2 fleet:meter-hours zset hour scope -> when it is gone, 3.. fleet:meters:<scope>
--   hash meter -> sum (as "%.17g" text: a double read back exactly), one per scope.
-- ARGV[1] the operation, ARGV[2] the prefix of the scope hashes (the prune builds the
-- keys of the hour scopes it deletes), ARGV[3] now; then per operation (below).
local K_SCOPES, K_HOURS = KEYS[1], KEYS[2]
local op = ARGV[1]
local prefix = ARGV[2]
local now = tonumber(ARGV[3])

local function fstr(x)
  return string.format('%.17g', x)
end

-- A stored sum: a finite number, else 0.
local function stored(raw)
  local x = tonumber(raw)
  if x == nil or x ~= x or x == math.huge or x == -math.huge then return 0 end
  return x
end

-- Budgets (fleet/core/budgets.py, `over`; held to it by
-- tests/conformance/test_differential_budgets.py): the first cap by name that the
-- meters reach, as its reason; nil while every cap is above.
local BUDGET_SUMS = {bytes = {'bytes_received', 'bytes_sent'}, solver_calls = {'solves'}}

local function budget_over(budget, meters)
  local names = {}
  for name in pairs(budget) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local parts = BUDGET_SUMS[name] or {name}
    local have = 0
    for _, part in ipairs(parts) do have = have + (meters[part] or 0) end
    local cap = tonumber(budget[name]) or 0
    if have >= cap then
      return string.format('budget reached: %s %.6g of %.6g', name, have, cap)
    end
  end
  return nil
end

-- A run scope's meters changed: a running run with a budget they reach pauses here,
-- in the step that took it past (docs/costs.md), and the runs topic says so.
local function budget_check(run_prefix, events, scope, key)
  local rn = string.match(scope, '^run:([0-9a-f]+)$')
  if not rn or #rn ~= 32 then return end
  local run_key = run_prefix .. rn
  local v = redis.call('HMGET', run_key, 'state', 'bg')
  if v[1] ~= 'running' or not v[2] then return end
  local ok, budget = pcall(cjson.decode, v[2])
  if not ok or type(budget) ~= 'table' then return end
  local flat = redis.call('HGETALL', key)
  local meters = {}
  for j = 1, #flat, 2 do meters[flat[j]] = stored(flat[j + 1]) end
  local reason = budget_over(budget, meters)
  if not reason then return end
  redis.call('HSET', run_key, 'state', 'paused', 'pr', reason, 'pa', fstr(now))
  if events ~= '' then
    redis.call('PUBLISH', events .. 'runs', cjson.encode({event = 'paused', run_id = rn,
      state = 'paused', paused_reason = reason, paused_at = now}))
  end
end

-- A type's day grew: past the daily_budget of its type-wide config (one source, read
-- here), its dispatch is held until the next UTC day (the hold hash reserve.lua reads:
-- until, reason; it expires then), and the budgets topic says so.
local function day_check(events, c)
  local raw = redis.call('GET', c.cfg)
  if not raw then return end
  local ok, cfg = pcall(cjson.decode, raw)
  if not ok or type(cfg) ~= 'table' or type(cfg.daily_budget) ~= 'table' then return end
  if next(cfg.daily_budget) == nil then return end
  local sums = {}
  for _, key in ipairs(c.hours) do
    local flat = redis.call('HGETALL', key)
    for j = 1, #flat, 2 do sums[flat[j]] = (sums[flat[j]] or 0) + stored(flat[j + 1]) end
  end
  local reason = budget_over(cfg.daily_budget, sums)
  if not reason then return end
  local til = tonumber(c['until'])
  local cur = tonumber(redis.call('HGET', c.hold, 'until'))
  if cur and cur >= til then return end
  reason = 'daily ' .. reason
  redis.call('HSET', c.hold, 'until', fstr(til), 'reason', reason)
  redis.call('PEXPIREAT', c.hold, math.floor(til * 1000))
  if events ~= '' then
    redis.call('PUBLISH', events .. 'budgets', cjson.encode({event = 'paused', type = c.type,
      ['until'] = til, reason = reason}))
  end
end

if op == 'budget_over' then
  -- The rule alone, for the differential test: ARGV[4] budget JSON, [5] meters JSON.
  return budget_over(cjson.decode(ARGV[4]), cjson.decode(ARGV[5])) or ''
end

if op == 'add' then
  -- ARGV[4] the most meters of a scope, [5] the most hour scopes pruned, [6] the prefix
  -- of the run hashes ('' on Cluster: no runs, no budgets there), [7] the event channel
  -- prefix of this database (where a pause is published; '' none), [8] how many day
  -- checks follow, each: the type's config key, its hold key, the next day's start, the
  -- type, how many hour keys, the hour keys of its day so far; then per scope (KEYS
  -- 3.. in order): its name, when it is gone ('' for never), how many meters, then
  -- meter, amount ("repr" of a double), ... sorted by meter name.
  local most = tonumber(ARGV[4])
  local run_prefix, events = ARGV[6], ARGV[7]
  local checks = {}
  local i = 9
  for _ = 1, tonumber(ARGV[8]) do
    local c = {cfg = ARGV[i], hold = ARGV[i + 1], ['until'] = ARGV[i + 2], type = ARGV[i + 3],
               hours = {}}
    local n = tonumber(ARGV[i + 4])
    i = i + 5
    for j = 1, n do c.hours[j] = ARGV[i + j - 1] end
    i = i + n
    checks[#checks + 1] = c
  end
  local gone = redis.call('ZRANGEBYSCORE', K_HOURS, '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
  for _, scope in ipairs(gone) do
    redis.call('DEL', prefix .. scope)
    redis.call('ZREM', K_HOURS, scope)
  end
  local k = 3
  while i <= #ARGV do
    local scope, expires, n = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
    local key = KEYS[k]
    i, k = i + 3, k + 1
    local count = redis.call('HLEN', key)
    local changed = false
    for _ = 1, n do
      local meter, amount = ARGV[i], tonumber(ARGV[i + 1])
      i = i + 2
      local raw = redis.call('HGET', key, meter)
      if raw or count < most then
        if not raw then count = count + 1 end
        redis.call('HSET', key, meter, fstr(stored(raw) + amount))
        changed = true
      end
    end
    if changed then
      if expires == '' then
        redis.call('ZADD', K_SCOPES, 0, scope)
      else
        redis.call('ZADD', K_HOURS, expires, scope)
        redis.call('EXPIREAT', key, expires)
      end
      if run_prefix ~= '' then budget_check(run_prefix, events, scope, key) end
    end
  end
  for _, c in ipairs(checks) do day_check(events, c) end
  return 0
end

if op == 'get' then
  -- Per scope (KEYS 3..): {meter, sum, ...} (sums as "%.17g" text).
  local out = {}
  for k = 3, #KEYS do
    local flat = redis.call('HGETALL', KEYS[k])
    local row = {}
    for j = 1, #flat, 2 do
      row[#row + 1] = flat[j]
      row[#row + 1] = fstr(stored(flat[j + 1]))
    end
    out[#out + 1] = row
  end
  return out
end

if op == 'drop' then
  -- ARGV[4..] the scopes of KEYS 3.. in order: each deleted, out of both indexes;
  -- returns how many either index named.
  local dropped = 0
  for k = 3, #KEYS do
    local scope = ARGV[k + 1]
    redis.call('DEL', KEYS[k])
    dropped = dropped + redis.call('ZREM', K_SCOPES, scope) + redis.call('ZREM', K_HOURS, scope)
  end
  return dropped
end

return redis.error_reply('ERR meters: unknown operation ' .. tostring(op))
