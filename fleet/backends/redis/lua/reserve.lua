-- @include queue_common
-- ARGV: now, k, deadline (now + visibility), default max_attempts, token base
-- (fresh random text; the token of the i-th reservation is base .. "." .. i).
-- Returns {next_due} followed by (body, record, token) per reservation;
-- next_due is the earliest scheduled ready_at ("" if none) when nothing was taken.
-- Only if tasks were dropped for their ttl, one more trailing element: the flat
-- array {id, age, ttl, id, age, ttl, ...} (ages and ttls as strings, "" if the
-- body cannot tell) for the caller to log; scripts cannot log, and a reply with
-- nothing expired stays as short as before.
local now, k = tonumber(ARGV[1]), tonumber(ARGV[2])
local deadline, defmax, base = ARGV[3], tonumber(ARGV[4]), ARGV[5]
drain_due(now)
local out = {''}
local got = 0
local zargs, pargs, targs = {}, {}, {}
local expired = nil

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

for _, tk in ipairs({K_HIGH, K_NORMAL, K_LOW}) do
  while got < k do
    local items = redis.call('LPOP', tk, k - got)
    if not items then break end
    -- Fleet's bodies start with a plain id: read it without decoding the payload,
    -- and fetch every record in one HMGET.
    local ids = {}
    for i, raw in ipairs(items) do ids[i] = string.match(raw, '^{"id":"([^"\\]*)"') or '' end
    local recs = redis.call('HMGET', K_TASKS, unpack(ids))
    for i, raw in ipairs(items) do
      local id = ids[i]
      local rec = recs[i] and dec(recs[i])
      if not rec then rec, id = slow_record(raw) end
      if not rec then
        -- No usable id: dead-letter it as is rather than deliver it unowned.
        redis.call('RPUSH', K_DEAD, raw)
        count('dead')
      elseif rec.c then
        finish(id, rec, 'C', now)
        count('cancelled')
      elseif rec.x and now > tonumber(rec.x) then
        redis.call('HDEL', K_TASKS, id)
        count('expired')
        -- The rare path: decoding the body here costs nothing on the hot one.
        local body = decode_body(raw)
        local enq = body and tonumber(jnull(body.enqueued_at))
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
        if a > m then
          rec.e = 'attempt ' .. a .. ' exceeds max_attempts=' .. m ..
            ': earlier attempts were lost with their worker'
          rec.f = fstr(now)
          bury(id, raw, rec)
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
          targs[#targs + 1] = id
          targs[#targs + 1] = encoded
          out[#out + 1] = raw
          out[#out + 1] = encoded
          out[#out + 1] = tok
        end
      end
    end
  end
  if got >= k then break end
end
if got > 0 then
  mcall('ZADD', K_PROC, zargs)
  mcall('HSET', K_PBODY, pargs)
  mcall('HSET', K_TASKS, targs)
else
  local first = redis.call('ZRANGE', K_SCHED, 0, 0, 'WITHSCORES')
  if first[2] then out[1] = first[2] end
end
if expired then out[#out + 1] = expired end
return out
