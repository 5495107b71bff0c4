-- @include queue_common
-- ARGV: now, limit. Re-queues up to limit leases past their deadline at the head
-- of their tier (the attempt stays charged) and drains due scheduled tasks.
-- Returns {re-queued, examined} so the caller loops while examined == limit.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', K_PROC, '-inf', now, 'LIMIT', 0, limit)
local n = 0
-- Reversed so the lease that ran out first ends up at the very head.
for i = #ids, 1, -1 do
  local id = ids[i]
  local raw = unregister(id)
  local rec = get_rec(id)
  if raw then
    local prio = 0
    if rec and rec.s == 'p' then
      rec.s = 'q'
      rec.k = nil
      prio = rec.p or 0
      set_rec(id, rec)
    end
    redis.call('LPUSH', tier_key(prio), raw)
    n = n + 1
  end
end
wake(n)
drain_due(now)
return {n, #ids}
