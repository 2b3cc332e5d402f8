"""Dashboard sessions and the brakes on password guessing, in the store.

A session is a random cookie value; the store keeps only its SHA-256 (as for API keys), with the user's name, id and
generation and the session's CSRF token (checked by dashboard/csrf.py).

Session expiry, every part of it:
- `SESSION_TTL_S` below (8 hours from login, not sliding): the store forgets the session then (the key's TTL, set by
  `SessionStore.create`), and the browser's cookie carries the same age (`set_session_cookie` in dashboard/auth.py).
- Logging out ends it at once (`SessionStore.end`, from `logout` in dashboard/routes_login.py).
- Every request re-reads the user and drops the session unless the user still exists with the same id and
  generation (`signed_in` in dashboard/auth.py): deleting a user (even re-created under the same name, as the
  documented password reset does) or changing its password or role ends every session opened before.

Wrong passwords are counted in fixed windows of `LOGIN_WINDOW_S`, twice (docs/dashboard.md, "Logging in"):
- per client address, any names: past `MAX_FAILURES_PER_ADDRESS` the address's logins are refused (429) until its
  window ends. This stops one address spraying a password over many names.
- per name, any addresses: past `MAX_FAILURES_PER_NAME` the name is locked, but only for addresses that have failed
  a login in their own current window. A guesser keeps the name locked for as long as it likes, yet only against
  addresses that guessed wrong: the real user from an address without failures (a fresh one) always gets in, and
  their own address, after a typo, waits at most `LOGIN_WINDOW_S` (its window ends, and it is fresh again).
A name is counted under its SHA-256 (fixed width, so a counter costs the same whatever was typed) and only once it
passed the user-name rule (store/people/users.py valid_login_name), so nothing is stored for a malformed name.
Key schema: `store.redis_keys` (mod:session:{sha256}, mod:login-failures:{sha256}, mod:login-failures-from:{addr}).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError
from redis.asyncio import Redis

from store import redis_keys

SESSION_TTL_S = 8 * 3600  # a working day; then log in again
MAX_FAILURES_PER_NAME = 5
MAX_FAILURES_PER_ADDRESS = 20
LOGIN_WINDOW_S = 15 * 60


class Session(BaseModel):
    user: str
    user_id: str
    generation: int
    csrf_token: str


class SessionStore:
    def __init__(self, redis: Redis, ttl_s: int = SESSION_TTL_S):
        self._redis, self.ttl_s = redis, ttl_s

    async def create(self, user: str, user_id: str, generation: int) -> tuple[str, Session]:
        """The cookie value (shown to the browser only) and the session it opens."""
        token = secrets.token_urlsafe(32)
        session = Session(user=user, user_id=user_id, generation=generation, csrf_token=secrets.token_urlsafe(32))
        key = redis_keys.session(redis_keys.secret_sha256_hex(token))
        await self._redis.set(key, session.model_dump_json(), ex=self.ttl_s)
        return token, session

    async def get(self, token: str) -> Session | None:
        raw = await self._redis.get(redis_keys.session(redis_keys.secret_sha256_hex(token)))
        try:
            return Session.model_validate_json(raw) if raw is not None else None
        except ValidationError:  # a session stored before sessions held the user's id: log in again
            return None

    async def end(self, token: str) -> None:
        await self._redis.delete(redis_keys.session(redis_keys.secret_sha256_hex(token)))


@dataclass(frozen=True)
class LoginVerdict:
    """Whether a login may be tried now; `retry_after_s` > 0 when not, `reason` says which brake holds."""

    retry_after_s: int = 0
    reason: str = ""


@dataclass(frozen=True)
class Tripped:
    """Which brakes a failed login just engaged (each once per window: the audit log records only these)."""

    address: bool
    name: bool


class LoginThrottle:
    def __init__(
        self,
        redis: Redis,
        max_failures_per_name: int = MAX_FAILURES_PER_NAME,
        max_failures_per_address: int = MAX_FAILURES_PER_ADDRESS,
        window_s: int = LOGIN_WINDOW_S,
    ):
        self._redis, self.window_s = redis, window_s
        self.max_failures_per_name, self.max_failures_per_address = max_failures_per_name, max_failures_per_address

    def _keys(self, name: str, address: str) -> tuple[str, str]:
        return redis_keys.login_failures(redis_keys.secret_sha256_hex(name)), redis_keys.login_failures_from(address)

    async def check(self, name: str, address: str) -> LoginVerdict:
        """Reads only: may `address` try `name` now?"""
        name_key, address_key = self._keys(name, address)
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in (name_key, address_key):
                pipe.get(key)
                pipe.ttl(key)
            name_count, name_ttl, address_count, address_ttl = await pipe.execute()
        address_failures = int(address_count or 0)
        if address_failures >= self.max_failures_per_address:
            return LoginVerdict(max(int(address_ttl), 1), "address")
        # A locked name refuses only addresses with failures of their own: a fresh address always may try.
        if address_failures and int(name_count or 0) >= self.max_failures_per_name:
            return LoginVerdict(max(min(int(address_ttl), int(name_ttl)), 1), "name")
        return LoginVerdict()

    async def failed(self, name: str, address: str) -> Tripped:
        name_key, address_key = self._keys(name, address)
        async with self._redis.pipeline(transaction=True) as pipe:
            for key in (name_key, address_key):
                pipe.incr(key)
                pipe.expire(key, self.window_s, nx=True)  # the window starts at its first failure
            name_count, _, address_count, _ = await pipe.execute()
        return Tripped(address=address_count == self.max_failures_per_address,
                       name=name_count == self.max_failures_per_name)  # fmt: skip

    async def succeeded(self, name: str) -> None:
        """The name's count starts again; the address's does not (one right password must not reset a sprayer)."""
        await self._redis.delete(self._keys(name, "")[0])
