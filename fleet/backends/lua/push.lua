-- @include queue_common
-- ARGV: now, n, then per request 8 fields:
--   id, body JSON, priority, ready_at (0 = now), idempotency KEYS index (0 = none),
--   idempotency ttl ms, attempt, max_attempts ('' = none)
-- Returns per request: queued (1|0), task id (the original one for a duplicate).
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local out = {}
local ready, delayed = 0, 0
for i = 0, n - 1 do
  local b = 3 + i * 8
  local id, raw, prio = ARGV[b], ARGV[b + 1], tonumber(ARGV[b + 2])
  local ready_at, ik, ittl = tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), ARGV[b + 5]
  local dup = nil
  if ik > 0 then
    dup = redis.call('GET', KEYS[ik]) or nil
  end
  if not dup then
    local rec = get_rec(id)
    if rec and (rec.s == 'q' or rec.s == 's' or rec.s == 'p') then dup = id end
  end
  if dup then
    out[#out + 1] = 0
    out[#out + 1] = dup
  else
    if ik > 0 then redis.call('SET', KEYS[ik], id, 'PX', ittl) end
    local rec = {p = prio, a = tonumber(ARGV[b + 6]) or 0, m = tonumber(ARGV[b + 7])}
    if ready_at > 0 then
      redis.call('ZADD', K_SCHED, ready_at, raw)
      rec.s = 's'
      rec.b = raw
      delayed = 1
    else
      redis.call('RPUSH', tier_key(prio), raw)
      rec.s = 'q'
      ready = ready + 1
    end
    set_rec(id, rec)
    count('submitted')
    out[#out + 1] = 1
    out[#out + 1] = id
  end
end
-- A delayed push also wakes one reserver so it re-bounds its wait by the new due time.
wake(ready + delayed)
return out
