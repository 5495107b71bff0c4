-- @include queue_common
-- ARGV: JSON array [task_id, token, task_id, token, ...], now, the worker's quoted
-- id ('' for none). Marks every owned reservation started (:processing:started
-- task_id -> "<token>/<now>[/<worker>]") and returns 1|0 per lease (0: stale,
-- nothing changed). Reads every record with one HMGET and writes with one HSET.
local flat = cjson.decode(ARGV[1])
local suffix = ARGV[2] and ('/' .. ARGV[2]) or ''
if ARGV[3] and ARGV[3] ~= '' then suffix = suffix .. '/' .. ARGV[3] end
local ids = {}
for i = 1, #flat, 2 do ids[#ids + 1] = flat[i] end
local out = {}
if #ids == 0 then return out end
-- A running task's record is in :tasks (rec_place), all of them in one HMGET.
local recs = redis.call('HMGET', K_TASKS, unpack(ids))
local marks = {}
for j, id in ipairs(ids) do
  local raw = recs[j]
  local rec = raw and dec(raw)
  local tok = flat[2 * j]
  if rec and rec.s == 'p' and rec.k == tok then
    marks[#marks + 1] = id
    marks[#marks + 1] = tok .. suffix
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
if #marks > 0 then mcall('HSET', K_STARTED, marks) end
return out
