-- Keep a task's latest progress report in its record and announce it.
-- KEYS[1]=the task's record hash (fleet:queue:<type>:rec:<id>); ARGV: progress
-- JSON, the record's lifetime (seconds), channel, event JSON -> 1
redis.call('HSET', KEYS[1], 'p', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
