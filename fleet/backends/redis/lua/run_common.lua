-- Runs (docs/runs.md, the rule: fleet.core.runs). Included after queue_common by
-- every queue script that moves a task. A task's run id rides in its record's JSON
-- tail as rn, only when it has one: a task without a run costs nothing here.
-- Keys (docs/redis-schema.md, "Runs"):
--   fleet:run:<id>        hash  state, name, oc (on_complete JSON), created_at,
--                               finished_at, c:<counter> totals, t:<type>:<counter>
--   fleet:run:<id>:live   set   "<type>|<task id>" of its live tasks (for run cancel)
--   fleet:run:<id>:keys   set   its unique keys (exact; dropped when it ends)
-- The hash and the sets expire RUN_TTL_MS after the run ended (FLEET_RUN_TTL_SECONDS).
local RUN_TTL_MS = math.ceil((tonumber('__RUN_TTL__') or 604800) * 1000)
local RUN_PREFIX = 'fleet:run:'
local RUN_TYPE = string.sub(K_NORMAL, 13) -- after 'fleet:queue:'
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

-- Push a run's on_complete task into its type's queue, with the fixed key layout
-- of fleet.backends.redis.keys (the normal tier, :tasks, :counters, :wake) and
-- the fixed id run-<id>-complete: pushed once, in the step that ended the run.
local function run_callback(rn, key, oc_json, now)
  local ok, oc = pcall(cjson.decode, oc_json)
  if not ok or type(oc) ~= 'table' or type(oc.type) ~= 'string' then return end
  local q = 'fleet:queue:' .. oc.type
  local id = 'run-' .. rn .. '-complete'
  local old = redis.call('HGET', q .. ':tasks', id)
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
    ',"priority":0,"attempt":0,"max_attempts":null,"enqueued_at":' .. fstr(now) .. '}'
  redis.call('HSET', q .. ':tasks', id, enc({s = 'q', a = 0, p = 0, d = '/' .. fstr(now)}))
  redis.call('RPUSH', q, raw)
  redis.call('HINCRBY', q .. ':counters', 'submitted', 1)
  if redis.call('LLEN', q .. ':wake') < WAKE_CAP then redis.call('LPUSH', q .. ':wake', '1') end
end

-- End a run (state done or cancelled) at now: its keys go, everything of it
-- expires RUN_TTL_MS from now, and a run that ended done pushes its callback.
local function run_end(rn, key, state, now)
  redis.call('HSET', key, 'state', state, 'finished_at', fstr(now))
  redis.call('DEL', key .. ':keys')
  redis.call('PEXPIRE', key, RUN_TTL_MS)
  redis.call('PEXPIRE', key .. ':live', RUN_TTL_MS)
  if state == 'done' then
    local oc = redis.call('HGET', key, 'oc')
    if oc then run_callback(rn, key, oc, now) end
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
  if event == 'queued' or event == 'replayed' then
    redis.call('SADD', key .. ':live', RUN_TYPE .. '|' .. id)
  elseif RUN_LEAVES[event] then
    redis.call('SREM', key .. ':live', RUN_TYPE .. '|' .. id)
  end
  if event == 'queued' or event == 'duplicate' or event == 'started' or event == 'replayed' then
    return
  end
  local v = redis.call('HMGET', key, 'state', 'c:submitted', 'c:pending', 'c:running')
  if v[1] == 'running' and (tonumber(v[2]) or 0) > 0 and (tonumber(v[3]) or 0) <= 0
      and (tonumber(v[4]) or 0) <= 0 then
    run_end(rn, key, 'done', now)
  end
end

-- Whether a push into run `rn` with unique key `uk` (or nil) may be queued:
-- 'ok', 'duplicate' (counted) or 'refused' (the run is not running).
local function run_admit(rn, uk, id)
  local key = RUN_PREFIX .. rn
  if redis.call('HGET', key, 'state') ~= 'running' then return 'refused' end
  if uk and redis.call('SADD', key .. ':keys', uk) == 0 then
    run_event(rn, id, 'duplicate', false, 0)
    return 'duplicate'
  end
  return 'ok'
end
