-- Runs (docs/runs.md, the rule: fleet.core.runs). Included after queue_common by
-- every queue script that moves a task. A task's run id rides in its record's JSON
-- tail as rn, only when it has one: a task without a run costs nothing here.
-- Keys (docs/redis-schema.md, "Runs"):
--   fleet:run:<id>        hash  state, name, oc (on_complete JSON), created_at,
--                               finished_at, c:<counter> totals, t:<type>:<counter>
--   fleet:run:<id>:live   set   "<type>|<task id>" of its live tasks (for run cancel)
--   fleet:run:<id>:keys:<n>  string  level n of its unique-key filter (below; dropped
--                               when it ends); the hash's kl/kn: levels, keys in the last
--   fleet:run:<id>:parked:<type>  list  bodies of its tasks a reserve took while it was
--                               paused (bg budget JSON, pr/pa why and when it paused)
--   fleet:run:<id>:parked set   the types that have such a list
-- The hash and the sets expire RUN_TTL_MS after the run ended (FLEET_RUN_TTL_SECONDS).
-- While it runs, all of them expire RUN_IDLE_MS after it last moved
-- (FLEET_RUN_IDLE_TTL_SECONDS; a task pushed with a delay counts as moving when due):
-- every move pushes their expiry forward (run_touch).
local RUN_TTL_MS = math.ceil((tonumber('__RUN_TTL__') or 604800) * 1000)
local RUN_IDLE_MS = math.ceil((tonumber('__RUN_IDLE_TTL__') or 86400) * 1000)
-- A move pushes the expiry forward only when that gains more than this: most moves
-- of a busy run cost one PTTL.
local RUN_TOUCH_SLACK_MS = math.min(60000, math.floor(RUN_IDLE_MS / 100))
-- The longest delay of a task of a run that does not say (fleet.core.runs).
local RUN_MAX_DELAY = 86400
-- The fleet's namespace prefix ('' or '<namespace>:') is what comes before
-- 'fleet:queue:' in the type's normal tier key; every run key carries it too.
local RUN_AT = string.find(K_NORMAL, 'fleet:queue:', 1, true)
local RUN_NS = string.sub(K_NORMAL, 1, RUN_AT - 1)
local RUN_PREFIX = RUN_NS .. 'fleet:run:'
local RUN_TYPE = string.sub(K_NORMAL, RUN_AT + 12) -- after 'fleet:queue:'
local RUN_DELTAS = {
  queued = {{'submitted', 1}, {'pending', 1}},
  duplicate = {{'duplicates', 1}},
  started = {{'pending', -1}, {'running', 1}},
  requeued = {{'running', -1}, {'pending', 1}},
  done = {{'running', -1}, {'done', 1}},
  expired = {{'pending', -1}, {'expired', 1}},
  replayed = {{'dead', -1}, {'pending', 1}},
}
local RUN_LEAVES = {done = true, dead = true, cancelled = true, expired = true}

-- unique_key: a scalable Bloom filter, at most 16 bytes per key. Level i holds up
-- to 1024 * 2^i keys at a false-positive rate of 2^-(30 + i), so the rate over all
-- levels stays below 2^-29 (two in a billion): a crawl of millions of pages loses
-- none to a false "seen" in practice. BF_LEVELS[i + 1] = {m bits (the prime at or
-- above -n ln p / ln2^2), k hashes (ceil(-log2 p))}, computed once (bench/run_keys.py
-- prints the check); 16 levels: 67 million keys a run (a Redis string holds at most
-- 2^32 bits; past them the last level takes the rest, its rate growing). Bit
-- offsets: triple hashing, a + j b + j^2 c modulo the prime m, of three 48-bit parts
-- of sha1(key) reduced modulo m. (Double hashing, a + j b, is not enough: two keys
-- whose two parts agree modulo m share every bit, one chance in m^2, which on the
-- small first levels is about one false positive a million keys; in m^3 it is none.)
-- A level is created at its full size (a SET of zero bytes: SETBIT would
-- over-allocate a growing string).
local BF_N0 = 1024
local BF_LEVELS = {{44351, 30}, {91621, 31}, {189127, 32}, {390043, 33}, {803669, 34},
  {1654649, 35}, {3403783, 36}, {6996611, 37}, {14371369, 38}, {29499143, 39},
  {60511037, 40}, {124047607, 41}, {254146271, 42}, {520394747, 43}, {1064993887, 44},
  {2178396589, 45}}

