-- @include pool_common
-- ARGV 5: op, then op arguments:
--   put id item_json expires_at('')          -> 1
--   release|evict id token                    -> 1|0
--   extend id token hold hold_ms              -> 1|0
--   remove id                                 -> 1|0
--   prune limit                               -> {items removed, expired seen, claims ended}
--   stats soon_seconds                        -> {total, available, claimed, soon}
--   drop limit                                -> {items deleted, items left}
local op = ARGV[5]
if op == 'put' then
  tidy()
  local id, raw, exp = ARGV[6], ARGV[7], ARGV[8]
  local old = get_item(id)
  if old then idx_rem(id, old) end
  redis.call('HSET', K_ITEMS, id, raw)
  redis.call('SADD', K_NAMES, NAME)
  if exp ~= '' then
    redis.call('ZADD', K_EXPIRY, exp, id)
  else
    redis.call('ZREM', K_EXPIRY, id)
  end
  -- An existing claim is kept: the item becomes available when it ends.
  if not redis.call('ZSCORE', K_CLAIMED, id) then idx_add(id, cjson.decode(raw)) end
  return 1
end
if op == 'release' or op == 'evict' or op == 'extend' then
  tidy()
  local id, token = ARGV[6], ARGV[7]
  local item = held(id, token)
  if not item then return 0 end
  if op == 'release' then
    redis.call('ZREM', K_CLAIMED, id)
    redis.call('DEL', CLAIM .. id)
    idx_add(id, item)
  elseif op == 'evict' then
    delete_item(id, item)
    forget_if_empty()
  else
    redis.call('ZADD', K_CLAIMED, NOW + tonumber(ARGV[8]), id)
    redis.call('SET', CLAIM .. id, token, 'PX', ARGV[9])
  end
  return 1
end
if op == 'remove' then
  tidy()
  local id = ARGV[6]
  local item = get_item(id)
  if not item then return 0 end
  delete_item(id, item)
  forget_if_empty()
  return 1
end
if op == 'prune' then
  -- Bounded work per call (a long script blocks Redis); the caller loops.
  local limit = tonumber(ARGV[6])
  local n, seen = prune(limit)
  local back = reclaim(limit)
  return {n, seen, back}
end
if op == 'stats' then
  tidy()
  local total = redis.call('HLEN', K_ITEMS)
  local avail = redis.call('ZCARD', K_AVAIL)
  local soon = redis.call('ZCOUNT', K_EXPIRY, '(' .. NOW_S, NOW + tonumber(ARGV[6]))
  return {total, avail, total - avail, soon}
end
if op == 'drop' then
  -- Deletes up to limit items (with their index entries and claims) per call;
  -- the caller loops until none is left. Emptied index zsets vanish by themselves.
  local limit = tonumber(ARGV[6])
  local ids = redis.call('HRANDFIELD', K_ITEMS, limit)
  for _, id in ipairs(ids) do
    local item = get_item(id)
    if item then delete_item(id, item) end
  end
  local left = redis.call('HLEN', K_ITEMS)
  if left == 0 then
    redis.call('DEL', K_ITEMS, K_AVAIL, K_CLAIMED, K_EXPIRY)
    redis.call('SREM', K_NAMES, NAME)
  end
  return {#ids, left}
end
return redis.error_reply('unknown pool op ' .. tostring(op))
