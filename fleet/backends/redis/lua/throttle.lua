-- @include queue_common queue_groups run_common
-- ARGV: now, task_id, token, retry_after seconds. Ends an owned reservation
-- without charging its attempt: a grouped task goes back to the head of its group
-- and the group is held until now + retry_after (a later hold already in place is
-- kept); any other task is scheduled retry_after from now. Returns 1, or 0 if stale.
local now, id, tok = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local after = tonumber(ARGV[4])
local rec = owned(id, tok)
if not rec then return 0 end
local raw = unregister(id)
rec.a = math.max((rec.a or 1) - 1, 0)
rec.k = nil
count('throttled')
run_event(rec.rn, id, 'requeued', false, now)
if rec.g then
  rec.s = 'q'
  set_rec(id, rec)
  ended(rec.g, now)
  local g = gpush(rec.g, tier_index(rec.p), raw, true)
  g.til = math.max(g.til, now + after)
  set_aside(g, 'D', g.til)
  gsave(g)
else
  redis.call('ZADD', K_SCHED, now + after, raw)
  rec.s = 's'
  rec.b = raw
  set_rec(id, rec)
  wake(1)
end
return 1
