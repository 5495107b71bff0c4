-- Shared by every queue script. KEYS (built by redis_keys.queue_keys):
--  1 normal tier list   2 high tier list   3 low tier list
--  4 :processing zset   5 :processing:body hash   6 :scheduled zset
--  7 :dead list   8 :tasks hash   9 :counters hash   10 :done:<hour> hash
--  11 :wake list   12 :dead:info hash   13 previous :done:<hour> hash
--  14 :processing:started hash (task_id -> "<token>/<time>" of the reservation
--     marked started)
-- KEYS 10 is :done:<hour>, the hash of this hour's finished (done/cancelled) records.
-- Task state records (:tasks, :dead:info and :done:<hour> values) are
--   s|a|m|p|k|c|x|d[|{"e":..,"t":..,"f":..,"b":..,"r":..}]
-- s state (q|s|p|D|C), a attempt, m max_attempts, p priority ('' for 0), k lease token,
-- c "1" if a cancel was requested, x expires_at (ttl), d the task's times
-- "finished_at/submitted_at/started_at" (each may be empty: a live task has
-- "/<submitted_at>"; started_at is that of the attempt that finished), and only
-- when set a JSON tail: e last_error, t traceback, f failed_at, b the scheduled
-- member (body) while scheduled, r refunds (attempts sweep gave back because the
-- reservation expired without a start mark), g the flow-control group, tr the
-- trace id, rn the run (run_common.lua). The hot
-- fields need no JSON work. Times are
-- strings ("%.17g") because cjson rounds numbers to 14 digits. Bodies are never
-- re-encoded. Fleet's pushes leave enqueued_at out of the body: the record's
-- submitted time is the same number (34 bytes less per queued task).
local K_NORMAL, K_HIGH, K_LOW = KEYS[1], KEYS[2], KEYS[3]
local K_PROC, K_PBODY, K_SCHED = KEYS[4], KEYS[5], KEYS[6]
local K_DEAD, K_TASKS, K_COUNTERS = KEYS[7], KEYS[8], KEYS[9]
local K_DONE, K_WAKE, K_DEADINFO, K_DONE_PREV = KEYS[10], KEYS[11], KEYS[12], KEYS[13]
local K_STARTED = KEYS[14]
-- KEYS 15-21, flow control (used by queue_groups.lua): 15 :groups hash,
-- 16 :groups:ready zset, 17 :groups:delayed zset, 18 :groups:conf hash,
-- 19 :groups:names zset, 20 :groups:meta hash, 21 the prefix of the group lists.
-- KEYS 22-23, task records: 22 :finished zset (task_id -> when it finished or died:
-- the retention index), 23 the prefix of the per-task record keys <prefix><id>
-- (hash: p progress JSON, n outputs emitted) and <prefix><id>:out (list, newest
-- outputs); only tasks that reported progress or emitted have them.
-- Finished records live in hourly hashes that expire as a whole; the :finished
-- index drops each one RESULT_TTL after it ended, and the oldest first past
-- RESULT_MAX per type. Both come from the process' settings at script load
-- (FLEET_RESULT_TTL_SECONDS, FLEET_RESULT_MAX_PER_TYPE).
local RESULT_TTL = tonumber('__RESULT_TTL__') or 86400
local RESULT_MAX = tonumber('__RESULT_MAX__') or 100000
local DONE_TTL = math.ceil(RESULT_TTL) + 3600
local K_FINISHED, K_REC = KEYS[22], KEYS[23]
local DONE_PREFIX = string.match(K_DONE, '^(.*:done:)%d+$') or K_DONE
local RETAIN_CHUNK = 1000
local done_ttl_set = false
local WAKE_CAP = 64
local DRAIN_LIMIT = 1000

local function jnull(v)
  if v == cjson.null then return nil end
  return v
end

local function fstr(x)
  return string.format('%.17g', x)
end

local function tier_key(prio)
  prio = tonumber(prio) or 0
  if prio > 0 then return K_HIGH end
  if prio < 0 then return K_LOW end
  return K_NORMAL
end

local REC_PATTERN = '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|?(.*)$'

