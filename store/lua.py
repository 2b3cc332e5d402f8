"""The Lua scripts of admission (rate, quota, in-flight slots, keys) and of the review queue.

Lua lives in two files of `store/`, each beside what it serves: this one, and `store.lua_outbox` (the outbox's
scripts and the function the review scripts below include to write deliveries and bank a rejected hash).

Each runs inside Redis as one atomic step; the comment above each says why it has to.
Key names come in through KEYS (built by `store.redis_keys`), or, where a name is known only
inside the script, as a prefix in ARGV (also from `store.redis_keys`); numbers go back as strings
where they are fractional, since Redis would truncate a Lua number to an integer.
The review scripts also write the item's webhook deliveries (and bank a rejected image's hash) in the same step;
that Lua lives in `store.lua_outbox`, its arguments at the end of ARGV.
"""

from store.lua_outbox import EMIT_EVENTS

# Token bucket of one key, the rate limit, taken by AUTHORIZE below. Read, refill, take and write back
# must be one step: two requests of the same key racing between the read and the write would both
# spend the same token. A Lua function of its own so that the bucket's arithmetic reads apart from
# AUTHORIZE's lookups. A refused take spends nothing: asked again at the same time, the bucket
# answers the same wait.
# `now` in seconds, or nil for Redis TIME (so all replicas share one clock). Returns 0 when admitted,
# else the seconds until a token is available.
TAKE_RATE_TOKEN = """
local function take_rate_token(bucket_key, rate, burst, now)
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) + tonumber(t[2]) / 1000000
  end
  local state = redis.call('HMGET', bucket_key, 'tokens', 'ts')
  local tokens = tonumber(state[1]) or burst
  local ts = tonumber(state[2]) or now
  tokens = math.min(burst, tokens + math.max(0, now - ts) * rate)
  local wait = 0
  if tokens >= 1 then
    tokens = tokens - 1
  else
    wait = (1 - tokens) / rate
  end
  redis.call('HSET', bucket_key, 'tokens', string.format('%.17g', tokens),
             'ts', string.format('%.6f', math.max(now, ts)))
  -- Once idle long enough to be full again the bucket equals a fresh one, so it can go.
  redis.call('PEXPIRE', bucket_key, math.ceil(burst / rate * 1000) + 1000)
  return wait
end
"""

# Monthly quota and work in progress: check and take in one step, or concurrent requests would all see room for
# the last unit (or slot) and the account would be served past its quota (or its max_in_flight).
# take_units(quota_key, quota, expire_at, units, wip_key, max_in_flight, slot_id, lease): `units` of the month
# counter at `quota_key` (which may then expire at the unix time `expire_at`), all or none; with `wip_key`, the
# account's set of work in progress, also a slot in it. A slot is a member scored by the time its lease ends (Redis
# TIME, one clock for every replica), so the slot of a replica that died mid-request frees itself. Returns 1 when
# taken, 0 (taking nothing) when the units do not fit, -1 (taking nothing) when the account already holds
# max_in_flight live slots.
TAKE_UNITS = """
local function take_units(quota_key, quota, expire_at, units, wip_key, max_in_flight, slot_id, lease)
  if wip_key then
    local t = redis.call('TIME')
    redis.call('ZREMRANGEBYSCORE', wip_key, '-inf', tonumber(t[1]) + tonumber(t[2]) / 1000000)
    if redis.call('ZCARD', wip_key) >= max_in_flight then
      return -1
    end
  end
  local used = tonumber(redis.call('GET', quota_key) or '0')
  if used + units > quota then
    return 0
  end
  redis.call('INCRBY', quota_key, units)
  redis.call('EXPIREAT', quota_key, expire_at)
  if wip_key then
    local t = redis.call('TIME')
    redis.call('ZADD', wip_key, tonumber(t[1]) + lease, slot_id)
    redis.call('EXPIRE', wip_key, math.ceil(lease) + 1)
  end
  return 1
end
"""

