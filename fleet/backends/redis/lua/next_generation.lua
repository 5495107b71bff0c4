-- Take the next config generation of a type, above a floor.
-- KEYS[1]=the type's generation counter; ARGV: floor -> max(counter, floor) + 1
local cur = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local floor = tonumber(ARGV[1])
if floor > cur then cur = floor end
redis.call('SET', KEYS[1], cur + 1)
return cur + 1
