-- Append an entry to a type's output stream, trim it by age and length, announce it.
-- KEYS[1]=stream; ARGV: ts, envelope, min ts, max len, channel -> 1
-- An emit of a task also gives KEYS[2] (its record hash), KEYS[3] (its outputs
-- list), ARGV[6] (the record's lifetime, seconds) and ARGV[7] (outputs kept): the
-- envelope joins the newest outputs of the task's record in the same step.
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
local maxlen = tonumber(ARGV[4])
if redis.call('ZCARD', KEYS[1]) > maxlen then
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(maxlen + 1))
end
if KEYS[2] then
  redis.call('RPUSH', KEYS[3], ARGV[2])
  redis.call('LTRIM', KEYS[3], -tonumber(ARGV[7]), -1)
  redis.call('HINCRBY', KEYS[2], 'n', 1)
  redis.call('EXPIRE', KEYS[2], ARGV[6])
  redis.call('EXPIRE', KEYS[3], ARGV[6])
end
redis.call('PUBLISH', ARGV[5], ARGV[2])
return 1
