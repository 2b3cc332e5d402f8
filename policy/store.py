"""Keys, plans and profiles in Redis. The key schema is documented in `policy.redis_keys`.

Secrets are never stored: only their SHA-256, as the name of an index key that points at the
key's record. SHA-256 without salt is enough here because the secrets are 32 random bytes.
"""

from __future__ import annotations

import hashlib
import secrets
import time

from redis.asyncio import Redis

from policy import lua, redis_keys
from policy.types import ApiKey, Plan, Profile

SECRET_PREFIX = "mod_"
KEY_ID_PREFIX = "key_"
KEY_ID_BYTES = 16  # 128-bit ids: never guessed, never repeated
# A collision of 128 random bits does not happen; the retry is there so that one could never overwrite a key.
KEY_CREATE_ATTEMPTS = 3


def _sha256_hex(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _named_json(record: Plan | Profile) -> str:
    # The name is part of the Redis key: without one the record could never be looked up again.
    if not record.name:
        raise ValueError(f"a stored {type(record).__name__.lower()} needs a name")
    return record.model_dump_json()


class ConfigStore:
    def __init__(self, redis: Redis):
        self._redis = redis
        self._create_key = redis.register_script(lua.CREATE_API_KEY)

    async def put_plan(self, plan: Plan) -> None:
        await self._redis.set(redis_keys.plan(plan.name), _named_json(plan))

    async def get_plan(self, name: str) -> Plan | None:
        raw = await self._redis.get(redis_keys.plan(name))
        return Plan.model_validate_json(raw) if raw is not None else None

    async def put_profile(self, profile: Profile) -> None:
        await self._redis.set(redis_keys.profile(profile.name), _named_json(profile))

    async def get_profile(self, name: str) -> Profile | None:
        raw = await self._redis.get(redis_keys.profile(name))
        return Profile.model_validate_json(raw) if raw is not None else None

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
                    redis_keys.api_key_by_hash(_sha256_hex(secret)),
                    redis_keys.live_api_keys(),
                ],
                args=[record.model_dump_json(), record.id],
            )
            if created == 1:
                return record, secret
        raise RuntimeError(f"no free key id in {KEY_CREATE_ATTEMPTS} attempts")

    async def authenticate(self, secret: str) -> ApiKey | None:
        key_id = await self._redis.get(redis_keys.api_key_by_hash(_sha256_hex(secret)))
        if key_id is None:
            return None
        record = await self.get_key(key_id)
        if record is None or record.revoked:
            return None
        return record

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
