"""The Lua of the webhook outbox (store/webhooks/outbox.py).

`EMIT_EVENTS` is a Lua function that the review scripts of `store.review.lua` include, so that an event is written in the
very step that changes the review item: a creation or a decision is never acknowledged without its deliveries, and
no delivery exists for a change that did not happen. It writes one delivery per enabled endpoint of the account that
subscribes to the event, with the request body the worker will send (never the content: the item's id, reference,
status, reason, decided_at and category scores). An account without endpoints costs one SMEMBERS. An account keeps
at most `max undelivered` deliveries waiting (for a receiver that is down, say): past it the oldest are dropped
unsent, each noted in its endpoint's log and counted, so the change itself never fails for want of a receiver.

Its arguments come at the END of ARGV (`store.webhooks.outbox.review_event_args`), so that the review scripts' own argument
positions do not move: ARGV[n-14] account undelivered prefix, ARGV[n-13] max undelivered per account, ARGV[n-12]
endpoint log prefix, ARGV[n-11] log cap, ARGV[n-10] log retention (s), ARGV[n-9] dropped counter, ARGV[n-8]
account endpoints prefix, ARGV[n-7] endpoint prefix, ARGV[n-6] delivery prefix, ARGV[n-5] due lane prefix, ARGV[n-4]
due accounts zset, ARGV[n-3] undelivered zset, ARGV[n-2] event id base (random, per call), ARGV[n-1] the event's
ISO timestamp, ARGV[n] now (unix seconds). As with
the other scripts, keys named from prefixes assume a single Redis instance (no Cluster).
"""

EMIT_EVENTS = """
local webhook_state = nil
-- One table per script run, so that two events of one run (an escalation's) get different ids.
local function webhook_args()
  if not webhook_state then
    local n = #ARGV
    webhook_state = {account_undelivered_prefix = ARGV[n - 14], max_undelivered = tonumber(ARGV[n - 13]),
                     log_prefix = ARGV[n - 12], log_cap = tonumber(ARGV[n - 11]), log_retention_s = ARGV[n - 10],
                     dropped = ARGV[n - 9],
                     account_prefix = ARGV[n - 8], endpoint_prefix = ARGV[n - 7], delivery_prefix = ARGV[n - 6],
                     lane_prefix = ARGV[n - 5], due_accounts = ARGV[n - 4], undelivered = ARGV[n - 3],
                     event_base = ARGV[n - 2], timestamp = ARGV[n - 1], now = ARGV[n], count = 0}
  end
  return webhook_state
end
local function webhook_body(event_type, item_id, item_key, timestamp)
  local data = cjson.decode(redis.call('HGET', item_key, 'data'))
  local state = redis.call('HMGET', item_key, 'status', 'decided_at')
  local item = {id = tonumber(item_id), reference = data['reference'], status = state[1], reason = data['reason'],
                kind = data['kind'], created_at = data['created_at'], decided_at = tonumber(state[2]) or cjson.null,
                categories = data['scores'] or {}}
  return cjson.encode({type = event_type, timestamp = timestamp, data = item})
end
local function subscribed(events, event_type)
  for _, name in ipairs(events) do
    if name == event_type then
      return true
    end
  end
  return false
end
-- Past the account's cap, its oldest undelivered deliveries go unsent: the record deleted, out of every set, one
-- line in its endpoint's log (outcome `backlog_full`) and one more in the counter. Called after the new deliveries
-- are written (a full store refuses the script at its first growing write, never halfway).
local function drop_oldest_undelivered(w, account)
  local undelivered = w.account_undelivered_prefix .. account
  local over = redis.call('ZCARD', undelivered) - w.max_undelivered
  if over <= 0 then
    return
  end
  for _, member in ipairs(redis.call('ZRANGE', undelivered, 0, over - 1)) do
    local record = redis.call('HMGET', w.delivery_prefix .. member, 'event_id', 'type', 'attempts')
    if record[1] then
      local log = w.log_prefix .. string.sub(member, string.find(member, ':', 1, true) + 1)
      redis.call('LPUSH', log, cjson.encode({
        event_id = record[1], type = record[2], attempt = tonumber(record[3]) or 0, outcome = 'backlog_full',
        status = cjson.null, latency_ms = 0, at = tonumber(w.now), next_try_at = cjson.null,
        error = 'dropped unsent: the account had ' .. w.max_undelivered .. ' deliveries waiting'}))
      redis.call('LTRIM', log, 0, w.log_cap - 1)
      redis.call('EXPIRE', log, w.log_retention_s)
    end
    redis.call('DEL', w.delivery_prefix .. member)
    redis.call('ZREM', undelivered, member)
    redis.call('ZREM', w.lane_prefix .. account, member)
    redis.call('ZREM', w.undelivered, member)
    redis.call('INCR', w.dropped)
  end
end
local function emit_event(w, event_type, item_id, item_key, account)
  local endpoint_ids = redis.call('SMEMBERS', w.account_prefix .. account)
  if #endpoint_ids == 0 then
    return 0
  end
  w.count = w.count + 1
  local event_id = w.event_base .. '_' .. w.count
  local body = nil
  local made = 0
  for _, endpoint_id in ipairs(endpoint_ids) do
    local state = redis.call('HMGET', w.endpoint_prefix .. endpoint_id, 'json', 'enabled')
    if state[1] and state[2] == '1' and subscribed(cjson.decode(state[1])['events'], event_type) then
      body = body or webhook_body(event_type, item_id, item_key, w.timestamp)
      local member = event_id .. ':' .. endpoint_id
      redis.call('HSET', w.delivery_prefix .. member, 'event_id', event_id, 'endpoint', endpoint_id,
                 'account', account, 'type', event_type, 'body', body, 'created_at', w.now, 'attempts', 0,
                 'round_start', 0, 'status', 'pending')
      redis.call('ZADD', w.lane_prefix .. account, w.now, member)
      redis.call('ZADD', w.due_accounts, 'LT', w.now, account)
      redis.call('ZADD', w.undelivered, w.now, member)
      redis.call('ZADD', w.account_undelivered_prefix .. account, w.now, member)
      made = made + 1
    end
  end
  if made > 0 then
    drop_oldest_undelivered(w, account)
  end
  return made
end
"""

