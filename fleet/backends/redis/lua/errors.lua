-- Error groups and snapshots of one type (fleet/backends/redis/errors.py). The rules
-- are fleet/core/error_groups.py's `merged` and `evicted`, written again here and held
-- to them by tests/conformance/test_differential_errors.py.
-- KEYS: 1 fleet:errors:<type> zset group -> last seen (pages, expiry),
--   2 fleet:errors:<type>:g hash group -> JSON {exc, message, location, count, first,
--   last, domains, sample} (times as "%.17g" text: cjson rounds numbers to 14 digits;
--   sample: the sample's own JSON text),
--   3 fleet:errors:<type>:s zset "<group>/<id>" -> taken at (budget, expiry),
--   4 fleet:errors:<type>:m hash "<group>/<id>" -> the snapshot's description JSON,
--   5 fleet:errors:<type>:b hash "<group>/<id>:h" -> HTML, "<group>/<id>:p" -> PNG.
-- ARGV[1] the operation, ARGV[2] now, ARGV[3] the TTL (s); then per operation (below).
local K_IDX, K_GROUPS, K_SNAPS, K_META, K_BODIES = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local op = ARGV[1]
local now = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local edge = now - ttl

local function fstr(x)
  return string.format('%.17g', x)
end

local function drop_snapshot(member)
  redis.call('ZREM', K_SNAPS, member)
  redis.call('HDEL', K_META, member)
  redis.call('HDEL', K_BODIES, member .. ':h', member .. ':p')
end

-- Up to `n` expired groups and snapshots, oldest first (sqlite/errors.py `prune`).
local function prune(n)
  local old = redis.call('ZRANGEBYSCORE', K_IDX, '-inf', fstr(edge), 'LIMIT', 0, n)
  for _, g in ipairs(old) do
    redis.call('ZREM', K_IDX, g)
    redis.call('HDEL', K_GROUPS, g)
  end
  local snaps = redis.call('ZRANGEBYSCORE', K_SNAPS, '-inf', fstr(edge), 'LIMIT', 0, n)
  for _, m in ipairs(snaps) do
    drop_snapshot(m)
  end
end

-- Every key lives a TTL past the last write: a type nobody fails any more vanishes.
local function touch()
  local seconds = math.ceil(ttl) + 60
  for _, k in ipairs(KEYS) do
    redis.call('EXPIRE', k, seconds)
  end
end

local function decode(raw)
  if not raw then return nil end
  local ok, doc = pcall(cjson.decode, raw)
  if not ok or type(doc) ~= 'table' then return nil end
  return doc
end

if op == 'record' then
  -- ARGV[4] prune bound, ARGV[5] max domains, then per delta: group, exc, message,
  -- location, count, first, last, sample JSON, the domain count and the domains.
  prune(tonumber(ARGV[4]))
  local max_domains = tonumber(ARGV[5])
  local i = 6
  while i <= #ARGV do
    local g, exc, msg, loc = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    local count, first, last = tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6])
    local sample = ARGV[i + 7]
    local nd = tonumber(ARGV[i + 8])
    local new = {}
    for j = 1, nd do new[j] = ARGV[i + 8 + j] end
    i = i + 9 + nd
    local old = decode(redis.call('HGET', K_GROUPS, g))
    if old and (tonumber(old.last) or 0) + ttl <= now then old = nil end
    local doc, domains
    if old == nil then
      doc = {exc = exc, message = msg, location = loc, count = count,
             first = first, last = last, sample = sample}
      domains = {}
    else
      local olast = tonumber(old.last) or 0
      doc = old
      doc.count = (tonumber(old.count) or 0) + count
      doc.first = math.min(tonumber(old.first) or first, first)
      doc.last = math.max(olast, last)
      if last >= olast then doc.sample = sample end
      domains = {}
      if type(old.domains) == 'table' then
        for _, d in ipairs(old.domains) do domains[#domains + 1] = d end
      end
    end
    for _, d in ipairs(new) do
      if #domains >= max_domains then break end
      local seen = false
      for _, e in ipairs(domains) do
        if e == d then seen = true break end
      end
      if not seen then domains[#domains + 1] = d end
    end
    doc.domains = domains
    local last_seen = doc.last
    doc.first, doc.last = fstr(doc.first), fstr(doc.last)
    local text = cjson.encode(doc)
    if #domains == 0 then
      -- cjson writes an empty table as an object; readers want a list
      text = string.gsub(text, '"domains":{}', '"domains":[]')
    end
    redis.call('HSET', K_GROUPS, g, text)
    redis.call('ZADD', K_IDX, last_seen, g)
  end
  touch()
  return 1
end

if op == 'put' then
  -- ARGV[4] prune bound, ARGV[5] per group, ARGV[6] budget, ARGV[7] group, ARGV[8] id,
  -- ARGV[9] taken at, ARGV[10] bytes, ARGV[11] description JSON, ARGV[12] "1" + HTML or
  -- "0", ARGV[13] "1" + PNG or "0". Returns 1 (kept) or 0 (refused).
  prune(tonumber(ARGV[4]))
  local per_group, budget = tonumber(ARGV[5]), tonumber(ARGV[6])
  local g, id, taken, size = ARGV[7], ARGV[8], tonumber(ARGV[9]), tonumber(ARGV[10])
  local member = g .. '/' .. id
  drop_snapshot(member)
  if size > budget then return 0 end
  -- held, oldest first: zset order is (taken at, member) = (taken at, group, id)
  local flat = redis.call('ZRANGEBYSCORE', K_SNAPS, '(' .. fstr(edge), '+inf', 'WITHSCORES')
  local held = {}
  for j = 1, #flat, 2 do
    local m = flat[j]
    local doc = decode(redis.call('HGET', K_META, m))
    local b = 0
    if doc then b = tonumber(doc.bytes) or 0 end
    held[#held + 1] = {m = m, b = b, g = string.sub(m, 1, 16)}
  end
  local gone = {}
  local mine = 0
  for _, h in ipairs(held) do
    if h.g == g then mine = mine + 1 end
  end
  for _, h in ipairs(held) do
    if mine + 1 <= per_group then break end
    if h.g == g then
      gone[h.m] = true
      mine = mine - 1
    end
  end
  local total = size
  for _, h in ipairs(held) do
    if not gone[h.m] then total = total + h.b end
  end
  for _, h in ipairs(held) do
    if total <= budget then break end
    if not gone[h.m] then
      gone[h.m] = true
      total = total - h.b
    end
  end
  for m, _ in pairs(gone) do drop_snapshot(m) end
  redis.call('ZADD', K_SNAPS, taken, member)
  redis.call('HSET', K_META, member, ARGV[11])
  if string.sub(ARGV[12], 1, 1) == '1' then
    redis.call('HSET', K_BODIES, member .. ':h', string.sub(ARGV[12], 2))
  end
  if string.sub(ARGV[13], 1, 1) == '1' then
    redis.call('HSET', K_BODIES, member .. ':p', string.sub(ARGV[13], 2))
  end
  touch()
  return 1
end

if op == 'page' then
  -- ARGV[4] the cursor's last seen ('' from the start), ARGV[5] its group, ARGV[6] how
  -- many. Returns flat group, JSON, ... newest last seen first, then group descending.
  local want = tonumber(ARGV[6])
  local top, after = '+inf', nil
  if ARGV[4] ~= '' then
    top = ARGV[4]
    after = tonumber(ARGV[4])
  end
  local out = {}
  local offset = 0
  local chunk = want + 16
  while #out < 2 * want do
    local flat = redis.call('ZREVRANGEBYSCORE', K_IDX, top, '(' .. fstr(edge), 'WITHSCORES',
      'LIMIT', offset, chunk)
    if #flat == 0 then break end
    for j = 1, #flat, 2 do
      local g, score = flat[j], tonumber(flat[j + 1])
      if not (after ~= nil and score == after and g >= ARGV[5]) then
        local raw = redis.call('HGET', K_GROUPS, g)
        if raw then
          out[#out + 1] = g
          out[#out + 1] = raw
          if #out >= 2 * want then break end
        end
      end
    end
    offset = offset + chunk
  end
  return out
end

if op == 'get' then
  -- ARGV[4] the group. Returns {JSON, member, taken at, description, ...} or {}.
  local g = ARGV[4]
  local raw = redis.call('HGET', K_GROUPS, g)
  local score = redis.call('ZSCORE', K_IDX, g)
  if not raw or not score or tonumber(score) <= edge then return {} end
  local out = {raw}
  local flat = redis.call('ZREVRANGEBYSCORE', K_SNAPS, '+inf', '(' .. fstr(edge), 'WITHSCORES')
  local prefix = g .. '/'
  for j = 1, #flat, 2 do
    local m = flat[j]
    if string.sub(m, 1, 17) == prefix then
      out[#out + 1] = string.sub(m, 18)
      out[#out + 1] = flat[j + 1]
      out[#out + 1] = redis.call('HGET', K_META, m) or '{}'
    end
  end
  return out
end

if op == 'snap' then
  -- ARGV[4] "<group>/<id>". Returns {taken at, description, HTML or false, PNG or false}.
  local m = ARGV[4]
  local score = redis.call('ZSCORE', K_SNAPS, m)
  if not score or tonumber(score) <= edge then return {} end
  local bodies = redis.call('HMGET', K_BODIES, m .. ':h', m .. ':p')
  return {score, redis.call('HGET', K_META, m) or '{}', bodies[1], bodies[2]}
end

if op == 'forget' then
  redis.call('DEL', K_IDX, K_GROUPS, K_SNAPS, K_META, K_BODIES)
  return 1
end

return redis.error_reply('ERR errors.lua: unknown operation ' .. tostring(op))
