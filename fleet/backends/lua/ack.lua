-- @include queue_common
-- ARGV: now, JSON array [task_id, token, task_id, token, ...].
-- Returns 1|0 per lease.
local now = tonumber(ARGV[1])
local flat = cjson.decode(ARGV[2])
local out = {}
local completed, cancelled = 0, 0
for i = 1, #flat, 2 do
  local id, tok = flat[i], flat[i + 1]
  local rec = owned(id, tok)
  if rec then
    redis.call('ZREM', K_PROC, id)
    redis.call('HDEL', K_PBODY, id)
    if rec.c then
      finish(id, rec, 'C', now)
      cancelled = cancelled + 1
    else
      finish(id, rec, 'D', now)
      completed = completed + 1
    end
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
if completed > 0 then count('completed', completed) end
if cancelled > 0 then count('cancelled', cancelled) end
return out
