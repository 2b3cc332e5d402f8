"""The Lua of the review queue: an item's creation, a report, the cap of an account's report counters, a decision,
pruning, a moderator's claim and the one walk that adds old items to the newer indexes. Each runs inside Redis as one atomic step; the comment above each
says why it has to.

The creating and deciding scripts also write the item's webhook deliveries in the same step: that Lua is
`EMIT_EVENTS` of `store.webhooks.lua`, its arguments at the end of ARGV. The deciding script banks a rejected image's
hash in the same step too, within the bank's cap (`BANK_REJECTED_HASH` of `store.hash_bank.lua`), and keeps a decided
text's label (`KEEP_DECIDED_LABEL` of `store.labels.lua`). Key names come in
through KEYS (built by `store.redis_keys`), or as prefixes in ARGV where a name is known only inside the script.
"""

from store.hash_bank.lua import BANK_REJECTED_HASH
from store.labels.lua import KEEP_DECIDED_LABEL
from store.webhooks.lua import EMIT_EVENTS

# The review scripts share one layout of the queue's global keys, at an offset into KEYS, and one
# layout of the queue's arguments, at an offset into ARGV (`ReviewQueue._queue_keys` / `_queue_args`):
# KEYS[first..first+6] sequence counter, all index, pending / approved / rejected indexes, expiring zset, accounts
# with pending items; ARGV[first..first+5] item key prefix, account index prefix, account pending-set prefix, now,
# prune limit, account pending-ids prefix.
_REVIEW_LAYOUT = """
local function review_keys(first)
  return {sequence = KEYS[first], all = KEYS[first + 1], pending = KEYS[first + 2], approved = KEYS[first + 3],
          rejected = KEYS[first + 4], expiring = KEYS[first + 5], pending_accounts = KEYS[first + 6]}
end
local function review_args(first)
  return {item_prefix = ARGV[first], account_prefix = ARGV[first + 1], account_pending_prefix = ARGV[first + 2],
          now = ARGV[first + 3], prune_limit = tonumber(ARGV[first + 4]), account_pending_ids_prefix = ARGV[first + 5]}
end
-- An account leaves the accounts with pending items (which the operators' queue goes round) with the last item of
-- its pending-ids index. Its place there, the sequence of the item that made it join, holds still until then, so
-- that "decide and next" can go round the accounts in a fixed order. (Until ADD_OLD_PENDING_ITEMS has walked a store
-- of an earlier version, an account may leave while its oldest items are not in that index yet: the walk puts it
-- back.)
local function forget_account_if_done(k, a, account)
  if redis.call('ZCARD', a.account_pending_ids_prefix .. account) == 0 then
    redis.call('ZREM', k.pending_accounts, account)
  end
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
    forget_account_if_done(k, a, account)
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

# Whether the random id the caller drew is one the queue holds already (reads only): every item is in the `all`
# index from its creation until pruning deletes it. The caller draws another and runs the script again.
_ID_TAKEN = """
local function id_taken(k, id)
  return redis.call('ZSCORE', k.all, id) ~= false
end
"""

# Writes a pending review item under the caller's random `id` and its indexes, scored by the next creation sequence,
# then prunes. Shared by the two scripts that create items so that an item is written one way only; atomic so that
# no sequence is handed out without its item and indexes. The caller checks `pending_full` and `id_taken` first, in
# the same script, so racing creations never pass the cap nor share an id. The item expires at `expire_at` unless
# decided first (DECIDE_REVIEW_ITEM moves its time). Returns the id.
_INSERT_REVIEW_ITEM = _PRUNE_EXPIRED + _PENDING_FULL + _ID_TAKEN + EMIT_EVENTS + """
local function insert_review_item(k, a, account_key, account_pending_key, account, data, expire_at, id, evidence)
  local seq = redis.call('INCR', k.sequence)
  redis.call('HSET', a.item_prefix .. id, 'data', data, 'status', 'pending', 'seq', seq)
  if evidence and evidence ~= '' then
    redis.call('HSET', a.item_prefix .. id, 'evidence', evidence)
  end
  redis.call('EXPIREAT', a.item_prefix .. id, expire_at)
  redis.call('ZADD', k.all, seq, id)
  redis.call('ZADD', k.pending, seq, id)
  redis.call('ZADD', account_key, seq, id)
  redis.call('ZADD', account_pending_key, expire_at, id)
  redis.call('ZADD', a.account_pending_ids_prefix .. account, seq, id)
  redis.call('ZADD', k.pending_accounts, 'NX', seq, account)
  redis.call('ZADD', k.expiring, expire_at, id .. ':' .. account)
  emit_event(webhook_args(), 'review.created', id, a.item_prefix .. id, account)
  prune_expired(k, a)
  return id
