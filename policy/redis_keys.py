"""The one Redis key schema of the policy layer. Every key the service writes is built here.

All keys start with `mod:` so the service can share a Redis with other tenants and an operator can
see at a glance what belongs to it. Variable parts come last (or after a fixed-width part) so that
a `:` inside an account name or a reference can never make two different keys collide.

Configuration (`policy.store.ConfigStore`), never expires:
  mod:plan:{name}                 string  Plan as JSON (pydantic `model_dump_json`)
  mod:profile:{name}              string  Profile as JSON
  mod:apikey:{key_id}             string  ApiKey as JSON (no secret in it)
  mod:apikey-sha256:{hex}         string  key id whose secret has this SHA-256; the secret itself is never stored
  mod:apikeys:live                set     ids of the keys that are not revoked (so counting them is O(1))

Limits (`policy.limits.Limits`):
  mod:rate:{key_id}               hash    token bucket of one key: `tokens` (float), `ts` (seconds, float);
                                          expires once idle long enough to be full again
  mod:quota:{YYYY-MM}:{account}   string  units used by the account in that UTC calendar month;
                                          expires some days after the month ends

Review queue and reports (`policy.review_queue.ReviewQueue`), never expire (AOF keeps them across restarts):
  mod:review:next-id              string  counter that hands out review item ids (INCR)
  mod:review:item:{id}            hash    `data`: the item's immutable fields as JSON (account, reason, kind,
                                          reference, image_url, scores, model_version, created_at);
                                          `status`: pending|approved|rejected; `decided_at`: float, once decided
  mod:review:all                  zset    every item id, score = id (newest first = highest score)
  mod:review:status:{status}      zset    ids of the items in that status, score = id
  mod:review:account:{account}    zset    ids of the account's items, score = id
  mod:reports:count:{account}     hash    reference -> number of reports of it
  mod:reports:review:{account}    hash    reference -> id of the review item its reports escalated to
"""

from __future__ import annotations

PREFIX = "mod:"

# The report script creates items itself and only learns the id inside Redis, so it gets the
# prefix and appends the id: this constant is the single definition of that key's shape.
REVIEW_ITEM_PREFIX = f"{PREFIX}review:item:"


def plan(name: str) -> str:
    return f"{PREFIX}plan:{name}"


def profile(name: str) -> str:
    return f"{PREFIX}profile:{name}"


def api_key(key_id: str) -> str:
    return f"{PREFIX}apikey:{key_id}"


def api_key_by_hash(secret_sha256_hex: str) -> str:
    return f"{PREFIX}apikey-sha256:{secret_sha256_hex}"


def live_api_keys() -> str:
    return f"{PREFIX}apikeys:live"


def rate_bucket(key_id: str) -> str:
    return f"{PREFIX}rate:{key_id}"


def quota(account: str, month: str) -> str:
    """`month` is `YYYY-MM` (UTC); being fixed-width it keeps the account part unambiguous."""
    return f"{PREFIX}quota:{month}:{account}"


def review_next_id() -> str:
    return f"{PREFIX}review:next-id"


def review_item(item_id: int) -> str:
    return f"{REVIEW_ITEM_PREFIX}{item_id}"


def review_all() -> str:
    return f"{PREFIX}review:all"


def review_by_status(status: str) -> str:
    return f"{PREFIX}review:status:{status}"


def review_by_account(account: str) -> str:
    return f"{PREFIX}review:account:{account}"


def report_counts(account: str) -> str:
    return f"{PREFIX}reports:count:{account}"


def report_reviews(account: str) -> str:
    return f"{PREFIX}reports:review:{account}"
