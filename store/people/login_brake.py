"""The login brake: the brakes on password guessing, at login per client address and per name, and on the password
form's current password per user. Its home: every part is named here.

- Here: the limits (`MAX_FAILURES_PER_ADDRESS`, `MAX_FAILURES_PER_NAME`, `MAX_WRONG_CURRENT_PASSWORDS`, each per
  window of `LOGIN_WINDOW_S`) and `LoginBrake`: `take` an attempt, `succeeded`, `give_back`, `take_password_check`,
  `give_back_password_check`.
- Its steps, one Lua script each: store/people/lua.py `TAKE_LOGIN_ATTEMPT`, `TAKE_PASSWORD_CHECK`,
  `GIVE_BACK_GUESSES`; its counters: store/redis_keys.py `login_failures`, `login_failures_from`,
  `password_check_failures`.
- Before it: the user-name rule (store/people/users.py `valid_login_name`); after it, the bound on password hashes
  running at once (store/people/hash_pool.py `HashesBusy`: the attempt is given back).
- Its users: the login page (dashboard/routes_login.py `login`, which counts the peer by `client_address` and answers
  `BRAKE_MESSAGES`; `_failed` puts a brake that engages in the audit log), the password form
  (dashboard/routes_people.py `_check_current_password`), over the dashboard's stores (dashboard/stores.py
  `DashboardStores.login_brake`).

Wrong passwords are counted in fixed windows of `LOGIN_WINDOW_S`, twice (docs/dashboard.md, "Logging in"):
- per client address, any names: past `MAX_FAILURES_PER_ADDRESS` the address's logins are refused (429) until its
  window ends. This stops one address spraying a password over many names.
- per name, any addresses: past `MAX_FAILURES_PER_NAME` the name is locked, but only for addresses that have failed
  a login in their own current window. A guesser keeps the name locked for as long as it likes, yet only against
  addresses that guessed wrong: the real user from an address without failures (a fresh one) always gets in, and
  their own address, after a typo, waits at most `LOGIN_WINDOW_S` (its window ends, and it is fresh again).
An attempt is taken before its password is hashed (`LoginBrake.take`, one Lua step that checks both brakes and
counts the attempt as wrong): simultaneous attempts cannot all pass a check made before any of them was counted, so a
burst from one address gets at most a limit's worth of hashes. A right password gives its attempt back
(`succeeded`: the address's count loses it, the name's starts again), and so does an attempt whose hash could not
run (`give_back`).
The password form's current password is braked the same way, per user (`take_password_check`): past
`MAX_WRONG_CURRENT_PASSWORDS` wrong ones in a window, the form answers 429: a stolen session gets that many guesses
per window, not as many as it can send.
A name is counted under its SHA-256 (fixed width, so a counter costs the same whatever was typed) and only once it
passed the user-name rule (store/people/users.py valid_login_name), so nothing is stored for a malformed name.
Key schema: `store.redis_keys` (mod:login-failures:{sha256}, mod:login-failures-from:{addr},
mod:password-check-failures:{name}).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from redis.asyncio import Redis

from store import redis_keys
from store.people import lua

MAX_FAILURES_PER_NAME = 5
MAX_FAILURES_PER_ADDRESS = 20
MAX_WRONG_CURRENT_PASSWORDS = 5
LOGIN_WINDOW_S = 15 * 60


@dataclass(frozen=True)
class Tripped:
    """Which brakes a failed login engages (each once per window: the audit log records only these)."""

    address: bool = False
    name: bool = False


@dataclass(frozen=True)
class LoginAttempt:
    """A login attempt: refused when `retry_after_s` > 0 (`reason` says which brake holds), else taken, and counted
    as a wrong password until `LoginBrake.succeeded` or `give_back`."""

    name: str
    address: str
    retry_after_s: int = 0
    reason: str = ""
    # The brakes this attempt engages if its password proves wrong.
    engages: Tripped = field(default_factory=Tripped)


BRAKES = {1: "address", 2: "name"}  # store/people/lua.py TAKE_LOGIN_ATTEMPT's answer


class LoginBrake:
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
