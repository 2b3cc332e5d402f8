"""The Lua of the people's store: taking a password guess past its brakes, giving one back, and opening a session
within the user's cap. Each runs inside Redis as one atomic step; the comment above each says why it has to.

Key names come in through KEYS (built by `store.redis_keys`), or as a prefix in ARGV where a name is known only
inside the script. A full store (maxmemory, noeviction) refuses a script whose first write may grow memory, so each
script that can grow makes such a write before any removal: a full store refuses it whole.
"""

# One login attempt, taken before its password is hashed: both brakes are checked and, if neither holds, the attempt
# is counted at once as a wrong password under the name and the address. One step, or a burst of simultaneous
# attempts would all pass the check before the first was counted (120 at once from one address were all hashed).
# A right password gives its attempt back (GIVE_BACK_GUESSES). The rules are store/people/login_brake.py's.
# KEYS: the name's counter, the address's counter. ARGV: limit per name, limit per address, window (s).
# Returns {brake, retry_after_s, name_count, address_count}: brake 0 when taken (the counts include this attempt),
# 1 when the address's brake holds, 2 when the name's does.
TAKE_LOGIN_ATTEMPT = """
local name_key, address_key = KEYS[1], KEYS[2]
local max_name, max_address, window = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local address_count = tonumber(redis.call('GET', address_key) or '0')
if address_count >= max_address then
  return {1, math.max(redis.call('TTL', address_key), 1), 0, address_count}
end
local name_count = tonumber(redis.call('GET', name_key) or '0')
-- A locked name holds only addresses with failures of their own in their window: a fresh address may try.
if address_count > 0 and name_count >= max_name then
  local wait = math.min(redis.call('TTL', address_key), redis.call('TTL', name_key))
  return {2, math.max(wait, 1), name_count, address_count}
end
name_count = redis.call('INCR', name_key)
redis.call('EXPIRE', name_key, window, 'NX')  -- a window starts at its first failure
address_count = redis.call('INCR', address_key)
redis.call('EXPIRE', address_key, window, 'NX')
return {0, 0, name_count, address_count}
"""

# One guess at a user's current password (the password form), taken before it is hashed, as a login attempt is:
# checked against the limit and counted in one step, so simultaneous guesses cannot all pass the check.
# KEYS: the user's counter. ARGV: limit, window (s). Returns 0 when taken, else the seconds until the window ends.
TAKE_PASSWORD_CHECK = """
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count >= tonumber(ARGV[1]) then
  return math.max(redis.call('TTL', KEYS[1]), 1)
end
redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[2], 'NX')
return 0
"""

# Gives back guesses counted by the scripts above that were no wrong password (it was right, or no hash could run).
# For each key, ARGV says how: 'one' takes one count back, 'all' clears the count (a right login password starts
# its name's count again). A count back at zero goes with its key, so the next failure starts a new window. One
# step: read and write apart, a key that expired in between would come back as -1 with no expiry.
GIVE_BACK_GUESSES = """
for i, key in ipairs(KEYS) do
  local count = tonumber(redis.call('GET', key) or '0')
  if ARGV[i] == 'all' or count <= 1 then
    redis.call('DEL', key)
  else
    redis.call('DECR', key)
  end
end
return 0
"""

# Opens a session and keeps the user's live sessions at most `max`, ending the oldest past it. One step, so that
# simultaneous logins of one user never leave more than `max` open. The user's index holds each session's SHA-256
# scored by the time it expires (all sessions live equally long, so the lowest score is the oldest); members whose
# time is over are dropped first, so only live sessions count.
# KEYS: the session's key, the user's index. ARGV: session JSON, its lifetime (s), now (s), max, the prefix of
# session keys, the session's SHA-256. Returns how many older sessions were ended.
OPEN_SESSION = """
local session_key, index_key = KEYS[1], KEYS[2]
local ttl, now, max = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('SET', session_key, ARGV[1], 'EX', ttl)
redis.call('ZADD', index_key, now + ttl, ARGV[6])
redis.call('EXPIRE', index_key, ttl)  -- the index lives as long as the user's newest session
redis.call('ZREMRANGEBYSCORE', index_key, '-inf', now)
local over = redis.call('ZCARD', index_key) - max
if over <= 0 then
  return 0
end
for _, sha in ipairs(redis.call('ZRANGE', index_key, 0, over - 1)) do
  redis.call('DEL', ARGV[5] .. sha)
end
redis.call('ZREMRANGEBYRANK', index_key, 0, over - 1)
return over
"""
