-- Store a partial config at the type's next generation (one PATCH, any number of workers).
-- KEYS[1]=the type's generation counter KEYS[2]=the config (type-wide or an override)
-- KEYS[3]=the type's config generations hash; ARGV: config JSON, hash field ('' for the
-- type-wide config, else the worker id), floor -> the generation
-- A counter that cannot be read counts as 0: the floor (or 1) takes over.
local raw = redis.pcall('GET', KEYS[1])
local cur = (type(raw) == 'string' and tonumber(raw)) or 0
local floor = tonumber(ARGV[3]) or 0
if floor > cur then cur = floor end
local gen = cur + 1
redis.call('SET', KEYS[1], gen)
redis.call('SET', KEYS[2], ARGV[1])
if redis.call('TYPE', KEYS[3]).ok ~= 'hash' then redis.call('DEL', KEYS[3]) end
redis.call('HSET', KEYS[3], ARGV[2], gen)
return gen