local function dec(raw)
  local s, a, m, p, k, c, x, d, rest = string.match(raw, REC_PATTERN)
  if not s then return nil end
  -- s0: the state as read, so a write knows which browse index the task leaves
  local rec = {s = s, s0 = s, a = tonumber(a), m = tonumber(m), p = tonumber(p) or 0}
  if k ~= '' then rec.k = k end
  if c ~= '' then rec.c = 1 end
  if x ~= '' then rec.x = x end
  if d ~= '' then rec.d = d end
  if rest ~= '' then
    local extra = cjson.decode(rest)
    rec.e = jnull(extra.e)
    rec.t = jnull(extra.t)
    rec.f = jnull(extra.f)
    rec.b = jnull(extra.b)
    rec.r = tonumber(jnull(extra.r))
    rec.g = jnull(extra.g)
    rec.tr = jnull(extra.tr)
    rec.rn = jnull(extra.rn)
    rec.ah = jnull(extra.ah)
  end
  return rec
end

local function enc(rec)
  -- priority 0 (most tasks) as '': one byte less in every queued task's record
  local p = rec.p
  if p == 0 then p = nil end
  local head = (rec.s or '') .. '|' .. (rec.a or '') .. '|' .. (rec.m or '') .. '|' ..
    (p or '') .. '|' .. (rec.k or '') .. '|' .. (rec.c and '1' or '') .. '|' ..
    (rec.x or '') .. '|' .. (rec.d or '')
  if rec.e or rec.t or rec.f or rec.b or rec.r or rec.g or rec.tr or rec.rn or rec.ah then
    return head .. '|' .. cjson.encode({e = rec.e, t = rec.t, f = rec.f, b = rec.b, r = rec.r,
                                        g = rec.g, tr = rec.tr, rn = rec.rn, ah = rec.ah})
  end
  return head
end

-- The browse indexes (lua/browse.lua pages them): per state of a type, a zset
-- <queue>:browse:<pending|scheduled|processing|dead> of task_id -> submitted time,
-- so a page of a state reads the page, not the type's records. Finished tasks are
-- in none. 'x' names the DLQ (a dead record has no state letter).
-- The DLQ's index is always kept (bury adds, dead.lua removes: off the hot path).
-- The live states' indexes are kept only while the type is browsed: while the
-- marker <queue>:browse exists (browse.lua sets it, with a TTL that each page
-- renews, and builds the indexes from the records), the scripts that change a
-- record's state keep them: set_rec and drop_rec here (through the state a record
-- was read in, rec.s0) and the batched writes of push, reserve and ack. A type
-- nobody browses pays one EXISTS per script call that changes a state.
local IDX_SUFFIX = {q = ':browse:pending', s = ':browse:scheduled',
                    p = ':browse:processing', x = ':browse:dead'}

-- The browse index key of state letter st of the queue whose normal list is q
-- (nil for a state without one).
local function idx_key(q, st)
  local suffix = st and IDX_SUFFIX[st]
  return suffix and q .. suffix
end

-- Whether this call keeps the live states' indexes (asked once per call).
local idx_kept = nil
local function idx_keeping()
  if idx_kept == nil then idx_kept = redis.call('EXISTS', K_NORMAL .. ':browse') == 1 end
  return idx_kept
end

-- The index score of a record: its submitted time (text, exact), 0 when unknown.
local function idx_at(rec)
  local sub = string.match(rec.d or '', '^[^/]*/([^/]*)')
  if sub == nil or sub == '' then return '0' end
  return sub
end

-- Move id between the live browse indexes of states `from` and `to` (either nil),
-- while they are kept.
local function idx_move(id, from, to, rec)
  if from == to or not idx_keeping() then return end
  local out, into = idx_key(K_NORMAL, from), idx_key(K_NORMAL, to)
  if out then redis.call('ZREM', out, id) end
  if into then redis.call('ZADD', into, idx_at(rec), id) end
end