# A key by its id, with its plan and profile, as AUTHORIZE and the widget's WIDGET_AUTHORIZE (store.lua_widget)
# read it: {key JSON, plan JSON, profile JSON, the plan decoded}, nil; or nil and the script's refusal: {"refused"}
# for a key that is gone or revoked, {"unconfigured", key JSON} when its plan or profile is missing or its plan's
# rate is not a number.
KEY_WITH_CONFIG = """
local function key_with_config(key_id, key_prefix, plan_prefix, profile_prefix)
  local key_json = redis.call('GET', key_prefix .. key_id)
  if not key_json then
    return nil, {'refused'}
  end
  local key = cjson.decode(key_json)
  if key['revoked'] == true then
    return nil, {'refused'}
  end
  local plan_json = redis.call('GET', plan_prefix .. key['plan'])
  local profile_json = redis.call('GET', profile_prefix .. key['profile'])
  if not plan_json or not profile_json then
    return nil, {'unconfigured', key_json}
  end
  local plan = cjson.decode(plan_json)
  if not tonumber(plan['rate_per_second']) or not tonumber(plan['burst']) then
    -- A plan stored before non-finite numbers were refused (a rate of inf written as null): refused for its keys
    -- only, with a log line (store/config.py), never a script error.
    return nil, {'unconfigured', key_json}
  end
  return {key_json, plan_json, profile_json, plan}, nil
end
"""

# Everything a request needs to know about its caller, in one round trip: the key id under the
# secret's SHA-256, the key record, its plan and profile, and a token of its rate bucket. One step
# also means the token is taken at the rate of the plan read with it. A refused key (unknown, gone,
# revoked) and a key whose plan or profile is missing take no token. Nothing is logged.
# Only the hash index key is known before the script runs; the record, plan, profile and bucket
# keys are named after values read inside it, so they are built here from the prefixes in ARGV
# (`store.redis_keys` defines them) and cannot be declared in KEYS. Redis allows that on a single
# instance, which is what this service runs on: it does not support Redis Cluster, where such
# keys could live on another node. The ACL still applies to every key the script touches.
# For a moderation request the same step also admits it (store.quota.Admission): once the rate token is taken, its
# first quota unit and its slot of the account's work in progress (take_units), so that a request costs one round
# trip before its model call. The slots of this replica's ended requests come along and are given back first,
# whatever the outcome: the step absorbs what the requests before it left to do.
# KEYS[1] hash index; ARGV[1] key record prefix, ARGV[2] plan prefix, ARGV[3] profile prefix,
# ARGV[4] rate bucket prefix, ARGV[5] now in seconds ("" = Redis TIME). To admit as well: ARGV[6] "admit",
# ARGV[7] the month (`YYYY-MM`), ARGV[8] the unix time at which its counter may expire, ARGV[9] quota counter
# prefix, ARGV[10] work-in-progress prefix, ARGV[11] the slot's id, ARGV[12] its lease in seconds, ARGV[13] the
# kind of content the request moderates ("text", "image", "" for either), then pairs of (account, slot id) of ended
# requests. A plan whose scope does not cover the kind takes nothing (the service answers 403). Keys are named as
# `store.redis_keys` names them: prefix, month, ":", account.
# Returns {"refused"}, {"unconfigured", key JSON} or {"ok", key JSON, plan JSON, profile JSON, wait, taken}
# (wait as `take_rate_token` returns it: "0" when admitted, else the seconds until a token is available; taken as
# `take_units` returns it when asked to admit and a token was taken, else "": nothing taken).
AUTHORIZE = TAKE_RATE_TOKEN + KEY_WITH_CONFIG + TAKE_UNITS + """
local admit = ARGV[6] == 'admit'
if admit then
  for i = 14, #ARGV, 2 do
    redis.call('ZREM', ARGV[10] .. ARGV[i], ARGV[i + 1])
  end
end
local key_id = redis.call('GET', KEYS[1])
if not key_id then
  return {'refused'}
end
local found, refusal = key_with_config(key_id, ARGV[1], ARGV[2], ARGV[3])
if refusal then
  return refusal
end
local plan = found[4]
local wait = take_rate_token(ARGV[4] .. key_id, tonumber(plan['rate_per_second']), tonumber(plan['burst']),
                             tonumber(ARGV[5]))
local taken = ''
local quota, max_in_flight = tonumber(plan['monthly_quota']), tonumber(plan['max_in_flight'])
-- A plan record without either number (one written before max_in_flight existed) is taken apart, by Limits.take,
-- with the plan as the service reads it, defaults filled in.
local kind, scope = ARGV[13], plan['scope']
local covered = kind == '' or scope == 'both' or (kind == 'text' and scope == 'text')
                or (kind == 'image' and scope == 'images')
if admit and wait == 0 and covered and quota and max_in_flight then
  local account = cjson.decode(found[1])['account']
  taken = take_units(ARGV[9] .. ARGV[7] .. ':' .. account, quota, ARGV[8], 1, ARGV[10] .. account, max_in_flight,
                     ARGV[11], tonumber(ARGV[12]))
end
return {'ok', found[1], found[2], found[3], string.format('%.17g', wait), tostring(taken)}
"""

