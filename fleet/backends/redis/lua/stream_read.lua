-- Read up to n entries of a stream after a cursor.
-- KEYS[1]=stream; ARGV: min score, after id ('' = from the start), n -> envelopes
-- Members sort by (score, member) and members start with {"id":"<id>", so the
-- order is the id order; skip members at or before the cursor.
local after, n = ARGV[2], tonumber(ARGV[3])
local out = {}
local off, batch = 0, 256
while #out < n do
  local items = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf', 'LIMIT', off, batch)
  for _, m in ipairs(items) do
    local id = string.match(m, '^{"id":"([^"]*)"')
    if after == '' or (id and id > after) then
      out[#out + 1] = m
      if #out >= n then break end
    end
  end
  if #items < batch then break end
  off = off + batch
end
return out