local function bf_shape(i)
  local shape = BF_LEVELS[math.min(i + 1, #BF_LEVELS)]
  local n = BF_N0 * 2 ^ i
  if i + 1 >= #BF_LEVELS then n = math.huge end
  return n, shape[1], shape[2]
end

-- The j-th bit of a key whose hash parts are h, in a level of m bits.
local function bf_bit(h, j, m)
  return (h[1] % m + j * (h[2] % m) + j * j * (h[3] % m)) % m
end

local function bf_set_args(h, m, k)
  local args = {}
  for j = 0, k - 1 do
    args[#args + 1] = 'SET'
    args[#args + 1] = 'u1'
    args[#args + 1] = bf_bit(h, j, m)
    args[#args + 1] = 1
  end
  return args
end

-- True if `uk` is in run `key`'s filter (or a false positive); else adds it. The
-- caller hashes the type with the key: a key belongs to a (run, type) pair.
local function bf_seen_or_add(key, uk)
  local hex = redis.sha1hex(uk)
  local h = {tonumber(string.sub(hex, 1, 12), 16), tonumber(string.sub(hex, 13, 24), 16),
             tonumber(string.sub(hex, 25, 36), 16)}
  local meta = redis.call('HMGET', key, 'kl', 'kn')
  local levels, filled = tonumber(meta[1]) or 0, tonumber(meta[2]) or 0
  for i = levels - 1, 0, -1 do
    local _, m, k = bf_shape(i)
    local level = key .. ':keys:' .. i
    local all = true
    for j = 0, k - 1 do
      -- One bit at a time: a key not in the level stops at its first 0 bit (after
      -- about two reads), where one BITFIELD would read all k.
      if redis.call('GETBIT', level, bf_bit(h, j, m)) == 0 then
        all = false
        break
      end
    end
    if all then return true end
  end
  if levels == 0 or filled >= bf_shape(levels - 1) then
    local _, m = bf_shape(levels)
    local bits = string.rep('\0', math.ceil(m / 8))
    local left = redis.call('PTTL', key)
    if left > 0 then
      redis.call('SET', key .. ':keys:' .. levels, bits, 'PX', left) -- expires with the run
    else
      redis.call('SET', key .. ':keys:' .. levels, bits)
    end
    levels, filled = levels + 1, 0
  end
  local _, m, k = bf_shape(levels - 1)
  redis.call('BITFIELD', key .. ':keys:' .. (levels - 1), unpack(bf_set_args(h, m, k)))
  redis.call('HSET', key, 'kl', levels, 'kn', filled + 1)
  return false
end

local function run_drop_keys(key)
  local levels = tonumber(redis.call('HGET', key, 'kl')) or 0
  for i = 0, levels - 1 do redis.call('DEL', key .. ':keys:' .. i) end
end

-- Push a run's on_complete task into its type's queue, with the fixed key layout
-- of fleet.backends.redis.keys (the normal tier, :tasks and its buckets, :counters, :wake) and
-- the fixed id run-<id>-complete: pushed once, in the step that ended the run.
local function run_callback(rn, key, oc_json, now)
  local ok, oc = pcall(cjson.decode, oc_json)
  if not ok or type(oc) ~= 'table' or type(oc.type) ~= 'string' then return end
  -- A type name as fleet.core.contracts.check_name has it (runs.create checks it):
  -- never a name that would reach another key (a ':' or '*' in it).
  if #oc.type > 128 or not string.match(oc.type, '^[A-Za-z0-9][A-Za-z0-9_.%-]*$') then return end
  local q = RUN_NS .. 'fleet:queue:' .. oc.type
  local id = 'run-' .. rn .. '-complete'
  local old, was = rec_text(q .. ':tasks', id)
  if old then
    local rec = dec(old)
    if rec and (rec.s == 'q' or rec.s == 's' or rec.s == 'p') then return end
  end
  local counters = {}
  local flat = redis.call('HGETALL', key)
  for i = 1, #flat, 2 do
    local name = string.match(flat[i], '^c:(.*)$')
    if name then counters[name] = tonumber(flat[i + 1]) end
  end
  local payload = jnull(oc.payload)
  if type(payload) ~= 'table' then payload = {} end
  payload.run = {run_id = rn, state = 'done', counters = counters}
  local raw = '{"id":' .. cjson.encode(id) .. ',"payload":' .. cjson.encode(payload) ..
    ',"enqueued_at":' .. fstr(now) .. '}'
  rec_store(q .. ':tasks', id, enc({s = 'q', a = 0, p = 0, d = '/' .. fstr(now)}), was)
  if redis.call('EXISTS', q .. ':browse') == 1 then
    redis.call('ZADD', q .. IDX_SUFFIX.q, fstr(now), id)
  end
  redis.call('RPUSH', q, raw)
  redis.call('HINCRBY', q .. ':counters', 'submitted', 1)
  if redis.call('LLEN', q .. ':wake') < WAKE_CAP then redis.call('LPUSH', q .. ':wake', '1') end
end

-- Publish a run's end (topic runs, as memory and SQLite do) on the channel prefix of
-- this database, which run_create stores in fleet:runs:channel (a script cannot
-- tell its database number); the message is the run's record and event: ended.
local RUN_COUNTERS = {'submitted', 'pending', 'running', 'done', 'dead', 'cancelled',
  'expired', 'duplicates'}

local function run_publish(rn, key)
  local prefix = redis.call('GET', RUN_NS .. 'fleet:runs:channel')
  if not prefix then return end
  local flat = redis.call('HGETALL', key)
  local h = {}
  for i = 1, #flat, 2 do h[flat[i]] = flat[i + 1] end
  local counters, by_type = {}, {}
  for _, name in ipairs(RUN_COUNTERS) do counters[name] = tonumber(h['c:' .. name]) or 0 end
  for field, value in pairs(h) do
    local t, name = string.match(field, '^t:(.*):([^:]*)$')
    if t then
      if not by_type[t] then
        by_type[t] = {}
        for _, n in ipairs(RUN_COUNTERS) do by_type[t][n] = 0 end
      end
      by_type[t][name] = tonumber(value) or 0
    end
  end
  local oc = cjson.null
  if h.oc then
    local ok, decoded = pcall(cjson.decode, h.oc)
    if ok then oc = decoded end
  end
  local msg = {event = 'ended', run_id = rn, name = h.name or cjson.null, state = h.state,
               on_complete = oc, created_at = tonumber(h.created_at),
               finished_at = tonumber(h.finished_at), counters = counters, by_type = by_type}
  redis.call('PUBLISH', prefix .. 'runs', cjson.encode(msg))
end

-- End a run (state done or cancelled) at now: its keys go, everything of it
-- expires RUN_TTL_MS from now, and a run that ended done pushes its callback.
local function run_end(rn, key, state, now)
  redis.call('HSET', key, 'state', state, 'finished_at', fstr(now))
  run_drop_keys(key)
  redis.call('PEXPIRE', key, RUN_TTL_MS)
  redis.call('PEXPIRE', key .. ':live', RUN_TTL_MS)
  if state == 'done' then
    local oc = redis.call('HGET', key, 'oc')
    if oc then run_callback(rn, key, oc, now) end
  end
  run_publish(rn, key)
end

-- Run `key` moved: if it is running, it and its keys expire RUN_IDLE_MS (plus
-- `ahead_ms`, a pushed task's delay) from now, unless they live longer already.
local function run_touch(key, ahead_ms)
  local ms = RUN_IDLE_MS + ahead_ms
  local left = redis.call('PTTL', key)
  -- -2: gone; -1: a run from before runs expired when idle, touched now.
  if left == -2 or (left >= 0 and left + RUN_TOUCH_SLACK_MS >= ms) then return end
  local v = redis.call('HMGET', key, 'state', 'kl')
  -- an ended run keeps its FLEET_RUN_TTL_SECONDS
  if v[1] ~= 'running' and v[1] ~= 'paused' then return end
  redis.call('PEXPIRE', key, ms)
  redis.call('PEXPIRE', key .. ':live', ms)
  for i = 0, (tonumber(v[2]) or 0) - 1 do redis.call('PEXPIRE', key .. ':keys:' .. i, ms) end
  if v[1] == 'paused' then
    redis.call('PEXPIRE', key .. ':parked', ms)
    for _, t in ipairs(redis.call('SMEMBERS', key .. ':parked')) do
      redis.call('PEXPIRE', key .. ':parked:' .. t, ms)
    end
  end
end

-- One event of task `id` (of this script's type) of run `rn` (nothing if nil or
-- gone): the counters move, and the run ends if the rule says so.
local function run_event(rn, id, event, from_running, now)
  if not rn then return end
  local key = RUN_PREFIX .. rn
  local deltas = RUN_DELTAS[event]
  if not deltas then deltas = {{from_running and 'running' or 'pending', -1}, {event, 1}} end
  if redis.call('EXISTS', key) == 0 then return end
  for _, d in ipairs(deltas) do
    redis.call('HINCRBY', key, 'c:' .. d[1], d[2])
    redis.call('HINCRBY', key, 't:' .. RUN_TYPE .. ':' .. d[1], d[2])
  end
  run_touch(key, 0)
  if event == 'queued' or event == 'replayed' then
    local live = key .. ':live'
    if redis.call('SADD', live, RUN_TYPE .. '|' .. id) == 1 and redis.call('PTTL', live) == -1 then
      -- A new set: it expires with the run's hash.
      local left = redis.call('PTTL', key)
      if left > 0 then redis.call('PEXPIRE', live, left) end
    end
  elseif RUN_LEAVES[event] then
    redis.call('SREM', key .. ':live', RUN_TYPE .. '|' .. id)
  end
  if event == 'queued' or event == 'duplicate' or event == 'started' or event == 'replayed' then
    return
  end
  local v = redis.call('HMGET', key, 'state', 'c:submitted', 'c:pending', 'c:running')
  if (v[1] == 'running' or v[1] == 'paused') and (tonumber(v[2]) or 0) > 0
      and (tonumber(v[3]) or 0) <= 0 and (tonumber(v[4]) or 0) <= 0 then
    run_end(rn, key, 'done', now)
  end
end

-- The state of run `rn` (nil if gone), read as a reserve takes a task of it. A run
-- cancel answers its live tasks and cancels them one call each; a task of it popped
-- in between is dropped by the reserve, so none of a cancelled run's queued tasks
-- starts; a paused run's is parked (run_park).
local function run_state(rn)
  return redis.call('HGET', RUN_PREFIX .. rn, 'state')
end

-- Set the body of a task of paused run `rn` aside (it stays queued: its record, its
-- browse entry and the run's pending count are unchanged) until the run resumes
-- (run_unpark.lua); the lists expire with the run.
local function run_park(rn, raw)
  local key = RUN_PREFIX .. rn
  local list = key .. ':parked:' .. RUN_TYPE
  redis.call('RPUSH', list, raw)
  redis.call('SADD', key .. ':parked', RUN_TYPE)
  local left = redis.call('PTTL', key)
  if left > 0 then
    redis.call('PEXPIRE', list, left)
    redis.call('PEXPIRE', key .. ':parked', left)
  end
end

-- Whether a push into run `rn` with unique key `uk` (or nil), due `delay` seconds
-- from now, may be queued: 'ok', 'duplicate' (the key was seen in this type:
-- counted), 'delay' (past the run's max_delay_seconds) or 'refused' (the run is not
-- running, or `rn` is not a run id: nothing else is ever read for it).
local function run_admit(rn, uk, id, delay)
  if type(rn) ~= 'string' or #rn ~= 32 or string.find(rn, '[^0-9a-f]') then return 'refused' end
  local key = RUN_PREFIX .. rn
  local v = redis.call('HMGET', key, 'state', 'md')
  if v[1] ~= 'running' and v[1] ~= 'paused' then return 'refused' end
  if delay > (tonumber(v[2]) or RUN_MAX_DELAY) then return 'delay' end
  if uk and bf_seen_or_add(key, RUN_TYPE .. '\0' .. uk) then
    run_event(rn, id, 'duplicate', false, 0)
    return 'duplicate'
  end
  if delay > 0 then run_touch(key, math.ceil(delay * 1000)) end
  return 'ok'
end