# take_units for a known account (Limits.take: the units a request needs past its first, and the paths that do not
# take their first unit with AUTHORIZE). KEYS[1] month counter; ARGV[1] quota, ARGV[2] unix time at which the
# counter expires, ARGV[3] units. With KEYS[2], the account's set of work in progress: ARGV[4] the plan's
# max_in_flight, ARGV[5] the slot's id, ARGV[6] its lease in seconds, and ARGV[7] on the slots of the account's ended
# requests that their replica has not given back yet (Limits.release_slot), given back first, so that an account's
# next request never finds its own finished ones in the way. Returns as take_units.
TAKE_QUOTA = TAKE_UNITS + """
if KEYS[2] and #ARGV > 6 then
  redis.call('ZREM', KEYS[2], unpack(ARGV, 7))
end
return take_units(KEYS[1], tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), KEYS[2], tonumber(ARGV[4]), ARGV[5],
                  tonumber(ARGV[6]))
"""

# Give units back without going below zero: a separate check and DECR could race another
# give-back and leave the counter negative, which would hand out an extra unit.
# KEYS[1] month counter; ARGV[1] units (default 1).
GIVE_BACK_QUOTA = """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local units = math.min(used, tonumber(ARGV[1] or '1'))
if units > 0 then
  redis.call('DECRBY', KEYS[1], units)
end
return 0
"""

# The review scripts share one layout of the queue's global keys, at an offset into KEYS, and one
# layout of the queue's arguments, at an offset into ARGV (`ReviewQueue._queue_keys` / `_queue_args`):
# KEYS[first..first+5] next-id counter, all index, pending / approved / rejected indexes, expiring zset;
# ARGV[first..first+5] item key prefix, account index prefix, account pending-set prefix, now, prune limit,
# account pending-ids prefix.
_REVIEW_LAYOUT = """
local function review_keys(first)
  return {next_id = KEYS[first], all = KEYS[first + 1], pending = KEYS[first + 2], approved = KEYS[first + 3],
          rejected = KEYS[first + 4], expiring = KEYS[first + 5]}
end
local function review_args(first)
  return {item_prefix = ARGV[first], account_prefix = ARGV[first + 1], account_pending_prefix = ARGV[first + 2],
          now = ARGV[first + 3], prune_limit = tonumber(ARGV[first + 4]), account_pending_ids_prefix = ARGV[first + 5]}
end
"""

# Removes the items whose time is over, pending or decided, from every index (their hash has an EXPIREAT of
# the same time, so the data goes even if nothing prunes). Members of the expiring zset are "{id}:{account}",
# so no item has to be read. Every script that adds or decides an item prunes up to `prune_limit` after its
# own writes: each adds at most one item to expire later, so the indexes never fall behind. PRUNE_REVIEW_ITEMS
# only removes, so it runs on a full store too and gives memory back.
_PRUNE_EXPIRED = _REVIEW_LAYOUT + """
local function prune_expired(k, a)
  local due = redis.call('ZRANGEBYSCORE', k.expiring, '-inf', a.now, 'LIMIT', 0, a.prune_limit)
  for _, member in ipairs(due) do
    local sep = string.find(member, ':', 1, true)
    local id = string.sub(member, 1, sep - 1)
    local account = string.sub(member, sep + 1)
    redis.call('ZREM', k.all, id)
    redis.call('ZREM', k.pending, id)
    redis.call('ZREM', k.approved, id)
    redis.call('ZREM', k.rejected, id)
    redis.call('ZREM', a.account_prefix .. account, id)
    redis.call('ZREM', a.account_pending_prefix .. account, id)
    redis.call('ZREM', a.account_pending_ids_prefix .. account, id)
    redis.call('DEL', a.item_prefix .. id)
    redis.call('ZREM', k.expiring, member)
  end
  return #due
end
"""

# A full store (maxmemory, noeviction) refuses a script's first write only if that write is one that may
# grow memory (INCR, HSET, ZADD, ...); once a script has written anything, even a ZREM, its later writes are
# let through past maxmemory, so that no script is left half done. So every script below first checks by
# reads alone, then makes a growing write first, and prunes (removals) last: a full store refuses the script
# whole instead of letting it grow past the limit.

