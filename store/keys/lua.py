"""The Lua of admission: an API key's rate bucket, its lookup with its plan and profile, the quota and the work slots,
and a new key's record. Each runs inside Redis as one atomic step; the comment above each says why it has to.

Key names come in through KEYS (built by `store.redis_keys`), or, where a name is known only inside the script, as a
prefix in ARGV (also from `store.redis_keys`); numbers go back as strings where they are fractional, since Redis
would truncate a Lua number to an integer.

A full store (`maxmemory`, `noeviction`) refuses a plain script only at its first write that may grow memory, and
lets every write after any first one through, even past the limit (a script is never left half done). The scripts
that may grow memory begin with `REFUSED_WHOLE_WHEN_FULL` instead, whatever they write first: the server refuses
them before they run (an OutOfMemoryError), so a full store admits no request. Script flags need Redis 7.0 or
Valkey 7.2 and later.
`GIVE_BACK_QUOTA` only ever lowers a counter and is let through (`LET_THROUGH_WHEN_FULL`): a unit taken just before
the store filled still goes back when its request fails.
"""

# Script flags (Valkey/Redis 7+): a flagged script without `allow-oom` is refused whole on a full store.
REFUSED_WHOLE_WHEN_FULL = "#!lua\n"
LET_THROUGH_WHEN_FULL = "#!lua flags=allow-oom\n"

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

# A key by its id, with its plan and profile, as AUTHORIZE and the widget's WIDGET_AUTHORIZE (store.widget.lua)
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
    -- only, with a log line (store/keys/config.py), never a script error.
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
# For a moderation request the same step also admits it (store.keys.quota.Admission): once the rate token is taken, its
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
AUTHORIZE = REFUSED_WHOLE_WHEN_FULL + TAKE_RATE_TOKEN + KEY_WITH_CONFIG + TAKE_UNITS + """
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
-- A plan record without either number (one written before max_in_flight existed) is taken apart, by QuotaStore.take,
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

# take_units for a known account (QuotaStore.take: the units a request needs past its first, and the paths that do not
# take their first unit with AUTHORIZE). KEYS[1] month counter; ARGV[1] quota, ARGV[2] unix time at which the
# counter expires, ARGV[3] units. With KEYS[2], the account's set of work in progress: ARGV[4] the plan's
# max_in_flight, ARGV[5] the slot's id, ARGV[6] its lease in seconds, and ARGV[7] on the slots of the account's ended
# requests that their replica has not given back yet (QuotaStore.release_slot), given back first, so that an account's
# next request never finds its own finished ones in the way. Returns as take_units.
TAKE_QUOTA = REFUSED_WHOLE_WHEN_FULL + TAKE_UNITS + """
if KEYS[2] and #ARGV > 6 then
  redis.call('ZREM', KEYS[2], unpack(ARGV, 7))
end
return take_units(KEYS[1], tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), KEYS[2], tonumber(ARGV[4]), ARGV[5],
                  tonumber(ARGV[6]))
"""

# Give units back without going below zero: a separate check and DECR could race another
# give-back and leave the counter negative, which would hand out an extra unit.
# KEYS[1] month counter; ARGV[1] units (default 1).
GIVE_BACK_QUOTA = LET_THROUGH_WHEN_FULL + """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local units = math.min(used, tonumber(ARGV[1] or '1'))
if units > 0 then
  redis.call('DECRBY', KEYS[1], units)
end
return 0
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
