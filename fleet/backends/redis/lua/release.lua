-- @include queue_common
-- ARGV: task_id, token. Refunds the attempt and puts the task at the head of its tier.
local id, tok = ARGV[1], ARGV[2]
local rec = owned(id, tok)
if not rec then return 0 end
local raw = unregister(id)
rec.a = math.max((rec.a or 1) - 1, 0)
rec.s = 'q'
rec.k = nil
set_rec(id, rec)
redis.call('LPUSH', tier_key(rec.p), raw)
wake(1)
return 1
