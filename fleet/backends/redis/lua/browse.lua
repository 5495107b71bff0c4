-- One page of a type's tasks in one state, newest first (fleet/backends/redis/browse.py).
-- KEYS: 1 the record hash (:tasks for live states, :dead:info for the DLQ),
--       2 the zset holding the state's times (:scheduled or :processing; else unused).
-- ARGV: state letter (q|s|p, or '*': every record of the hash), n (at most 501),
--       buckets (live records also live in KEYS[1]:0 .. KEYS[1]:<buckets - 1>, see
--       queue_common.lua; 0 for the DLQ), then, for a page after the first, the
--       cursor's enqueued_at and task id.
-- The order is (submitted_at, id) descending: submitted_at is the record's d field
-- (finished/submitted/started), the body's enqueued_at, which no move changes. The
-- walk reads the whole hash (O(N) of the type's live or dead tasks) and keeps the n
-- best in a heap (O(N log n)). Ids compare byte by byte: Lua's `<` on strings follows
-- the server's LC_COLLATE, which Redis takes from its environment.
-- Returns flat (id, record, time) per task, newest first; time is a scheduled task's
-- ready_at or a processing task's lease deadline, '' otherwise.
local letter, n, buckets = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local cur_at, cur_id = ARGV[4] and tonumber(ARGV[4]), ARGV[5]

local function id_lt(a, b)
  if a == b then return false end
  local len = math.min(#a, #b)
  for i = 1, len do
    local ca, cb = string.byte(a, i), string.byte(b, i)
    if ca ~= cb then return ca < cb end
  end
  return #a < #b
end

-- (at, id) of x before (at, id) of y in ascending order
local function lt(xa, xi, ya, yi)
  if xa ~= ya then return xa < ya end
  return id_lt(xi, yi)
end

-- the submitted_at of d (finished/submitted/started), the record's eighth field
local D_PATTERN = '^[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|/]*/([^|/]*)'
-- a min-heap on (at, id) of the n newest seen: its root is the first to give way
local h_at, h_id, h_raw, size = {}, {}, {}, 0

local function swap(i, j)
  h_at[i], h_at[j] = h_at[j], h_at[i]
  h_id[i], h_id[j] = h_id[j], h_id[i]
  h_raw[i], h_raw[j] = h_raw[j], h_raw[i]
end

local function sift_down(i)
  while true do
    local l, r, m = 2 * i, 2 * i + 1, i
    if l <= size and lt(h_at[l], h_id[l], h_at[m], h_id[m]) then m = l end
    if r <= size and lt(h_at[r], h_id[r], h_at[m], h_id[m]) then m = r end
    if m == i then return end
    swap(i, m)
    i = m
  end
end

local function offer(at, id, raw)
  if size < n then
    size = size + 1
    h_at[size], h_id[size], h_raw[size] = at, id, raw
    local i = size
    while i > 1 do
      local p = math.floor(i / 2)
      if not lt(h_at[i], h_id[i], h_at[p], h_id[p]) then break end
      swap(i, p)
      i = p
    end
  elseif lt(h_at[1], h_id[1], at, id) then
    h_at[1], h_id[1], h_raw[1] = at, id, raw
    sift_down(1)
  end
end

local byte = letter ~= '*' and string.byte(letter) or nil
local function walk(key)
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    local id, raw = all[i], all[i + 1]
    if not byte or string.byte(raw, 1) == byte then
      local at = tonumber(string.match(raw, D_PATTERN)) or 0
      -- cheap rejects first: older than a full heap's root, or not before the cursor
      if (size < n or at >= h_at[1]) and (not cur_at or at < cur_at
          or (at == cur_at and id_lt(id, cur_id))) then
        offer(at, id, raw)
      end
    end
  end
end
walk(KEYS[1])
for b = 0, buckets - 1 do walk(KEYS[1] .. ':' .. b) end

-- pop the heap (oldest first), then answer newest first
local order = {}
while size > 0 do
  order[#order + 1] = {h_id[1], h_raw[1]}
  swap(1, size)
  h_at[size], h_id[size], h_raw[size] = nil, nil, nil
  size = size - 1
  sift_down(1)
end
local out = {}
for i = #order, 1, -1 do
  local id, raw = order[i][1], order[i][2]
  local t = ''
  if letter == 'p' then
    t = redis.call('ZSCORE', KEYS[2], id) or ''
  elseif letter == 's' then
    local tail = string.match(raw, '^[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|[^|]*|(.*)$')
    if tail and tail ~= '' then
      local ok, extra = pcall(cjson.decode, tail)
      if ok and type(extra) == 'table' and type(extra.b) == 'string' then
        t = redis.call('ZSCORE', KEYS[2], extra.b) or ''
      end
    end
  end
  out[#out + 1] = id
  out[#out + 1] = raw
  out[#out + 1] = t
end
return out
