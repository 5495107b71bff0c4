-- Small token-checked primitives. ARGV 1: op.
--   lock_renew  KEYS[1]=lock, token, hold ms         -> 1|0
--   lock_release KEYS[1]=lock, token                  -> 1|0
--   worker_config_put KEYS[1]=config KEYS[2]=gen, config JSON, gen -> 1|0
--   next_generation KEYS[1]=type gen counter, floor  -> max(counter, floor) + 1
--   stream_push KEYS[1]=stream, ts, envelope, min ts, max len, channel -> 1
--   stream_read KEYS[1]=stream, min score, after id, n -> envelopes
local op = ARGV[1]
if op == 'lock_renew' then
  if redis.call('GET', KEYS[1]) == ARGV[2] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return 1
  end
  return 0
end
if op == 'lock_release' then
  if redis.call('GET', KEYS[1]) == ARGV[2] then
    redis.call('DEL', KEYS[1])
    return 1
  end
  return 0
end
if op == 'next_generation' then
  local cur = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
  local floor = tonumber(ARGV[2])
  if floor > cur then cur = floor end
  redis.call('SET', KEYS[1], cur + 1)
  return cur + 1
end
if op == 'worker_config_put' then
  -- A stored generation or config that cannot be read (not a number, not a JSON
  -- object, a key of another type) counts as none: any write replaces it.
  local g = redis.pcall('GET', KEYS[2])
  local cur = (type(g) == 'string' and tonumber(g)) or 0
  if cur > 0 then
    local c = redis.pcall('GET', KEYS[1])
    local ok, v = false, nil
    if type(c) == 'string' and not string.match(c, '^%s*%[') then ok, v = pcall(cjson.decode, c) end
    if not ok or type(v) ~= 'table' then cur = 0 end
  end
  if tonumber(ARGV[3]) > cur then
    redis.call('SET', KEYS[1], ARGV[2])
    redis.call('SET', KEYS[2], ARGV[3])
    return 1
  end
  return 0
end
if op == 'stream_push' then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[4])
  local maxlen = tonumber(ARGV[5])
  if redis.call('ZCARD', KEYS[1]) > maxlen then
    redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(maxlen + 1))
  end
  redis.call('PUBLISH', ARGV[6], ARGV[3])
  return 1
end
if op == 'stream_read' then
  -- Members sort by (score, member) and members start with {"id":"<id>", so the
  -- order is the id order; skip members at or before the cursor.
  local after, n = ARGV[3], tonumber(ARGV[4])
  local out = {}
  local off, batch = 0, 256
  while #out < n do
    local items = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[2], '+inf', 'LIMIT', off, batch)
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
end
return redis.error_reply('unknown op ' .. tostring(op))
