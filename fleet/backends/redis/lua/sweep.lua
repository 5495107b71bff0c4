-- @include queue_common queue_groups run_common
-- ARGV: now, limit. Re-queues up to limit leases past their deadline at the head
-- of their tier (or group) and drains due scheduled tasks. The attempt stays charged if the
-- reservation was marked started (:processing:started holds its token/time); else it
-- is refunded (a -= 1, r += 1) unless r already reached max(max_attempts, 2)
-- (fleet.core.records.refund_cap).
-- Returns {re-queued, examined} so the caller loops while examined == limit.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', K_PROC, '-inf', now, 'LIMIT', 0, limit)
local n = 0
-- Reversed so the lease that ran out first ends up at the very head.
for i = #ids, 1, -1 do
  local id = ids[i]
  local full = redis.call('HGET', K_STARTED, id)
  local mark = full and string.match(full, '^[^/]*') or nil
  local raw = unregister(id)
  local rec = get_rec(id)
  if raw then
    local live = nil
    if rec and rec.s == 'p' then
      live = rec
      local a, r = rec.a or 0, rec.r or 0
      if mark ~= rec.k and a > 0 and r < math.max(rec.m or 0, 2) then
        -- Never marked started: it died unstarted with its worker.
        rec.a = a - 1
        rec.r = r + 1
      else
        -- Charged: it was lost while it ran (or unmarked past its refunds).
        local began, worker = mark_parts(full, rec.k)
        add_attempt(rec, worker, began, now, 'lost', nil)
      end
      rec.s = 'q'
      rec.k = nil
      set_rec(id, rec)
      ended(rec.g, now)
      run_event(rec.rn, id, 'requeued', false, now)
    end
    requeue(raw, live, true)
    n = n + 1
  end
end
wake(n)
drain_due(now)
return {n, #ids}
