-- @include queue_common
-- ARGV: now, task_id, token, visibility seconds. Returns ok|cancelled|stale.
local now, id, tok, vis = tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4])
local rec = owned(id, tok)
if not rec then return 'stale' end
redis.call('ZADD', K_PROC, 'XX', now + vis, id)
if rec.c then return 'cancelled' end
return 'ok'
