-- @include queue_common queue_groups
-- ARGV: op, now, ...
--   list after limit  -> up to limit groups by name after `after` ('' = from the
--                        start): flat (name, state, pending, settings JSON or ''),
--                        then one more name if more may follow
--   info name         -> {state or '', pending, settings JSON or ''}
--   set name json     -> the group's own settings (json '' = none); back in the
--                        rotation, checked at its turn (wakes one reserver)
--   reset name        -> no settings and no throttle, likewise back in rotation
local op, now = ARGV[1], tonumber(ARGV[2])

local function describe(name)
  return redis.call('HGET', K_GROUPS, name) or '', gpending(name),
    redis.call('HGET', K_GCONF, name) or ''
end

if op == 'list' then
  local after, limit = ARGV[3], tonumber(ARGV[4])
  local from = after == '' and '-' or '(' .. after
  local out = {}
  local n = 0
  -- Empty groups met on the way are forgotten (tidy) and skipped.
  while n < limit do
    local names = redis.call('ZRANGEBYLEX', K_GNAMES, from, '+', 'LIMIT', 0, limit - n + 1)
    if #names == 0 then return out end
    for _, name in ipairs(names) do
      if n == limit then
        out[#out + 1] = name -- more may follow
        return out
      end
      local g = gget(name)
      if g.new or not tidy(g, now) then
        local st, pending, conf = describe(name)
        out[#out + 1] = name
        out[#out + 1] = st
        out[#out + 1] = pending
        out[#out + 1] = conf
        n = n + 1
      end
      from = '(' .. name
    end
  end
  return out
end

local name = ARGV[3]
if op == 'info' then
  local st, pending, conf = describe(name)
  return {st, pending, conf}
end

local g = gget(name)
if op == 'set' then
  if ARGV[4] == '' then
    redis.call('HDEL', K_GCONF, name)
  else
    redis.call('HSET', K_GCONF, name, ARGV[4])
  end
elseif op == 'reset' then
  redis.call('HDEL', K_GCONF, name)
  g.til = 0
else
  return redis.error_reply('ERR unknown groups op ' .. tostring(op))
end
-- Whatever held it may hold no longer: back in the rotation, checked at its turn.
if g.pl ~= 'R' then
  unplace(g)
  if activate(g) then wake(1) end
end
if not tidy(g, now) then gsave(g) end
return 1