-- Where live records are kept (keys.record_bucket in Python is the same rule):
-- the record of a waiting task (queued or scheduled) in its bucket, the hash
-- <:tasks>:<n> with n in 0..1023 from the id's last three bytes, each folded to
-- a hex digit's value (ten bits of the lowercase hex of Fleet's ids, evenly).
-- Up to 512 records a bucket (half a million waiting tasks a type), Redis keeps
-- a bucket as one listpack: ~75 bytes a record instead of ~130 in one big hash.
-- In the :tasks hash itself, as every record was before buckets: the records of
-- running tasks (few, at most the slots; reserve writes them in one HSET, mark
-- and ack read them with one HMGET) and any id or record longer than 64 bytes
-- (an error's traceback, a delayed task's body, a trace id), which would turn
-- its bucket into a hashtable.
local BUCKET_TEXT = 64 -- Redis' default hash-max-listpack-value

-- Each byte folded to a hex digit's value, (byte % 39 - 9) % 16, written out:
-- this runs at every push and reserve.
local function record_bucket(id)
  local n = #id
  local a, b, c = 48, 48, 48
  if n > 2 then
    a, b, c = string.byte(id, n - 2, n)
  elseif n == 2 then
    b, c = string.byte(id, 1, 2)
  elseif n == 1 then
    c = string.byte(id, 1)
  end
  return (a % 39 - 9) % 4 * 256 + (b % 39 - 9) % 16 * 16 + (c % 39 - 9) % 16
end

-- The buckets' key suffixes ':<n>', kept across calls by the function library
-- (formatting the number cost more than the HGET it names); 1,024 short strings.
local BUCKET_SUFFIXES = {}

local function bucket_key(tasks, id)
  local n = record_bucket(id)
  local suffix = BUCKET_SUFFIXES[n]
  if not suffix then
    suffix = ':' .. n
    BUCKET_SUFFIXES[n] = suffix
  end
  return tasks .. suffix
end

-- Where the record text raw of id belongs: 'b' its bucket or 'h' the :tasks hash.
local function rec_place(id, raw)
  if #raw <= BUCKET_TEXT and #id <= BUCKET_TEXT and string.byte(raw, 1) ~= 112 then
    return 'b' -- 112: 'p', a running task's record
  end
  return 'h'
end

-- A live record's text and where it is ('b' its bucket, 'h' the hash of `tasks`,
-- the :tasks key of its type), or false, 'n'.
local function rec_text(tasks, id)
  local raw = redis.call('HGET', bucket_key(tasks, id), id)
  if raw then return raw, 'b' end
  raw = redis.call('HGET', tasks, id)
  if raw then return raw, 'h' end
  return false, 'n'
end

-- Store a live record's text where rec_place puts it; `was` is where it was
-- ('b', 'h', 'n' nowhere, nil not known: both places are cleared). Returns where
-- it is now.
local function rec_store(tasks, id, raw, was)
  local bucket = bucket_key(tasks, id)
  if rec_place(id, raw) == 'b' then
    redis.call('HSET', bucket, id, raw)
    if was == 'h' or was == nil then redis.call('HDEL', tasks, id) end
    return 'b'
  end
  redis.call('HSET', tasks, id, raw)
  if was == 'b' or was == nil then redis.call('HDEL', bucket, id) end
  return 'h'
end

local function rec_drop(tasks, id, was)
  if was ~= 'h' then redis.call('HDEL', bucket_key(tasks, id), id) end
  if was ~= 'b' then redis.call('HDEL', tasks, id) end
end

-- The decoded live record of id (its place in rec.at), or nil.
local function get_rec(id)
  local raw, at = rec_text(K_TASKS, id)
  if not raw then return nil end
  local rec = dec(raw)
  if rec then rec.at = at end
  return rec
end

-- Write rec back (a record from get_rec knows its place; any other is put in
-- place of whatever the id had).
local function set_rec(id, rec)
  rec.at = rec_store(K_TASKS, id, enc(rec), rec.at)
  if rec.s ~= rec.s0 then
    idx_move(id, rec.s0, rec.s, rec)
    rec.s0 = rec.s
  end
end

local function drop_rec(id, rec)
  rec_drop(K_TASKS, id, rec and rec.at)
  if rec and rec.s0 then
    idx_move(id, rec.s0, nil, rec)
    rec.s0 = nil
  end
end

