"""The Lua of the browser widget (store/widget/tokens.py): a token's mint, a token's check and an operator's change of
a key's origins.

As in `store.keys.lua`, keys named after values read inside a script come in as prefixes in ARGV (`store.redis_keys`),
which assumes a single Redis instance (no Cluster). A check and a mint may grow memory: a full store refuses them
whole, before they run (`REFUSED_WHOLE_WHEN_FULL`, `store.keys.lua` says why).
"""

from store.keys.lua import KEY_WITH_CONFIG, REFUSED_WHOLE_WHEN_FULL, TAKE_RATE_TOKEN

# One widget check's admission, in one step, so that concurrent checks of one token never spend a use twice and a
# refused check spends nothing: the token (gone once expired: its hash has an EXPIREAT), its key live, the page's
# origin among those the operator allows for the key now (so removing an origin holds from the next check), the key's
# plan and profile (after the origin, so a page of another origin reads nothing, not even that the key is
# misconfigured: serve_app/widget_cors.py), a use of the token's budget, a token of the client address's bucket for
# this key, and a token of the key's own rate bucket (a widget check is a request of the key like any other). An
# admitted check, and a check refused for its origin, a spent token or its address, is counted in the key's widget
# use of the month.
# KEYS[1] the token's hash. ARGV[1] the page's origin, ARGV[2] the client address, ARGV[3] key record prefix,
# ARGV[4] plan prefix, ARGV[5] profile prefix, ARGV[6] key rate bucket prefix, ARGV[7] origins prefix, ARGV[8] address
# bucket prefix, ARGV[9] address rate per second, ARGV[10] address burst, ARGV[11] the month's use prefix,
# ARGV[12] seconds the use counter lives.
# Returns {"refused"} (no such token, or its key revoked), {"origin"}, {"spent"}, {"unconfigured", key JSON},
# {"address", wait} or {"ok", key JSON, plan JSON, profile JSON, wait, uses left} (wait: the key's bucket, as
# AUTHORIZE answers it; a check it refuses spends no use).
WIDGET_AUTHORIZE = REFUSED_WHOLE_WHEN_FULL + TAKE_RATE_TOKEN + KEY_WITH_CONFIG + """
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
if refusal and refusal[1] == 'refused' then
  return refusal
end
if redis.call('SISMEMBER', ARGV[7] .. key_id, ARGV[1]) == 0 then
  return counted('refused_origin', {'origin'})
end
if refusal then
  return refusal
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

# A new token of a key, unless the key already holds its cap of live tokens: count and write in one step, or
# concurrent mints would all see room for the last one. The key's live tokens are a sorted set scored by expiry;
# those expired are trimmed first, so only live ones count, and the set itself expires with its last token.
# KEYS[1] the token's hash, KEYS[2] the key's live tokens, KEYS[3] the key's widget use of the month. ARGV[1] the key
# id, ARGV[2] the token's uses, ARGV[3] its expiry (unix s), ARGV[4] now (unix s), ARGV[5] the cap, ARGV[6] the token's
# SHA-256 (its member), ARGV[7] seconds the use counter lives.
# Returns {"ok"}, or {"full", seconds until the oldest live token expires} having written nothing.
MINT_WIDGET_TOKEN = REFUSED_WHOLE_WHEN_FULL + """
local now, expires_at = tonumber(ARGV[4]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  return {'full', string.format('%.17g', tonumber(oldest[2]) - now)}
end
redis.call('HSET', KEYS[1], 'key_id', ARGV[1], 'uses_left', ARGV[2], 'expires_at', ARGV[3])
redis.call('EXPIREAT', KEYS[1], math.floor(expires_at) + 1)
redis.call('ZADD', KEYS[2], expires_at, ARGV[6])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('EXPIREAT', KEYS[2], math.floor(tonumber(last[2])) + 1)
redis.call('HINCRBY', KEYS[3], 'tokens', 1)
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[7]))
return {'ok'}
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
