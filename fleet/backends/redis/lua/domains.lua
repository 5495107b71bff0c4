-- Proxy tiers per domain (fleet/backends/redis/domains.py). The rule is
-- fleet/core/tiers.py's `step`, written again here and held to it by
-- tests/conformance/test_differential_domains.py; what a stored state or config reads
-- as is fleet/core/tier_store.py's.
-- KEYS: 1 fleet:domains:<type> hash domain -> state JSON {tier, since, window_start,
--   window_blocks, probe_streak, counts {"<tier>:<kind>": n}, last_kind, last_vendor,
--   last_at, changes} (times as "%.17g" text: cjson rounds numbers to 14 digits),
--   2 fleet:domains:<type>:names zset domain -> 0 (pages by name), 3 fleet:config:<type>
--   (the type-wide config, read only).
-- ARGV[1] the operation, ARGV[2] now; then per operation (below).
local K_STATES, K_NAMES, K_CONFIG = KEYS[1], KEYS[2], KEYS[3]
local op = ARGV[1]
local now = tonumber(ARGV[2])

local ESCALATING = {blocked = true, challenge = true, captcha = true}

local function fstr(x)
  return string.format('%.17g', x)
end

local function finite(x)
  return x == x and x ~= math.huge and x ~= -math.huge
end

-- A stored time: a number or numeric text, finite; else 0.
local function real(x)
  if type(x) == 'string' then x = tonumber(x) end
  if type(x) ~= 'number' or not finite(x) then return 0 end
  return x
end

-- A stored count: an integral finite number; else 0.
local function int(x)
  if type(x) ~= 'number' or not finite(x) or math.floor(x) ~= x then return 0 end
  return x
end

local function text(x)
  if type(x) == 'string' then return x end
  return nil
end

-- The stored state of a domain (nil: none, or one that does not decode).
local function read(domain)
  local raw = redis.call('HGET', K_STATES, domain)
  if not raw then return nil end
  local ok, doc = pcall(cjson.decode, raw)
  if not ok or type(doc) ~= 'table' then return nil end
  local counts = {}
  if type(doc.counts) == 'table' then
    for k, v in pairs(doc.counts) do
      if type(k) == 'string' and type(v) == 'number' and int(v) == v then counts[k] = v end
    end
  end
  return {
    tier = int(doc.tier),
    since = real(doc.since),
    window_start = real(doc.window_start),
    window_blocks = int(doc.window_blocks),
    probe_streak = int(doc.probe_streak),
    counts = counts,
    last_kind = text(doc.last_kind),
    last_vendor = text(doc.last_vendor),
    last_at = real(doc.last_at),
    changes = int(doc.changes),
  }
end

local function fresh()
  return {
    tier = 0, since = now, window_start = 0, window_blocks = 0, probe_streak = 0,
    counts = {}, last_at = 0, changes = 0,
  }
end

local function encode(s)
  return cjson.encode({
    tier = s.tier,
    since = fstr(s.since),
    window_start = fstr(s.window_start),
    window_blocks = s.window_blocks,
    probe_streak = s.probe_streak,
    counts = s.counts,
    last_kind = s.last_kind,
    last_vendor = s.last_vendor,
    last_at = fstr(s.last_at),
    changes = s.changes,
  })
end

local function save(domain, s)
  local doc = encode(s)
  redis.call('HSET', K_STATES, domain, doc)
  redis.call('ZADD', K_NAMES, 0, domain)
  return doc
end

local function whole(v)
  return type(v) == 'number' and finite(v) and math.floor(v) == v
end