end
"""

# KEYS[1..7] the queue's keys (above), KEYS[8] the account's index, KEYS[9] its pending set, KEYS[10] the account's
# audits of the day; ARGV[1..6] the queue's arguments, ARGV[7] account, ARGV[8] item data JSON, ARGV[9] unix time the
# pending item expires, ARGV[10] the account's cap of pending items, ARGV[11] the new item's id, ARGV[12] the item's
# evidence JSON ('' for none: store/labels/lua.py), ARGV[13] the day's cap of audits ('' for an item that is not an
# audit), ARGV[14] unix time the day's counter expires. Returns the id, 0 (nothing written) when the account's pending
# items are at the cap, -1 (nothing written) when the id is taken, or -2 (nothing written) when the account has
# queued its audits of the day: the cap is checked and counted in the step that queues.
CREATE_REVIEW_ITEM = _INSERT_REVIEW_ITEM + """
local k, a = review_keys(1), review_args(1)
if pending_full(KEYS[9], a.now, tonumber(ARGV[10])) then
  return 0
end
if id_taken(k, ARGV[11]) then
  return -1
end
if ARGV[13] ~= '' then
  if tonumber(redis.call('GET', KEYS[10]) or '0') >= tonumber(ARGV[13]) then
    return -2
  end
  redis.call('INCR', KEYS[10])
  redis.call('EXPIREAT', KEYS[10], ARGV[14])
end
return insert_review_item(k, a, KEYS[8], KEYS[9], ARGV[7], ARGV[8], ARGV[9], ARGV[11], ARGV[12])
"""

# One report of (account, reference). Counting, the daily caps and escalating must be one step:
# reports racing past the threshold would otherwise each see "no item yet" and queue the content
# several times, and racing reports could all pass a cap. A refused report writes nothing.
# KEYS[1] the reference's counter hash (`count`, `review`), KEYS[2] the account's reports today,
# KEYS[3] its escalations today, KEYS[4..10] the queue's keys, KEYS[11] the account's index, KEYS[12] its
# pending set; ARGV[1..6] the queue's arguments, ARGV[7] account, ARGV[8] item data JSON, ARGV[9] unix time
# a pending item expires, ARGV[10] pending cap, ARGV[11] the id of an item it would create, ARGV[12] threshold,
# ARGV[13] counter TTL seconds, ARGV[14] unix time at which the day counters expire, ARGV[15] reports per day,
# ARGV[16] escalations per day.
# Returns {count, review id or 0, refused}: refused is 0, 1 (reports cap), 2 (escalations cap), 3 (the
# account's pending items are at their cap) or 4 (the new item's id is taken: nothing counted, draw another).
REPORT = _INSERT_REVIEW_ITEM + """
if tonumber(redis.call('GET', KEYS[2]) or '0') >= tonumber(ARGV[15]) then
  return {0, 0, 1}
end
local k, a = review_keys(4), review_args(1)
local state = redis.call('HMGET', KEYS[1], 'count', 'review')
local count = tonumber(state[1]) or 0
local review_id = tonumber(state[2])
if review_id and redis.call('EXISTS', a.item_prefix .. review_id) == 0 then
  -- The item it escalated to is gone (its time is over): the reference counts afresh.
  review_id = nil
  count = 0
end
count = count + 1
local escalate = not review_id and count > tonumber(ARGV[12])
if escalate and tonumber(redis.call('GET', KEYS[3]) or '0') >= tonumber(ARGV[16]) then
  return {count - 1, 0, 2}
end
if escalate and pending_full(KEYS[12], a.now, tonumber(ARGV[10])) then
  return {count - 1, 0, 3}
end
if escalate and id_taken(k, ARGV[11]) then
  return {count - 1, 0, 4}
end
redis.call('INCR', KEYS[2])
redis.call('EXPIREAT', KEYS[2], ARGV[14])
if escalate then
  review_id = insert_review_item(k, a, KEYS[11], KEYS[12], ARGV[7], ARGV[8], ARGV[9], ARGV[11])
  emit_event(webhook_args(), 'report.escalated', review_id, a.item_prefix .. review_id, ARGV[7])
  redis.call('INCR', KEYS[3])
  redis.call('EXPIREAT', KEYS[3], ARGV[14])
end
redis.call('DEL', KEYS[1])
if review_id then
  redis.call('HSET', KEYS[1], 'count', count, 'review', review_id)
else
  redis.call('HSET', KEYS[1], 'count', count)
