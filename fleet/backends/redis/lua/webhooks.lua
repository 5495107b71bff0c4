-- A webhook delivery logged (fleet/backends/redis/webhooks.py; the rule is
-- fleet/core/webhooks.py's merged and dropped, held to it by
-- tests/conformance/test_differential_webhooks.py).
-- KEYS: 1 subscriptions hash id -> JSON, 2 the log hash event id -> delivery JSON,
--   3 the log's order zset event id -> created_at.
-- ARGV: 1 the subscription id, 2 the update (delivery JSON), 3 entries kept.
-- Returns the entry as stored (JSON), or false if the subscription is unknown.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return false end
local update = cjson.decode(ARGV[2])
local keep = tonumber(ARGV[3])
local STATUSES = {pending = true, delivered = true, failed = true, dead = true}

local function readable(raw)
  if not raw then return nil end
  local ok, found = pcall(cjson.decode, raw)
  if not ok or type(found) ~= 'table' or not STATUSES[found.status] then return nil end
  return found
end

local function merged(before, u)
  if not before then return u end
  before.attempts = math.max(tonumber(before.attempts) or 0, tonumber(u.attempts) or 0)
  local final = (before.status == 'delivered' or before.status == 'dead')
    and not (before.status == 'dead' and u.status == 'delivered')
  if final or u.status == 'pending' then return before end
  before.status = u.status
  before.http_status = u.http_status
  before.error = u.error
  before.updated_at = math.max(tonumber(before.updated_at) or 0, tonumber(u.updated_at) or 0)
  return before
end

local raw = redis.call('HGET', KEYS[2], update.event_id)
local entry = merged(readable(raw), update)
local text = cjson.encode(entry)
redis.call('HSET', KEYS[2], update.event_id, text)
if not raw then
  redis.call('ZADD', KEYS[3], update.created_at, update.event_id)
  local extra = redis.call('ZCARD', KEYS[3]) - keep
  if extra > 0 then
    local gone = redis.call('ZRANGE', KEYS[3], 0, extra - 1)
    redis.call('ZREM', KEYS[3], unpack(gone))
    redis.call('HDEL', KEYS[2], unpack(gone))
  end
end
return text