# Each account's pending deliveries wait in a lane of their own (`mod:webhooks:due:{account}`), and the accounts with
# pending work in one zset scored by their lane's earliest try, so that a claim goes account by account: one
# account's flood or slow receiver never stands ahead of another account's deliveries (runtime/webhook_worker.py).
LANES = """
-- The account's place among the due accounts: its lane's earliest score, or gone when the lane is empty.
local function refresh_lane(due_accounts, lane_prefix, account)
  local first = redis.call('ZRANGE', lane_prefix .. account, 0, 0, 'WITHSCORES')
  if #first == 0 then
    redis.call('ZREM', due_accounts, account)
  else
    redis.call('ZADD', due_accounts, first[2], account)
  end
end
local function endpoint_of(member)
  return string.sub(member, string.find(member, ':', 1, true) + 1)
end
-- A delivery's account; one written before the lanes has none: its endpoint's, or, when that is gone too, the
-- lane '?' of deliveries nobody owns any more (the claim drops each as endpoint_deleted).
local function delivery_account(delivery_key, endpoint_key)
  local account = redis.call('HGET', delivery_key, 'account')
  if account then
    return account
  end
  local stored = redis.call('HGET', endpoint_key, 'json')
  account = stored and cjson.decode(stored)['account'] or '?'
  if redis.call('EXISTS', delivery_key) == 1 then
    redis.call('HSET', delivery_key, 'account', account)
  end
  return account
end
"""

# The due deliveries, account by account, leased: each one's next try moves to the end of its lease, so that another
# worker (or this one after a restart) takes it again only if this one never reported. At most `per account` of one
# account are in flight at once, whichever workers send them: each one taken is counted in the account's sending set
# until its attempt is recorded or its lease ends (so a dead worker's count lasts no longer than its lease), and the
# claim takes only what that set leaves of the share. A slow receiver holds only its own account's share, of all
# workers together. Accounts at their share are passed over, at most `pass over` of them (beyond `how many`) per
# claim. Deliveries whose record is gone leave the sets. First, up to 100 deliveries of the shared due set of
# earlier versions move into their lanes (a no-op once it is empty).
# KEYS[1] due accounts, KEYS[2] undelivered, KEYS[3] the old shared due set; ARGV[1] delivery prefix, ARGV[2]
# endpoint prefix, ARGV[3] lane prefix, ARGV[4] now, ARGV[5] lease end, ARGV[6] how many at most, ARGV[7] how many
# per account at most, ARGV[8] sending prefix, ARGV[9] account undelivered prefix, ARGV[10] pass over. Returns
# {member, delivery fields, endpoint fields} per delivery.
CLAIM_DUE = LANES + """
local legacy = redis.call('ZRANGE', KEYS[3], 0, 99, 'WITHSCORES')
for i = 1, #legacy, 2 do
  local member = legacy[i]
  local account = delivery_account(ARGV[1] .. member, ARGV[2] .. endpoint_of(member))
  redis.call('ZADD', ARGV[3] .. account, legacy[i + 1], member)
  redis.call('ZADD', KEYS[1], 'LT', legacy[i + 1], account)
  redis.call('ZREM', KEYS[3], member)
end
local limit, per_account = tonumber(ARGV[6]), tonumber(ARGV[7])
local claimed = {}
local accounts = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[4], 'LIMIT', 0, limit + tonumber(ARGV[10]))
for _, account in ipairs(accounts) do
  if #claimed >= limit then
    break
  end
  local sending = ARGV[8] .. account
  redis.call('ZREMRANGEBYSCORE', sending, '-inf', ARGV[4])  -- leases over: attempts of a worker that died
  local room = math.min(per_account - redis.call('ZCARD', sending), limit - #claimed)
  if room > 0 then
    local lane = ARGV[3] .. account
    for _, member in ipairs(redis.call('ZRANGEBYSCORE', lane, '-inf', ARGV[4], 'LIMIT', 0, room)) do
      local fields = redis.call('HGETALL', ARGV[1] .. member)
      if #fields == 0 then
        redis.call('ZREM', lane, member)
        redis.call('ZREM', KEYS[2], member)
        redis.call('ZREM', ARGV[9] .. account, member)
      else
        redis.call('ZADD', lane, ARGV[5], member)
        redis.call('ZADD', sending, ARGV[5], member)
        redis.call('EXPIREAT', sending, math.ceil(tonumber(ARGV[5])))
        table.insert(claimed, {member, fields, redis.call('HGETALL', ARGV[2] .. endpoint_of(member))})
      end
    end
    refresh_lane(KEYS[1], ARGV[3], account)
  end
end
return claimed
"""

