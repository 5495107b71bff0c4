-- Schedules. KEYS: 1 fleet:schedules:due (zset member JSON [type, id] -> next run),
-- 2 the type's hash fleet:schedules:<type> (id -> record JSON; '' for `due`/`next`),
-- 3 the prefix of the per-type hashes (fleet:schedules:).
-- ARGV: op, ...
--   put id raw due           -> store, index at due ('' = not indexed); 1
--   swap id expected raw due -> the same only if the stored record is `expected`; 1|0
--   delete id                -> 1 if it existed
--   due now limit            -> flat (type, id, raw) of the due ones, earliest first
--   next                     -> the earliest due time, or ''
local K_DUE, K_TYPE, PREFIX = KEYS[1], KEYS[2], KEYS[3]
local op = ARGV[1]

local function member(id)
  return cjson.encode({string.sub(K_TYPE, #PREFIX + 1), id})
end

local function store(id, raw, due)
  redis.call('HSET', K_TYPE, id, raw)
  if due == '' then
    redis.call('ZREM', K_DUE, member(id))
  else
    redis.call('ZADD', K_DUE, due, member(id))
  end
end

if op == 'put' then
  store(ARGV[2], ARGV[3], ARGV[4])
  return 1
end
if op == 'swap' then
  if redis.call('HGET', K_TYPE, ARGV[2]) ~= ARGV[3] then return 0 end
  store(ARGV[2], ARGV[4], ARGV[5])
  return 1
end
if op == 'delete' then
  redis.call('ZREM', K_DUE, member(ARGV[2]))
  return redis.call('HDEL', K_TYPE, ARGV[2])
end
if op == 'next' then
  local first = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
  return first[2] or ''
end
if op == 'due' then
  local out = {}
  local due = redis.call('ZRANGEBYSCORE', K_DUE, '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
  for _, m in ipairs(due) do
    local ok, pair = pcall(cjson.decode, m)
    if ok and type(pair) == 'table' and type(pair[1]) == 'string' and type(pair[2]) == 'string' then
      local raw = redis.call('HGET', PREFIX .. pair[1], pair[2])
      if raw then
        out[#out + 1] = pair[1]
        out[#out + 1] = pair[2]
        out[#out + 1] = raw
      else
        redis.call('ZREM', K_DUE, m) -- its record is gone: so is its place
      end
    else
      redis.call('ZREM', K_DUE, m)
    end
  end
  return out
end
return redis.error_reply('ERR unknown schedules op ' .. tostring(op))
