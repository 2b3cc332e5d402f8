"""The Lua of the webhook outbox (store/webhooks/outbox.py) and of the hash bank's learning step.

`EMIT_EVENTS` is a Lua function that the review scripts of `store.review.lua` include, so that an event is written in the
very step that changes the review item: a creation or a decision is never acknowledged without its deliveries, and
no delivery exists for a change that did not happen. It writes one delivery per enabled endpoint of the account that
subscribes to the event, with the request body the worker will send (never the content: the item's id, reference,
status, reason, decided_at and category scores). An account without endpoints costs one SMEMBERS.

Its arguments come at the END of ARGV (`store.webhooks.outbox.review_event_args`), so that the review scripts' own argument
positions do not move: ARGV[n-10] account endpoints prefix, ARGV[n-9] endpoint prefix, ARGV[n-8] delivery prefix,
ARGV[n-7] due lane prefix, ARGV[n-6] due accounts zset, ARGV[n-5] undelivered zset, ARGV[n-4] event id base (random,
per call), ARGV[n-3] the event's ISO timestamp, ARGV[n-2] now (unix seconds), ARGV[n-1] hash bank prefix, ARGV[n]
hash bank version prefix. As with the other scripts, keys named from prefixes assume a single Redis instance (no
Cluster).
"""

EMIT_EVENTS = """
local webhook_state = nil
-- One table per script run, so that two events of one run (an escalation's) get different ids.
local function webhook_args()
  if not webhook_state then
    local n = #ARGV
    webhook_state = {account_prefix = ARGV[n - 10], endpoint_prefix = ARGV[n - 9], delivery_prefix = ARGV[n - 8],
                     lane_prefix = ARGV[n - 7], due_accounts = ARGV[n - 6], undelivered = ARGV[n - 5],
                     event_base = ARGV[n - 4],
                     timestamp = ARGV[n - 3], now = ARGV[n - 2], bank_prefix = ARGV[n - 1],
                     bank_version_prefix = ARGV[n], count = 0}
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
      made = made + 1
    end
  end
  return made
end
-- A rejected image whose hash was kept with its item joins the account's bank, in the step of the decision.
local function bank_rejected_image(w, item_id, item_key, account)
  local data = cjson.decode(redis.call('HGET', item_key, 'data'))
  local pdq = data['pdq']
  if type(pdq) ~= 'string' then
    return 0
  end
  redis.call('HSET', w.bank_prefix .. account, pdq, cjson.encode({review_id = tonumber(item_id), added_at = w.now}))
  redis.call('INCR', w.bank_version_prefix .. account)
  return 1
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
# worker (or this one after a restart) takes it again only if this one never reported. At most `per account` are
# taken of one account, less what this worker has of it in flight already (the pairs at the end of ARGV): a slow
# receiver holds only its own account's share of the worker. Deliveries whose record is gone leave the sets. First,
# up to 100 deliveries of the shared due set of earlier versions move into their lanes (a no-op once it is empty).
# KEYS[1] due accounts, KEYS[2] undelivered, KEYS[3] the old shared due set; ARGV[1] delivery prefix, ARGV[2]
# endpoint prefix, ARGV[3] lane prefix, ARGV[4] now, ARGV[5] lease end, ARGV[6] how many at most, ARGV[7] how many
# per account at most, then pairs: account, deliveries of it in flight. Returns {member, delivery fields, endpoint
# fields} per delivery.
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
local in_flight, busy = {}, 0
for i = 8, #ARGV, 2 do
  in_flight[ARGV[i]] = tonumber(ARGV[i + 1])
  busy = busy + 1
end
local claimed = {}
local accounts = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[4], 'LIMIT', 0, limit + busy)
for _, account in ipairs(accounts) do
  local room = math.min(per_account - (in_flight[account] or 0), limit - #claimed)
  if room > 0 then
    local lane = ARGV[3] .. account
    for _, member in ipairs(redis.call('ZRANGEBYSCORE', lane, '-inf', ARGV[4], 'LIMIT', 0, room)) do
      local fields = redis.call('HGETALL', ARGV[1] .. member)
      if #fields == 0 then
        redis.call('ZREM', lane, member)
        redis.call('ZREM', KEYS[2], member)
      else
        redis.call('ZADD', lane, ARGV[5], member)
        table.insert(claimed, {member, fields, redis.call('HGETALL', ARGV[2] .. endpoint_of(member))})
      end
    end
    refresh_lane(KEYS[1], ARGV[3], account)
  end
end
return claimed
"""

# One attempt's outcome: the next try (ARGV[4], unix time) or, when ARGV[4] is "", the final status; the attempt
# in the endpoint's log (newest first, capped); on a 410 the endpoint disabled. One step, so that a delivery is
# never both rescheduled and final, and its log line never missing.
# KEYS[1] delivery, KEYS[2] due accounts, KEYS[3] undelivered, KEYS[4] the endpoint's log, KEYS[5] the endpoint;
# ARGV[1] member, ARGV[2] outcome, ARGV[3] attempts so far, ARGV[4] next try or "", ARGV[5] final status,
# ARGV[6] log entry JSON, ARGV[7] log cap, ARGV[8] seconds a finished delivery (and the log) is kept,
# ARGV[9] "1" to disable the endpoint, ARGV[10] why, ARGV[11] the HTTP status ("" for none), ARGV[12] lane prefix,
# ARGV[13] the delivery's account.
RECORD_ATTEMPT = LANES + """
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
# it is done again. KEYS[1] delivery, KEYS[2] due accounts, KEYS[3] undelivered, KEYS[4] the endpoint; ARGV[1]
# member, ARGV[2] now, ARGV[3] lane prefix. Returns 0 when the delivery is unknown (never made, or its retention is
# over).
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
return 1
"""