# Whether the account already holds `cap` pending items whose time is not over (reads only).
_PENDING_FULL = """
local function pending_full(account_pending_key, now, cap)
  return redis.call('ZCOUNT', account_pending_key, '(' .. now, '+inf') >= cap
end
"""

# Writes a pending review item and its indexes, then prunes. Shared by the two scripts that create items so
# that an item is written one way only; atomic so that no id is ever handed out without its item and indexes.
# The caller checks `pending_full` first, in the same script, so racing creations never pass the cap.
# The item expires at `expire_at` unless decided first (DECIDE_REVIEW_ITEM moves its time). Returns the new id.
_INSERT_REVIEW_ITEM = _PRUNE_EXPIRED + _PENDING_FULL + EMIT_EVENTS + """
local function insert_review_item(k, a, account_key, account_pending_key, account, data, expire_at)
  local id = redis.call('INCR', k.next_id)
  redis.call('HSET', a.item_prefix .. id, 'data', data, 'status', 'pending')
  redis.call('EXPIREAT', a.item_prefix .. id, expire_at)
  redis.call('ZADD', k.all, id, id)
  redis.call('ZADD', k.pending, id, id)
  redis.call('ZADD', account_key, id, id)
  redis.call('ZADD', account_pending_key, expire_at, id)
  redis.call('ZADD', a.account_pending_ids_prefix .. account, id, id)
  redis.call('ZADD', k.expiring, expire_at, id .. ':' .. account)
  emit_event(webhook_args(), 'review.created', id, a.item_prefix .. id, account)
  prune_expired(k, a)
  return id
end
"""

# KEYS[1..6] the queue's keys (above), KEYS[7] the account's index, KEYS[8] its pending set;
# ARGV[1..6] the queue's arguments, ARGV[7] account, ARGV[8] item data JSON, ARGV[9] unix time the pending
# item expires, ARGV[10] the account's cap of pending items. Returns the new id, or 0 (nothing written) when
# the account's pending items are at the cap.
CREATE_REVIEW_ITEM = _INSERT_REVIEW_ITEM + """
local a = review_args(1)
if pending_full(KEYS[8], a.now, tonumber(ARGV[10])) then
  return 0
end
return insert_review_item(review_keys(1), a, KEYS[7], KEYS[8], ARGV[7], ARGV[8], ARGV[9])
"""

# One report of (account, reference). Counting, the daily caps and escalating must be one step:
# reports racing past the threshold would otherwise each see "no item yet" and queue the content
# several times, and racing reports could all pass a cap. A refused report writes nothing.
# KEYS[1] the reference's counter hash (`count`, `review`), KEYS[2] the account's reports today,
# KEYS[3] its escalations today, KEYS[4..9] the queue's keys, KEYS[10] the account's index, KEYS[11] its
# pending set; ARGV[1..6] the queue's arguments, ARGV[7] account, ARGV[8] item data JSON, ARGV[9] unix time
# a pending item expires, ARGV[10] pending cap, ARGV[11] threshold, ARGV[12] counter TTL seconds, ARGV[13] unix
# time at which the day counters expire, ARGV[14] reports per day, ARGV[15] escalations per day.
# Returns {count, review id or 0, refused}: refused is 0, 1 (reports cap), 2 (escalations cap) or 3 (the
# account's pending items are at their cap).
REPORT = _INSERT_REVIEW_ITEM + """
if tonumber(redis.call('GET', KEYS[2]) or '0') >= tonumber(ARGV[14]) then
  return {0, 0, 1}
end
local a = review_args(1)
local state = redis.call('HMGET', KEYS[1], 'count', 'review')
local count = tonumber(state[1]) or 0
local review_id = tonumber(state[2])
if review_id and redis.call('EXISTS', a.item_prefix .. review_id) == 0 then
  -- The item it escalated to is gone (its time is over): the reference counts afresh.
  review_id = nil
  count = 0
end
count = count + 1
local escalate = not review_id and count > tonumber(ARGV[11])
if escalate and tonumber(redis.call('GET', KEYS[3]) or '0') >= tonumber(ARGV[15]) then
  return {count - 1, 0, 2}
end
if escalate and pending_full(KEYS[11], a.now, tonumber(ARGV[10])) then
  return {count - 1, 0, 3}
end
redis.call('INCR', KEYS[2])
redis.call('EXPIREAT', KEYS[2], ARGV[13])
if escalate then
  review_id = insert_review_item(review_keys(4), a, KEYS[10], KEYS[11], ARGV[7], ARGV[8], ARGV[9])
  emit_event(webhook_args(), 'report.escalated', review_id, a.item_prefix .. review_id, ARGV[7])
  redis.call('INCR', KEYS[3])
  redis.call('EXPIREAT', KEYS[3], ARGV[13])
end
redis.call('DEL', KEYS[1])
if review_id then
  redis.call('HSET', KEYS[1], 'count', count, 'review', review_id)
else
  redis.call('HSET', KEYS[1], 'count', count)
end
redis.call('EXPIRE', KEYS[1], ARGV[12])
return {count, review_id or 0, 0}
"""