end
redis.call('EXPIRE', KEYS[1], ARGV[13])
return {count, review_id or 0, 0}
"""

# pending -> approved | rejected in one step: two moderators deciding the same item at once
# must not both succeed, and the status indexes must follow the item's status exactly. The
# decided item leaves its account's pending set and expires after its retention; then up to the
# prune limit of items whose time is over leave the indexes.
# KEYS[1] item hash, KEYS[2..8] the queue's keys; ARGV[1..6] the queue's arguments, ARGV[7] new status,
# ARGV[8] decided_at, ARGV[9] item id, ARGV[10] unix time the decided item expires, ARGV[11] who decided,
# ARGV[12] the decision's reason code ("" when none), ARGV[13..16] the hash bank's (store/hash_bank/bank.py,
# decision_args), ARGV[17..20] the labels' (store/labels/labels.py, decision_args).
# Returns {"ok", the bank's outcome (bank_rejected_hash's; 0 for an approval), the item's fields...}, {"missing"} or
# {"decided"}.
DECIDE_REVIEW_ITEM = _PRUNE_EXPIRED + EMIT_EVENTS + BANK_REJECTED_HASH + KEEP_DECIDED_LABEL + """
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
-- An item stored before ids were random has no `seq`: its id is its sequence.
redis.call('ZADD', index, redis.call('HGET', KEYS[1], 'seq') or ARGV[9], ARGV[9])
redis.call('ZADD', k.expiring, ARGV[10], ARGV[9] .. ':' .. account)
redis.call('ZREM', k.pending, ARGV[9])
redis.call('ZREM', a.account_pending_prefix .. account, ARGV[9])
redis.call('ZREM', a.account_pending_ids_prefix .. account, ARGV[9])
forget_account_if_done(k, a, account)
local banked = 0
if ARGV[7] == 'rejected' then
  banked = bank_rejected_hash(13, ARGV[9], KEYS[1], account, ARGV[8])
end
keep_decided_label(17, KEYS[1], account, ARGV[7], ARGV[8])
emit_event(webhook_args(), 'review.decided', ARGV[9], KEYS[1], account)
local reply = redis.call('HGETALL', KEYS[1])
table.insert(reply, 1, banked)
table.insert(reply, 1, 'ok')
redis.call('EXPIREAT', KEYS[1], ARGV[10])
prune_expired(k, a)
return reply
"""

# KEYS[1..7] the queue's keys, ARGV[1..6] the queue's arguments. Returns how many were pruned.
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

# Items queued before the per-account pending-ids indexes and the accounts with pending items existed are in the
# global pending index only (and their account's pending set). The first read of the queue adds them, by one walk
# through the global pending index in order, `limit` items per call so that no call blocks the store for long; the
# cursor records how far it went, `done` at the end (items queued since are added by the scripts above, so the walk
# may pass over them). Old items have their sequence as id; an item whose hash is gone is skipped.
# KEYS[1] the global pending index, KEYS[2] the accounts with pending items, KEYS[3] the cursor; ARGV[1] the item key
# prefix, ARGV[2] the account pending-ids prefix, ARGV[3] limit. Returns 1 once the walk is done, else 0.
ADD_OLD_PENDING_ITEMS = """
local cursor = redis.call('GET', KEYS[3])
if cursor == 'done' then
  return 1
end
local rows = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. (cursor or '-inf'), '+inf', 'WITHSCORES', 'LIMIT', 0, ARGV[3])
for i = 1, #rows, 2 do
  local data = redis.call('HGET', ARGV[1] .. rows[i], 'data')
  if data then
    local account = cjson.decode(data)['account']
    redis.call('ZADD', ARGV[2] .. account, 'NX', rows[i + 1], rows[i])
    redis.call('ZADD', KEYS[2], 'LT', rows[i + 1], account)
  end
end
if #rows < 2 * tonumber(ARGV[3]) then
  redis.call('SET', KEYS[3], 'done')
  return 1
end
redis.call('SET', KEYS[3], rows[#rows])
return 0
"""

# Keeps an account's report counters within its cap (store/review/report_counters.py), right after a report counted:
# the counter joins the account's index of counters, scored by when it expires (by Redis TIME, the clock of the
# counter's own EXPIRE), and past the cap the counters nearest their end (the least recently reported) go, up to 16 a
# call, so that a lowered cap is reached over the next reports. Growing write first, removals last.
# KEYS[1] the account's index, KEYS[2] the counter just written; ARGV[1] its reference's SHA-256, ARGV[2] the
# counter's TTL in seconds, ARGV[3] the cap, ARGV[4] the counter key prefix, ARGV[5] the account.
# Returns how many counters went.
TRACK_REPORT_COUNTER = """
if redis.call('EXISTS', KEYS[2]) == 0 then
  return 0
end
local time = redis.call('TIME')
local now = tonumber(time[1]) + tonumber(time[2]) / 1000000
local expires_at = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], string.format('%.6f', expires_at), ARGV[1])
redis.call('EXPIREAT', KEYS[1], math.ceil(expires_at))
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.6f', now))
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[3])
if over <= 0 then
  return 0
end
local gone = redis.call('ZPOPMIN', KEYS[1], math.min(over, 16))
for i = 1, #gone, 2 do
  redis.call('DEL', ARGV[4] .. gone[i] .. ':' .. ARGV[5])
end
return #gone / 2
"""
