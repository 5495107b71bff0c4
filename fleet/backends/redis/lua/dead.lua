-- @include queue_common queue_groups run_common
-- ARGV: op, ...
--   peek n            -> flat (body, info JSON or '') of the n oldest dead
--   replay n          -> replays the n oldest (n = -1: all); returns how many
--   replay_ids id...  -> replays the given ids; returns how many
--   clear             -> removes every dead task; returns how many
--   pick_replay id... -> replays the given ids; returns flat (id, 1 replayed | 0 taken
--                        out, a live task of the id won) per id found in the DLQ
--   pick_delete id... -> removes the given ids; returns the ids found in the DLQ
local op = ARGV[1]
if op == 'peek' then
  local n = tonumber(ARGV[2])
  local out = {}
  if n <= 0 then return out end
  for _, raw in ipairs(redis.call('LRANGE', K_DEAD, 0, n - 1)) do
    local body, id = decode_body(raw)
    out[#out + 1] = raw
    out[#out + 1] = (id and redis.call('HGET', K_DEADINFO, id)) or ''
  end
  return out
end
if op == 'clear' then
  local n = redis.call('LLEN', K_DEAD)
  redis.call('UNLINK', K_DEAD, K_DEADINFO, K_NORMAL .. IDX_SUFFIX.x)
  return n
end

local function replay_one(raw)
  local body, id = decode_body(raw)
  if not body then
    redis.call('RPUSH', K_NORMAL, raw)
    return 1
  end
  local group = jnull(body.group)
  local info = redis.call('HGET', K_DEADINFO, id)
  redis.call('HDEL', K_DEADINFO, id)
  redis.call('ZREM', K_NORMAL .. IDX_SUFFIX.x, id)
  local live = get_rec(id)
  if live and (live.s == 'q' or live.s == 's' or live.s == 'p') then
    return 0 -- the id was pushed again meanwhile; the live task wins
  end
  -- A new life: the record of the dead one goes.
  redis.call('ZREM', K_FINISHED, id)
  redis.call('DEL', K_REC .. id, K_REC .. id .. ':out')
  local rec
  if info then
    rec = dec(info)
  else
    rec = {p = tonumber(jnull(body.priority)) or 0, m = tonumber(jnull(body.max_attempts))}
    local ttl = tonumber(jnull(body.ttl_seconds))
    if ttl then rec.x = fstr((tonumber(jnull(body.enqueued_at)) or 0) + ttl) end
  end
  rec.a = 0
  rec.r = nil
  rec.b = nil
  rec.s = 'q'
  rec.k = nil
  rec.c = nil
  if type(group) == 'string' then rec.g = group end
  set_rec(id, rec)
  requeue(raw, rec, false)
  run_event(rec.rn, id, 'replayed', false, 0)
  return 1
end

-- The DLQ entries (raw bodies) of the ids in ARGV[2..], first occurrence each: one
-- LRANGE per 1,000 entries, stopping once every id was found.
local function find_ids()
  local want = {}
  local left = 0
  for i = 2, #ARGV do
    if not want[ARGV[i]] then left = left + 1 end
    want[ARGV[i]] = true
  end
  local len = redis.call('LLEN', K_DEAD)
  local hits, hit_ids = {}, {}
  local start, chunk = 0, 1000
  while start < len and left > 0 do
    for _, raw in ipairs(redis.call('LRANGE', K_DEAD, start, start + chunk - 1)) do
      local body, id = decode_body(raw)
      if body and want[id] then
        want[id] = nil
        left = left - 1
        hits[#hits + 1] = raw
        hit_ids[#hit_ids + 1] = id
      end
    end
    start = start + chunk
  end
  return hits, hit_ids
end

if op == 'pick_delete' then
  local hits, hit_ids = find_ids()
  for i, raw in ipairs(hits) do
    redis.call('LREM', K_DEAD, 1, raw)
    redis.call('HDEL', K_DEADINFO, hit_ids[i])
  end
  mcall('ZREM', K_NORMAL .. IDX_SUFFIX.x, hit_ids)
  return hit_ids
end

local replayed = 0
if op == 'pick_replay' then
  local hits, hit_ids = find_ids()
  local out = {}
  for i, raw in ipairs(hits) do
    redis.call('LREM', K_DEAD, 1, raw)
    local one = replay_one(raw)
    replayed = replayed + one
    out[#out + 1] = hit_ids[i]
    out[#out + 1] = one
  end
  wake(replayed)
  return out
end
if op == 'replay' then
  local n = tonumber(ARGV[2])
  if n < 0 then n = redis.call('LLEN', K_DEAD) end
  if n > 0 then
    local items = redis.call('LPOP', K_DEAD, n)
    if items then
      for _, raw in ipairs(items) do replayed = replayed + replay_one(raw) end
    end
  end
elseif op == 'replay_ids' then
  local hits = find_ids()
  for _, raw in ipairs(hits) do
    redis.call('LREM', K_DEAD, 1, raw)
    replayed = replayed + replay_one(raw)
  end
end
wake(replayed)
return replayed
