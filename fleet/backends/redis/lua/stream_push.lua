-- Append entries to a type's output stream, trim it by age and length, announce each.
-- KEYS[1]=stream, then the record keys of the entries emitted by a task: its record
-- hash and its outputs list, side by side.
-- ARGV: min ts (the newest entry's time minus the stream's max age), max len, channel,
-- a record's lifetime (seconds), outputs kept per record, then per entry: ts,
-- envelope, the KEYS index of its record hash (0: not emitted by a task), what the
-- record keeps of it ('': the envelope; else the marker of an output over the
-- record's byte cap) -> entries.
-- The entries of one call are the emits that waited while another was written (several
-- slots emitting at once): one call instead of one per emit. Trimming once, after
-- them all, leaves what trimming after each would.
local stream, channel = KEYS[1], ARGV[3]
local life, keep = ARGV[4], tonumber(ARGV[5])
local n = 0
for i = 6, #ARGV, 4 do
  local env, k, kept = ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
  redis.call('ZADD', stream, ARGV[i], env)
  if k > 0 then
    local rec, out = KEYS[k], KEYS[k + 1]
    if kept == '' then kept = env end
    redis.call('RPUSH', out, kept)
    redis.call('LTRIM', out, -keep, -1)
    redis.call('HINCRBY', rec, 'n', 1)
    redis.call('EXPIRE', rec, life)
    redis.call('EXPIRE', out, life)
  end
  redis.call('PUBLISH', channel, env)
  n = n + 1
end
redis.call('ZREMRANGEBYSCORE', stream, '-inf', '(' .. ARGV[1])
local maxlen = tonumber(ARGV[2])
if redis.call('ZCARD', stream) > maxlen then
  redis.call('ZREMRANGEBYRANK', stream, 0, -(maxlen + 1))
end
return n
