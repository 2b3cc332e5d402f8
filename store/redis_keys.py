"""The one Redis key schema of the store. Every key the service writes is built here.

All keys start with `mod:` so the service can share a Redis with other tenants and an operator can
see at a glance what belongs to it. Variable parts come last (or after a fixed-width part) so that
a `:` inside an account name or a reference can never make two different keys collide.

Configuration (`store.keys.config.ConfigStore`), never expires:
  mod:plan:{name}                 string  Plan as JSON (pydantic `model_dump_json`)
  mod:profile:{name}              string  Profile as JSON
  mod:apikey:{key_id}             string  ApiKey as JSON (no secret in it)
  mod:apikey-sha256:{hex}         string  key id whose secret has this SHA-256; the secret itself is never stored
  mod:apikeys:live                set     ids of the keys that are not revoked (so counting them is O(1))

Admission: the rate bucket (`ConfigStore.authorize`) and the quota (`store.keys.quota.QuotaStore`):
  mod:rate:{key_id}               hash    token bucket of one key: `tokens` (float), `ts` (seconds, float);
                                          expires once idle long enough to be full again
  mod:quota:{YYYY-MM}:{account}   string  units used by the account in that UTC calendar month;
                                          expires some days after the month ends
  mod:refusals:rate:{YYYY-MM}:{account}  string  requests of the account refused for their key's rate that
                                          UTC month (`store.keys.rate_limit`); expires 40 days after the last one

Review queue (`store.review.queue.ReviewQueue`). Every item expires: a pending one
`pending_retention_s` after it was queued, a decided one `decided_retention_s` after its decision (EXPIREAT
on its hash, moved at the decision); then it leaves every index. An account holds at most
`pending_per_account` pending items. An item's id is random (`store.review.queue.new_review_id`), so that it
tells nothing about other items; its place in the queue is its creation sequence (`seq`), which only the store
sees. An item stored before ids were random has its sequence as its id (and no `seq` field):
  mod:review:next-id              string  counter that hands out each item's creation sequence (INCR)
  mod:review:item:{id}            hash    `data`: the item's immutable fields as JSON (account, reason, kind,
                                          reference, image_url, scores, model_version, created_at);
                                          `status`: pending|approved|rejected; `decided_at`: float, once decided;
                                          `seq`: its creation sequence
  mod:review:all                  zset    every item id, score = seq (newest first = highest score)
  mod:review:status:{status}      zset    ids of the items in that status, score = seq
  mod:review:account:{account}    zset    ids of the account's items, score = seq
  mod:review:pending:{account}    zset    ids of the account's pending items, score = unix time it expires;
                                          its size is what the cap counts
  mod:review:pending-ids:{account}  zset  the same ids, score = seq: the account's queue in order, read by the
                                          dashboard (store/review/browse.py)
  mod:review:pending-accounts     zset    the accounts with pending items, score = seq of the item that made the
                                          account join (it leaves with its last pending item): the operators'
                                          queue goes round them in this order (store/review/browse.py)
  mod:review:old-items-added      string  how far (seq) the one walk that adds items queued before the two
                                          indexes above existed has gone through the pending index, `done` once
                                          it has (store/review/lua.py ADD_OLD_PENDING_ITEMS)
  mod:review:expiring             zset    `{id}:{account}` of every item, score = unix time it expires;
                                          whatever is due leaves the indexes at the next creation, decision
                                          (or prune)

Claims and decisions per hour (`store.review.claims`, `store.review.stats`), expiring:
  mod:review:claim:{id}           string  the dashboard user who holds the item (claimed it); expires after the
                                          claim's minutes
  mod:review:decided:{YYYY-MM-DDTHH}  string  decisions made in that UTC hour; expires two days later

Dashboard users and their sessions (`store.people.users`, `store.people.sessions`):
  mod:user:{name}                 string  User as JSON (id, generation, role, accounts, scrypt password hash,
                                          settings); never expires
  mod:users                       set     every user's name
  mod:session:{sha256}            string  Session as JSON (user name, id and generation, CSRF token) of the cookie
                                          whose SHA-256 this is; the cookie itself is never stored; expires with
                                          the session
  mod:login-failures:{sha256}     string  wrong passwords for the login name with this SHA-256 in the current
                                          window; expires with it
  mod:login-failures-from:{addr}  string  wrong passwords from this client address in the current window;
                                          expires with it (in both counters an attempt counts as wrong from
                                          before its hash until its password proves right)
  mod:user-sessions:{name}        zset    the SHA-256 of each of the user's sessions, score = unix time it
                                          expires: at most MAX_SESSIONS_PER_USER live ones; expires with the
                                          newest
  mod:password-check-failures:{name}  string  wrong current passwords typed in the user's password form in the
                                          current window; expires with it

Reports (`ReviewQueue.report`), all expiring:
  mod:reports:ref:{sha256}:{account}      hash    one reference's reports: `count`, and `review` (the id of the
                                                  item they escalated to, once they have); the reference appears
                                                  only as the SHA-256 hex of its UTF-8, so a long one costs no
                                                  memory here; expires `report_counter_ttl_s` after its last report
  mod:reports:refs:{account}              zset    the account's counters: each reference's SHA-256 hex, score = unix
                                                  time its counter expires; past `report_counters_per_account` the
                                                  counters nearest their end go (store/review/report_counters.py)
  mod:reports:day:{YYYY-MM-DD}:{account}  string  reports the account made that UTC day (capped)
  mod:escalations:day:{YYYY-MM-DD}:{account} string  review items its reports created that UTC day (capped);
                                                  both day counters expire a day after their day ends

Health (`store.health`), expiring:
  mod:health:probe:{name}         string  the write probe of one ingress replica (a time); expires seconds
                                          after the last probe

Feedback (`store.score_suggestions.FeedbackStore`), expiring:
  mod:feedback:{account}          list    score suggestions of `comments:suggestscore`, newest first, as JSON
                                          (`attribute`, `score`, `client_token`, `at`; never the comment's text);
                                          the newest 10,000 kept; expires 30 days after the last suggestion

Webhooks (`store.webhooks.endpoints.WebhookStore`, `store.webhooks.outbox.Outbox`; the review scripts write deliveries in the step
that creates or decides an item). At most `max_endpoints_per_account` endpoints per account; a finished delivery
and an endpoint's log expire `done_retention_s` after their last change:
  mod:webhooks:account:{account}  set     ids of the account's endpoints
  mod:webhooks:endpoint:{id}      hash    `json`: url, events, secrets (with the time a rotated-out one expires),
                                          account, created_at; `enabled`: 1|0; `disabled_reason` (a 410, an admin)
  mod:webhooks:delivery:{event_id}:{endpoint_id}  hash  `event_id`, `endpoint`, `account`, `type`, `body` (the JSON
                                          sent, the same on every try), `created_at`, `attempts`, `round_start`,
                                          `status` (pending|delivered|failed|dropped), `next_at`, `last_outcome`,
                                          `last_status`
  mod:webhooks:due:{account}      zset    the account's lane: `{event_id}:{endpoint_id}` of each of its pending
                                          deliveries, score = its next try (a claimed one: the end of its lease)
  mod:webhooks:due_accounts       zset    accounts with a pending delivery, score = the earliest score in the
                                          account's lane: the worker takes due work account by account
  mod:webhooks:due                zset    the one shared due set of earlier versions: the claim moves what is left
                                          there into the lanes (store/webhooks/lua.py, CLAIM_DUE)
  mod:webhooks:undelivered        zset    the same members, score = when each became pending: depth and age metrics
  mod:webhooks:undelivered:{account}  zset  the account's own, scored the same: at most MAX_UNDELIVERED_PER_ACCOUNT
                                          (webhooks/deliveries.py); past it the oldest are dropped unsent
  mod:webhooks:backlog_dropped    string  deliveries dropped unsent so, in all (a counter; the worker's metric)
  mod:webhooks:sending:{account}  zset    the account's deliveries being sent now, by any worker, score = the end
                                          of each one's lease (a dead worker's count ends with it): the claim's
                                          share of one account; expires with its last lease
  mod:webhooks:log:{endpoint_id}  list    the endpoint's delivery attempts as JSON, newest first, capped

Hash bank (`store.hash_bank.bank.HashBank`; DECIDE_REVIEW_ITEM adds a rejected image's hash). An account's bank holds
at most `max_entries` hashes, checked in the step that adds (`store.hash_bank.lua`):
  mod:hashbank:entries:{account}  hash    PDQ hex -> JSON `review_id` (null for an imported hash), `added_at`
  mod:hashbank:version:{account}  string  bumped at every change, so a replica's copy of the bank knows it is stale
  mod:hashbank:skipped:{account}  string  rejected images not banked because the bank was full

Admin audit log (`store.people.audit_log.AuditLog`), bounded and expiring:
  mod:audit:admin                 stream  one entry per admin change or refused admin token: `at`, `actor`,
                                          `source`, `action`, `target`, `status` (never a secret or a body);
                                          the newest `max_entries` kept, older than `retention_s` trimmed,
                                          the key expires `retention_s` after the last entry

Labels and corrections (`store.labels`): what each account's moderators and backend taught the service, never the
text, and never read by another account. DECIDE_REVIEW_ITEM keeps a decided text item's label in its own step:
  mod:labels:{account}            list    labels of the account's decided text items (flagged or audit), as JSON
                                          (adaptation/labels.py), newest first; at most `labels_per_account`; expires
                                          `retention_s` after the newest
  mod:labels-reported:{account}   list    labels the account's backend sent (`POST /v1/feedback`,
                                          `comments:suggestscore`), the same way, at most `reported_per_account`: a
                                          flood of them never pushes out the moderators' decisions
  mod:labels-due                  zset    accounts with labels newer than their last fit, score = unix time of the
                                          first such label: the background refit takes them (moderation/site_adaptation.py)
  mod:audits:{YYYY-MM-DD}:{account}  string  audit items the account queued that UTC day (capped in the creating
                                          step); expires a day after its day ends
  mod:adaptation:{account}        string  the account's last fit as JSON: the correction, whether it is live and why,
                                          its cross-validated figures, when; erased with the labels

Browser widget (`store.widget.tokens.WidgetStore`; the widget's Lua is in `store.widget.lua`):
  mod:widget:origins:{key_id}     set     page origins (`scheme://host[:port]`) the operator allows for the key
  mod:widget:origin-keys:{origin} set     ids of the keys that allow the origin: what a CORS preflight reads
  mod:widget:token:{sha256}       hash    a widget token whose secret has this SHA-256: `key_id`, `uses_left`,
                                          `expires_at`; expires with the token (EXPIREAT)
  mod:widget:live:{key_id}        zset    the key's live tokens: their SHA-256 scored by expiry, trimmed at each mint,
                                          at most `live_tokens_per_key`; expires with the last of them
  mod:widget:rate:addr:{key_id}:{address}  hash  token bucket of one client address's checks through the key
  mod:widget:use:{YYYY-MM}:{key_id}  hash  the key's widget use that UTC month: `tokens`, `checks`,
                                          `refused_origin`, `refused_spent`, `refused_address`; expires 40 days
                                          after its last change
  mod:widget:signing-secret       string  the secret verdicts are signed with (32 random bytes, hex); never expires
  mod:widget:redeemed:{nonce}     string  a verdict that was redeemed; expires when the verdict does
"""

