-- @include queue_common queue_groups run_common
-- ARGV: now, JSON array of requests, then the body JSON of each request in order.
-- A request is
--   [id, priority, ready_at (0 = now), idempotency KEYS index (0 = none),
--    idempotency ttl ms, attempt, max_attempts (null = none), expires_at (null = no ttl),
--    group (null = none), submitted_at[, trace id (null = none)[, run id[, unique key]]]]
-- (the trace id only for a traced task or one with a run; the run id only for a task
-- of a run, the unique key only when it has one)
-- (one JSON argument instead of eight per request: far cheaper to send and parse;
-- bodies go as arguments of their own so neither side escapes them into a string).
-- Returns per request: queued (1|0|2: refused, its run is not running|3: refused,
-- delayed past its run's max_delay_seconds), task id (the original one for a
-- duplicate).
local now = tonumber(ARGV[1])
local reqs = cjson.decode(ARGV[2])
local out = {}
local tails = {[K_HIGH] = {}, [K_NORMAL] = {}, [K_LOW] = {}}
local ready, delayed, submitted = 0, 0, 0
-- `live` also catches an id given twice in one call; `was` is where each id's
-- record is (see rec_store).
local live, was = {}, {}
-- The browse indexes' (submitted time, id) pairs of the queued and the delayed
-- (nil while the type is not browsed: see IDX_SUFFIX).
local indexed = idx_keeping() and {q = {}, s = {}} or nil
for _, r in ipairs(reqs) do
  local id = r[1]
  if was[id] == nil then
    local raw, at = rec_text(K_TASKS, id)
    was[id] = at
    local rec = raw and dec(raw)
    if rec and (rec.s == 'q' or rec.s == 's' or rec.s == 'p') then live[id] = true end
  end
end
for n, r in ipairs(reqs) do
  local id, raw, prio, ready_at, ik = r[1], ARGV[2 + n], r[2], r[3], r[4]
  local dup = nil
  if ik > 0 then
    dup = redis.call('GET', KEYS[ik]) or nil
  end
  if not dup and live[id] then dup = id end
  local rn = jnull(r[12])
  local verdict = 'ok'
  if rn and not dup then
    verdict = run_admit(rn, jnull(r[13]), id, ready_at > 0 and ready_at - now or 0)
  end
  if dup or verdict == 'duplicate' then
    out[#out + 1] = 0
    out[#out + 1] = dup or id
  elseif verdict == 'refused' or verdict == 'delay' then
    out[#out + 1] = verdict == 'delay' and 3 or 2
    out[#out + 1] = id
  else
    if ik > 0 then redis.call('SET', KEYS[ik], id, 'PX', r[5]) end
    local group = jnull(r[9])
    local rec = {p = prio, a = r[6], m = jnull(r[7]), x = jnull(r[8]), g = group,
                 d = '/' .. r[10], tr = jnull(r[11]), rn = rn}
    if ready_at > 0 then
      redis.call('ZADD', K_SCHED, ready_at, raw)
      rec.s = 's'
      rec.b = raw
      delayed = 1
    elseif group then
      gpush(group, tier_index(prio), raw, false)
      rec.s = 'q'
      ready = ready + 1
    else
      local tail = tails[tier_key(prio)]
      tail[#tail + 1] = raw
      rec.s = 'q'
      ready = ready + 1
    end
    live[id] = true
    if rn then run_event(rn, id, 'queued', false, now) end
    was[id] = rec_store(K_TASKS, id, enc(rec), was[id])
    if indexed then
      local ix = indexed[rec.s]
      ix[#ix + 1] = rec.d and string.sub(rec.d, 2) or '0'
      ix[#ix + 1] = id
    end
    submitted = submitted + 1
    out[#out + 1] = 1
    out[#out + 1] = id
  end
end
for key, tail in pairs(tails) do
  for i = 1, #tail, 500 do
    redis.call('RPUSH', key, unpack(tail, i, math.min(i + 499, #tail)))
  end
end
for st, ix in pairs(indexed or {}) do
  if #ix > 0 then mcall('ZADD', idx_key(K_NORMAL, st), ix) end
end
if submitted > 0 then count('submitted', submitted) end
-- A delayed push also wakes one reserver so it re-bounds its wait by the new due time.
wake(ready + delayed)
return out