-- One command over many arguments (in chunks the Lua stack can take): batching
-- the per-task writes saves most of a script's cost.
local function mcall(cmd, key, args)
  local n = #args
  local i = 1
  while i <= n do
    local j = math.min(i + 999, n)
    redis.call(cmd, key, unpack(args, i, j))
    i = j + 1
  end
end

local function touch_done()
  if not done_ttl_set then
    redis.call('EXPIRE', K_DONE, DONE_TTL)
    done_ttl_set = true
  end
end

local function count(name, n)
  redis.call('HINCRBY', K_COUNTERS, name, n or 1)
end

-- Wake up to n blocked reservers; the list never grows past WAKE_CAP. While
-- nobody consumes it (no worker running) it stays full and a push costs one LLEN.
local function wake(n)
  if n <= 0 then return end
  local room = WAKE_CAP - redis.call('LLEN', K_WAKE)
  if n > room then n = room end
  if n <= 0 then return end
  local args = {}
  for i = 1, n do args[i] = '1' end
  redis.call('LPUSH', K_WAKE, unpack(args))
end

-- Decode a body; returns (body table, id string) or nil if unusable.
local function decode_body(raw)
  local ok, body = pcall(cjson.decode, raw)
  if not ok or type(body) ~= 'table' then return nil end
  local id = jnull(body.id)
  if id == nil or (type(id) ~= 'string' and type(id) ~= 'number') then return nil end
  return body, tostring(id)
end

-- The id of a body in Fleet's form, which starts with a plain id, read without
-- decoding the payload ('' for any other body).
local function head_id(raw)
  return string.match(raw, '^{"id":"([^"\\]*)"') or ''
end

