//! The Lua scripts that make each Ferry operation one atomic step on the server. Redis runs
//! a script without interleaving other commands, so a dead-letter republish and the XACK
//! of its original, or a dedup check and its XADD, can never be seen half done — and
//! several SDK processes can fetch, move delayed entries and claim expired leases at once.
//!
//! Key layout, for a queue or subscription `N` and a topic `T`:
//! - `ferry:src:N` — hash: `kind` (`queue`/`subscription`), `spec` (the settings as JSON),
//!   `topic`, and the fields publish scripts need (`maxdelay`, `dedup`, `maxlen`, in ms);
//! - `ferry:q:N` — the queue's stream (a subscription's own stream for delayed
//!   redeliveries), with `:delayed` (sorted set of packed entries by due time), `:dedup`
//!   (sorted set of dedup ids by expiry), `:ext` (hash of lease extensions beyond the
//!   lease) and `:fails` (hash of first failure time and last error per pending entry);
//! - `ferry:q:N.dlq` — the dead letters, a stream read like a queue;
//! - `ferry:t:T` — the topic's stream, with `:meta`, `:subs` (set of subscription names)
//!   and `:delayed`.
//!
//! Entry fields: `id`, `t` (published at, server ms), `h` (headers, JSON), `p` (payload),
//! `k` (key, when set), `x` (expires at), `a` (deliveries made before this entry was
//! re-added after a delay), `ff`/`le` (first failure and last error, carried likewise),
//! and on dead letters `dr`, `dn`, `do`, `de`, `df`, `dl`, `dc` (the `ferry-dlq-*` data).

/// Helpers every script below starts with.
const COMMON: &str = r#"
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- When an entry delayed by `delay` ms comes due. `now_ms` drops the part of a millisecond
-- (up to 1 ms), and an entry moves once its due time is not after `now_ms`: one more
-- millisecond keeps it from moving before its whole delay has passed.
local function due_after(now, delay) return now + delay + 1 end
local function ms(n) return string.format('%d', n) end
local function field_map(fields)
  local m = {}
  for i = 1, #fields, 2 do m[fields[i]] = fields[i + 1] end
  return m
end
local function entry_fields(stream, id)
  local r = redis.call('XRANGE', stream, id, id)
  if #r == 0 then return nil end
  return r[1][2]
end
local internal = {a = true, ff = true, le = true, x = true, dr = true, dn = true, ['do'] = true,
  de = true, df = true, dl = true, dc = true}
