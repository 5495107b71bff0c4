-- Shared by every pool script. KEYS (built by redis_keys.pool_keys):
--  1 items hash (item_id -> JSON {p, t, x, c, i})   2 available zset
--  3 claimed zset (item_id -> lease end)   4 expiry zset (item_id -> expires_at)
--  5 set of pool names
-- ARGV 1..4: now, pool name, claim key prefix, tag index prefix.
-- The available zset and every tag index zset (prefix .. "<field>=<json>") hold
-- only unclaimed items, scored by expiry; items that never expire score
-- NEVER + created_at so they sort after every expiring item, newest last.
-- item.i lists the item's tag index suffixes (computed in Python, never here).
local K_ITEMS, K_AVAIL, K_CLAIMED, K_EXPIRY, K_NAMES = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local NOW_S = ARGV[1]
local NOW = tonumber(NOW_S)
local NAME, CLAIM, TAG = ARGV[2], ARGV[3], ARGV[4]
local NEVER = 1e12
local TIDY_LIMIT = 100

local function jnull(v)
  if v == cjson.null then return nil end
  return v
end

local function get_item(id)
  local raw = redis.call('HGET', K_ITEMS, id)
  if not raw then return nil, nil end
  return cjson.decode(raw), raw
end

local function score_of(item)
  local x = jnull(item.x)
  if x == nil then return NEVER + (tonumber(jnull(item.c)) or 0) end
  return x
end

local function idx_add(id, item)
  local s = score_of(item)
  redis.call('ZADD', K_AVAIL, s, id)
  for _, suf in ipairs(item.i or {}) do redis.call('ZADD', TAG .. suf, s, id) end
end

local function idx_rem(id, item)
  redis.call('ZREM', K_AVAIL, id)
  for _, suf in ipairs(item.i or {}) do redis.call('ZREM', TAG .. suf, id) end
end

local function delete_item(id, item)
  idx_rem(id, item)
  redis.call('ZREM', K_CLAIMED, id)
  redis.call('ZREM', K_EXPIRY, id)
  redis.call('HDEL', K_ITEMS, id)
  redis.call('DEL', CLAIM .. id)
end

local function forget_if_empty()
  if redis.call('HLEN', K_ITEMS) == 0 then redis.call('SREM', K_NAMES, NAME) end
end

-- Drop up to limit expired items; returns how many items were dropped.
local function prune(limit)
  local ids = redis.call('ZRANGEBYSCORE', K_EXPIRY, '-inf', NOW_S, 'LIMIT', 0, limit)
  local n = 0
  for _, id in ipairs(ids) do
    local item = get_item(id)
    if item then
      delete_item(id, item)
      n = n + 1
    else
      redis.call('ZREM', K_EXPIRY, id)
    end
  end
  if n > 0 then forget_if_empty() end
  return n, #ids
end

-- Make up to limit items whose claim ran out available again.
local function reclaim(limit)
  local ids = redis.call('ZRANGEBYSCORE', K_CLAIMED, '-inf', NOW_S, 'LIMIT', 0, limit)
  for _, id in ipairs(ids) do
    redis.call('ZREM', K_CLAIMED, id)
    redis.call('DEL', CLAIM .. id)
    local item = get_item(id)
    if item then idx_add(id, item) end
  end
  return #ids
end

local function tidy()
  prune(TIDY_LIMIT)
  reclaim(TIDY_LIMIT)
end

-- The item a token holds now, or nil.
local function held(id, token)
  if redis.call('GET', CLAIM .. id) ~= token then return nil end
  local until_ = redis.call('ZSCORE', K_CLAIMED, id)
  if not until_ or tonumber(until_) <= NOW then return nil end
  return get_item(id)
end

-- The zset to scan for a where filter (list of tag suffixes) and the suffixes
-- a candidate must also carry; nil if some field has no available item at all.
local function candidates(where)
  if #where == 0 then return K_AVAIL, {} end
  local best, bestn = nil, nil
  for _, suf in ipairs(where) do
    local n = redis.call('ZCARD', TAG .. suf)
    if n == 0 then return nil, nil end
    if not bestn or n < bestn then best, bestn = suf, n end
  end
  local need = {}
  for _, suf in ipairs(where) do
    if suf ~= best then need[#need + 1] = suf end
  end
  return TAG .. best, need
end

local function matches(id, need)
  if #need == 0 then return true end
  local item = get_item(id)
  if not item then return false end
  local have = {}
  for _, s in ipairs(item.i or {}) do have[s] = true end
  for _, s in ipairs(need) do
    if not have[s] then return false end
  end
  return true
end

-- Visit unexpired members of key in expiry order (desc: freshest first) that
-- carry every suffix in need, until fn returns true.
local function scan(key, desc, need, fn)
  -- Without extra fields the first member usually ends the walk: fetch small first.
  local off, batch = 0, 16
  if #need == 0 then batch = 4 end
  while true do
    local ids
    if desc then
      ids = redis.call('ZREVRANGEBYSCORE', key, '+inf', '(' .. NOW_S, 'LIMIT', off, batch)
    else
      ids = redis.call('ZRANGEBYSCORE', key, '(' .. NOW_S, '+inf', 'LIMIT', off, batch)
    end
    for _, id in ipairs(ids) do
      if matches(id, need) and fn(id) then return end
    end
    if #ids < batch then return end
    off = off + batch
    if batch < 256 then batch = batch * 4 end
  end
end
