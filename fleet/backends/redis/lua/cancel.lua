-- @include queue_common queue_groups run_common
-- ARGV: now, task_id. Returns cancelled|cancelling|not_found.
-- A queued task is found by scanning its tier (operator action, O(tier length)).
local now, id = tonumber(ARGV[1]), ARGV[2]
local rec = get_rec(id)
if not rec then return 'not_found' end
if rec.s == 'p' then
  rec.c = 1
  set_rec(id, rec)
  return 'cancelling'
end
if rec.s == 's' then
  redis.call('ZREM', K_SCHED, rec.b)
elseif rec.s == 'q' then
  local key = tier_key(rec.p)
  if rec.g then key = glist(rec.g, tier_index(rec.p)) end
  local needle = '"' .. id .. '"'
  -- An id JSON escapes differently cannot be found verbatim: decode every item.
  local verbatim = not string.find(id, '[%c"\\]')
  local len = redis.call('LLEN', key)
  local start, chunk, done = 0, 1000, false
  while start < len and not done do
    local items = redis.call('LRANGE', key, start, start + chunk - 1)
    for _, raw in ipairs(items) do
      if not verbatim or string.find(raw, needle, 1, true) then
        local body, bid = decode_body(raw)
        if body and bid == id then
          redis.call('LREM', key, 1, raw)
          if rec.g then redis.call('HINCRBY', K_GMETA, TIER_NAMES[tier_index(rec.p)], -1) end
          done = true
          break
        end
      end
    end
    start = start + chunk
  end
else
  return 'not_found'
end
finish(id, rec, 'C', now)
count('cancelled')
run_event(rec.rn, id, 'cancelled', false, now)
return 'cancelled'
