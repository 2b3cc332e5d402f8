"""The webhook outbox: deliveries in Redis, written in the review scripts' own step, taken and settled by the worker.

At-least-once: a delivery is pending until an attempt is recorded as its last (delivered, failed after the whole
schedule, or dropped because its endpoint is gone or disabled), or until its account has `MAX_UNDELIVERED_PER_ACCOUNT`
newer ones waiting (then it is dropped unsent and logged). Each account's due deliveries wait in a lane of their own,
and the claim goes account by account, at most a share of one account in flight at a time across every worker (the
store counts them), so that one account's backlog or slow receiver never delays another's. The worker leases what
it takes (`claim`): a worker that dies mid-send leaves the lease to run out, and the delivery is taken again, so a
receiver may see an event twice (the same `webhook-id`) but never misses one unless its account's backlog overflows.
Everything lives in the AOF store, so a restart of the worker or of the store loses nothing. Retries follow
`WebhookRules.retry_schedule_s` with jitter, later when the receiver's Retry-After asks for more. Scripts:
`store.webhooks.lua`; keys: `store.redis_keys`.
"""

from __future__ import annotations

import json
import random
import secrets
import time
from datetime import datetime, timezone

from pydantic import BaseModel
from redis.asyncio import Redis

from store import redis_keys
from store.webhooks import lua
from store.webhooks.endpoints import endpoint_for_delivery
from webhooks.deliveries import (
    DELIVERED, MAX_UNDELIVERED_PER_ACCOUNT, Attempt, Delivery, WebhookRules, next_try_in,
)  # fmt: skip

# Accounts already at their share that one claim passes over to reach others: 256 accounts with 4 attempts each in
# flight (about 32 workers' worth) before an account further back waits for the next claim.
MAX_BUSY_ACCOUNTS_PASSED = 256


