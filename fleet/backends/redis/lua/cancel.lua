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
  if remove_body(key, id) and rec.g then
    redis.call('HINCRBY', K_GMETA, TIER_NAMES[tier_index(rec.p)], -1)
  end
else
  return 'not_found'
end
finish(id, rec, 'C', now)
count('cancelled')
run_event(rec.rn, id, 'cancelled', false, now)
return 'cancelled'
