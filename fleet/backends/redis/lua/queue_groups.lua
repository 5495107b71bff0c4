-- Flow control, shared by the queue scripts that move tasks in and out of groups
-- (included after queue_common). The rule is fleet/core/capabilities/groups.py;
-- admit() below is fleet/core/flow.py's admit.
--
-- A group's pending tasks wait in one list per tier, <prefix><group>:<tier>.
-- Its state, in :groups, is "running|tat|until|place|key tier": reservations not
-- yet ended, the rate's theoretical arrival time, the throttle's end, and where it
-- sits: R (in :groups:ready, scored key tier * 2^50 + turn: the rotation), D (in
-- :groups:delayed until its rate or throttle lets it go), S (saturated: back to R
-- when one of its reservations ends) or '' (empty or paused). Every move is
-- O(log G) in the number of groups: nothing here walks a list of groups.
local K_GROUPS, K_GREADY, K_GDELAYED = KEYS[15], KEYS[16], KEYS[17]
local K_GCONF, K_GNAMES, K_GMETA, G_PREFIX = KEYS[18], KEYS[19], KEYS[20], KEYS[21]
local TIER_NAMES = {'high', 'normal', 'low'}
local TIER_SPAN = 1125899906842624 -- 2^50: turns below it, tiers above
local GROUP_PATTERN = '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$'

local function tier_index(prio)
  prio = tonumber(prio) or 0
  if prio > 0 then return 1 end
  if prio < 0 then return 3 end
  return 2
end

local function glist(name, ti)
  return G_PREFIX .. name .. ':' .. TIER_NAMES[ti]
end

local function gget(name)
  local raw = redis.call('HGET', K_GROUPS, name)
  local g = {n = name, run = 0, tat = 0, til = 0, pl = '', kt = 0}
  if not raw then
    g.new = true
    return g
  end
  local run, tat, til, pl, kt = string.match(raw, GROUP_PATTERN)
  g.run = tonumber(run) or 0
  g.tat = tonumber(tat) or 0
  g.til = tonumber(til) or 0
  g.pl = pl or ''
  g.kt = tonumber(kt) or 0
  return g
end

local function gsave(g)
  redis.call('HSET', K_GROUPS, g.n,
    g.run .. '|' .. fstr(g.tat) .. '|' .. fstr(g.til) .. '|' .. g.pl .. '|' .. g.kt)
  if g.new then
    redis.call('ZADD', K_GNAMES, 0, g.n)
    g.new = nil
  end
end

local function gbest(name)
  for ti = 1, 3 do
    if redis.call('LLEN', glist(name, ti)) > 0 then return ti end
  end
  return nil
end

local function gpending(name)
  local n = 0
  for ti = 1, 3 do n = n + redis.call('LLEN', glist(name, ti)) end
  return n
end

local function gconf(name)
  local raw = redis.call('HGET', K_GCONF, name)
  if not raw then return nil end
  local ok, c = pcall(cjson.decode, raw)
  if not ok or type(c) ~= 'table' then return nil end
  return c
end

local function unplace(g)
  if g.pl == 'R' then redis.call('ZREM', K_GREADY, g.n) end
  if g.pl == 'D' then redis.call('ZREM', K_GDELAYED, g.n) end
  g.pl = ''
end

local function to_ready(g, ti)
  if g.pl == 'D' then redis.call('ZREM', K_GDELAYED, g.n) end
  g.pl = 'R'
  g.kt = ti
  local turn = redis.call('HINCRBY', K_GMETA, 'seq', 1)
  redis.call('ZADD', K_GREADY, ti * TIER_SPAN + turn, g.n)
end

-- Put a group with pending tasks in the rotation, unchecked (reserve checks its
-- budget when its turn comes). True if it was not there.
local function activate(g)
  if g.pl == 'R' then return false end
  local best = gbest(g.n)
  if not best then return false end
  to_ready(g, best)
  return true
end

-- Out of the rotation: D until `til` (waking one reserver if that is now the
-- earliest time a held group may go, so a blocked one re-bounds its wait), S or ''.
local function set_aside(g, place, til)
  unplace(g)
  g.pl = place
  if place == 'D' then
    local first = redis.call('ZRANGE', K_GDELAYED, 0, 0, 'WITHSCORES')
    redis.call('ZADD', K_GDELAYED, til, g.n)
    if not first[2] or til < tonumber(first[2]) then wake(1) end
  end
