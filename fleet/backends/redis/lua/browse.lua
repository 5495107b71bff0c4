-- @include queue_common
-- The task browser (fleet/backends/redis/browse.py). KEYS: the queue keys
-- (keys.queue_keys). ARGV: op, then
--   page <state letter> <n> <keep ms> <cursor at> <cursor id> <run>
--     ('' for no cursor, no run). One page of a state, newest first, from its browse
--     index (done, letter D: the :finished index, each record read from its hour's
--     :done hash; a run: only records whose rn is it) (the zset
--     <queue>:browse:<state>, see IDX_SUFFIX in queue_common.lua): the rank of the
--     cursor is found with ZCOUNT and a binary search among the members of its
--     score (a zset orders equal scores by member bytes, as the cursor's ids), then
--     the next members are read with their records. O(log N + page): an entry whose
--     record no longer says that state (a write of an older Fleet) is skipped, at most
--     a few pages of them per call.
--     Returns flat (id, record, time) per task, newest first; time is a scheduled
--     task's ready_at or a processing task's lease deadline, '' otherwise. Returns
--     {'build'} instead when the index must be built first: a live state's while its
--     type was not browsed (the marker <queue>:browse absent: this call sets it to
--     '0', for <keep ms>, and empties the live indexes; or '0': a build under way),
--     the DLQ's when it holds fewer entries than :dead:info (dead letters buried by a
--     Fleet before the indexes). A live page renews the marker and the live indexes'
--     TTLs to <keep ms>; each live index holds the sentinel member '' (score -inf),
--     so that it exists, and expires with the marker, however many tasks it lists.
--   build <first bucket> <last bucket> <hscan cursor>
--     Index the live records of buckets first..last, then of one HSCAN step (1000)
--     of the :tasks hash from <hscan cursor> ('' for none). Idempotent; the scripts
--     keep the indexes meanwhile (the marker exists), so a record that moves during
--     the build ends in the index of its state then. Returns the next HSCAN cursor.
--   ready      The build is done: the marker says '1' (its TTL kept).
--   dead_build <hscan cursor>
--     Index one HSCAN step (2000) of :dead:info; returns the next cursor.
local op = ARGV[1]
local MARKER = K_NORMAL .. ':browse'
local LIVE = {'q', 's', 'p'}
-- The letter and the submitted time of a record, without decoding it.
local D_PATTERN = '^[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|/]*/([^|/]*)'

local function index_flat(flat, dead)
  local args = {q = {}, s = {}, p = {}, x = {}}
  for i = 1, #flat, 2 do
    local raw = flat[i + 1]
    local st = dead and 'x' or string.sub(raw, 1, 1)
    local list = args[st]
    if list then
      local at = string.match(raw, D_PATTERN)
      list[#list + 1] = (at == nil or at == '') and '0' or at
      list[#list + 1] = flat[i]
    end
  end
  for st, list in pairs(args) do
    if #list > 0 then mcall('ZADD', idx_key(K_NORMAL, st), list) end
  end
end

if op == 'build' then
  for b = tonumber(ARGV[2]), tonumber(ARGV[3]) do
    index_flat(redis.call('HGETALL', K_TASKS .. ':' .. b), false)
  end
  if ARGV[4] == '' then return '' end
  local step = redis.call('HSCAN', K_TASKS, ARGV[4], 'COUNT', 1000)
  index_flat(step[2], false)
  return step[1]
end
if op == 'dead_build' then
  local step = redis.call('HSCAN', K_DEADINFO, ARGV[2], 'COUNT', 2000)
  index_flat(step[2], true)
  return step[1]
end
if op == 'ready' then
  redis.call('SET', MARKER, '1', 'XX', 'KEEPTTL')
  return 1
end

local letter, n, keep = ARGV[2], tonumber(ARGV[3]), ARGV[4]
local cur_at, cur_id = ARGV[5], ARGV[6]
if cur_at == '' then cur_at = nil end
local run = ARGV[7]
if run == '' then run = nil end
local idx
if letter == 'D' then
  idx = K_FINISHED -- every finished or dead task by when it ended: done ones are read
elseif letter == '*' then
  idx = idx_key(K_NORMAL, 'x')
else
  idx = idx_key(K_NORMAL, letter)
end

if letter == '*' then
  if redis.call('ZCARD', idx) < redis.call('HLEN', K_DEADINFO) then return {'build'} end
elseif letter ~= 'D' then
  local on = redis.call('GET', MARKER)
  if not on then
    local live = {}
    for i, st in ipairs(LIVE) do live[i] = idx_key(K_NORMAL, st) end
    redis.call('UNLINK', unpack(live))
    for _, key in ipairs(live) do
      redis.call('ZADD', key, '-inf', '')
      redis.call('PEXPIRE', key, keep)
    end
    redis.call('SET', MARKER, '0', 'PX', keep)
    return {'build'}
  end
  redis.call('PEXPIRE', MARKER, keep)
  for _, st in ipairs(LIVE) do redis.call('PEXPIRE', idx_key(K_NORMAL, st), keep) end
  if on ~= '1' then return {'build'} end
end

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

-- The record of id in the state the page lists (nil if it is no longer there).
local function record_of(id, score)
  if id == '' then return nil end -- the sentinel
  local raw
  if letter == 'D' then
    raw = redis.call('HGET', DONE_PREFIX .. math.floor((tonumber(score) or 0) / 3600), id)
  elseif letter == '*' then
    return redis.call('HGET', K_DEADINFO, id) or nil
  else
    raw = rec_text(K_TASKS, id)
  end
  if raw and string.byte(raw, 1) == string.byte(letter) then return raw end
  return nil
end

-- Read windows of n entries, at most SCAN_PAGES of them (Python's SCAN_PAGES): a page
-- whose entries are skipped (other runs; the dead and cancelled among the finished)
-- ends there, with a last triple ('', '', '<score> <id>') where the reading stopped.
local out, found = {}, 0
local last_at, last_id
for _ = 1, 4 do
  local window = redis.call('ZREVRANGE', idx, start, start + n - 1, 'WITHSCORES')
  for i = 1, #window, 2 do
    local id, score = window[i], window[i + 1]
    last_at, last_id = score, id
    local raw = record_of(id, score)
    local rec = raw and (run or letter == 's') and dec(raw) or nil
    if raw and (not run or (rec and rec.rn == run)) then
      local t = ''
      if letter == 'p' then
        t = redis.call('ZSCORE', K_PROC, id) or ''
      elseif letter == 's' then
        if rec and rec.b then t = redis.call('ZSCORE', K_SCHED, rec.b) or '' end
      elseif letter == 'D' then
        t = score
      end
      out[#out + 1] = id
      out[#out + 1] = raw
      out[#out + 1] = t
      found = found + 1
      if found >= n then return out end
    end
  end
  if #window < 2 * n then return out end
  start = start + n
end
if last_id and last_id ~= '' then
  out[#out + 1] = ''
  out[#out + 1] = ''
  out[#out + 1] = last_at .. ' ' .. last_id
end
return out
