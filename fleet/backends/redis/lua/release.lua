-- @include queue_common queue_groups run_common
-- ARGV: task_id, token, now. Refunds the attempt and puts the task at the head of
-- its tier (or group).
local id, tok, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local rec = owned(id, tok)
if not rec then return 0 end
local raw = unregister(id)
rec.a = math.max((rec.a or 1) - 1, 0)
rec.s = 'q'
rec.k = nil
set_rec(id, rec)
ended(rec.g, now)
requeue(raw, rec, true)
run_event(rec.rn, id, 'requeued', false, now)
wake(1)
return 1
