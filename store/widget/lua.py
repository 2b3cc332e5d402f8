"""The Lua of the browser widget (store/widget/tokens.py): a token's check and an operator's change of a key's origins.

As in `store.keys.lua`, keys named after values read inside a script come in as prefixes in ARGV (`store.redis_keys`),
which assumes a single Redis instance (no Cluster).
"""

from store.keys.lua import KEY_WITH_CONFIG, TAKE_RATE_TOKEN

# One widget check's admission, in one step, so that concurrent checks of one token never spend a use twice and a
# refused check spends nothing: the token (gone once expired: its hash has an EXPIREAT), its key live with its plan
# and profile, the page's origin among those the operator allows for the key now (so removing an origin holds from
# the next check), a use of the token's budget, a token of the client address's bucket for this key, and a
# token of the key's own rate bucket (a widget check is a request of the key like any other). An admitted check, and
# a check refused for its origin, a spent token or its address, is counted in the key's widget use of the month.
# KEYS[1] the token's hash. ARGV[1] the page's origin, ARGV[2] the client address, ARGV[3] key record prefix,
# ARGV[4] plan prefix, ARGV[5] profile prefix, ARGV[6] key rate bucket prefix, ARGV[7] origins prefix, ARGV[8] address
# bucket prefix, ARGV[9] address rate per second, ARGV[10] address burst, ARGV[11] the month's use prefix,
# ARGV[12] seconds the use counter lives.
# Returns {"refused"} (no such token, or its key revoked), {"origin"}, {"spent"}, {"unconfigured", key JSON},
# {"address", wait} or {"ok", key JSON, plan JSON, profile JSON, wait, uses left} (wait: the key's bucket, as
# AUTHORIZE answers it; a check it refuses spends no use).
WIDGET_AUTHORIZE = TAKE_RATE_TOKEN + KEY_WITH_CONFIG + """
local key_id = redis.call('HGET', KEYS[1], 'key_id')
if not key_id then
  return {'refused'}
end
local use_key = ARGV[11] .. key_id
local function counted(field, reply)
  redis.call('HINCRBY', use_key, field, 1)
  redis.call('EXPIRE', use_key, tonumber(ARGV[12]))
  return reply
end
local found, refusal = key_with_config(key_id, ARGV[3], ARGV[4], ARGV[5])
if refusal then
  return refusal
end
if redis.call('SISMEMBER', ARGV[7] .. key_id, ARGV[1]) == 0 then
  return counted('refused_origin', {'origin'})
end
if tonumber(redis.call('HGET', KEYS[1], 'uses_left') or '0') <= 0 then
  return counted('refused_spent', {'spent'})
end
local address_wait = take_rate_token(ARGV[8] .. key_id .. ':' .. ARGV[2], tonumber(ARGV[9]), tonumber(ARGV[10]), nil)
if address_wait > 0 then
  return counted('refused_address', {'address', string.format('%.17g', address_wait)})
end
local plan = found[4]
local wait = take_rate_token(ARGV[6] .. key_id, tonumber(plan['rate_per_second']), tonumber(plan['burst']), nil)
local uses_left = tonumber(redis.call('HGET', KEYS[1], 'uses_left'))
if wait == 0 then
  uses_left = redis.call('HINCRBY', KEYS[1], 'uses_left', -1)
  counted('checks', nil)
end
return {'ok', found[1], found[2], found[3], string.format('%.17g', wait), tostring(uses_left)}
"""

# An operator's new list of a key's allowed origins, and the reverse index the preflight reads (which origins some
# key allows), changed together so that the two never disagree. KEYS[1] the key's origin set; ARGV[1] the reverse
# index's prefix, ARGV[2] the key id, ARGV[3..] the new origins (none: the key allows no page).
SET_WIDGET_ORIGINS = """
for _, origin in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  redis.call('SREM', ARGV[1] .. origin, ARGV[2])
end
redis.call('DEL', KEYS[1])
for i = 3, #ARGV do
  redis.call('SADD', KEYS[1], ARGV[i])
  redis.call('SADD', ARGV[1] .. ARGV[i], ARGV[2])
end
return #ARGV - 2
"""