-- The message itself, without bookkeeping; the expiry kept when asked.
local function message_fields(fields, keep_expiry)
  local out = {}
  for i = 1, #fields, 2 do
    local f = fields[i]
    if not internal[f] or (keep_expiry and f == 'x') then
      out[#out + 1] = f
      out[#out + 1] = fields[i + 1]
    end
  end
  return out
end
-- First failure time and last error of a pending entry: from the fails hash, else carried
-- in the entry from before a delayed hop.
local function failure(fails, id, m)
  local packed = redis.call('HGET', fails, id)
  if packed then
    local f = cmsgpack.unpack(packed)
    return f[1], f[2]
  end
  return m['ff'], m['le']
end
-- Set by a script settling a batch: ids done with, by stream, for one XACK (and XDEL and
-- HDELs) per stream at its end instead of one each.
local settled_by_stream = nil
-- Done with a pending entry: XACK, and XDEL where the stream is the source's own (a
-- topic's stream is shared with the other subscriptions, which may not have read it).
local function settle_now(s, stream, ids)
  redis.call('XACK', stream, s.group, unpack(ids))
  if stream == s.home then redis.call('XDEL', stream, unpack(ids)) end
  redis.call('HDEL', s.ext, unpack(ids))
  redis.call('HDEL', s.fails, unpack(ids))
end
local function settle(s, id)
  if settled_by_stream == nil then
    settle_now(s, s.stream, {id})
    return
  end
  local ids = settled_by_stream[s.stream]
  if ids == nil then
    ids = {}
    settled_by_stream[s.stream] = ids
  end
  ids[#ids + 1] = id
end
-- Republish to the dead-letter stream first, then settle the original: at-least-once,
-- and both in this one script.
local function dead_letter(s, id, reason, deliveries, err, consumer, now)
  local fields = entry_fields(s.stream, id)
  if s.dlq ~= '' and fields then
    local m = field_map(fields)
    local first, last_error = failure(s.fails, id, m)
    if err == nil or err == '' then err = last_error end
    local out = message_fields(fields, false)
    local function add(f, v) out[#out + 1] = f; out[#out + 1] = v end
    add('dr', reason)
    add('dn', tostring(deliveries))
    add('do', s.origin)
    add('df', first or ms(now))
    add('dl', ms(now))
    if err and err ~= '' then add('de', err) end
    if consumer and consumer ~= '' then add('dc', consumer) end
    redis.call('XADD', s.dlq, '*', unpack(out))
  end
  settle(s, id)
end
-- Deliveries `out` ({stream index, id, count, fields}) read from `streams`, less those
-- whose TTL has passed, which are dead-lettered (reason `expired`) instead.
local function unexpired(s, streams, out, ttl, consumer, now)
  local result = {}
  for _, e in ipairs(out) do
    local m = field_map(e[4])
    local expires = tonumber(m['x'] or '0')
    if expires == 0 and ttl > 0 and m['t'] then expires = tonumber(m['t']) + ttl end
    if expires > 0 and expires <= now then
      s.stream = streams[e[1]]
      local carried = tonumber(m['a'] or '0')
      dead_letter(s, e[2], 'expired', carried + e[3] - 1, '', consumer, now)
    else
      result[#result + 1] = e
    end
  end
  return result
end
"#;

/// KEYS: meta, home stream, dlq stream, topic meta, topic stream, topic subs.
/// ARGV: kind, spec, maxdelay, dedup, maxlen, group, topic, name.
/// Returns `CREATED`, or `{kind, spec, topic}` of what exists.
pub const DECLARE: &str = r#"
local kind = redis.call('HGET', KEYS[1], 'kind')
if kind then
  return {kind, redis.call('HGET', KEYS[1], 'spec'), redis.call('HGET', KEYS[1], 'topic') or ''}
end
if ARGV[1] == 'subscription' then
  if redis.call('EXISTS', KEYS[4]) == 0 then
    return redis.error_reply('NOTFOUND topic ' .. ARGV[7])
  end
  -- At `$`: a subscription gets what is published from now on.
  redis.pcall('XGROUP', 'CREATE', KEYS[5], ARGV[6], '$', 'MKSTREAM')
  redis.call('SADD', KEYS[6], ARGV[8])
end
redis.call('HSET', KEYS[1], 'kind', ARGV[1], 'spec', ARGV[2], 'maxdelay', ARGV[3],
  'dedup', ARGV[4], 'maxlen', ARGV[5], 'topic', ARGV[7])
redis.pcall('XGROUP', 'CREATE', KEYS[2], ARGV[6], '0', 'MKSTREAM')
redis.pcall('XGROUP', 'CREATE', KEYS[3], 'ferry', '0', 'MKSTREAM')
return 'CREATED'
"#;

/// Deletes queues, subscriptions and topics by name, building the keys as the layout
/// above says; a topic that still has subscriptions is refused. ARGV: what (`source`,
/// `dead-letters` or `topic`), name.
pub const DELETE: &str = r#"
local function del_queue_keys(base)
  redis.call('DEL', base, base .. ':delayed', base .. ':dedup', base .. ':ext', base .. ':fails')
end
local function del_source(name)
  local meta = 'ferry:src:' .. name
  if redis.call('HGET', meta, 'kind') == 'subscription' then
    local topic = 'ferry:t:' .. redis.call('HGET', meta, 'topic')
    redis.pcall('XGROUP', 'DESTROY', topic, name)
    redis.call('SREM', topic .. ':subs', name)
  end
  del_queue_keys('ferry:q:' .. name)
  del_queue_keys('ferry:q:' .. name .. '.dlq')
  redis.call('DEL', meta)
end
local what, name = ARGV[1], ARGV[2]
if what == 'topic' then
  local t = 'ferry:t:' .. name
  if redis.call('EXISTS', t .. ':meta') == 0 then
    return redis.error_reply('NOTFOUND topic ' .. name)
  end
  local subscription = redis.call('SRANDMEMBER', t .. ':subs')
  if subscription then
    return redis.error_reply('CONFLICT topic ' .. name .. ' has subscription ' .. subscription)
  end
  redis.call('DEL', t, t .. ':meta', t .. ':subs', t .. ':delayed')
  return 'OK'
end
if not redis.call('HGET', 'ferry:src:' .. name, 'kind') then
  return redis.error_reply('NOTFOUND queue ' .. name)
end
if what == 'dead-letters' then
  del_queue_keys('ferry:q:' .. name .. '.dlq')
  redis.call('XGROUP', 'CREATE', 'ferry:q:' .. name .. '.dlq', 'ferry', '0', 'MKSTREAM')
else
  del_source(name)
end
return 'OK'
"#;

/// One message's ARGV, eight each after the count: id, has key, key, headers, payload,
/// delay ms, ttl ms, dedup id.
const MESSAGE_ARGS: &str = r#"
local function message(i)
  local b = 2 + i * 8
  return {id = ARGV[b], has_key = ARGV[b + 1] == '1', key = ARGV[b + 2], headers = ARGV[b + 3],
    payload = ARGV[b + 4], delay = tonumber(ARGV[b + 5]), ttl = tonumber(ARGV[b + 6]),
    dedup = ARGV[b + 7]}
end
local function store(msg, now, stream, delayed)
  local f = {'id', msg.id, 't', ms(now), 'h', msg.headers, 'p', msg.payload}
  if msg.has_key then f[#f + 1] = 'k'; f[#f + 1] = msg.key end
  if msg.ttl > 0 then f[#f + 1] = 'x'; f[#f + 1] = ms(now + msg.ttl) end
  if msg.delay > 0 then
    redis.call('ZADD', delayed, due_after(now, msg.delay), cmsgpack.pack(f))
  else
    redis.call('XADD', stream, '*', unpack(f))
  end
end
"#;

/// KEYS: meta, stream, delayed, dedup. ARGV: count, then the messages.
/// All or nothing: every check runs before the first write.
pub const PUBLISH_QUEUE: &str = r#"
if redis.call('HGET', KEYS[1], 'kind') ~= 'queue' then
  return redis.error_reply('NOTFOUND queue ' .. KEYS[1]:sub(11))
end
local window = tonumber(redis.call('HGET', KEYS[1], 'dedup'))
local maxlen = tonumber(redis.call('HGET', KEYS[1], 'maxlen'))
local maxdelay = tonumber(redis.call('HGET', KEYS[1], 'maxdelay'))
local now = now_ms()
local n = tonumber(ARGV[1])
if window > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now) end
local fresh, seen, count = {}, {}, 0
for i = 0, n - 1 do
  local msg = message(i)
  if msg.delay > maxdelay then
    return redis.error_reply('INVALID a delay of ' .. msg.delay ..
      ' ms is beyond the queue max_delay of ' .. maxdelay .. ' ms')
  end
  if msg.dedup ~= '' and window == 0 then
    return redis.error_reply('INVALID a dedup id was given but the queue has no dedup window')
  end
  local dup = false
  if window > 0 then
    local d = msg.dedup ~= '' and msg.dedup or msg.id
    dup = seen[d] or redis.call('ZSCORE', KEYS[4], d)
    seen[d] = true
  end
  fresh[i] = not dup
  if not dup then count = count + 1 end
end
if maxlen > 0 then
  local waiting = redis.call('XLEN', KEYS[2]) + redis.call('ZCARD', KEYS[3])
  if waiting + count > maxlen then
    return redis.error_reply('FULL queue holds ' .. waiting .. ' of at most ' .. maxlen ..
      ' messages; this batch adds ' .. count)
  end
end
for i = 0, n - 1 do
  if fresh[i] then
    local msg = message(i)
    if window > 0 then
      redis.call('ZADD', KEYS[4], now + window, msg.dedup ~= '' and msg.dedup or msg.id)
    end
    store(msg, now, KEYS[2], KEYS[3])
  end
end
return count
"#;

/// KEYS: topic meta, topic stream, topic delayed, subs. ARGV: count, then the messages.
pub const PUBLISH_TOPIC: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NOTFOUND topic ' .. KEYS[2]:sub(9))
end
local subs = redis.call('SMEMBERS', KEYS[4])
local maxdelay = nil
for _, sub in ipairs(subs) do
  local d = tonumber(redis.call('HGET', 'ferry:src:' .. sub, 'maxdelay') or '0')
  if maxdelay == nil or d < maxdelay then maxdelay = d end
end
local now = now_ms()
local n = tonumber(ARGV[1])
for i = 0, n - 1 do
  local msg = message(i)
  if msg.dedup ~= '' then
    return redis.error_reply('INVALID topics have no dedup window; publish dedup ids to a queue')
  end
  if maxdelay ~= nil and msg.delay > maxdelay then
    return redis.error_reply('INVALID a delay of ' .. msg.delay ..
      ' ms is beyond a subscription max_delay of ' .. maxdelay .. ' ms')
  end
end
-- Nobody subscribes: a subscription gets only what is published after it is declared.
if #subs == 0 then return 0 end
for i = 0, n - 1 do store(message(i), now, KEYS[2], KEYS[3]) end
return n
"#;

/// KEYS: home stream, delayed, ext, fails, dlq ('' when none), topic delayed and topic
/// stream ('' for queues).
/// ARGV: group, consumer, max, lease ms, max deliveries (0: no limit), default ttl ms,
/// origin.
/// Moves due delayed entries into their streams, claims entries whose lease ended
/// (dead-lettering those out of deliveries), reads new entries, and dead-letters expired
/// ones. Returns `{deliveries, wake}`: `{stream index, id, delivery count, fields}` per
/// delivery and, when there are none, the milliseconds until a delayed entry is due or a
/// lease ends (-1 when none is waiting).
pub const FETCH: &str = r#"
local LEASE_SCAN, UNSURE_WAKE_MS = 512, 50
local s = {home = KEYS[1], ext = KEYS[3], fails = KEYS[4], dlq = KEYS[5], group = ARGV[1],
  origin = ARGV[7]}
local delayed, tdelayed, tstream = KEYS[2], KEYS[6], KEYS[7]
local consumer, max, lease = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local maxd, ttl = tonumber(ARGV[5]), tonumber(ARGV[6])
local now = now_ms()
local function move(zset, target)
  local due = redis.call('ZRANGEBYSCORE', zset, '-inf', now, 'LIMIT', 0, 256)
  for _, m in ipairs(due) do
    redis.call('XADD', target, '*', unpack(cmsgpack.unpack(m)))
    redis.call('ZREM', zset, m)
  end
end
move(delayed, s.home)
if tdelayed ~= '' and redis.call('EXISTS', tstream) == 1 then move(tdelayed, tstream) end
local streams = {}
if tstream ~= '' then streams[#streams + 1] = tstream end
streams[#streams + 1] = s.home
local out = {}
for si, stream in ipairs(streams) do
  s.stream = stream
  local pending = redis.call('XPENDING', stream, s.group, 'IDLE', lease, '-', '+', max + 32)
  for _, p in ipairs(pending) do
    if #out >= max then break end
    local id, owner, count = p[1], p[2], tonumber(p[4])
    if tonumber(redis.call('HGET', s.ext, id) or '0') <= now then
      local fields = entry_fields(stream, id)
      if not fields then
        settle(s, id)
      else
        local carried = tonumber(field_map(fields)['a'] or '0')
        if maxd > 0 and carried + count >= maxd then
          dead_letter(s, id, 'max_deliveries', carried + count, 'lease expired', owner, now)
        else
          redis.call('XCLAIM', stream, s.group, consumer, 0, id)
          redis.call('HDEL', s.ext, id)
          out[#out + 1] = {si, id, count + 1, fields}
        end
      end
    end
  end
end
-- One stream at a time, so that no more than `max` are delivered in all.
for si, stream in ipairs(streams) do
  if #out >= max then break end
  local read = redis.call('XREADGROUP', 'GROUP', s.group, consumer, 'COUNT', max - #out,
    'STREAMS', stream, '>')
  if read then
    for _, e in ipairs(read[1][2]) do out[#out + 1] = {si, e[1], 1, e[2]} end
  end
end
local result = unexpired(s, streams, out, ttl, consumer, now)
if #result > 0 then return {result, -1} end
-- Nothing to deliver: how long until something could be, so that the caller's blocking
-- read (which wakes only for new entries) ends in time for a delayed entry coming due or
-- a lease running out. -1: nothing is waiting on a timer.
local wake = -1
local function sooner(after)
  if after < 0 then after = 0 end
  if wake < 0 or after < wake then wake = after end
end
for _, zset in ipairs({delayed, tdelayed}) do
  if zset ~= '' then
    local first = redis.call('ZRANGE', zset, 0, 0, 'WITHSCORES')
    if #first == 2 then sooner(tonumber(first[2]) - now) end
  end
end
for _, stream in ipairs(streams) do
  if redis.call('EXISTS', stream) == 1 then
    local pending = redis.call('XPENDING', stream, s.group, '-', '+', LEASE_SCAN)
    for _, p in ipairs(pending) do
      local due = lease - tonumber(p[3])
      local extended = tonumber(redis.call('HGET', s.ext, p[1]) or '0') - now
      if extended > due then due = extended end
      sooner(due)
    end
    -- More pending than scanned: one of the rest may end sooner; look again as often as
    -- a poll would.
    if #pending >= LEASE_SCAN then sooner(UNSURE_WAKE_MS) end
  end
end
return {{}, wake}
"#;

/// KEYS: as [`FETCH`]'s.
/// ARGV: group, consumer, default ttl ms, origin, then a stream index and an id for each
/// entry the caller's blocking XREADGROUP read (now pending for it, delivered once).
/// Dead-letters those whose TTL has passed, as [`FETCH`] does for what it reads, and
/// returns the rest as [`FETCH`] returns deliveries.
pub const ADMIT: &str = r#"
local s = {home = KEYS[1], ext = KEYS[3], fails = KEYS[4], dlq = KEYS[5], group = ARGV[1],
  origin = ARGV[4]}
local tstream = KEYS[7]
local streams = {}
if tstream ~= '' then streams[#streams + 1] = tstream end
streams[#streams + 1] = s.home
local out = {}
for i = 5, #ARGV, 2 do
  local si, id = tonumber(ARGV[i]), ARGV[i + 1]
  local fields = entry_fields(streams[si], id)
  if fields then
    out[#out + 1] = {si, id, 1, fields}
  else
    s.stream = streams[si]
    settle(s, id)
  end
end
return unexpired(s, streams, out, tonumber(ARGV[3]), ARGV[2], now_ms())
"#;

/// KEYS: home, topic stream ('' for queues), ext, fails, dlq ('' when none), delayed.
/// ARGV: group, max deliveries (0: no limit), lease ms, origin, then eight per settlement:
/// stream index (`1`: the topic's stream, else home), op (`ack`, `nack`, `reject`,
/// `extend`), id, consumer, delivery count, carried deliveries, delay ms, error.
/// Settles a batch of one consumer's deliveries in one step: what is done with is XACKed
/// (and XDELed, and its hashes cleared) in one call per stream at the end.
/// Returns per settlement `NOTHELD` unless the consumer still holds that delivery, else
/// `OK` (or `DEAD` when a nack used up the deliveries).
pub const SETTLE: &str = r#"
local s = {home = KEYS[1], ext = KEYS[3], fails = KEYS[4], dlq = KEYS[5], group = ARGV[1],
  origin = ARGV[4]}
local tstream, delayed = KEYS[2], KEYS[6]
local maxd, lease = tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
settled_by_stream = {}
local function one(op, id, consumer, count, carried, delay, err)
  -- Held means: still pending, owned by this consumer, and not delivered again since (the
  -- delivery count would have risen).
  local p = redis.call('XPENDING', s.stream, s.group, id, id, 1)
  if #p ~= 1 or p[1][2] ~= consumer or tonumber(p[1][4]) ~= count then return 'NOTHELD' end
  local attempt = carried + count
  if op == 'ack' then
    settle(s, id)
    return 'OK'
  end
  if op == 'reject' then
    dead_letter(s, id, 'rejected', attempt, err, consumer, now)
    return 'OK'
  end
  -- Ages the entry so that claiming (idle >= lease) takes it `after` ms from now.
  local function due_in(after)
    if after <= lease then
      redis.call('XCLAIM', s.stream, s.group, consumer, 0, id, 'IDLE', lease - after, 'JUSTID')
      redis.call('HDEL', s.ext, id)
    else
      redis.call('XCLAIM', s.stream, s.group, consumer, 0, id, 'IDLE', 0, 'JUSTID')
      redis.call('HSET', s.ext, id, ms(now + after))
    end
  end
  if op == 'extend' then
    due_in(delay)
    return 'OK'
  end
  if maxd > 0 and attempt >= maxd then
    dead_letter(s, id, 'max_deliveries', attempt, err, consumer, now)
    return 'DEAD'
  end
  local fields = entry_fields(s.stream, id)
  if not fields then
    settle(s, id)
    return 'OK'
  end
  local first = failure(s.fails, id, field_map(fields))
  first = first or ms(now)
  if delay <= lease then
    -- Stays pending: the delivery count goes on rising natively.
    redis.call('HSET', s.fails, id, cmsgpack.pack({first, err}))
    due_in(delay)
    return 'OK'
  end
  -- Longer than a lease: out of the stream into the delayed set, carrying the deliveries
  -- made so far, then settled here.
  local out = message_fields(fields, true)
  local function add(f, v) out[#out + 1] = f; out[#out + 1] = v end
  add('a', tostring(attempt))
  add('ff', first)
  add('le', err)
  redis.call('ZADD', delayed, due_after(now, delay), cmsgpack.pack(out))
  settle(s, id)
  return 'OK'
end
local replies = {}
for b = 5, #ARGV, 8 do
  s.stream = (ARGV[b] == '1') and tstream or s.home
  replies[#replies + 1] = one(ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], tonumber(ARGV[b + 4]),
    tonumber(ARGV[b + 5]), tonumber(ARGV[b + 6]), ARGV[b + 7])
end
for stream, ids in pairs(settled_by_stream) do settle_now(s, stream, ids) end
return replies
"#;

/// KEYS: a subscription's topic stream ('' for queues), the source's own stream.
/// ARGV: group, idle ms, consumer ('' for none).
/// Housekeeping, run now and then by each consumer and once when it closes:
/// - forgets group consumers holding nothing that were idle that long, or the closing
///   consumer if it holds nothing (one still polling is recreated by its next read; one
///   with pending entries is kept, as forgetting it would drop them from the PEL);
/// - trims from a topic's stream what every subscription has read and acked: below the
///   lowest of each group's oldest pending entry, or its last delivered id when none is.
pub const MAINTAIN: &str = r#"
local group, idle, closing = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local function prune(stream)
  if stream == '' or redis.call('EXISTS', stream) == 0 then return end
  local consumers = redis.pcall('XINFO', 'CONSUMERS', stream, group)
  if consumers.err then return end
  for _, c in ipairs(consumers) do
    local m = field_map(c)
    if tonumber(m['pending']) == 0 and (m['name'] == closing or tonumber(m['idle']) >= idle) then
      redis.call('XGROUP', 'DELCONSUMER', stream, group, m['name'])
    end
  end
end
local function parse(id)
  local a, b = id:match('^(%d+)-(%d+)$')
  return tonumber(a), tonumber(b)
end
local function less(x, y)
  local xa, xb = parse(x)
  local ya, yb = parse(y)
  return xa < ya or (xa == ya and xb < yb)
end
local function trim(stream)
  if stream == '' or redis.call('EXISTS', stream) == 0 then return 0 end
  local low = nil
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local m = field_map(g)
    local candidate = m['last-delivered-id']
    local p = redis.call('XPENDING', stream, m['name'])
    if tonumber(p[1]) > 0 then candidate = p[2] end
    if low == nil or less(candidate, low) then low = candidate end
  end
  if low == nil then return 0 end
  return redis.call('XTRIM', stream, 'MINID', low)
end
prune(KEYS[1])
prune(KEYS[2])
return trim(KEYS[1])
"#;

/// A script with the common helpers in front.
pub fn with_common(body: &str) -> String {
    format!("{COMMON}\n{body}")
}

/// The publish scripts: common helpers, the message reader, then `body`.
pub fn with_messages(body: &str) -> String {
    format!("{COMMON}\n{MESSAGE_ARGS}\n{body}")
}
