-- @include queue_common
-- The task browser (fleet/backends/redis/browse.py). KEYS: the queue keys
-- (keys.queue_keys). ARGV: op, then
--   page <state letter> <n> [<cursor at> <cursor id>]
--     One page of a state, newest first, from its browse index (the zset
--     <queue>:browse:<state>, see IDX_SUFFIX in queue_common.lua): the rank of the
--     cursor is found with ZCOUNT and a binary search among the members of its
--     score (a zset orders equal scores by member bytes, as the cursor's ids), then
--     the next members are read with their records. O(log N + page): an entry whose
--     record no longer says that state (a write of an older Fleet) is skipped, at most
--     a few pages of them per call.
--     Returns flat (id, record, time) per task, newest first; time is a scheduled
--     task's ready_at or a processing task's lease deadline, '' otherwise.
--   build <first bucket> <last bucket>
--     Index the records of buckets first..last (-1: the :tasks hash itself and the
--     DLQ's :dead:info): what a Fleet before the indexes stored. Idempotent; the
--     scripts keep the indexes meanwhile. Returns how many records it indexed.
local op = ARGV[1]

if op == 'build' then
  local added = 0
  local function index_hash(key, dead)
    local all = redis.call('HGETALL', key)
    local args = {q = {}, s = {}, p = {}, x = {}}
    for i = 1, #all, 2 do
      local rec = dec(all[i + 1])
      local st = rec and (dead and 'x' or rec.s)
      local list = st and args[st]
      if list then
        list[#list + 1] = idx_at(rec)
        list[#list + 1] = all[i]
        added = added + 1
      end
    end
    for st, list in pairs(args) do
      if #list > 0 then mcall('ZADD', idx_key(K_NORMAL, st), list) end
    end
  end
  local first, last = tonumber(ARGV[2]), tonumber(ARGV[3])
  if first < 0 then
    index_hash(K_TASKS, false)
    index_hash(K_DEADINFO, true)
  else
    for b = first, last do index_hash(K_TASKS .. ':' .. b, false) end
  end
  return added
end

local letter, n = ARGV[2], tonumber(ARGV[3])
local cur_at, cur_id = ARGV[4], ARGV[5]
local idx = idx_key(K_NORMAL, letter == '*' and 'x' or letter)

local function id_lt(a, b)
  if a == b then return false end
  local len = math.min(#a, #b)
  for i = 1, len do
    local ca, cb = string.byte(a, i), string.byte(b, i)
    if ca ~= cb then return ca < cb end
  end
  return #a < #b
end

-- Newest first is ZREVRANGE's order: scores descending, equal scores by member
-- descending. The page starts at the first member strictly before the cursor.
local start = 0
if cur_at then
  local above = redis.call('ZCOUNT', idx, '(' .. cur_at, '+inf')
  local ties = redis.call('ZCOUNT', idx, cur_at, cur_at)
  local lo, hi = above, above + ties
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local m = redis.call('ZREVRANGE', idx, mid, mid)[1]
    if id_lt(m, cur_id) then hi = mid else lo = mid + 1 end
  end
  start = lo
end

local out, found = {}, 0
local byte = letter ~= '*' and string.byte(letter) or nil
for _ = 1, 4 do
  local ids = redis.call('ZREVRANGE', idx, start, start + n - 1)
  for _, id in ipairs(ids) do
    local raw
    if byte then raw = rec_text(K_TASKS, id) else raw = redis.call('HGET', K_DEADINFO, id) end
    if raw and (not byte or string.byte(raw, 1) == byte) then
      local t = ''
      if letter == 'p' then
        t = redis.call('ZSCORE', K_PROC, id) or ''
      elseif letter == 's' then
        local rec = dec(raw)
        if rec and rec.b then t = redis.call('ZSCORE', K_SCHED, rec.b) or '' end
      end
      out[#out + 1] = id
      out[#out + 1] = raw
      out[#out + 1] = t
      found = found + 1
      if found >= n then return out end
    end
  end
  if #ids < n then break end
  start = start + n
end
return out
