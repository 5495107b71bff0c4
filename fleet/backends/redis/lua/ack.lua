-- @include queue_common queue_groups run_common
-- ARGV: now, JSON array [task_id, token, task_id, token, ...], the quoted id of the
-- worker that ran them ('' for none: the start marks').
-- Returns 1|0 per lease. Reads every record with one HMGET and writes with one
-- command per key.
local now_s = ARGV[1]
local flat = cjson.decode(ARGV[2])
local ids = {}
for i = 1, #flat, 2 do ids[#ids + 1] = flat[i] end
local out = {}
if #ids == 0 then return out end
-- A running task's record is in :tasks (rec_place), all of them in one HMGET.
local recs = redis.call('HMGET', K_TASKS, unpack(ids))
local marks = redis.call('HMGET', K_STARTED, unpack(ids))
local now = tonumber(now_s)
local gone, done, grouped = {}, {}, {}
local seen = {}
local completed, cancelled = 0, 0
local ran = {}
for j, id in ipairs(ids) do
  local raw = recs[j]
  local rec = raw and dec(raw)
  if rec and not seen[id] and rec.s == 'p' and rec.k == flat[2 * j] then
    seen[id] = true
    gone[#gone + 1] = id
    if rec.g then grouped[#grouped + 1] = rec.g end
    if rec.c then
      rec.s = 'C'
      cancelled = cancelled + 1
    else
      rec.s = 'D'
      completed = completed + 1
    end
    if rec.rn then ran[#ran + 1] = {rec.rn, id, rec.s == 'C' and 'cancelled' or 'done'} end
    rec.k = nil
    rec.c = nil
    rec.b = nil
    rec.d = finished_times(rec, now_s, marks[j] or nil, ARGV[3])
    done[#done + 1] = id
    done[#done + 1] = enc(rec)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
if #gone > 0 then
  mcall('ZREM', K_PROC, gone)
  mcall('HDEL', K_PBODY, gone)
  mcall('HDEL', K_STARTED, gone)
  mcall('HDEL', K_TASKS, gone)
  if idx_keeping() then mcall('ZREM', K_NORMAL .. IDX_SUFFIX.p, gone) end
  mcall('HSET', K_DONE, done)
  touch_done()
  retain(gone, now)
end
for _, name in ipairs(grouped) do ended(name, now) end
for _, e in ipairs(ran) do run_event(e[1], e[2], e[3], true, now) end
if completed > 0 then count('completed', completed) end
if cancelled > 0 then count('cancelled', cancelled) end
return out