from __future__ import annotations

import hashlib

PREFIX = "mod:"


# A secret (API key, widget token, session cookie) or a login name is in a key name only as this SHA-256 hex.
def secret_sha256_hex(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# The report script creates items itself and only learns the id inside Redis, so it gets the
# prefix and appends the id: this constant is the single definition of that key's shape.
REVIEW_ITEM_PREFIX = f"{PREFIX}review:item:"


# The authorize script learns a key's id, plan and profile names inside Redis, so it gets these
# prefixes and appends the names: each constant is the single definition of its key's shape.
PLAN_PREFIX = f"{PREFIX}plan:"
PROFILE_PREFIX = f"{PREFIX}profile:"
API_KEY_PREFIX = f"{PREFIX}apikey:"
RATE_BUCKET_PREFIX = f"{PREFIX}rate:"
# Named inside the AUTHORIZE script, which learns the account from the key it reads (store.keys.lua).
QUOTA_PREFIX = f"{PREFIX}quota:"
WORK_IN_PROGRESS_PREFIX = f"{PREFIX}inflight:"


def plan(name: str) -> str:
    return f"{PLAN_PREFIX}{name}"


def profile(name: str) -> str:
    return f"{PROFILE_PREFIX}{name}"


def api_key(key_id: str) -> str:
    return f"{API_KEY_PREFIX}{key_id}"


def api_key_by_hash(secret_sha256_hex: str) -> str:
    return f"{PREFIX}apikey-sha256:{secret_sha256_hex}"


def live_api_keys() -> str:
    return f"{PREFIX}apikeys:live"


def quota(account: str, month: str) -> str:
    """`month` is `YYYY-MM` (UTC); being fixed-width it keeps the account part unambiguous."""
    return f"{QUOTA_PREFIX}{month}:{account}"


def rate_refusals(account: str, month: str) -> str:
    return f"{PREFIX}refusals:rate:{month}:{account}"


def work_in_progress(account: str) -> str:
    """The account's slots of moderation work in progress (a sorted set: slot id -> end of its lease)."""
    return f"{WORK_IN_PROGRESS_PREFIX}{account}"


def review_sequence() -> str:
    return f"{PREFIX}review:next-id"  # the name of the days when the sequence was the id


def review_item(item_id: int) -> str:
    return f"{REVIEW_ITEM_PREFIX}{item_id}"


def review_all() -> str:
    return f"{PREFIX}review:all"


def review_by_status(status: str) -> str:
    return f"{PREFIX}review:status:{status}"


# The decision script prunes the indexes of expired items from inside Redis, by account.
REVIEW_ACCOUNT_PREFIX = f"{PREFIX}review:account:"


def review_by_account(account: str) -> str:
    return f"{REVIEW_ACCOUNT_PREFIX}{account}"


# The scripts take a decided or expired item out of its account's pending set from inside Redis, by account.
REVIEW_PENDING_ACCOUNT_PREFIX = f"{PREFIX}review:pending:"


def review_pending_of(account: str) -> str:
    return f"{REVIEW_PENDING_ACCOUNT_PREFIX}{account}"


# The scripts keep each account's pending ids in id order too, naming the key from inside Redis, by account.
REVIEW_PENDING_IDS_PREFIX = f"{PREFIX}review:pending-ids:"


def review_pending_ids_of(account: str) -> str:
    return f"{REVIEW_PENDING_IDS_PREFIX}{account}"


def review_pending_accounts() -> str:
    return f"{PREFIX}review:pending-accounts"


def review_old_items_added() -> str:
    return f"{PREFIX}review:old-items-added"


def review_expiring() -> str:
    return f"{PREFIX}review:expiring"


# The counters' index names each counter by its reference's SHA-256; the script that trims it names the counter
# from inside Redis, from this prefix.
REPORT_COUNTER_PREFIX = f"{PREFIX}reports:ref:"


def reference_sha256_hex(reference: str) -> str:
    return hashlib.sha256(reference.encode()).hexdigest()


def report_counter(account: str, reference: str) -> str:
    """The reference is hashed: fixed width (so the account part stays unambiguous) and small."""
    return f"{REPORT_COUNTER_PREFIX}{reference_sha256_hex(reference)}:{account}"


def report_counters_of(account: str) -> str:
    return f"{PREFIX}reports:refs:{account}"


def reports_on_day(account: str, day: str) -> str:
    """`day` is `YYYY-MM-DD` (UTC)."""
    return f"{PREFIX}reports:day:{day}:{account}"


def escalations_on_day(account: str, day: str) -> str:
    return f"{PREFIX}escalations:day:{day}:{account}"


def health_probe(name: str) -> str:
    return f"{PREFIX}health:probe:{name}"


def feedback(account: str) -> str:
    return f"{PREFIX}feedback:{account}"


def admin_audit() -> str:
    return f"{PREFIX}audit:admin"


# The review scripts write webhook deliveries from inside Redis (store/webhooks/lua.py), naming keys from these.
WEBHOOK_ACCOUNT_PREFIX = f"{PREFIX}webhooks:account:"
WEBHOOK_ENDPOINT_PREFIX = f"{PREFIX}webhooks:endpoint:"
WEBHOOK_DELIVERY_PREFIX = f"{PREFIX}webhooks:delivery:"


def webhook_endpoints_of(account: str) -> str:
    return f"{WEBHOOK_ACCOUNT_PREFIX}{account}"


def webhook_endpoint(endpoint_id: str) -> str:
    return f"{WEBHOOK_ENDPOINT_PREFIX}{endpoint_id}"


def webhook_delivery(member: str) -> str:
    """`member` is `{event_id}:{endpoint_id}`, as in the due and undelivered sets."""
    return f"{WEBHOOK_DELIVERY_PREFIX}{member}"


# Each account's due deliveries in a lane of their own, so that one account's backlog is never ahead of another's.
WEBHOOK_DUE_LANE_PREFIX = f"{PREFIX}webhooks:due:"


def webhook_due_accounts() -> str:
    return f"{PREFIX}webhooks:due_accounts"


def webhook_legacy_due() -> str:
    """The shared due set of versions before the per-account lanes; drained into the lanes by the claim."""
    return f"{PREFIX}webhooks:due"


def webhook_undelivered() -> str:
    return f"{PREFIX}webhooks:undelivered"


# The outbox's scripts name an account's undelivered and in-flight sets from inside Redis, from these.
WEBHOOK_UNDELIVERED_PREFIX = f"{PREFIX}webhooks:undelivered:"
WEBHOOK_SENDING_PREFIX = f"{PREFIX}webhooks:sending:"


def webhook_undelivered_of(account: str) -> str:
    return f"{WEBHOOK_UNDELIVERED_PREFIX}{account}"


def webhook_sending_of(account: str) -> str:
    return f"{WEBHOOK_SENDING_PREFIX}{account}"


def webhook_backlog_dropped() -> str:
    return f"{PREFIX}webhooks:backlog_dropped"


# The review scripts log a delivery dropped for its account's backlog from inside Redis (store/webhooks/lua.py).
WEBHOOK_LOG_PREFIX = f"{PREFIX}webhooks:log:"


def webhook_log(endpoint_id: str) -> str:
    return f"{WEBHOOK_LOG_PREFIX}{endpoint_id}"


# DECIDE_REVIEW_ITEM adds a rejected image's hash to its account's bank from inside Redis.
HASH_BANK_PREFIX = f"{PREFIX}hashbank:entries:"
HASH_BANK_VERSION_PREFIX = f"{PREFIX}hashbank:version:"
HASH_BANK_SKIPPED_PREFIX = f"{PREFIX}hashbank:skipped:"


def hash_bank(account: str) -> str:
    return f"{HASH_BANK_PREFIX}{account}"


def hash_bank_version(account: str) -> str:
    return f"{HASH_BANK_VERSION_PREFIX}{account}"


def hash_bank_skipped(account: str) -> str:
    return f"{HASH_BANK_SKIPPED_PREFIX}{account}"


def review_claim(item_id: int) -> str:
    return f"{PREFIX}review:claim:{item_id}"


def review_decided_in_hour(hour: str) -> str:
    """`hour` is `YYYY-MM-DDTHH` (UTC)."""
    return f"{PREFIX}review:decided:{hour}"


def user(name: str) -> str:
    return f"{PREFIX}user:{name}"


def users() -> str:
    return f"{PREFIX}users"


def session(token_sha256_hex: str) -> str:
    return f"{PREFIX}session:{token_sha256_hex}"


def login_failures(name_sha256_hex: str) -> str:
    return f"{PREFIX}login-failures:{name_sha256_hex}"


def login_failures_from(address: str) -> str:
    return f"{PREFIX}login-failures-from:{address}"


def user_sessions(name: str) -> str:
    return f"{PREFIX}user-sessions:{name}"


def password_check_failures(name: str) -> str:
    return f"{PREFIX}password-check-failures:{name}"


# The widget's check (store.widget.lua.WIDGET_AUTHORIZE) learns the key id inside Redis: these prefixes are the
# single definition of the keys it builds from it.
WIDGET_ORIGINS_PREFIX = f"{PREFIX}widget:origins:"
WIDGET_ORIGIN_KEYS_PREFIX = f"{PREFIX}widget:origin-keys:"
WIDGET_ADDRESS_BUCKET_PREFIX = f"{PREFIX}widget:rate:addr:"


def widget_origins(key_id: str) -> str:
    return f"{WIDGET_ORIGINS_PREFIX}{key_id}"


def widget_origin_keys(origin: str) -> str:
    return f"{WIDGET_ORIGIN_KEYS_PREFIX}{origin}"


def widget_token(secret_sha256_hex: str) -> str:
    return f"{PREFIX}widget:token:{secret_sha256_hex}"


def widget_live_tokens(key_id: str) -> str:
    return f"{PREFIX}widget:live:{key_id}"


def widget_use_prefix(month: str) -> str:
    return f"{PREFIX}widget:use:{month}:"


def widget_use(month: str, key_id: str) -> str:
    return f"{widget_use_prefix(month)}{key_id}"


def widget_signing_secret() -> str:
    return f"{PREFIX}widget:signing-secret"


def widget_redeemed(nonce: str) -> str:
    return f"{PREFIX}widget:redeemed:{nonce}"


LABELS_PREFIX = f"{PREFIX}labels:"
REPORTED_LABELS_PREFIX = f"{PREFIX}labels-reported:"


def labels(account: str) -> str:
    return f"{LABELS_PREFIX}{account}"


def reported_labels(account: str) -> str:
    return f"{REPORTED_LABELS_PREFIX}{account}"


def labels_due() -> str:
    return f"{PREFIX}labels-due"


def audits_on_day(account: str, day: str) -> str:
    return f"{PREFIX}audits:{day}:{account}"


def adaptation(account: str) -> str:
    return f"{PREFIX}adaptation:{account}"