-- Forget the finished records of {id, end time, id, end time, ...} (from the
-- :finished index): their done entry, started time and record keys.
local function forget_finished(flat)
  if #flat == 0 then return end
  local ids, recs, by_hour = {}, {}, {}
  for i = 1, #flat, 2 do
    local id = flat[i]
    ids[#ids + 1] = id
    recs[#recs + 1] = K_REC .. id
    recs[#recs + 1] = K_REC .. id .. ':out'
    local hour = math.floor((tonumber(flat[i + 1]) or 0) / 3600)
    local list = by_hour[hour]
    if not list then
      list = {}
      by_hour[hour] = list
    end
    list[#list + 1] = id
  end
  for hour, list in pairs(by_hour) do mcall('HDEL', DONE_PREFIX .. hour, list) end
  local i = 1
  while i <= #recs do
    local j = math.min(i + 999, #recs)
    redis.call('DEL', unpack(recs, i, j))
    i = j + 1
  end
  mcall('ZREM', K_FINISHED, ids)
end

-- Index tasks that just finished or died at ``now`` (a number) for retention,
-- and drop what is past RESULT_TTL or beyond RESULT_MAX (the oldest first).
local function retain(ids, now)
  if #ids == 0 then return end
  local at = fstr(now)
  local args = {}
  for _, id in ipairs(ids) do
    args[#args + 1] = at
    args[#args + 1] = id
  end
  mcall('ZADD', K_FINISHED, args)
  forget_finished(redis.call('ZRANGEBYSCORE', K_FINISHED, '-inf', '(' .. fstr(now - RESULT_TTL),
    'WITHSCORES', 'LIMIT', 0, RETAIN_CHUNK))
  local over = redis.call('ZCARD', K_FINISHED) - RESULT_MAX
  if over > 0 then
    forget_finished(redis.call('ZRANGE', K_FINISHED, 0, math.min(over, RETAIN_CHUNK) - 1,
      'WITHSCORES'))
  end
end

-- The times field of a record that finished at now_s (a string), keeping when it
-- was submitted; started: the finishing attempt's start mark ("<token>/<time>").
-- The submitted part of a record's times field ('' if it has none).
local function submitted_text(rec)
  return string.match(rec.d or '', '^[^/]*/([^/]*)') or ''
end

-- worker: the quoted id of the worker that finished it ('' or nil: the mark's).
local function finished_times(rec, now_s, started, worker)
  local sub = submitted_text(rec)
  local st, mw = '', ''
  if started then
    st = string.match(started, '^[^/]*/([^/]*)') or ''
    mw = string.match(started, '^[^/]*/[^/]*/(.*)$') or ''
  end
  if worker and worker ~= '' then mw = worker end
  if mw ~= '' then return now_s .. '/' .. sub .. '/' .. st .. '/' .. mw end
  return now_s .. '/' .. sub .. '/' .. st
end

-- Add an attempt that ended without finishing the task to rec.ah (the newest
-- ATTEMPTS_KEPT; fleet.core.attempts.entry is the same list): its number, the
-- worker's quoted id, when it started, when it ended, how, and its (cut) error.
local ATTEMPTS_KEPT = 10
local function add_attempt(rec, worker, started, ended, outcome, err)
  local list = rec.ah
  if type(list) ~= 'table' then list = {} end
  -- times as text: cjson would round a number to 14 digits
  list[#list + 1] = {rec.a or 0, worker or cjson.null, started and fstr(started) or cjson.null,
                     fstr(ended), outcome, err or cjson.null}
  while #list > ATTEMPTS_KEPT do table.remove(list, 1) end
  rec.ah = list
end

-- The time and quoted worker of a start mark "<token>/<time>[/<worker>]" if it
-- belongs to token (nil, nil otherwise).
local function mark_parts(mark, token)
  if not mark then return nil, nil end
  local tok, at, worker = string.match(mark, '^([^/]*)/([^/]*)/?(.*)$')
  if tok ~= token then return nil, nil end
  return tonumber(at), (worker ~= '' and worker or nil)
end

-- When a task was submitted: its body's enqueued_at or, for Fleet's own pushes
-- (which leave it out of the body, TaskBody.to_json), the record's submitted time.
local function submitted_at(body, rec)
  local enq = body and tonumber(jnull(body.enqueued_at))
  if enq then return enq end
  return rec and tonumber(submitted_text(rec))
end

local function finish(id, rec, state, now)
  rec.s = state
  rec.k = nil
  rec.c = nil
  rec.b = nil
  rec.d = finished_times(rec, fstr(now), nil)
  drop_rec(id, rec)
  redis.call('HSET', K_DONE, id, enc(rec))
  touch_done()
  retain({id}, now)
end

-- Take the first body of id out of the list at key (scanned a chunk at a time:
-- O(list length), for operator actions and rare paths). True if one was there.
local function remove_body(key, id)
  local needle = '"' .. id .. '"'
  -- An id JSON escapes differently cannot be found verbatim: decode every item.
  local verbatim = not string.find(id, '[%c"\\]')
  local len = redis.call('LLEN', key)
  for start = 0, len - 1, 1000 do
    for _, raw in ipairs(redis.call('LRANGE', key, start, start + 999)) do
      if not verbatim or string.find(raw, needle, 1, true) then
        local body, bid = decode_body(raw)
        if body and bid == id then
          redis.call('LREM', key, 1, raw)
          return true
        end
      end
    end
  end
  return false
end

-- Bury a body in the DLQ with its record (the live record goes away). The DLQ
-- keeps one dead letter per id, of its newest death (as memory and SQLite do). The
-- record keeps the body (b), so a dead task is read by id without a walk of :dead.
local function bury(id, raw, rec)
  rec.s = nil
  rec.k = nil
  rec.b = raw
  drop_rec(id, rec)
  if redis.call('HEXISTS', K_DEADINFO, id) == 1 then remove_body(K_DEAD, id) end
  redis.call('HSET', K_DEADINFO, id, enc(rec))
  redis.call('ZADD', K_NORMAL .. IDX_SUFFIX.x, idx_at(rec), id)
  redis.call('RPUSH', K_DEAD, raw)
  count('dead')
  retain({id}, tonumber(rec.f) or 0)
end

-- The owned record of a lease, or nil if the token does not hold the task.
local function owned(id, token)
  local rec = get_rec(id)
  if rec and rec.s == 'p' and rec.k == token then return rec end
  return nil
end

local function unregister(id)
  redis.call('ZREM', K_PROC, id)
  local raw = redis.call('HGET', K_PBODY, id)
  redis.call('HDEL', K_PBODY, id)
  redis.call('HDEL', K_STARTED, id)
  return raw
end
