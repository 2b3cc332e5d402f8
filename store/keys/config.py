"""Keys, plans and profiles in Redis. The key schema is documented in `store.redis_keys`.

Secrets are never stored: only their SHA-256, as the name of an index key that points at the
key's record. SHA-256 without salt is enough here because the secrets are 32 random bytes.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass
from typing import TypeVar

from pydantic import ValidationError
from redis.asyncio import Redis

from store import redis_keys
from store.keys import lua
from store.keys.quota import Admission, Taken
from policy.types import ApiKey, Plan, Profile

log = logging.getLogger("moderation.config")
R = TypeVar("R", Plan, Profile)

SECRET_PREFIX = "mod_"
KEY_ID_PREFIX = "key_"
KEY_ID_BYTES = 16  # 128-bit ids: never guessed, never repeated
# A collision of 128 random bits does not happen; the retry is there so that one could never overwrite a key.
KEY_CREATE_ATTEMPTS = 3


class UnreadableRecord(Exception):
    """A stored plan or profile that no longer validates: one written before non-finite numbers were refused (a
    rate of `inf` was stored as null). Never guessed at: it is logged, its keys answer 503, and the pages list the
    others, until an operator saves it again (docs/configuration.md)."""

    def __init__(self, kind: str, name: str):
        super().__init__(f"The stored {kind} {name!r} cannot be read; save it again (PUT /admin/v1/{kind}s/{name}).")


def read_record(model: type[R], name: str, raw: str) -> R:
    """`raw` as a Plan or Profile; raises UnreadableRecord, with a log line that names it, when it does not validate."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as error:
        kind = model.__name__.lower()
        first = error.errors()[0]
        log.error("the stored %s %r cannot be read (%s: %s); its keys answer 503 until it is saved again", kind, name,
                  ".".join(map(str, first.get("loc", ()))), first.get("msg"))  # fmt: skip
        raise UnreadableRecord(kind, name) from None


def _named_json(record: Plan | Profile) -> str:
    # The name is part of the Redis key: without one the record could never be looked up again.
    if not record.name:
        raise ValueError(f"a stored {type(record).__name__.lower()} needs a name")
    return record.model_dump_json()


@dataclass(frozen=True)
class Authorized:
    """A live key with its plan and profile, read in the same step in which its rate token was taken."""

    key: ApiKey
    plan: Plan
    profile: Profile
    retry_after_s: float  # 0.0 when a token was taken, else the seconds until the bucket has one
    taken: Taken | None = None  # the first unit and slot asked with the token (`authorize`'s admission)


@dataclass(frozen=True)
class Unconfigured:
    """A live key whose plan or profile record is missing or cannot be read; no rate token was taken, unless its
    plan's record was read by the store but not by the service, in which case `taken` says what was."""

    key: ApiKey
    taken: Taken | None = None


