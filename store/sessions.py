"""Dashboard sessions and the brake on password guessing, in the store.

A session is a random cookie value; the store keeps only its SHA-256 (as for API keys), with the user's name and
the session's CSRF token, and forgets it `SESSION_TTL_S` after login or at logout. Every request re-reads the user,
so a deleted user or a changed role takes effect on the next request.

Wrong passwords are counted per account name in a fixed window: past `MAX_LOGIN_FAILURES` in `LOGIN_WINDOW_S`, the
account's logins are refused (even with the right password) until the window ends. Per account, because a guesser
spreads over addresses but not over the account it wants; a locked-out moderator waits at most the window.
Key schema: `store.redis_keys` (mod:session:{sha256}, mod:login-failures:{name}).
"""

from __future__ import annotations

import hashlib
import secrets

from pydantic import BaseModel
from redis.asyncio import Redis

from store import redis_keys

SESSION_TTL_S = 8 * 3600  # a working day; then log in again
MAX_LOGIN_FAILURES = 5
LOGIN_WINDOW_S = 15 * 60


class Session(BaseModel):
    user: str
    csrf_token: str


def _hashed(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class SessionStore:
    def __init__(self, redis: Redis, ttl_s: int = SESSION_TTL_S):
        self._redis, self.ttl_s = redis, ttl_s

    async def create(self, user: str) -> tuple[str, Session]:
        """The cookie value (shown to the browser only) and the session it opens."""
        token = secrets.token_urlsafe(32)
        session = Session(user=user, csrf_token=secrets.token_urlsafe(32))
        await self._redis.set(redis_keys.session(_hashed(token)), session.model_dump_json(), ex=self.ttl_s)
        return token, session

    async def get(self, token: str) -> Session | None:
        raw = await self._redis.get(redis_keys.session(_hashed(token)))
        return Session.model_validate_json(raw) if raw is not None else None

    async def end(self, token: str) -> None:
        await self._redis.delete(redis_keys.session(_hashed(token)))


class LoginThrottle:
    def __init__(self, redis: Redis, max_failures: int = MAX_LOGIN_FAILURES, window_s: int = LOGIN_WINDOW_S):
        self._redis, self.max_failures, self.window_s = redis, max_failures, window_s

    async def locked_for_s(self, name: str) -> int:
        """Seconds until `name` may try again; 0 when it may now."""
        key = redis_keys.login_failures(name)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.get(key)
            pipe.ttl(key)
            count, ttl = await pipe.execute()
        return max(int(ttl), 1) if count is not None and int(count) >= self.max_failures else 0

    async def failed(self, name: str) -> None:
        key = redis_keys.login_failures(name)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, self.window_s, nx=True)  # the window starts at its first failure
            await pipe.execute()

    async def succeeded(self, name: str) -> None:
        await self._redis.delete(redis_keys.login_failures(name))