def review_event_args(now: float) -> list:
    """The arguments the review scripts take at the end of ARGV (store/webhooks/lua.py, EMIT_EVENTS)."""
    stamp = datetime.fromtimestamp(now, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return [
        redis_keys.WEBHOOK_UNDELIVERED_PREFIX, MAX_UNDELIVERED_PER_ACCOUNT, redis_keys.WEBHOOK_LOG_PREFIX,
        WebhookRules.log_entries, WebhookRules.done_retention_s, redis_keys.webhook_backlog_dropped(),
        redis_keys.WEBHOOK_ACCOUNT_PREFIX, redis_keys.WEBHOOK_ENDPOINT_PREFIX, redis_keys.WEBHOOK_DELIVERY_PREFIX,
        redis_keys.WEBHOOK_DUE_LANE_PREFIX, redis_keys.webhook_due_accounts(), redis_keys.webhook_undelivered(),
        "msg_" + secrets.token_hex(12), stamp, repr(now),
    ]  # fmt: skip


class LoggedAttempt(BaseModel):
    """One line of an endpoint's delivery log (the admin API's `GET .../deliveries`)."""

    event_id: str
    type: str
    attempt: int
    outcome: str
    status: int | None = None
    latency_ms: float
    at: float
    next_try_at: float | None = None
    error: str | None = None


def _delivery(member: str, fields: list[str], endpoint_fields: list[str], now: float) -> Delivery:
    record = dict(zip(fields[::2], fields[1::2]))
    endpoint = endpoint_for_delivery(dict(zip(endpoint_fields[::2], endpoint_fields[1::2])), now)
    return Delivery(
        member=member, account=record.get("account", "?"), event_id=record["event_id"], event_type=record["type"],
        body=record["body"].encode(),
        attempts=int(record.get("attempts", 0)), round_start=int(record.get("round_start", 0)),
        created_at=float(record["created_at"]), endpoint=endpoint,
    )  # fmt: skip


class Outbox:
    def __init__(self, redis: Redis, rules: WebhookRules | None = None, rng: random.Random | None = None):
        self._redis = redis
        self.rules = rules or WebhookRules()
        self._rng = rng or random.Random()
        self._claim = redis.register_script(lua.CLAIM_DUE)
        self._record = redis.register_script(lua.RECORD_ATTEMPT)
        self._redeliver = redis.register_script(lua.REDELIVER)

    @property
    def lease_s(self) -> float:
        """Long enough for one attempt with redirects and the record; a dead worker's deliveries wait this long."""
        return self.rules.timeout_s * 2 + 15

    async def claim(self, limit: int, per_account: int | None = None, now: float | None = None) -> list[Delivery]:
        """Up to `limit` due deliveries, leased, taken account by account (earliest due first): at most `per_account`
        of one account in flight (default: `limit`), counting what every worker is sending of it now."""
        now = time.time() if now is None else now
        rows = await self._claim(
            keys=[redis_keys.webhook_due_accounts(), redis_keys.webhook_undelivered(), redis_keys.webhook_legacy_due()],
            args=[redis_keys.WEBHOOK_DELIVERY_PREFIX, redis_keys.WEBHOOK_ENDPOINT_PREFIX,
                  redis_keys.WEBHOOK_DUE_LANE_PREFIX, repr(now), repr(now + self.lease_s), limit,
                  limit if per_account is None else per_account, redis_keys.WEBHOOK_SENDING_PREFIX,
                  redis_keys.WEBHOOK_UNDELIVERED_PREFIX, MAX_BUSY_ACCOUNTS_PASSED],
        )  # fmt: skip
        return [_delivery(member, fields, endpoint, now) for member, fields, endpoint in rows]

    async def record(self, delivery: Delivery, attempt: Attempt, now: float | None = None) -> LoggedAttempt:
        """Settles one attempt: the next try, or the delivery's final status; logs it for its endpoint."""
        now = time.time() if now is None else now
        attempts = delivery.attempts + 1
        wait = None
        if attempt.outcome != DELIVERED and not attempt.final:
            wait = next_try_in(self.rules, attempts - delivery.round_start, attempt.retry_after_s, self._rng)
        final_status = DELIVERED if attempt.outcome == DELIVERED else ("dropped" if attempt.final else "failed")
        logged = LoggedAttempt(
            event_id=delivery.event_id, type=delivery.event_type, attempt=attempts, outcome=attempt.outcome,
            status=attempt.status, latency_ms=round(attempt.latency_ms, 1), at=now,
            next_try_at=None if wait is None else now + wait, error=attempt.error,
        )  # fmt: skip
        endpoint_id = delivery.endpoint_id
        await self._record(
            keys=[redis_keys.webhook_delivery(delivery.member), redis_keys.webhook_due_accounts(),
                  redis_keys.webhook_undelivered(), redis_keys.webhook_log(endpoint_id),
                  redis_keys.webhook_endpoint(endpoint_id), redis_keys.webhook_sending_of(delivery.account),
                  redis_keys.webhook_undelivered_of(delivery.account)],
            args=[delivery.member, attempt.outcome, attempts, "" if wait is None else repr(now + wait), final_status,
                  logged.model_dump_json(), self.rules.log_entries, self.rules.done_retention_s,
                  "1" if attempt.disable_endpoint else "0", f"the receiver answered {attempt.status}",
                  "" if attempt.status is None else attempt.status, redis_keys.WEBHOOK_DUE_LANE_PREFIX,
                  delivery.account],
        )  # fmt: skip
        return logged

    async def redeliver(self, endpoint_id: str, event_id: str, now: float | None = None) -> bool:
        """Sends an event to the endpoint again, from the start of the schedule; False when no such delivery is kept."""
        now = time.time() if now is None else now
        member = f"{event_id}:{endpoint_id}"
        return bool(
            await self._redeliver(
                keys=[redis_keys.webhook_delivery(member), redis_keys.webhook_due_accounts(),
                      redis_keys.webhook_undelivered(), redis_keys.webhook_endpoint(endpoint_id)],
                args=[member, repr(now), redis_keys.WEBHOOK_DUE_LANE_PREFIX, redis_keys.WEBHOOK_UNDELIVERED_PREFIX],
            )
        )

    async def log(self, endpoint_id: str, limit: int = 100) -> list[LoggedAttempt]:
        rows = await self._redis.lrange(redis_keys.webhook_log(endpoint_id), 0, limit - 1)
        return [LoggedAttempt.model_validate(json.loads(row)) for row in rows]

    async def backlog(self, now: float | None = None) -> tuple[int, float]:
        """Pending deliveries, and the age in seconds of the oldest (0 when none): the queue's metrics."""
        now = time.time() if now is None else now
        key = redis_keys.webhook_undelivered()
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zcard(key)
            pipe.zrange(key, 0, 0, withscores=True)
            depth, oldest = await pipe.execute()
        return int(depth), max(0.0, now - oldest[0][1]) if oldest else 0.0

    async def dropped_for_backlog(self) -> int:
        """Deliveries dropped unsent because their account had MAX_UNDELIVERED_PER_ACCOUNT newer ones waiting."""
        return int(await self._redis.get(redis_keys.webhook_backlog_dropped()) or 0)
