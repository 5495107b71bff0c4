-- @include pool_common
-- ARGV 5..: hold seconds, hold ms, token, strategy (freshest|oldest|random), where suffixes...
-- Returns {item_id, item JSON} or false.
local hold, hold_ms, token, strategy = tonumber(ARGV[5]), ARGV[6], ARGV[7], ARGV[8]
local where = {}
for i = 9, #ARGV do where[#where + 1] = ARGV[i] end
tidy()
local key, need = candidates(where)
if not key then return false end
local chosen = nil
if strategy == 'random' then
  for _, id in ipairs(redis.call('ZRANDMEMBER', key, 8)) do
    local s = tonumber(redis.call('ZSCORE', key, id))
    if s and s > NOW and matches(id, need) then
      chosen = id
      break
    end
  end
end
if not chosen then
  scan(key, strategy ~= 'oldest', need, function(id)
    chosen = id
    return true
  end)
end
if not chosen then return false end
local item, raw = get_item(chosen)
idx_rem(chosen, item)
redis.call('ZADD', K_CLAIMED, NOW + hold, chosen)
redis.call('SET', CLAIM .. chosen, token, 'PX', hold_ms)
return {chosen, raw}
