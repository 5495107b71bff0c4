-- @include queue_common
-- ARGV: task_id. Returns {where, record JSON, score} with where in
-- live|dead|none; score is the lease deadline or ready_at as a string, or ''.
local id = ARGV[1]
local raw = redis.call('HGET', K_TASKS, id)
if raw then
  local rec = dec(raw)
  local score = false
  if rec.s == 'p' then score = redis.call('ZSCORE', K_PROC, id) end
  if rec.s == 's' and rec.b then score = redis.call('ZSCORE', K_SCHED, rec.b) end
  return {'live', raw, score or ''}
end
local info = redis.call('HGET', K_DEADINFO, id)
if info then return {'dead', info, ''} end
local done = redis.call('HGET', K_DONE, id) or redis.call('HGET', K_DONE_PREV, id)
if done then return {'live', done, ''} end
return {'none', '', ''}
