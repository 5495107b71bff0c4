-- @include queue_common queue_groups
-- ARGV: op, now, ...
--   list after limit  -> up to limit groups by name after `after` ('' = from the
--                        start): flat (name, state, pending, settings JSON or ''),
--                        then one more name if more may follow
--   info name         -> {state or '', pending, settings JSON or ''}
--   set name json     -> the group's own settings (json '' = none); back in the
--                        rotation, checked at its turn (wakes one reserver)
--   reset name        -> no settings and no throttle, likewise back in rotation
--   defaults gen c i r pb pc pm
--                     -> the type's limits for groups without settings (c, i
--                        and r: concurrency, rate interval and text, '' = none)
--                        and its proxy policy (pb pc pm: bad threshold, cool-down
--                        seconds, max concurrency; pb '' = no policy, pm '' = no
--                        cap; read by lua/proxies.lua) as of config generation
--                        gen, unless a newer one is stored (0 then, else 1); a
--                        change of c i r puts every held group back in the
--                        rotation, checked at its turn
--   getdefaults       -> {gen, c, i, r} ('' each if none stored)
local op, now = ARGV[1], tonumber(ARGV[2])

if op == 'getdefaults' then
  local d = redis.call('HMGET', K_GMETA, 'dg', 'dc', 'di', 'dr')
  return {d[1] or '', d[2] or '', d[3] or '', d[4] or ''}
end

if op == 'defaults' then
  local gen = tonumber(ARGV[3])
  local old = redis.call('HMGET', K_GMETA, 'dg', 'dc', 'di', 'dr')
  if old[1] and tonumber(old[1]) > gen then return 0 end
  local new = {ARGV[4], ARGV[5], ARGV[6]}
  local fields = {'dc', 'di', 'dr'}
  local changed = false
  for i, f in ipairs(fields) do
    if (old[i + 1] or '') ~= new[i] then changed = true end
    if new[i] == '' then
      redis.call('HDEL', K_GMETA, f)
    else
      redis.call('HSET', K_GMETA, f, new[i])
    end
  end
  -- The proxy policy shares the generation: one record of the type's fleet-wide fields.
  local pb, pc, pm = ARGV[7] or '', ARGV[8] or '', ARGV[9] or ''
  if pb == '' then
    redis.call('HDEL', K_GMETA, 'pb', 'pc', 'pm')
  else
    redis.call('HSET', K_GMETA, 'pb', pb, 'pc', pc)
    if pm == '' then
      redis.call('HDEL', K_GMETA, 'pm')
    else
      redis.call('HSET', K_GMETA, 'pm', pm)
    end
  end
  redis.call('HSET', K_GMETA, 'dg', ARGV[3])
  if changed then
    -- O(groups), once per config change; reserve stays O(log G).
    local all = redis.call('HGETALL', K_GROUPS)
    local woke = 0
    for i = 1, #all, 2 do
      -- The place is read from the state already fetched; only held groups are loaded.
      local _, _, _, place = string.match(all[i + 1], GROUP_PATTERN)
      if place == 'S' or place == 'D' then
        local g = gget(all[i])
        unplace(g)
        if activate(g) then woke = woke + 1 end
        gsave(g)
      end
    end
    if woke > 0 then wake(woke) end
  end
  return 1
end

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
