-- @include pool_common
-- ARGV 5..: op (list|size), n (list only, else 0), where suffixes...
-- list -> flat (item_id, item JSON), freshest first; size -> count.
local op, n = ARGV[5], tonumber(ARGV[6])
local where = {}
for i = 7, #ARGV do where[#where + 1] = ARGV[i] end
tidy()
local key, need = candidates(where)
if op == 'size' then
  if not key then return 0 end
  if #need == 0 then return redis.call('ZCOUNT', key, '(' .. NOW_S, '+inf') end
  local c = 0
  scan(key, true, need, function()
    c = c + 1
    return false
  end)
  return c
end
local out = {}
if not key or n <= 0 then return out end
scan(key, true, need, function(id)
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', K_ITEMS, id)
  return #out >= 2 * n
end)
return out
