"""Webhook endpoints per account, in Redis: where an account's review events go, and the secrets that sign them.

An endpoint is a URL (checked by `webhooks.url_guard`), the events it subscribes to, and its signing secrets: one
live secret, plus, for `secret_overlap_s` after a rotation, the previous one, so that a receiver can change its
secret without missing or rejecting an event (every request is signed with each live secret). Secrets are stored
as they are (the worker must sign with them) and shown only when created or rotated. The deliveries themselves:
`store.webhooks.outbox`. Key schema: `store.redis_keys`.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Literal

from pydantic import BaseModel
from redis.asyncio import Redis

from store import redis_keys
from webhooks.deliveries import EndpointForDelivery, WebhookRules
from webhooks.signing import new_secret
from webhooks.url_guard import check_webhook_url

EventType = Literal["review.created", "review.decided", "report.escalated"]
EVENT_TYPES: tuple[str, ...] = ("review.created", "review.decided", "report.escalated")
ENDPOINT_ID_PREFIX = "whk_"


class WebhookEndpoint(BaseModel):
    """An endpoint as the admin API shows it: never its secrets."""

    id: str
    account: str
    url: str
    events: list[EventType]
    description: str = ""
    enabled: bool = True
    disabled_reason: str | None = None
    created_at: float


class _Secret(BaseModel):
    secret: str
    expires_at: float | None = None  # None: the current one


class _Stored(BaseModel):
    """The `json` field of an endpoint's hash."""

    id: str
    account: str
    url: str
    events: list[EventType]
    description: str = ""
    created_at: float
    secrets: list[_Secret]


class TooManyEndpoints(Exception):
    def __init__(self, cap: int):
        super().__init__(f"The account already has {cap} webhook endpoints, the most it may have.")


def live_secrets(stored_json: str, now: float) -> list[str]:
    stored = _Stored.model_validate_json(stored_json)
    return [s.secret for s in stored.secrets if s.expires_at is None or s.expires_at > now]


def endpoint_for_delivery(fields: dict[str, str], now: float) -> EndpointForDelivery | None:
    """The worker's view of an endpoint's hash (as CLAIM_DUE returns it); None when the endpoint is gone."""
    if "json" not in fields:
        return None
    stored = _Stored.model_validate_json(fields["json"])
    return EndpointForDelivery(
        id=stored.id, url=stored.url, enabled=fields.get("enabled") == "1", secrets=live_secrets(fields["json"], now)
    )


def _public(stored: _Stored, fields: dict[str, str]) -> WebhookEndpoint:
    return WebhookEndpoint(
        **stored.model_dump(exclude={"secrets"}),
        enabled=fields.get("enabled") == "1",
        disabled_reason=fields.get("disabled_reason") or None,
    )


class WebhookStore:
    def __init__(self, redis: Redis, rules: WebhookRules | None = None):
        self._redis = redis
        self.rules = rules or WebhookRules()

    async def create(
        self, account: str, url: str, events: list[str], description: str = "", now: float | None = None
    ) -> tuple[WebhookEndpoint, str]:
        """The new endpoint and its secret (shown once). Raises UnsafeWebhookUrl, TooManyEndpoints."""
        await asyncio.to_thread(check_webhook_url, url, allow_private=self.rules.allow_private)  # DNS blocks
        index = redis_keys.webhook_endpoints_of(account)
        if await self._redis.scard(index) >= self.rules.max_endpoints_per_account:
            raise TooManyEndpoints(self.rules.max_endpoints_per_account)
        secret = new_secret()
        stored = _Stored(
            id=ENDPOINT_ID_PREFIX + secrets.token_hex(12), account=account, url=url,
            events=list(dict.fromkeys(events)), description=description,
            created_at=time.time() if now is None else now, secrets=[_Secret(secret=secret)],
        )  # fmt: skip
        async with self._redis.pipeline(transaction=True) as pipe:
            fields = {"json": stored.model_dump_json(), "enabled": "1"}
            pipe.hset(redis_keys.webhook_endpoint(stored.id), mapping=fields)
            pipe.sadd(index, stored.id)
            await pipe.execute()
        return _public(stored, {"enabled": "1"}), secret

    async def _read(self, endpoint_id: str) -> tuple[_Stored, dict[str, str]] | None:
        fields = await self._redis.hgetall(redis_keys.webhook_endpoint(endpoint_id))
        if "json" not in fields:
            return None
        return _Stored.model_validate_json(fields["json"]), fields

    async def get(self, endpoint_id: str) -> WebhookEndpoint | None:
        found = await self._read(endpoint_id)
        return _public(*found) if found else None

    async def list(self, account: str) -> list[WebhookEndpoint]:
        ids = sorted(await self._redis.smembers(redis_keys.webhook_endpoints_of(account)))
        endpoints = [await self.get(endpoint_id) for endpoint_id in ids]
        return sorted((e for e in endpoints if e is not None), key=lambda e: e.created_at)

    async def update(
        self, endpoint_id: str, *, url: str | None = None, events: list[str] | None = None,
        description: str | None = None, enabled: bool | None = None,
    ) -> WebhookEndpoint | None:  # fmt: skip
        """Changes what is given; enabling clears the reason it was disabled. None when there is no such endpoint."""
        found = await self._read(endpoint_id)
        if found is None:
            return None
        stored, fields = found
        changes = {k: v for k, v in (("url", url), ("events", events), ("description", description)) if v is not None}
        if url is not None:
            await asyncio.to_thread(check_webhook_url, url, allow_private=self.rules.allow_private)
        if events is not None:
            changes["events"] = list(dict.fromkeys(events))
        stored = stored.model_copy(update=changes)
        mapping = {"json": stored.model_dump_json()}
        if enabled is not None:
            mapping.update(enabled="1" if enabled else "0", disabled_reason="" if enabled else "disabled by an admin")
        await self._redis.hset(redis_keys.webhook_endpoint(endpoint_id), mapping=mapping)
        return _public(stored, {**fields, **mapping})

    async def rotate_secret(self, endpoint_id: str, now: float | None = None) -> tuple[str, float] | None:
        """A new current secret; the previous one signs too until the returned time. None: no such endpoint."""
        found = await self._read(endpoint_id)
        if found is None:
            return None
        now = time.time() if now is None else now
        stored, _ = found
        until = now + self.rules.secret_overlap_s
        kept = [
            _Secret(secret=s.secret, expires_at=until if s.expires_at is None else s.expires_at)
            for s in stored.secrets
            if s.expires_at is None or s.expires_at > now
        ]
        secret = new_secret()
        stored = stored.model_copy(update={"secrets": [_Secret(secret=secret), *kept]})
        await self._redis.hset(redis_keys.webhook_endpoint(endpoint_id), "json", stored.model_dump_json())
        return secret, until

    async def delete(self, endpoint_id: str) -> bool:
        """Its pending deliveries are dropped by the worker when it next meets them."""
        found = await self._read(endpoint_id)
        if found is None:
            return False
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(redis_keys.webhook_endpoint(endpoint_id))
            pipe.srem(redis_keys.webhook_endpoints_of(found[0].account), endpoint_id)
            await pipe.execute()
        return True