# pending -> approved | rejected in one step: two moderators deciding the same item at once
# must not both succeed, and the status indexes must follow the item's status exactly. The
# decided item leaves its account's pending set and expires after its retention; then up to the
# prune limit of items whose time is over leave the indexes.
# KEYS[1] item hash, KEYS[2..7] the queue's keys; ARGV[1..6] the queue's arguments, ARGV[7] new status,
# ARGV[8] decided_at, ARGV[9] item id, ARGV[10] unix time the decided item expires, ARGV[11] who decided,
# ARGV[12] the decision's reason code ("" when none).
# Returns {"ok", the item's fields...}, {"missing"} or {"decided"}.
DECIDE_REVIEW_ITEM = _PRUNE_EXPIRED + EMIT_EVENTS + """
local k, a = review_keys(2), review_args(1)
local status = redis.call('HGET', KEYS[1], 'status')
if not status then
  prune_expired(k, a)
  return {'missing'}
end
if status ~= 'pending' then
  return {'decided'}
end
local account = cjson.decode(redis.call('HGET', KEYS[1], 'data'))['account']
local index = k.approved
if ARGV[7] == 'rejected' then
  index = k.rejected
end
redis.call('HSET', KEYS[1], 'status', ARGV[7], 'decided_at', ARGV[8], 'decided_by', ARGV[11], 'reason_code', ARGV[12])
redis.call('ZADD', index, ARGV[9], ARGV[9])
redis.call('ZADD', k.expiring, ARGV[10], ARGV[9] .. ':' .. account)
redis.call('ZREM', k.pending, ARGV[9])
redis.call('ZREM', a.account_pending_prefix .. account, ARGV[9])
redis.call('ZREM', a.account_pending_ids_prefix .. account, ARGV[9])
local w = webhook_args()
if ARGV[7] == 'rejected' then
  bank_rejected_image(w, ARGV[9], KEYS[1], account)
end
emit_event(w, 'review.decided', ARGV[9], KEYS[1], account)
local reply = redis.call('HGETALL', KEYS[1])
table.insert(reply, 1, 'ok')
redis.call('EXPIREAT', KEYS[1], ARGV[10])
prune_expired(k, a)
return reply
"""

# KEYS[1..6] the queue's keys, ARGV[1..6] the queue's arguments. Returns how many were pruned.
PRUNE_REVIEW_ITEMS = _PRUNE_EXPIRED + """
return prune_expired(review_keys(1), review_args(1))
"""

# A new API key: the record with SET NX, so a (128-bit) id that is already taken is never
# overwritten; its hash index and the live set in the same step, so a key is never findable
# by hash without its record. KEYS[1] record, KEYS[2] hash index, KEYS[3] live set;
# ARGV[1] record JSON, ARGV[2] key id. Returns 1, or 0 when the id or the secret's hash is taken.
CREATE_API_KEY = """
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[2])
return 1
"""

# A moderator's claim on a review item (store/review_claims.py): taken if free, or renewed by its holder, in one step so
# that two moderators claiming the item at once cannot both hold it. KEYS[1] the claim key; ARGV[1] who claims,
# ARGV[2] the claim's length in seconds. Returns {holder, seconds left}: the claimer when taken or renewed.
CLAIM_REVIEW_ITEM = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  return {holder, redis.call('TTL', KEYS[1])}
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return {ARGV[1], tonumber(ARGV[2])}
"""

# Items queued before the per-account pending-ids index existed are in their account's pending set (score: expiry)
# but not in the index (score: id). Adds them, once: both sets are written together by the scripts above, so equal
# sizes mean nothing is missing and the call costs two ZCARDs. KEYS[1] the account's pending set, KEYS[2] its
# pending-ids index. Returns how many ids were read from the pending set (0 when nothing was missing).
BACKFILL_PENDING_IDS = """
if redis.call('ZCARD', KEYS[1]) == redis.call('ZCARD', KEYS[2]) then
  return 0
end
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[2], id, id)
end
return #ids
"""
