-- @include queue_common
-- ARGV: JSON array [task_id, token, task_id, token, ...], now.
-- Marks every owned reservation started (:processing:started task_id -> token,
-- :started_at task_id -> now) and returns 1|0 per lease (0: stale, nothing
-- changed). Reads every record with one HMGET and writes with one HSET per hash.
local flat = cjson.decode(ARGV[1])
local now_s = ARGV[2]
local times = {}
local ids = {}
for i = 1, #flat, 2 do ids[#ids + 1] = flat[i] end
local out = {}
if #ids == 0 then return out end
local recs = redis.call('HMGET', K_TASKS, unpack(ids))
local marks = {}
for j, id in ipairs(ids) do
  local raw = recs[j]
  local rec = raw and dec(raw)
  local tok = flat[2 * j]
  if rec and rec.s == 'p' and rec.k == tok then
    marks[#marks + 1] = id
    marks[#marks + 1] = tok
    times[#times + 1] = id
    times[#times + 1] = now_s
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
if #marks > 0 then mcall('HSET', K_STARTED, marks) end
if now_s and #times > 0 then mcall('HSET', K_STARTED_AT, times) end
return out
