-- Write a worker's desired config if its generation is newer than the stored one.
-- KEYS[1]=config KEYS[2]=gen; ARGV: config JSON, gen -> 1|0
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
if tonumber(ARGV[2]) > cur then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('SET', KEYS[2], ARGV[2])
  return 1
end
return 0
