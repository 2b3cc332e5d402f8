"""The dashboard's named accounts for people: moderators and operators, with scrypt password hashes.

Machines keep the admin token (admin/guard.py); people log in with a name and a password. A password is
stored only as a scrypt hash (hashlib's, a memory-hard KDF in the standard library, so no extra dependency), with
its own random salt and its cost parameters beside it, so the cost can be raised later without breaking old hashes.
A user has an `id` (random, new at every creation) and a `generation` (bumped at every password or role change);
a session holds both (store/people/sessions.py), so deleting and re-creating a name, or changing its password or role,
ends every session opened before. Every hash runs in the process's hash pool (store/people/hash_pool.py), which
bounds how many run at once. A moderator sees and decides only the items of the `accounts` an operator
assigned them (none: nothing); an operator sees every account.
Key schema: `store.redis_keys` (mod:user:{name}, mod:users).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict
from redis.asyncio import Redis
from redis.exceptions import WatchError

from policy.names import NAME_PATTERN
from store import redis_keys
from store.people.hash_pool import PASSWORD_HASHES, HashPool

Role = Literal["moderator", "operator"]
ROLES: tuple[Role, ...] = ("moderator", "operator")
MIN_PASSWORD_CHARS = 10
# scrypt is fed the whole password; past this it is a denial of service, not a password.
MAX_PASSWORD_CHARS = 1024
# A moderator's accounts are read on every request: a bound keeps that read (and the queue's merge) small.
MAX_ACCOUNTS_PER_USER = 100
MAX_ACCOUNT_CHARS = 200  # as an API key's account (admin/routes_keys.py KeyRequest)
# OWASP's scrypt floor (N=2^17, r=8, p=1): 128 MiB and about a tenth of a second per hash, which a login can afford
# and a guesser with a stolen store cannot multiply cheaply.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**17, 8, 1
SCRYPT_SALT_BYTES, SCRYPT_KEY_BYTES = 16, 32


class UserExists(Exception):
    """A user of this name exists already; nothing was changed."""


class InvalidPassword(ValueError):
    """A password shorter than MIN_PASSWORD_CHARS or longer than MAX_PASSWORD_CHARS."""


class InvalidAccounts(ValueError):
    """More than MAX_ACCOUNTS_PER_USER accounts, or an empty or over-long account name."""


class User(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    role: Role
    password_hash: str
    created_at: float
    # "" for a user stored before ids existed; any later creation gets a random one.
    id: str = ""
    generation: int = 0
    # The accounts whose review items a moderator sees and decides (an operator's are ignored: it sees all).
    accounts: list[str] = []
    # Moderator wellbeing: queue images are shown blurred and grey until clicked (each user's own setting).
    blur_images: bool = True


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def hash_password(password: str) -> str:
    """`scrypt$N$r$p$salt$hash`, salt and hash in base64."""
    check_password_rules(password)
    salt = secrets.token_bytes(SCRYPT_SALT_BYTES)
    digest = _scrypt(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt" or len(password) > MAX_PASSWORD_CHARS:
            return False
        computed = _scrypt(password, base64.b64decode(salt), int(n), int(r), int(p))
    except ValueError:
        return False
    return hmac.compare_digest(computed, base64.b64decode(digest))


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    memory = 128 * r * (n + p + 2)  # what OpenSSL needs; its default ceiling (32 MiB) is below N=2^17
    return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=memory, dklen=SCRYPT_KEY_BYTES)


def valid_login_name(name: str) -> bool:
    """Whether `name` could be a user's at all: checked before any hash or store write, so a malformed or huge
    name costs a regular expression and nothing else."""
    return len(name) <= 64 and re.fullmatch(NAME_PATTERN, name) is not None


def checked_accounts(accounts: list[str]) -> list[str]:
    """The accounts, trimmed, de-duplicated and sorted; raises InvalidAccounts."""
    cleaned = sorted({account.strip() for account in accounts})
    if len(cleaned) > MAX_ACCOUNTS_PER_USER:
        raise InvalidAccounts(f"A user has at most {MAX_ACCOUNTS_PER_USER} accounts.")
    if any(not account or len(account) > MAX_ACCOUNT_CHARS for account in cleaned):
        raise InvalidAccounts(f"An account name has 1 to {MAX_ACCOUNT_CHARS} characters.")
    return cleaned


def check_password_rules(password: str) -> None:
    if not MIN_PASSWORD_CHARS <= len(password) <= MAX_PASSWORD_CHARS:
        raise InvalidPassword(f"A password has {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters.")


class UserStore:
    def __init__(self, redis: Redis, hashes: HashPool = PASSWORD_HASHES):
        self._redis, self._hashes = redis, hashes

    async def create(
        self, name: str, role: Role, password: str, now: float | None = None, accounts: list[str] | None = None
    ) -> User:
        """Raises UserExists (nothing written), InvalidPassword or InvalidAccounts."""
        accounts = checked_accounts(accounts or [])
        password_hash = await self._hashes.run_in_turn(hash_password, password)
        user = User(name=name, role=role, password_hash=password_hash, created_at=time.time() if now is None else now,
                    id=secrets.token_urlsafe(16), accounts=accounts)  # fmt: skip
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(redis_keys.user(name), user.model_dump_json(), nx=True)
            pipe.sadd(redis_keys.users(), name)
            created, _ = await pipe.execute()
        if not created:
            raise UserExists(name)
        return user

    async def get(self, name: str) -> User | None:
        raw = await self._redis.get(redis_keys.user(name))
        return User.model_validate_json(raw) if raw is not None else None

    async def list(self) -> list[User]:
        names = sorted(await self._redis.smembers(redis_keys.users()))
        if not names:
            return []
        rows = await self._redis.mget([redis_keys.user(name) for name in names])
        return [User.model_validate_json(raw) for raw in rows if raw is not None]

    async def update(self, name: str, **changes) -> User | None:
        """Changes fields of a user that still exists (None when it does not): read and write in one optimistic
        transaction, retried if the user changed in between, so two changes never undo each other (a settings save
        cannot write back the role or generation an operator just changed)."""
        key = redis_keys.user(name)
        async with self._redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(key)
                    raw = await pipe.get(key)
                    if raw is None:
                        return None
                    user = User.model_validate_json(raw)
                    changed = user.model_copy(update={field: change(user) if callable(change) else change
                                                      for field, change in changes.items()})  # fmt: skip
                    pipe.multi()
                    pipe.set(key, changed.model_dump_json(), xx=True)
                    await pipe.execute()
                    return changed
                except WatchError:
                    continue

    async def set_password(self, name: str, password: str) -> User | None:
        """Raises InvalidPassword (nothing changed). A new generation: the user's sessions end."""
        password_hash = await self._hashes.run_in_turn(hash_password, password)
        return await self.update(name, password_hash=password_hash, generation=lambda user: user.generation + 1)

    async def assign(self, name: str, *, role: Role | None = None, accounts: list[str] | None = None) -> User | None:
        """Changes a user's role or accounts (None: unchanged); None when there is no such user. Raises
        InvalidAccounts. A changed role is a new generation (its sessions end); changed accounts take effect on the
        user's next request, since every request re-reads the user."""
        changes: dict = {}
        if accounts is not None:
            changes["accounts"] = checked_accounts(accounts)
        if role is not None:
            changes["generation"] = lambda user: user.generation + (role != user.role)
            changes["role"] = role
        return await self.update(name, **changes)

    async def delete(self, name: str) -> bool:
        """The user's sessions end with it: every request checks that its session's user still exists (and is the
        same user: a re-created name has a new id)."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(redis_keys.user(name))
            pipe.srem(redis_keys.users(), name)
            deleted, _ = await pipe.execute()
        return bool(deleted)

    async def authenticate(self, name: str, password: str) -> User | None:
        """The user when the password is theirs. An unknown name costs a hash too, so timing does not tell names.
        Raises HashesBusy (nothing checked) when the hash pool is full."""
        user = await self.get(name)
        stored = user.password_hash if user is not None else _DECOY_HASH
        matches = await self._hashes.run_or_refuse(verify_password, password, stored)
        return user if matches and user is not None else None


# A hash no password matches (its digest is not scrypt's output of anything we would compute for it): checked for
# unknown names so that a wrong name takes as long as a wrong password.
_DECOY_SALT, _DECOY_DIGEST = _b64(b"0" * SCRYPT_SALT_BYTES), _b64(b"1" * SCRYPT_KEY_BYTES)
_DECOY_HASH = f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_DECOY_SALT}${_DECOY_DIGEST}"