class ConfigStore:
    def __init__(self, redis: Redis):
        self._redis = redis
        self._create_key = redis.register_script(lua.CREATE_API_KEY)
        self._authorize = redis.register_script(lua.AUTHORIZE)

    async def put_plan(self, plan: Plan) -> None:
        await self._redis.set(redis_keys.plan(plan.name), _named_json(plan))

    async def get_plan(self, name: str) -> Plan | None:
        raw = await self._redis.get(redis_keys.plan(name))
        return read_record(Plan, name, raw) if raw is not None else None

    async def put_profile(self, profile: Profile) -> None:
        await self._redis.set(redis_keys.profile(profile.name), _named_json(profile))

    async def get_profile(self, name: str) -> Profile | None:
        raw = await self._redis.get(redis_keys.profile(name))
        return read_record(Profile, name, raw) if raw is not None else None

    async def seed(self, plans: list[Plan], profiles: list[Profile]) -> None:
        """Writes only what is missing (SET NX), so edits made through the admin API survive restarts."""
        for plan in plans:
            await self._redis.set(redis_keys.plan(plan.name), _named_json(plan), nx=True)
        for profile in profiles:
            await self._redis.set(redis_keys.profile(profile.name), _named_json(profile), nx=True)

    async def create_key(self, account: str, profile: str, plan: str) -> tuple[ApiKey, str]:
        """Returns the record and the secret; the secret is shown to the caller once and never stored.

        The id is 128 random bits, written with SET NX: an id (or a secret's hash) that is already
        taken is never overwritten, and a fresh one is drawn instead.
        """
        for _ in range(KEY_CREATE_ATTEMPTS):
            secret = SECRET_PREFIX + secrets.token_urlsafe(32)
            record = ApiKey(
                id=KEY_ID_PREFIX + secrets.token_hex(KEY_ID_BYTES),
                account=account,
                profile=profile,
                plan=plan,
                created_at=time.time(),
            )
            created = await self._create_key(
                keys=[
                    redis_keys.api_key(record.id),
                    redis_keys.api_key_by_hash(redis_keys.secret_sha256_hex(secret)),
                    redis_keys.live_api_keys(),
                ],
                args=[record.model_dump_json(), record.id],
            )
            if created == 1:
                return record, secret
        raise RuntimeError(f"no free key id in {KEY_CREATE_ATTEMPTS} attempts")

    async def authorize(
        self, secret: str, now: float | None = None, admission: Admission | None = None
    ) -> Authorized | Unconfigured | None:
        """Authenticates `secret` and takes a token of its key's rate bucket, in one Redis round trip.

        None for an unknown or revoked key, Unconfigured for a key whose plan or profile is gone;
        neither takes a token. This is the service's rate limit (the AUTHORIZE script of `store.keys.lua`):
        a token bucket per key, at the rate and burst of the key's plan. Only the secret's SHA-256
        goes to Redis. Without `now` the bucket uses Redis TIME, so all replicas share one clock.

        Nothing is cached in process: the plan and profile come fresh with every call at no extra
        round trip, so an admin change of either, or a revoke, holds from the next request on
        every replica, with no invalidation to get wrong.

        With `admission`, a token taken also takes the request's first quota unit and work slot in the same step
        (`taken` says how that went; None when nothing was asked or tried).
        """
        reply = await self._authorize(
            keys=[redis_keys.api_key_by_hash(redis_keys.secret_sha256_hex(secret))],
            args=[
                redis_keys.API_KEY_PREFIX,
                redis_keys.PLAN_PREFIX,
                redis_keys.PROFILE_PREFIX,
                redis_keys.RATE_BUCKET_PREFIX,
                "" if now is None else now,
                *(admission.script_args() if admission is not None else ()),
            ],
        )
        return _authorization_of(reply)

    async def revoke_key(self, key_id: str) -> bool:
        record = await self.get_key(key_id)
        if record is None:
            return False
        revoked = record.model_copy(update={"revoked": True})
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(redis_keys.api_key(key_id), revoked.model_dump_json())
            pipe.srem(redis_keys.live_api_keys(), key_id)
            await pipe.execute()
        return True

    async def get_key(self, key_id: str) -> ApiKey | None:
        raw = await self._redis.get(redis_keys.api_key(key_id))
        return ApiKey.model_validate_json(raw) if raw is not None else None

    async def count_keys(self) -> int:
        return await self._redis.scard(redis_keys.live_api_keys())


def _authorization_of(reply: list[str]) -> Authorized | Unconfigured | None:
    """The typed form of the AUTHORIZE script's reply (see `store.keys.lua`)."""
    outcome, *fields = reply
    if outcome == "refused":
        return None
    key = ApiKey.model_validate_json(fields[0])
    if outcome == "unconfigured":
        return Unconfigured(key)
    _, plan_json, profile_json, wait_s, taken = fields
    taken = Taken(int(taken)) if taken else None
    try:
        plan, profile = read_record(Plan, key.plan, plan_json), read_record(Profile, key.profile, profile_json)
    except UnreadableRecord:
        return Unconfigured(key, taken)  # this key's requests answer 503; every other key is served
    return Authorized(key=key, plan=plan, profile=profile, retry_after_s=float(wait_s), taken=taken)
