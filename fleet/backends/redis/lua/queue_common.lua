-- Shared by every queue script. KEYS (built by redis_keys.queue_keys):
--  1 normal tier list   2 high tier list   3 low tier list
--  4 :processing zset   5 :processing:body hash   6 :scheduled zset
--  7 :dead list   8 :tasks hash   9 :counters hash   10 :done:<hour> hash
--  11 :wake list   12 :dead:info hash   13 previous :done:<hour> hash
--  14 :processing:started hash (task_id -> token of the reservation marked started)
-- KEYS 10 is :done:<hour>, the hash of this hour's finished (done/cancelled) records.
-- Task state records (:tasks, :dead:info and :done:<hour> values) are
--   s|a|m|p|k|c|x|d[|{"e":..,"t":..,"f":..,"b":..,"r":..}]
-- s state (q|s|p|D|C), a attempt, m max_attempts, p priority, k lease token,
-- c "1" if a cancel was requested, x expires_at (ttl), d finished_at, and only
-- when set a JSON tail: e last_error, t traceback, f failed_at, b the scheduled
-- member (body) while scheduled, r refunds (attempts sweep gave back because the
-- reservation expired without a start mark), g the flow-control group. The hot
-- fields need no JSON work. Times are
-- strings ("%.17g") because cjson rounds numbers to 14 digits. Bodies are never
-- re-encoded.
local K_NORMAL, K_HIGH, K_LOW = KEYS[1], KEYS[2], KEYS[3]
local K_PROC, K_PBODY, K_SCHED = KEYS[4], KEYS[5], KEYS[6]
local K_DEAD, K_TASKS, K_COUNTERS = KEYS[7], KEYS[8], KEYS[9]
local K_DONE, K_WAKE, K_DEADINFO, K_DONE_PREV = KEYS[10], KEYS[11], KEYS[12], KEYS[13]
local K_STARTED = KEYS[14]
-- KEYS 15-21, flow control (used by queue_groups.lua): 15 :groups hash,
-- 16 :groups:ready zset, 17 :groups:delayed zset, 18 :groups:conf hash,
-- 19 :groups:names zset, 20 :groups:meta hash, 21 the prefix of the group lists.
-- Finished records live in hourly hashes that expire as a whole (no per-task index).
local DONE_TTL = 7200
local done_ttl_set = false
local WAKE_CAP = 64
local DRAIN_LIMIT = 1000

local function jnull(v)
  if v == cjson.null then return nil end
  return v
end

local function fstr(x)
  return string.format('%.17g', x)
end

local function tier_key(prio)
  prio = tonumber(prio) or 0
  if prio > 0 then return K_HIGH end
  if prio < 0 then return K_LOW end
  return K_NORMAL
end

local REC_PATTERN = '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|?(.*)$'

local function dec(raw)
  local s, a, m, p, k, c, x, d, rest = string.match(raw, REC_PATTERN)
  if not s then return nil end
  local rec = {s = s, a = tonumber(a), m = tonumber(m), p = tonumber(p) or 0}
  if k ~= '' then rec.k = k end
  if c ~= '' then rec.c = 1 end
  if x ~= '' then rec.x = x end
  if d ~= '' then rec.d = d end
  if rest ~= '' then
    local extra = cjson.decode(rest)
    rec.e = jnull(extra.e)
    rec.t = jnull(extra.t)
    rec.f = jnull(extra.f)
    rec.b = jnull(extra.b)
    rec.r = tonumber(jnull(extra.r))
    rec.g = jnull(extra.g)
  end
  return rec
end

local function enc(rec)
  local head = (rec.s or '') .. '|' .. (rec.a or '') .. '|' .. (rec.m or '') .. '|' ..
    (rec.p or 0) .. '|' .. (rec.k or '') .. '|' .. (rec.c and '1' or '') .. '|' ..
    (rec.x or '') .. '|' .. (rec.d or '')
  if rec.e or rec.t or rec.f or rec.b or rec.r or rec.g then
    return head .. '|' .. cjson.encode({e = rec.e, t = rec.t, f = rec.f, b = rec.b, r = rec.r,
                                        g = rec.g})
  end
  return head
end

local function get_rec(id)
  local raw = redis.call('HGET', K_TASKS, id)
  if not raw then return nil end
  return dec(raw)
end

local function set_rec(id, rec)
  redis.call('HSET', K_TASKS, id, enc(rec))
end

-- One command over many arguments (in chunks the Lua stack can take): batching
-- the per-task writes saves most of a script's cost.
local function mcall(cmd, key, args)
  local n = #args
  local i = 1
  while i <= n do
    local j = math.min(i + 999, n)
    redis.call(cmd, key, unpack(args, i, j))
    i = j + 1
  end
end

local function touch_done()
  if not done_ttl_set then
    redis.call('EXPIRE', K_DONE, DONE_TTL)
    done_ttl_set = true
  end
end

local function count(name, n)
  redis.call('HINCRBY', K_COUNTERS, name, n or 1)
end

-- Wake up to n blocked reservers; the list never grows past WAKE_CAP. While
-- nobody consumes it (no worker running) it stays full and a push costs one LLEN.
local function wake(n)
  if n <= 0 then return end
  local room = WAKE_CAP - redis.call('LLEN', K_WAKE)
  if n > room then n = room end
  if n <= 0 then return end
  local args = {}
  for i = 1, n do args[i] = '1' end
  redis.call('LPUSH', K_WAKE, unpack(args))
end

-- Decode a body; returns (body table, id string) or nil if unusable.
local function decode_body(raw)
  local ok, body = pcall(cjson.decode, raw)
  if not ok or type(body) ~= 'table' then return nil end
  local id = jnull(body.id)
  if id == nil or (type(id) ~= 'string' and type(id) ~= 'number') then return nil end
  return body, tostring(id)
end

local function finish(id, rec, state, now)
  rec.s = state
  rec.k = nil
  rec.c = nil
  rec.b = nil
  rec.d = fstr(now)
  redis.call('HDEL', K_TASKS, id)
  redis.call('HSET', K_DONE, id, enc(rec))
  touch_done()
end

-- Bury a body in the DLQ with its record (the live record goes away).
local function bury(id, raw, rec)
  rec.s = nil
  rec.k = nil
  rec.b = nil
  redis.call('HDEL', K_TASKS, id)
  redis.call('HSET', K_DEADINFO, id, enc(rec))
  redis.call('RPUSH', K_DEAD, raw)
  count('dead')
end

-- The owned record of a lease, or nil if the token does not hold the task.
local function owned(id, token)
  local rec = get_rec(id)
  if rec and rec.s == 'p' and rec.k == token then return rec end
  return nil
end

local function unregister(id)
  redis.call('ZREM', K_PROC, id)
  local raw = redis.call('HGET', K_PBODY, id)
  redis.call('HDEL', K_PBODY, id)
  redis.call('HDEL', K_STARTED, id)
  return raw
end