end

-- Forget a group that holds nothing any more.
local function tidy(g, now)
  if g.run > 0 or g.til > now or g.tat > now then return false end
  if redis.call('HEXISTS', K_GCONF, g.n) == 1 or gbest(g.n) then return false end
  unplace(g)
  redis.call('HDEL', K_GROUPS, g.n)
  redis.call('ZREM', K_GNAMES, g.n)
  return true
end

-- A task of tier ti joins its group (head or tail); the group joins the rotation
-- if it was out of it, or moves up to ti if it waited under a worse tier.
local function gpush(name, ti, raw, head)
  local g = gget(name)
  redis.call(head and 'LPUSH' or 'RPUSH', glist(name, ti), raw)
  redis.call('HINCRBY', K_GMETA, TIER_NAMES[ti], 1)
  if g.pl == '' then
    activate(g)
  elseif g.pl == 'R' and ti < g.kt then
    to_ready(g, ti)
  end
  gsave(g)
  return g
end

-- One reservation of the group ended (ack, nack, release, sweep, throttle).
local function ended(name, now)
  if not name then return end
  local g = gget(name)
  if g.new then return end
  g.run = math.max(g.run - 1, 0)
  if g.pl == 'S' then
    g.pl = ''
    if activate(g) then wake(1) end
  end
  if not tidy(g, now) then gsave(g) end
end

-- fleet.core.flow.admit: 'serve' (and the new tat), 'saturated', 'delayed' (and
-- until when) or 'paused'. defc/defi: the type's concurrency and rate interval.
local function admit(g, defc, defi, now)
  local c = gconf(g.n)
  local conc, interval = defc, defi
  if c then
    if c.paused == true then return 'paused', 0 end
    if tonumber(jnull(c.concurrency)) then conc = tonumber(c.concurrency) end
    if tonumber(jnull(c.interval)) then interval = tonumber(c.interval) end
  end
  if g.til > now then return 'delayed', g.til end
  if conc and g.run >= conc then return 'saturated', 0 end
  if interval and interval > 0 then
    if g.tat > now then return 'delayed', g.tat end
    -- Late by less than one interval keeps the schedule (flow.next_tat).
    local base = g.tat
    if now - g.tat >= interval then base = now end
    return 'serve', base + interval
  end
  return 'serve', g.tat
end

local function refuse(g, verdict, til)
  if verdict == 'delayed' then
    set_aside(g, 'D', til)
  elseif verdict == 'saturated' then
    set_aside(g, 'S', 0)
  else
    set_aside(g, '', 0)
  end
end

-- After its turn: the back of the line if it may go again, else set aside.
local function settle(g, defc, defi, now)
  local best = gbest(g.n)
  if not best then
    unplace(g)
    if not tidy(g, now) then gsave(g) end
    return
  end
  local verdict, val = admit(g, defc, defi, now)
  if verdict == 'serve' then
    to_ready(g, best)
  else
    refuse(g, verdict, val)
  end
  gsave(g)
end

-- Groups whose rate or throttle let them go again rejoin the rotation.
local function promote_groups(now)
  local due = redis.call('ZRANGEBYSCORE', K_GDELAYED, '-inf', now, 'LIMIT', 0, DRAIN_LIMIT)
  for _, name in ipairs(due) do
    local g = gget(name)
    redis.call('ZREM', K_GDELAYED, name)
    g.pl = ''
    activate(g)
    gsave(g)
  end
  return #due
end

-- Back into the queue: a grouped task into its group, any other into its tier.
local function requeue(raw, rec, head)
  if rec and rec.g then
    gpush(rec.g, tier_index(rec.p), raw, head)
  else
    redis.call(head and 'LPUSH' or 'RPUSH', tier_key(rec and rec.p or 0), raw)
  end
end

-- Move due scheduled tasks to the tail of their tier or group; returns how many.
local function drain_due(now)
  local due = redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', now, 'LIMIT', 0, DRAIN_LIMIT)
  for _, raw in ipairs(due) do
    redis.call('ZREM', K_SCHED, raw)
    local body, id = decode_body(raw)
    local rec = nil
    if body then
      rec = get_rec(id)
      if rec then
        rec.s = 'q'
        rec.b = nil
        set_rec(id, rec)
      end
    end
    requeue(raw, rec, false)
  end
  wake(#due)
  return #due
end
