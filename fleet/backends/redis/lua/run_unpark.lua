-- @include queue_common queue_groups run_common
-- ARGV: run id, now, most bodies to move. The tasks of this type that a reserve set
-- aside while the run was paused (run_park) go back to the tail of their tier or
-- group, each only if it is still queued in this run (one cancelled meanwhile is
-- dropped). Returns how many bodies are left to move (the caller calls again).
local rn, now, most = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local key = RUN_PREFIX .. rn
local list = key .. ':parked:' .. RUN_TYPE
local items = redis.call('LPOP', list, most)
local back = 0
for _, raw in ipairs(items or {}) do
  -- Fleet's bodies start with a plain id; any other is decoded.
  local id = head_id(raw)
  if id == '' then
    local _
    _, id = decode_body(raw)
  end
  local rec = id and get_rec(id)
  if rec and rec.s == 'q' and rec.rn == rn then
    requeue(raw, rec, false)
    back = back + 1
  end
end
if back > 0 then wake(back) end
local left = redis.call('LLEN', list)
if left == 0 then redis.call('SREM', key .. ':parked', RUN_TYPE) end
return left
