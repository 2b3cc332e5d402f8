"""The Lua of the labels: keeping one checks its list's cap and marks the account due a refit in the same step.

`KEEP_DECIDED_LABEL` is a Lua function that DECIDE_REVIEW_ITEM (store/review/lua.py) includes: a decided item that
carries `evidence` (a text item whose model gave an embedding: adaptation/labels.py) becomes a label, `harmful` when
rejected, in the step of the decision, so a decision is never kept twice nor lost. Its arguments are at
ARGV[first..first+3] of that script (`labels.decision_args`): the labels' key prefix, the cap, the retention in
seconds and the due set's key.
"""

# Pushes onto the newest end of the list and trims the oldest past the cap; marks the account due (the first
# label since its last fit sets the time: NX).
_PUSH_LABEL = """
local function push_label(list_key, label, cap, retention_s, due_key, account, now)
  redis.call('LPUSH', list_key, label)
  redis.call('LTRIM', list_key, 0, cap - 1)
  redis.call('EXPIRE', list_key, retention_s)
  redis.call('ZADD', due_key, 'NX', now, account)
end
"""

# Returns 1 when a label was kept, 0 when the item carries no evidence (an image, a report's item, a text whose
# model gave no embedding).
KEEP_DECIDED_LABEL = _PUSH_LABEL + """
local function keep_decided_label(first, item_key, account, status, now)
  local evidence = redis.call('HGET', item_key, 'evidence')
  if not evidence then
    return 0
  end
  local label = cjson.decode(evidence)
  label['harmful'] = status == 'rejected'
  label['at'] = tonumber(now)
  push_label(ARGV[first] .. account, cjson.encode(label), tonumber(ARGV[first + 1]), ARGV[first + 2],
             ARGV[first + 3], account, now)
  return 1
end
"""

# KEYS[1] the account's reported labels, KEYS[2] the due set; ARGV[1] the label JSON, ARGV[2] the cap, ARGV[3] the
# retention in seconds, ARGV[4] the account, ARGV[5] now.
ADD_REPORTED_LABEL = _PUSH_LABEL + """
push_label(KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3], KEYS[2], ARGV[4], ARGV[5])
return 1
"""
