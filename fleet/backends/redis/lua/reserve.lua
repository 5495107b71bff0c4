-- @include queue_common queue_groups run_common
-- ARGV: now, k, deadline (now + visibility), default max_attempts, token base
-- (fresh random text; the token of the i-th reservation is base .. "." .. i).
-- Groups without settings take the type's limits stored in :groups:meta (dc, di:
-- groups.lua 'defaults'), read here: one value for the fleet.
-- Returns {next_due} followed by (body, record, token) per reservation;
-- next_due is the earliest scheduled ready_at ("" if none) when nothing was taken.
-- Only if tasks were dropped for their ttl, one more trailing element: the flat
-- array {id, age, ttl, id, age, ttl, ...} (ages and ttls as strings, "" if the
-- body cannot tell) for the caller to log; scripts cannot log, and a reply with
-- nothing expired stays as short as before.
local now, k = tonumber(ARGV[1]), tonumber(ARGV[2])
local deadline, defmax, base = ARGV[3], tonumber(ARGV[4]), ARGV[5]
-- A type past its daily_budget (meters.lua's day check) is not dispatched until then.
local held = tonumber(redis.call('HGET', K_NORMAL .. ':budget', 'until'))
if held and held > now then return {fstr(held)} end
drain_due(now)
promote_groups(now)
local out = {''}
local got = 0
local zargs, pargs, targs = {}, {}, {}
-- The browse indexes: ids leaving pending, (submitted, id) pairs entering processing.
local left_q, into_p = {}, {}
local expired = nil
-- Group turns one call may take (each one that serves nothing sets a group aside).
local RESERVE_SPINS = 4000

-- The record of a body that is not in Fleet's form, or pushed by hand (RPUSH).
local function slow_record(raw)
  local body, id = decode_body(raw)
  if not body then return nil, nil end
  local rec = get_rec(id)
  if not rec then
    local ttl = tonumber(jnull(body.ttl_seconds))
    rec = {p = tonumber(jnull(body.priority)) or 0,
           a = tonumber(jnull(body.attempt)) or 0,
           m = tonumber(jnull(body.max_attempts))}
    if ttl then rec.x = fstr((tonumber(jnull(body.enqueued_at)) or 0) + ttl) end
  end
  return rec, id
end

-- Settle one popped body: dropped (cancelled, past its ttl), dead-lettered (out
-- of attempts, or no usable id) or leased. True if leased.
local function take_one(id, raw, rec)
  if not rec then rec, id = slow_record(raw) end
  if not rec then
    -- No usable id: dead-letter it as is rather than deliver it unowned.
    redis.call('RPUSH', K_DEAD, raw)
    count('dead')
    return false
  end
  -- A task without a run reads nothing more here.
  local gate = rec.rn and run_state(rec.rn)
  if rec.c or gate == 'cancelled' then
    finish(id, rec, 'C', now)
    count('cancelled')
    run_event(rec.rn, id, 'cancelled', false, now)
  elseif rec.x and now > tonumber(rec.x) then
    drop_rec(id, rec)
    count('expired')
    run_event(rec.rn, id, 'expired', false, now)
    -- The rare path: decoding the body here costs nothing on the hot one.
    local body = decode_body(raw)
    local enq = submitted_at(body, rec)
    local ttl = body and tonumber(jnull(body.ttl_seconds))
    expired = expired or {}
    expired[#expired + 1] = id
    expired[#expired + 1] = enq and fstr(now - enq) or ''
    expired[#expired + 1] = ttl and fstr(ttl) or ''
  else
    local m = rec.m
    if not m or m == 0 then m = defmax end
    rec.m = m
    local a = (rec.a or 0) + 1
    if gate == 'paused' and a <= m then
      -- Its run is paused: set aside untouched (no attempt charged) until it resumes.
      run_park(rec.rn, raw)
      return false
    end
    if a > m then
      rec.e = 'attempt ' .. a .. ' exceeds max_attempts=' .. m ..
        ': earlier attempts were lost with their worker'
      rec.f = fstr(now)
      bury(id, raw, rec)
      run_event(rec.rn, id, 'dead', false, now)
    else
      got = got + 1
      local tok = base .. '.' .. got
      rec.a = a
      rec.s = 'p'
      rec.k = tok
      rec.b = nil
      local encoded = enc(rec)
      zargs[#zargs + 1] = deadline
      zargs[#zargs + 1] = id
      pargs[#pargs + 1] = id
      pargs[#pargs + 1] = raw
      -- A running task's record goes to :tasks (rec_place): one HSET for all below.
      if rec.at ~= 'h' then rec_drop(K_TASKS, id, rec.at) end
      if idx_keeping() then
        if rec.s0 == 'q' then
          left_q[#left_q + 1] = id
        elseif rec.s0 then
          idx_move(id, rec.s0, nil, rec)
        end
        into_p[#into_p + 1] = idx_at(rec)
        into_p[#into_p + 1] = id
      end
      targs[#targs + 1] = id
      targs[#targs + 1] = encoded
      out[#out + 1] = raw
      out[#out + 1] = encoded
      out[#out + 1] = tok
      run_event(rec.rn, id, 'started', false, now)
      return true
    end
  end
  return false
end

local TIER_KEYS = {K_HIGH, K_NORMAL, K_LOW}
if redis.call('ZCARD', K_GREADY) == 0 then
  -- No group has a turn: tasks without a group only, exactly as before groups.
  for _, tk in ipairs(TIER_KEYS) do
    while got < k do
      local items = redis.call('LPOP', tk, k - got)
      if not items then break end
      -- Fleet's bodies start with a plain id: read it without decoding the payload.
      -- Every record is read before any is written (an id popped twice in one call
      -- is leased once per body, from the record as it was).
      local ids, recs = {}, {}
      for i, raw in ipairs(items) do
        ids[i] = head_id(raw)
        recs[i] = get_rec(ids[i]) or false
      end
      for i, raw in ipairs(items) do
        take_one(ids[i], raw, recs[i] or nil)
      end
    end
    if got >= k then break end
  end
else
  -- Tier by tier, tasks without a group and the groups whose best tier it is take
  -- turns (the turn survives the call); the groups go round robin; a group
  -- without budget is set aside on the way. Each group turn that serves nothing
  -- sets a group aside, so `spins` bounds a call's work, not its fairness.
  local meta = redis.call('HMGET', K_GMETA, 'turn', 'dc', 'di')
  local turn = meta[1] or 'plain'
  local defc, defi = tonumber(meta[2]), tonumber(meta[3])
  local spins = 0
  for ti, tk in ipairs(TIER_KEYS) do
    while got < k and spins < RESERVE_SPINS do
      spins = spins + 1
      local plain = redis.call('LLEN', tk) > 0
      local head = redis.call('ZRANGE', K_GREADY, 0, 0, 'WITHSCORES')
      local gname = nil
      if head[1] and math.floor(tonumber(head[2]) / TIER_SPAN) == ti then gname = head[1] end
      if not gname and not plain then break end
      if not gname or (plain and turn == 'plain') then
        if gname then turn = 'group' end
        local raw = redis.call('LPOP', tk)
        local id = head_id(raw)
        take_one(id, raw, get_rec(id))
      else
        local g = gget(gname)
        local best = gbest(gname)
        if best ~= ti then
          -- Its tasks of this tier left (cancelled): requeue it under its best.
          unplace(g)
          if best then to_ready(g, best) end
          if best or not tidy(g, now) then gsave(g) end
        else
          local verdict, val = admit(g, defc, defi, now)
          if verdict ~= 'serve' then
            refuse(g, verdict, val)
            gsave(g)
          else
            if plain then turn = 'plain' end
            local raw = redis.call('LPOP', glist(gname, ti))
            redis.call('HINCRBY', K_GMETA, TIER_NAMES[ti], -1)
            local id = head_id(raw)
            if take_one(id, raw, get_rec(id)) then
              g.run = g.run + 1
              g.tat = val
            end
            settle(g, defc, defi, now)
          end
        end
      end
    end
  end
  redis.call('HSET', K_GMETA, 'turn', turn)
end
if got > 0 then
  mcall('ZADD', K_PROC, zargs)
  mcall('HSET', K_PBODY, pargs)
  mcall('HSET', K_TASKS, targs)
  if #left_q > 0 then mcall('ZREM', K_NORMAL .. IDX_SUFFIX.q, left_q) end
  if #into_p > 0 then mcall('ZADD', K_NORMAL .. IDX_SUFFIX.p, into_p) end
else
  -- When to look again: the first scheduled task or held group coming due.
  local first = redis.call('ZRANGE', K_SCHED, 0, 0, 'WITHSCORES')
  local held = redis.call('ZRANGE', K_GDELAYED, 0, 0, 'WITHSCORES')
  local due = tonumber(first[2])
  if held[2] and (not due or tonumber(held[2]) < due) then due = tonumber(held[2]) end
  if due then out[1] = fstr(due) end
end
if expired then out[#out + 1] = expired end
return out
