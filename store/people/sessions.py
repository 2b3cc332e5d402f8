"""Dashboard sessions, in the store.

A session is a random cookie value; the store keeps only its SHA-256 (as for API keys), with the user's name, id and
generation and the session's CSRF token (checked by dashboard/csrf.py). A user holds at most `MAX_SESSIONS_PER_USER`
live sessions: opening one past that ends the user's oldest (store/people/lua.py OPEN_SESSION, one step, so that
simultaneous logins never pass the cap). Each login opens one, so without the cap a stolen password could open
sessions without end, each a key for 8 hours.

Session expiry, every part of it:
- `SESSION_TTL_S` below (8 hours from login, not sliding): the store forgets the session then (the key's TTL, set by
  `SessionStore.create`), and the browser's cookie carries the same age (`set_session_cookie` in dashboard/auth.py).
- Logging out ends it at once (`SessionStore.end`, from `logout` in dashboard/routes_login.py).
- A 21st login of the same user ends the oldest of its 20 live sessions (`MAX_SESSIONS_PER_USER`).
- Every request re-reads the user and drops the session unless the user still exists with the same id and
  generation (`signed_in` in dashboard/auth.py): deleting a user (even re-created under the same name, as the
  documented password reset does) or changing its password or role ends every session opened before.

The brakes on password guessing (wrong passwords counted per address, per name and per user) live in
store/people/login_brake.py.
Key schema: `store.redis_keys` (mod:session:{sha256}, mod:user-sessions:{name}). Scripts: `store.people.lua`.
"""

from __future__ import annotations

import secrets
import time

from pydantic import BaseModel, ValidationError
from redis.asyncio import Redis

from store import redis_keys
from store.people import lua

SESSION_TTL_S = 8 * 3600  # a working day; then log in again
# A moderator with a few browsers and devices needs a handful; 20 leaves room for forgotten ones.
MAX_SESSIONS_PER_USER = 20


class Session(BaseModel):
    user: str
    user_id: str
    generation: int
    csrf_token: str


class SessionStore:
    def __init__(self, redis: Redis, ttl_s: int = SESSION_TTL_S, max_per_user: int = MAX_SESSIONS_PER_USER):
        self._redis, self.ttl_s, self.max_per_user = redis, ttl_s, max_per_user
        self._open = redis.register_script(lua.OPEN_SESSION)

    async def create(self, user: str, user_id: str, generation: int) -> tuple[str, Session]:
        """The cookie value (shown to the browser only) and the session it opens; past the user's cap, the user's
        oldest session ends."""
        token = secrets.token_urlsafe(32)
        session = Session(user=user, user_id=user_id, generation=generation, csrf_token=secrets.token_urlsafe(32))
        token_sha = redis_keys.secret_sha256_hex(token)
        await self._open(keys=[redis_keys.session(token_sha), redis_keys.user_sessions(user)],
                         args=[session.model_dump_json(), self.ttl_s, time.time(), self.max_per_user,
                               redis_keys.session(""), token_sha])  # fmt: skip
        return token, session

    async def get(self, token: str) -> Session | None:
        raw = await self._redis.get(redis_keys.session(redis_keys.secret_sha256_hex(token)))
        try:
            return Session.model_validate_json(raw) if raw is not None else None
        except ValidationError:  # a session stored before sessions held the user's id: log in again
            return None

    async def end(self, token: str) -> None:
        """Ends the session and takes it off its user's count."""
        token_sha = redis_keys.secret_sha256_hex(token)
        session = await self.get(token)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(redis_keys.session(token_sha))
            if session is not None:
                pipe.zrem(redis_keys.user_sessions(session.user), token_sha)
            await pipe.execute()
