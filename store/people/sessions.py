"""Dashboard sessions and the brakes on password guessing, in the store.

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

Wrong passwords are counted in fixed windows of `LOGIN_WINDOW_S`, twice (docs/dashboard.md, "Logging in"):
- per client address, any names: past `MAX_FAILURES_PER_ADDRESS` the address's logins are refused (429) until its
  window ends. This stops one address spraying a password over many names.
- per name, any addresses: past `MAX_FAILURES_PER_NAME` the name is locked, but only for addresses that have failed
  a login in their own current window. A guesser keeps the name locked for as long as it likes, yet only against
  addresses that guessed wrong: the real user from an address without failures (a fresh one) always gets in, and
  their own address, after a typo, waits at most `LOGIN_WINDOW_S` (its window ends, and it is fresh again).
An attempt is taken before its password is hashed (`LoginThrottle.take`, one Lua step that checks both brakes and
counts the attempt as wrong): simultaneous attempts cannot all pass a check made before any of them was counted, so a
burst from one address gets at most a limit's worth of hashes. A right password gives its attempt back (`succeeded`: the address's
count loses it, the name's starts again), and so does an attempt whose hash could not run (`give_back`).
The password form's current password is braked the same way, per user (`take_password_check`): past
`MAX_WRONG_CURRENT_PASSWORDS` wrong ones in a window, the form answers 429: a stolen session gets that many guesses
per window, not as many as it can send.
A name is counted under its SHA-256 (fixed width, so a counter costs the same whatever was typed) and only once it
passed the user-name rule (store/people/users.py valid_login_name), so nothing is stored for a malformed name.
Key schema: `store.redis_keys` (mod:session:{sha256}, mod:user-sessions:{name}, mod:login-failures:{sha256},
mod:login-failures-from:{addr}, mod:password-check-failures:{name}). Scripts: `store.people.lua`.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

from pydantic import BaseModel, ValidationError
from redis.asyncio import Redis

from store import redis_keys
from store.people import lua

SESSION_TTL_S = 8 * 3600  # a working day; then log in again
# A moderator with a few browsers and devices needs a handful; 20 leaves room for forgotten ones.
MAX_SESSIONS_PER_USER = 20
MAX_FAILURES_PER_NAME = 5
MAX_FAILURES_PER_ADDRESS = 20
MAX_WRONG_CURRENT_PASSWORDS = 5
LOGIN_WINDOW_S = 15 * 60


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


@dataclass(frozen=True)
class Tripped:
    """Which brakes a failed login engages (each once per window: the audit log records only these)."""

    address: bool = False
    name: bool = False


@dataclass(frozen=True)
class LoginAttempt:
    """A login attempt: refused when `retry_after_s` > 0 (`reason` says which brake holds), else taken, and counted
    as a wrong password until `LoginThrottle.succeeded` or `give_back`."""

    name: str
    address: str
    retry_after_s: int = 0
    reason: str = ""
    # The brakes this attempt engages if its password proves wrong.
    engages: Tripped = field(default_factory=Tripped)


BRAKES = {1: "address", 2: "name"}  # store/people/lua.py TAKE_LOGIN_ATTEMPT's answer


class LoginThrottle:
    """The brakes on password guessing: at login per address and per name, on the password form per user."""

    def __init__(
        self,
        redis: Redis,
        max_failures_per_name: int = MAX_FAILURES_PER_NAME,
        max_failures_per_address: int = MAX_FAILURES_PER_ADDRESS,
        window_s: int = LOGIN_WINDOW_S,
        max_wrong_current_passwords: int = MAX_WRONG_CURRENT_PASSWORDS,
    ):
        self.window_s = window_s
        self.max_failures_per_name, self.max_failures_per_address = max_failures_per_name, max_failures_per_address
        self.max_wrong_current_passwords = max_wrong_current_passwords
        self._take_login = redis.register_script(lua.TAKE_LOGIN_ATTEMPT)
        self._take_check = redis.register_script(lua.TAKE_PASSWORD_CHECK)
        self._give_back = redis.register_script(lua.GIVE_BACK_GUESSES)

    def _keys(self, name: str, address: str) -> list[str]:
        return [redis_keys.login_failures(redis_keys.secret_sha256_hex(name)), redis_keys.login_failures_from(address)]

    async def take(self, name: str, address: str) -> LoginAttempt:
        """May `address` try `name` now? If so the attempt is counted, before any hash, as a wrong password."""
        brake, retry_after_s, name_count, address_count = await self._take_login(
            keys=self._keys(name, address),
            args=[self.max_failures_per_name, self.max_failures_per_address, self.window_s],
        )
        if brake:
            return LoginAttempt(name, address, int(retry_after_s), BRAKES[int(brake)])
        engages = Tripped(address=int(address_count) == self.max_failures_per_address,
                          name=int(name_count) == self.max_failures_per_name)  # fmt: skip
        return LoginAttempt(name, address, engages=engages)

    async def succeeded(self, attempt: LoginAttempt) -> None:
        """The name's count starts again; the address's only loses this attempt (one right password must not reset
        a sprayer)."""
        await self._give_back(keys=self._keys(attempt.name, attempt.address), args=["all", "one"])

    async def give_back(self, attempt: LoginAttempt) -> None:
        """An attempt whose password was never checked: neither count keeps it."""
        await self._give_back(keys=self._keys(attempt.name, attempt.address), args=["one", "one"])

    async def take_password_check(self, user: str) -> int:
        """May `user` check their current password now? 0 when yes (counted as wrong until given back), else the
        seconds until they may."""
        keys = [redis_keys.password_check_failures(user)]
        return int(await self._take_check(keys=keys, args=[self.max_wrong_current_passwords, self.window_s]))

    async def give_back_password_check(self, user: str) -> None:
        """A current password that proved right, or was never checked."""
        await self._give_back(keys=[redis_keys.password_check_failures(user)], args=["one"])
