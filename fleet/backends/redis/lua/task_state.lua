-- @include queue_common
-- ARGV: task_id. Returns {where, record, score, start mark, progress JSON,
-- outputs emitted, {newest output envelopes}} with where in live|dead|none; score
-- is the lease deadline or ready_at as a string, or ''; the start mark
-- ("<token>/<time>") of a processing task's reservation, or ''.
local id = ARGV[1]
local function with_record(where, raw, score, mark)
  local rec = redis.call('HMGET', K_REC .. id, 'p', 'n')
  return {where, raw, score, mark or '', rec[1] or '', rec[2] or '0',
    redis.call('LRANGE', K_REC .. id .. ':out', 0, -1)}
end
local raw = rec_text(K_TASKS, id)
if raw then
  local rec = dec(raw)
  local score = false
  if rec.s == 'p' then score = redis.call('ZSCORE', K_PROC, id) end
  if rec.s == 's' and rec.b then score = redis.call('ZSCORE', K_SCHED, rec.b) end
  local mark = false
  if rec.s == 'p' then mark = redis.call('HGET', K_STARTED, id) end
  return with_record('live', raw, score or '', mark)
end
local info = redis.call('HGET', K_DEADINFO, id)
if info then return with_record('dead', info, '') end
local done = false
local ended = redis.call('ZSCORE', K_FINISHED, id)
if ended then
  done = redis.call('HGET', DONE_PREFIX .. math.floor(tonumber(ended) / 3600), id)
end
done = done or redis.call('HGET', K_DONE, id) or redis.call('HGET', K_DONE_PREV, id)
if done then return with_record('live', done, '') end
return {'none', '', '', '', '', '0', {}}