-- The rule's numbers: the caller's, where the stored type-wide config sets none of its
-- own of the right type (a config that cannot be read sets none).
local function rule_of(rule)
  local raw = redis.pcall('GET', K_CONFIG)
  if type(raw) ~= 'string' then return rule end
  local ok, cfg = pcall(cjson.decode, raw)
  if not ok or type(cfg) ~= 'table' then return rule end
  local tiers = cfg.proxy_tiers
  if type(tiers) == 'table' then
    local list = true
    for k in pairs(tiers) do
      if type(k) ~= 'number' then list = false end
    end
    if list then rule.tiers = math.max(#tiers, 1) end
  end
  if whole(cfg.tier_escalate_after) then rule.escalate_after = cfg.tier_escalate_after end
  local v = cfg.tier_window_seconds
  if type(v) == 'number' and finite(v) then rule.window = v end
  v = cfg.tier_probe_after_seconds
  if type(v) == 'number' and finite(v) then rule.probe_after = v end
  if whole(cfg.tier_probe_successes) then rule.probe_successes = cfg.tier_probe_successes end
  return rule
end

local function moved(s, tier)
  s.tier = tier
  s.since = now
  s.window_start = 0
  s.window_blocks = 0
  s.probe_streak = 0
  s.changes = s.changes + 1
  return s
end

local function probing(s, rule)
  return s.tier > 0 and now - s.since >= rule.probe_after
end

-- fleet.core.tiers.step: the state after `count` verdicts of `kind` met at `tier`, and
-- the change ('up', 'down' or '').
local function step(s, rule, tier, kind, vendor, count)
  if s == nil then s = fresh() end
  local top = math.max(rule.tiers - 1, 0)
  local cur = math.min(s.tier, top)
  local key = string.format('%d:%s', tier, kind)
  s.counts[key] = (s.counts[key] or 0) + count
  s.tier = cur
  s.last_kind = kind
  s.last_vendor = vendor
  s.last_at = now
  if ESCALATING[kind] then
    if tier == cur then
      local blocks, start
      if s.window_start ~= 0 and now - s.window_start <= rule.window then
        blocks, start = s.window_blocks + count, s.window_start
      else
        blocks, start = count, now
      end
      if blocks >= rule.escalate_after and cur < top then return moved(s, cur + 1), 'up' end
      s.window_start = start
      s.window_blocks = blocks
      return s, ''
    end
    if tier == cur - 1 and probing(s, rule) then
      s.probe_streak = 0
      s.since = now
    end
    return s, ''
  end
  if kind == 'ok' and tier == cur - 1 and probing(s, rule) then
    local streak = s.probe_streak + count
    if streak >= rule.probe_successes then return moved(s, cur - 1), 'down' end
    s.probe_streak = streak
  end
  return s, ''
end

if op == 'record' then
  -- ARGV[3] domain, [4] tier met, [5] kind, [6] vendor ('' none, else '=' .. vendor),
  -- [7] count, [8..12] the caller's rule: tiers, escalate_after, window_seconds,
  -- probe_after_seconds, probe_successes. Returns {state JSON, change}.
  local domain = ARGV[3]
  local vendor = nil
  if ARGV[6] ~= '' then vendor = string.sub(ARGV[6], 2) end
  local rule = rule_of({
    tiers = tonumber(ARGV[8]),
    escalate_after = tonumber(ARGV[9]),
    window = tonumber(ARGV[10]),
    probe_after = tonumber(ARGV[11]),
    probe_successes = tonumber(ARGV[12]),
  })
  local s, change = step(read(domain), rule, tonumber(ARGV[4]), ARGV[5], vendor, tonumber(ARGV[7]))
  return {save(domain, s), change}
end

if op == 'set' then
  -- ARGV[3] domain, [4] tier: an operator's choice (since now, window and streak start
  -- over; a move counts as a change). Returns the state JSON.
  local domain, tier = ARGV[3], tonumber(ARGV[4])
  local s = read(domain) or fresh()
  if tier ~= s.tier then s.changes = s.changes + 1 end
  s.tier = tier
  s.since = now
  s.window_start = 0
  s.window_blocks = 0
  s.probe_streak = 0
  return save(domain, s)
end

if op == 'forget' then
  -- ARGV[3] domain; returns 1|0.
  redis.call('ZREM', K_NAMES, ARGV[3])
  return redis.call('HDEL', K_STATES, ARGV[3])
end

if op == 'page' then
  -- ARGV[3] after ('' from the first), [4] how many; returns domain, state JSON, ...
  local from = ARGV[3] == '' and '-' or ('(' .. ARGV[3])
  local names = redis.call('ZRANGE', K_NAMES, from, '+', 'BYLEX', 'LIMIT', 0, tonumber(ARGV[4]))
  local out = {}
  for _, d in ipairs(names) do
    out[#out + 1] = d
    out[#out + 1] = redis.call('HGET', K_STATES, d) or ''
  end
  return out
end

return redis.error_reply('unknown domains operation ' .. tostring(op))
