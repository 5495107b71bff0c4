-- Renew a lock this token holds. KEYS[1]=lock; ARGV: token, hold ms -> 1|0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
