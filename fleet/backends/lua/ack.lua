-- @include queue_common
-- ARGV: now, retention seconds, retention max count, then (task_id, token) pairs.
-- Returns 1|0 per lease.
local now = tonumber(ARGV[1])
local out = {}
local completed, cancelled = 0, 0
for i = 4, #ARGV, 2 do
  local id, tok = ARGV[i], ARGV[i + 1]
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
-- Forget finished records past retention (bounded work per call).
local old = redis.call('ZRANGEBYSCORE', K_FINISHED, '-inf', now - tonumber(ARGV[2]),
  'LIMIT', 0, 256)
local extra = redis.call('ZCARD', K_FINISHED) - tonumber(ARGV[3])
if extra > 0 then
  if extra > 256 then extra = 256 end
  for _, id in ipairs(redis.call('ZRANGE', K_FINISHED, 0, extra - 1)) do old[#old + 1] = id end
end
for _, id in ipairs(old) do
  local rec = get_rec(id)
  if rec and (rec.s == 'D' or rec.s == 'C') then redis.call('HDEL', K_TASKS, id) end
  redis.call('ZREM', K_FINISHED, id)
end
return out
