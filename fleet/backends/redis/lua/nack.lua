-- @include queue_common queue_groups run_common
-- ARGV: now, task_id, token, delay seconds, dead (1|0), error ('' + text, or '-' for
-- none), traceback (same encoding), the worker's quoted id, when the attempt started
-- ('' for either: the start mark's), the error cut for the attempts (same encoding).
-- Returns retry|dead|stale.
local now, id, tok = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local delay, dead = tonumber(ARGV[4]), ARGV[5] == '1'
local rec = owned(id, tok)
if not rec then return 'stale' end
local mark_at, mark_worker = mark_parts(redis.call('HGET', K_STARTED, id), tok)
local raw = unregister(id)
ended(rec.g, now)
local function opt(v)
  if v == '-' then return nil end
  return string.sub(v, 2)
end
rec.e = opt(ARGV[6])
rec.t = opt(ARGV[7])
rec.f = fstr(now)
rec.k = nil
local m = rec.m or rec.a
local burying = dead or rec.a >= m
local worker = (ARGV[8] and ARGV[8] ~= '') and ARGV[8] or mark_worker
local began = (ARGV[9] and ARGV[9] ~= '') and tonumber(ARGV[9]) or mark_at
add_attempt(rec, worker, began, now, burying and 'dead' or 'failed', opt(ARGV[10] or '-'))
if burying then
  bury(id, raw, rec)
  run_event(rec.rn, id, 'dead', true, now)
  return 'dead'
end
if delay < 0 then delay = 0 end
redis.call('ZADD', K_SCHED, now + delay, raw)
rec.s = 's'
rec.b = raw
set_rec(id, rec)
count('failed')
run_event(rec.rn, id, 'requeued', false, now)
wake(1)
return 'retry'
