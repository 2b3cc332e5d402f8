"""The Lua of the hash bank: every add checks the account's cap of hashes in the same step, so that racing imports and
rejections never take a bank past it.

`ADD_HASHES` is one step of an operator's import (store/hash_bank/bank.py). `BANK_REJECTED_HASH` is a Lua function that
DECIDE_REVIEW_ITEM (store/review/lua.py) includes, so that a rejected image's hash joins the bank in the step of the
decision; its arguments are at ARGV[first..first+3] of that script (`bank.decision_args`): the bank prefix, the
version prefix, the skipped-counter prefix and the cap. Both check by reads first and write only when the hashes fit.
"""

# KEYS[1] the account's bank, KEYS[2] its version counter; ARGV[1] the cap, ARGV[2] "1" to keep an entry already
# banked (else it is replaced), then pairs of (PDQ hex, entry JSON). Returns how many hashes were new, or -1 (nothing
# written) when the new ones would take the bank past its cap.
ADD_HASHES = """
local bank, keep = KEYS[1], ARGV[2] == '1'
local new = 0
for i = 3, #ARGV, 2 do
  new = new + 1 - redis.call('HEXISTS', bank, ARGV[i])
end
if new > 0 and redis.call('HLEN', bank) + new > tonumber(ARGV[1]) then
  return -1
end
local added = 0
for i = 3, #ARGV, 2 do
  if keep then
    added = added + redis.call('HSETNX', bank, ARGV[i], ARGV[i + 1])
  else
    added = added + redis.call('HSET', bank, ARGV[i], ARGV[i + 1])
  end
end
redis.call('INCR', KEYS[2])
return added
"""

# A rejected image whose hash was kept with its item joins the account's bank (an entry of the same hash is renewed).
# A full bank takes no new hash: the decision stands, and the account's skipped counter counts the image.
# Returns 1 (banked), 0 (no hash kept with the item) or -1 (skipped: the bank is full).
BANK_REJECTED_HASH = """
local function bank_rejected_hash(first, item_id, item_key, account, now)
  local pdq = cjson.decode(redis.call('HGET', item_key, 'data'))['pdq']
  if type(pdq) ~= 'string' then
    return 0
  end
  local bank = ARGV[first] .. account
  if redis.call('HEXISTS', bank, pdq) == 0 and redis.call('HLEN', bank) >= tonumber(ARGV[first + 3]) then
    redis.call('INCR', ARGV[first + 2] .. account)
    return -1
  end
  redis.call('HSET', bank, pdq, cjson.encode({review_id = tonumber(item_id), added_at = tonumber(now)}))
  redis.call('INCR', ARGV[first + 1] .. account)
  return 1
end
"""