# One attempt's outcome: the next try (ARGV[4], unix time) or, when ARGV[4] is "", the final status; the attempt
# in the endpoint's log (newest first, capped); on a 410 the endpoint disabled; the attempt no longer counted in
# its account's share, even when the delivery was dropped meanwhile. One step, so that a delivery is never both
# rescheduled and final, and its log line never missing.
# KEYS[1] delivery, KEYS[2] due accounts, KEYS[3] undelivered, KEYS[4] the endpoint's log, KEYS[5] the endpoint,
# KEYS[6] the account's sending set, KEYS[7] the account's undelivered set;
# ARGV[1] member, ARGV[2] outcome, ARGV[3] attempts so far, ARGV[4] next try or "", ARGV[5] final status,
# ARGV[6] log entry JSON, ARGV[7] log cap, ARGV[8] seconds a finished delivery (and the log) is kept,
# ARGV[9] "1" to disable the endpoint, ARGV[10] why, ARGV[11] the HTTP status ("" for none), ARGV[12] lane prefix,
# ARGV[13] the delivery's account.
RECORD_ATTEMPT = LANES + """
redis.call('ZREM', KEYS[6], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local lane = ARGV[12] .. ARGV[13]
redis.call('HSET', KEYS[1], 'attempts', ARGV[3], 'last_outcome', ARGV[2], 'last_status', ARGV[11])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'status', 'pending', 'next_at', ARGV[4])
  redis.call('ZADD', lane, ARGV[4], ARGV[1])
else
  redis.call('HSET', KEYS[1], 'status', ARGV[5])
  redis.call('HDEL', KEYS[1], 'next_at')
  redis.call('ZREM', lane, ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZREM', KEYS[7], ARGV[1])
  redis.call('EXPIRE', KEYS[1], ARGV[8])
end
refresh_lane(KEYS[2], ARGV[12], ARGV[13])
redis.call('LPUSH', KEYS[4], ARGV[6])
redis.call('LTRIM', KEYS[4], 0, tonumber(ARGV[7]) - 1)
redis.call('EXPIRE', KEYS[4], ARGV[8])
if ARGV[9] == '1' and redis.call('EXISTS', KEYS[5]) == 1 then
  redis.call('HSET', KEYS[5], 'enabled', '0', 'disabled_reason', ARGV[10])
end
return 1
"""

# A delivery sent again on request: pending, due now, its retry schedule started afresh (round_start), kept until
# it is done again (it counts as the account's newest undelivered one). KEYS[1] delivery, KEYS[2] due accounts,
# KEYS[3] undelivered, KEYS[4] the endpoint; ARGV[1] member, ARGV[2] now, ARGV[3] lane prefix, ARGV[4] account
# undelivered prefix. Returns 0 when the delivery is unknown (never made, or its retention is over).
REDELIVER = LANES + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local account = delivery_account(KEYS[1], KEYS[4])
local attempts = redis.call('HGET', KEYS[1], 'attempts')
redis.call('HSET', KEYS[1], 'status', 'pending', 'next_at', ARGV[2], 'round_start', attempts)
redis.call('PERSIST', KEYS[1])
redis.call('ZADD', ARGV[3] .. account, ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[2], 'LT', ARGV[2], account)
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
redis.call('ZADD', ARGV[4] .. account, ARGV[2], ARGV[1])
return 1
"""
