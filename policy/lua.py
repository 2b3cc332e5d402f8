"""The Lua scripts of the policy layer: the one place where they live.

Each runs inside Redis as one atomic step; the comment above each says why it has to.
Key names come in through KEYS (built by `policy.redis_keys`); numbers go back as strings
where they are fractional, since Redis would truncate a Lua number to an integer.
"""

# Token bucket of one key. Read, refill, take and write back must be one step: two requests of
# the same key racing between the read and the write would both spend the same token.
# KEYS[1] bucket hash; ARGV[1] rate per second, ARGV[2] burst, ARGV[3] now in seconds ("" = Redis TIME).
# Returns "0" when admitted, else the seconds until a token is available.
TAKE_RATE_TOKEN = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or burst
local ts = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
           'ts', string.format('%.6f', math.max(now, ts)))
-- Once idle long enough to be full again the bucket equals a fresh one, so it can go.
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return string.format('%.17g', wait)
"""

# Monthly quota: check and take in one step, or concurrent requests would all see room for
# the last unit and the account would be served past its quota.
# KEYS[1] month counter; ARGV[1] quota, ARGV[2] unix time at which the counter expires.
# Returns 1 when a unit was taken, 0 when the quota is exhausted.
TAKE_QUOTA = """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used >= tonumber(ARGV[1]) then
  return 0
end
redis.call('INCR', KEYS[1])
redis.call('EXPIREAT', KEYS[1], ARGV[2])
return 1
"""

# Give a unit back without going below zero: a separate check and DECR could race another
# give-back and leave the counter negative, which would hand out an extra unit.
# KEYS[1] month counter.
GIVE_BACK_QUOTA = """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used > 0 then
  redis.call('DECR', KEYS[1])
end
return 0
"""

# Writes a review item and its indexes. Shared by the two scripts below so that an item is
# written one way only; atomic so that no id is ever handed out without its item and indexes.
_INSERT_REVIEW_ITEM = """
local function insert_review_item(next_id_key, all_key, pending_key, account_key, item_prefix, data)
  local id = redis.call('INCR', next_id_key)
  redis.call('HSET', item_prefix .. id, 'data', data, 'status', 'pending')
  redis.call('ZADD', all_key, id, id)
  redis.call('ZADD', pending_key, id, id)
  redis.call('ZADD', account_key, id, id)
  return id
end
"""

# KEYS[1] next-id counter, KEYS[2] all index, KEYS[3] pending index, KEYS[4] account index;
# ARGV[1] item key prefix, ARGV[2] item data JSON. Returns the new id.
CREATE_REVIEW_ITEM = _INSERT_REVIEW_ITEM + """
return insert_review_item(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2])
"""

# One report of (account, reference). Counting and escalating must be one step: reports racing
# past the threshold would otherwise each see "no item yet" and queue the content several times.
# KEYS[1] report counts hash, KEYS[2] escalations hash, KEYS[3..6] as CREATE_REVIEW_ITEM;
# ARGV[1] reference, ARGV[2] threshold, ARGV[3] item key prefix, ARGV[4] item data JSON.
# Returns {count, review id or 0}.
REPORT = _INSERT_REVIEW_ITEM + """
local count = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
local review_id = tonumber(redis.call('HGET', KEYS[2], ARGV[1]))
if not review_id and count > tonumber(ARGV[2]) then
  review_id = insert_review_item(KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[3], ARGV[4])
  redis.call('HSET', KEYS[2], ARGV[1], review_id)
end
return {count, review_id or 0}
"""

# pending -> approved | rejected in one step: two moderators deciding the same item at once
# must not both succeed, and the status indexes must follow the item's status exactly.
# KEYS[1] item hash, KEYS[2] pending index, KEYS[3] index of the new status;
# ARGV[1] new status, ARGV[2] decided_at, ARGV[3] item id. Returns "ok", "missing" or "decided".
DECIDE_REVIEW_ITEM = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then
  return 'missing'
end
if status ~= 'pending' then
  return 'decided'
end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'decided_at', ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[3])
return 'ok'
"""
