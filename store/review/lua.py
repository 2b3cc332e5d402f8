"""The Lua of the review queue: an item's creation, a report, a decision, pruning, a moderator's claim and the
pending-ids backfill. Each runs inside Redis as one atomic step; the comment above each says why it has to.

The creating and deciding scripts also write the item's webhook deliveries (and bank a rejected image's hash) in the
same step: that Lua is `EMIT_EVENTS` of `store.webhooks.lua`, its arguments at the end of ARGV. Key names come in
through KEYS (built by `store.redis_keys`), or as prefixes in ARGV where a name is known only inside the script.
"""

from store.webhooks.lua import EMIT_EVENTS

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

# A moderator's claim on a review item (store/review/claims.py): taken if free, or renewed by its holder, in one step so
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
