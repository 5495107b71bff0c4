-- Append an entry to a type's output stream, trim it by age and length, announce it.
-- KEYS[1]=stream; ARGV: ts, envelope, min ts, max len, channel -> 1
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
local maxlen = tonumber(ARGV[4])
if redis.call('ZCARD', KEYS[1]) > maxlen then
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(maxlen + 1))
end
redis.call('PUBLISH', ARGV[5], ARGV[2])
return 1
