-- A type's history: one record (contract: fleet/core/capabilities/history.py; the rules,
-- whose only other copy this is: fleet/core/history.py).
-- KEYS (built by keys.history_keys): 1 the type's queue counters hash, 2 the history hash
-- (field 'last': the totals of the last record; 'm:<start>' / 'h:<start>': a minute / an
-- hour bucket), 3 the history index zset (bucket field -> when it expires).
-- ARGV: now, the workers' totals ('timed_out,h1,...,h14'), minute keep, hour keep, ttl,
-- then the queue counter names in vector order. Answers 1 if a bucket was added to.
-- Vectors are decimal integers joined by commas. A type where nothing happened and
-- nothing expired is only read.
local K_COUNTERS, K_HIST, K_IDX = KEYS[1], KEYS[2], KEYS[3]
local now = tonumber(ARGV[1])
local keep_m, keep_h, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])

local function parse(text)
  if not text then return nil end
  local out = {}
  for v in string.gmatch(text, '[^,]+') do
    local n = tonumber(v)
    if n == nil then return nil end
    out[#out + 1] = n
  end
  return out
end

local function join(v)
  local parts = {}
  for i = 1, #v do parts[i] = string.format('%d', v[i]) end
  return table.concat(parts, ',')
end

-- The totals: the queue counters read here (never a caller's copy), then the workers'.
local names = {}
for i = 6, #ARGV do names[#names + 1] = ARGV[i] end
local got = redis.call('HMGET', K_COUNTERS, unpack(names))
local current = {}
for i = 1, #names do current[i] = math.floor(tonumber(got[i]) or 0) end
for _, n in ipairs(parse(ARGV[2]) or {}) do current[#current + 1] = n end

local last_text = redis.call('HGET', K_HIST, 'last')
local last = parse(last_text or nil)
local wrote = 0
-- No baseline yet (or one of another layout): this record only sets it.
if last and #last == #current then
  local diff, any = {}, false
  for i = 1, #current do
    local d = current[i] - last[i]
    if d < 0 then d = 0 end -- a total that went down (purge, worker restart) counts 0
    diff[i] = d
    if d > 0 then any = true end
  end
  if any then
    for _, b in ipairs({{'m:', 60, keep_m}, {'h:', 3600, keep_h}}) do
      local start = math.floor(now / b[2]) * b[2]
      local field = b[1] .. string.format('%d', start)
      local sum = parse(redis.call('HGET', K_HIST, field))
      if sum and #sum == #diff then
        for i = 1, #diff do sum[i] = sum[i] + diff[i] end
      else
        sum = diff
      end
      redis.call('HSET', K_HIST, field, join(sum))
      redis.call('ZADD', K_IDX, string.format('%d', start + b[3]), field)
    end
    wrote = 1
  end
end
local current_text = join(current)
if last_text ~= current_text then
  redis.call('HSET', K_HIST, 'last', current_text)
end
if wrote == 1 or last_text ~= current_text then
  -- A type that stops for good is forgotten once its newest bucket would have expired.
  redis.call('EXPIRE', K_HIST, ttl)
  redis.call('EXPIRE', K_IDX, ttl)
end
-- ARGV[1] as sent (a Lua number would be printed with 14 digits only).
local old = redis.call('ZRANGEBYSCORE', K_IDX, '-inf', ARGV[1])
if #old > 0 then
  redis.call('HDEL', K_HIST, unpack(old))
  redis.call('ZREMRANGEBYSCORE', K_IDX, '-inf', ARGV[1])
end
return wrote
