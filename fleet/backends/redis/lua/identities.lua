-- Identity pools (fleet/backends/redis/identities.py; the rules are
-- fleet/core/identities.py's, held to the SQLite engine by the conformance tests).
-- KEYS: 1 :docs hash id -> document JSON, 2 :meta hash id -> state JSON
--   {r retired 0|1, c cooling until, l live leases, u uses, o ok, b blocked,
--    w blocked in a row, t last leased, why last reason, at created} (times as
--   "%.17g" text: cjson rounds numbers), 3 :ids zset (score 0: by id, for pages),
--   4 :ready zset id -> last leased (every identity not retired: the pool's order),
--   5 :leases zset token -> deadline, 6 :owner hash token -> id, 7 :sticky hash key -> id.
-- ARGV[1] the operation, ARGV[2] now; then per operation (below).
local K_DOCS, K_META, K_IDS, K_READY = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_LEASES, K_OWNER, K_STICKY = KEYS[5], KEYS[6], KEYS[7]
local op, now_s = ARGV[1], ARGV[2]
local now = tonumber(now_s)

local function fstr(x)
  return string.format('%.17g', x)
end

local function meta_of(id)
  local raw = redis.call('HGET', K_META, id)
  if not raw then return nil end
  return cjson.decode(raw)
end

local function save(id, m)
  redis.call('HSET', K_META, id, cjson.encode(m))
end

-- End the leases past their deadline: their identities' counts go down.
local function expire()
  local gone = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', '(' .. now_s)
  for _, tok in ipairs(gone) do
    local id = redis.call('HGET', K_OWNER, tok)
    redis.call('ZREM', K_LEASES, tok)
    redis.call('HDEL', K_OWNER, tok)
    local m = id and meta_of(id)
    if m then
      m.l = math.max((m.l or 0) - 1, 0)
      save(id, m)
    end
  end
end

local function usable(m, limit)
  return m and m.r ~= 1 and (not m.c or tonumber(m.c) <= now) and (m.l or 0) < limit
end

-- The first usable identity in the pool's order (least recently leased, then id).
local function first_usable(limit)
  local start = 0
  while true do
    local ids = redis.call('ZRANGE', K_READY, start, start + 199)
    if #ids == 0 then return nil end
    for _, id in ipairs(ids) do
      if usable(meta_of(id), limit) then return id end
    end
    start = start + 200
  end
end

local function held(tok, id)
  if redis.call('HGET', K_OWNER, tok) ~= id then return false end
  local deadline = tonumber(redis.call('ZSCORE', K_LEASES, tok))
  return deadline ~= nil and deadline >= now
end

if op == 'put' then
  -- ARGV[3..]: id, document, id, document...; returns how many were new.
  local added = 0
  for i = 3, #ARGV, 2 do
    local id = ARGV[i]
    if redis.call('HEXISTS', K_META, id) == 0 then
      added = added + 1
      save(id, {r = 0, l = 0, u = 0, o = 0, b = 0, w = 0, t = '0', at = now_s})
      redis.call('ZADD', K_IDS, 0, id)
      redis.call('ZADD', K_READY, 0, id)
    end
    redis.call('HSET', K_DOCS, id, ARGV[i + 1])
  end
  return added
end

if op == 'lease' then
  -- ARGV[3] lease seconds, [4] max concurrency, [5] sticky key ('' none), [6] token.
  -- Returns {id, document, meta} or false.
  local limit, key, tok = tonumber(ARGV[4]), ARGV[5], ARGV[6]
  expire()
  local chosen = nil
  if key ~= '' then
    local kept = redis.call('HGET', K_STICKY, key)
    local m = kept and meta_of(kept)
    if m and m.r ~= 1 then
      if not usable(m, limit) then return false end -- busy or cooling: wait for it
      chosen = kept
    end
  end
  if not chosen then
    chosen = first_usable(limit)
    if not chosen then return false end
    if key ~= '' then redis.call('HSET', K_STICKY, key, chosen) end
  end
  local m = meta_of(chosen)
  m.l = (m.l or 0) + 1
  m.u = (m.u or 0) + 1
  m.t = now_s
  save(chosen, m)
  redis.call('ZADD', K_READY, now_s, chosen)
  redis.call('ZADD', K_LEASES, fstr(now + tonumber(ARGV[3])), tok)
  redis.call('HSET', K_OWNER, tok, chosen)
  return {chosen, redis.call('HGET', K_DOCS, chosen), cjson.encode(m)}
end

if op == 'renew' then
  -- ARGV[3] id, [4] token, [5] lease seconds; returns 1|0.
  if not held(ARGV[4], ARGV[3]) then return 0 end
  redis.call('ZADD', K_LEASES, fstr(now + tonumber(ARGV[5])), ARGV[4])
  return 1
end

if op == 'release' then
  -- ARGV[3] id, [4] token, [5] outcome (ok|blocked|none), [6] reason ('' none),
  -- [7] the document the new one was made from, [8] the new document ('' keep),
  -- [9] cool-down seconds, [10] blocks in a row that retire.
  -- Returns 1, 0 (not held), or -1 (the document changed meanwhile: merge again).
  local id, tok, outcome = ARGV[3], ARGV[4], ARGV[5]
  if not held(tok, id) then return 0 end
  if ARGV[8] ~= '' and redis.call('HGET', K_DOCS, id) ~= ARGV[7] then return -1 end
  local m = meta_of(id)
  if not m then return 0 end
  redis.call('ZREM', K_LEASES, tok)
  redis.call('HDEL', K_OWNER, tok)
  m.l = math.max((m.l or 0) - 1, 0)
  if outcome == 'ok' then
    m.o = (m.o or 0) + 1
    m.w = 0
  elseif outcome == 'blocked' then
    m.b = (m.b or 0) + 1
    m.w = (m.w or 0) + 1
    if ARGV[6] ~= '' then m.why = ARGV[6] end
    if m.w >= tonumber(ARGV[10]) then
      m.r = 1
      redis.call('ZREM', K_READY, id)
    else
      m.c = fstr(now + tonumber(ARGV[9]))
    end
  end
  save(id, m)
  if ARGV[8] ~= '' then redis.call('HSET', K_DOCS, id, ARGV[8]) end
  return 1
end

if op == 'retire' or op == 'revive' then
  -- ARGV[3] id, [4] reason ('' none, retire only); returns 1|0.
  local id = ARGV[3]
  local m = meta_of(id)
  if not m then return 0 end
  if op == 'retire' then
    m.r = 1
    if ARGV[4] ~= '' then m.why = ARGV[4] end
    redis.call('ZREM', K_READY, id)
  else
    m.r = 0
    m.c = nil
    m.w = 0
    redis.call('ZADD', K_READY, m.t or '0', id)
  end
  save(id, m)
  return 1
end

if op == 'delete' then
  -- ARGV[3] id; its leases and sticky keys go too; returns 1|0.
  local id = ARGV[3]
  if redis.call('HDEL', K_META, id) == 0 then return 0 end
  redis.call('HDEL', K_DOCS, id)
  redis.call('ZREM', K_IDS, id)
  redis.call('ZREM', K_READY, id)
  local owners = redis.call('HGETALL', K_OWNER)
  for i = 1, #owners, 2 do
    if owners[i + 1] == id then
      redis.call('HDEL', K_OWNER, owners[i])
      redis.call('ZREM', K_LEASES, owners[i])
    end
  end
  local sticky = redis.call('HGETALL', K_STICKY)
  for i = 1, #sticky, 2 do
    if sticky[i + 1] == id then redis.call('HDEL', K_STICKY, sticky[i]) end
  end
  return 1
end

if op == 'read' then
  -- ARGV[3..] ids; returns {document, meta} per id (false for an unknown one), after
  -- ending expired leases (a read shows what holds now).
  expire()
  local out = {}
  for i = 3, #ARGV do
    out[#out + 1] = redis.call('HGET', K_DOCS, ARGV[i]) or false
    out[#out + 1] = redis.call('HGET', K_META, ARGV[i]) or false
  end
  return out
end

if op == 'page' then
  -- ARGV[3] after ('' from the first), [4] how many; returns {n, then n times id,
  -- document, meta: the page; then every identity's meta (the counts by state)}.
  expire()
  local from = ARGV[3] == '' and '-' or ('(' .. ARGV[3])
  local ids = redis.call('ZRANGEBYLEX', K_IDS, from, '+', 'LIMIT', 0, tonumber(ARGV[4]))
  local out = {#ids}
  for _, id in ipairs(ids) do
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGET', K_DOCS, id) or ''
    out[#out + 1] = redis.call('HGET', K_META, id) or ''
  end
  for _, m in ipairs(redis.call('HVALS', K_META)) do out[#out + 1] = m end
  return out
end

return redis.error_reply('unknown identities operation ' .. tostring(op))
