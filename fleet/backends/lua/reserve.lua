-- @include queue_common
-- ARGV: now, k, deadline (now + visibility), default max_attempts, token base
-- (fresh random text; the token of the i-th reservation is base .. "." .. i).
-- Returns {next_due} followed by (body, record JSON, token) per reservation;
-- next_due is the earliest scheduled ready_at ("" if none) when nothing was taken.
local now, k = tonumber(ARGV[1]), tonumber(ARGV[2])
local deadline, defmax, base = ARGV[3], tonumber(ARGV[4]), ARGV[5]
drain_due(now)
local out = {''}
local got = 0
for _, tk in ipairs({K_HIGH, K_NORMAL, K_LOW}) do
  while got < k do
    local items = redis.call('LPOP', tk, k - got)
    if not items then break end
    for _, raw in ipairs(items) do
      -- Fleet's bodies start with a plain id: read it without decoding the payload.
      local id = string.match(raw, '^{"id":"([^"\\]*)"')
      local rec = id and get_rec(id)
      if not rec then
        local body
        body, id = decode_body(raw)
        if body then
          rec = get_rec(id)
          if not rec then
            -- Pushed by hand (RPUSH): adopt it.
            local ttl = tonumber(jnull(body.ttl_seconds))
            rec = {p = tonumber(jnull(body.priority)) or 0,
                   a = tonumber(jnull(body.attempt)) or 0,
                   m = tonumber(jnull(body.max_attempts))}
            if ttl then rec.x = fstr((tonumber(jnull(body.enqueued_at)) or 0) + ttl) end
          end
        end
      end
      if not rec then
        -- No usable id: dead-letter it as is rather than deliver it unowned.
        redis.call('RPUSH', K_DEAD, raw)
        count('dead')
      else
        if rec.c then
          finish(id, rec, 'C', now)
          count('cancelled')
        elseif rec.x and now > tonumber(rec.x) then
          redis.call('HDEL', K_TASKS, id)
          count('expired')
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
            redis.call('ZADD', K_PROC, deadline, id)
            redis.call('HSET', K_PBODY, id, raw)
            local encoded = enc(rec)
            redis.call('HSET', K_TASKS, id, encoded)
            out[#out + 1] = raw
            out[#out + 1] = encoded
            out[#out + 1] = tok
          end
        end
      end
    end
  end
  if got >= k then break end
end
if got == 0 then
  local first = redis.call('ZRANGE', K_SCHED, 0, 0, 'WITHSCORES')
  if first[2] then out[1] = first[2] end
end
return out
