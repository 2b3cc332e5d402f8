"""The browser widget's state in Redis: each key's allowed page origins, widget tokens and the count of its live ones,
the verdict signing secret, redeemed verdicts and each key's widget use. The key schema is documented in
`store.redis_keys`.

A token's secret is never stored, only its SHA-256, as for API keys (store/keys/config.py). Nothing the widget sends
(the text, the photo) is stored here.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from redis.asyncio import Redis

from policy.types import ApiKey, Plan, Profile
from policy.widget_tokens import ADDRESS_BURST, ADDRESS_RATE_PER_S, DEFAULT_TOKEN_MINUTES
from store import redis_keys
from store.widget.lua import MINT_WIDGET_TOKEN, SET_WIDGET_ORIGINS, WIDGET_AUTHORIZE
from store.keys.quota import month_of

TOKEN_PREFIX = "wt_"
SIGNING_SECRET_BYTES = 32
# A month's use counter outlives its month by about as long as the quota's, so last month's stays readable.
USE_KEPT_S = 40 * 24 * 3600
USE_FIELDS = ("tokens", "checks", "refused_origin", "refused_spent", "refused_address")
# Live tokens one key may hold at once (MODERATION_WIDGET_LIVE_TOKENS_PER_KEY). A mint costs no quota unit, so without
# it a loop at the key's rate (20/s) of 24-hour tokens would keep 1.7 million live, more than the store holds. A live
# token takes ~360 bytes of store memory (its hash with its keyspace and expiry entries ~240, its entry in the key's
# live set ~120; measured on Valkey 9.1 at 5,000 tokens), so at most ~1.8 MB per key; 5,000 is a page view with a
# form every 0.36 s, around the clock, at the default 30-minute token.
LIVE_TOKENS_PER_KEY = 5_000
# A mint refused for the cap answers Retry-After when the key's oldest live token expires, at most a default token's
# life: a key that mints 24-hour tokens is not told to come back tomorrow for the one slot that frees first.
FULL_RETRY_AFTER_MAX_S = DEFAULT_TOKEN_MINUTES * 60


@dataclass(frozen=True)
class MintedToken:
    secret: str
    expires_at: float
    uses: int


class TooManyLiveTokens(Exception):
    """The key already holds its cap of live widget tokens; nothing was minted. `retry_after_s`: until its oldest live
    token expires (at most FULL_RETRY_AFTER_MAX_S)."""

    def __init__(self, cap: int, retry_after_s: float):
        super().__init__(f"The key holds {cap} live widget tokens, its limit; mint again once one expires.")
        self.cap, self.retry_after_s = cap, retry_after_s


@dataclass(frozen=True)
class WidgetAdmitted:
    """A widget check let through: the token's key with its plan and profile. `retry_after_s` > 0: the key's own
    rate refused it (no use spent)."""

    key: ApiKey
    plan: Plan
    profile: Profile
    retry_after_s: float
    uses_left: int


@dataclass(frozen=True)
class WidgetRefused:
    """Why a widget check was refused: `token` (unknown, expired, its key revoked), `origin`, `spent`,
    `unconfigured` (the key's plan or profile is gone) or `address` (this address's rate, `retry_after_s`)."""

    reason: str
    retry_after_s: float = 0.0

    @property
    def origin_allowed(self) -> bool:
        """Whether the page's origin is one the token's key allows: WIDGET_AUTHORIZE checks the origin right after
        the token and its key, so every later refusal comes from an allowed origin."""
        return self.reason not in ("token", "origin")


class WidgetStore:
    def __init__(self, redis: Redis, live_tokens_per_key: int = LIVE_TOKENS_PER_KEY):
        self._redis = redis
        self._live_tokens_per_key = live_tokens_per_key
        self._mint = redis.register_script(MINT_WIDGET_TOKEN)
        self._authorize = redis.register_script(WIDGET_AUTHORIZE)
        self._set_origins = redis.register_script(SET_WIDGET_ORIGINS)
        self._signing_secret: bytes | None = None

    async def set_origins(self, key_id: str, origins: list[str]) -> None:
        """The key's allowed page origins become exactly `origins` (already in normal form)."""
        await self._set_origins(
            keys=[redis_keys.widget_origins(key_id)],
            args=[redis_keys.WIDGET_ORIGIN_KEYS_PREFIX, key_id, *origins],
        )

    async def origins(self, key_id: str) -> list[str]:
        return sorted(await self._redis.smembers(redis_keys.widget_origins(key_id)))

    async def some_key_allows(self, origin: str) -> bool:
        """What a CORS preflight may know: a preflight carries no token, so it learns only whether any key allows
        the page's origin."""
        return await self._redis.exists(redis_keys.widget_origin_keys(origin)) == 1

    async def mint(self, key_id: str, *, minutes: int, uses: int, now: float | None = None) -> MintedToken:
        """A new token of the key, counted among its live ones in the same step (the MINT_WIDGET_TOKEN script of
        `store.widget.lua`); TooManyLiveTokens when the key holds its cap of them."""
        now = time.time() if now is None else now
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        secret_sha256 = redis_keys.secret_sha256_hex(secret)
        expires_at = now + minutes * 60
        outcome, *wait_s = await self._mint(
            keys=[redis_keys.widget_token(secret_sha256), redis_keys.widget_live_tokens(key_id),
                  redis_keys.widget_use(month_of(now)[0], key_id)],
            args=[key_id, uses, expires_at, now, self._live_tokens_per_key, secret_sha256, USE_KEPT_S],
        )  # fmt: skip
        if outcome != "ok":
            raise TooManyLiveTokens(self._live_tokens_per_key, min(float(wait_s[0]), FULL_RETRY_AFTER_MAX_S))
        return MintedToken(secret=secret, expires_at=expires_at, uses=uses)

    async def admit_check(self, secret: str, *, origin: str, address: str) -> WidgetAdmitted | WidgetRefused:
        """Takes a use of the token `secret` for a check from `origin` and `address`, in one step (the
        WIDGET_AUTHORIZE script of `store.widget.lua`)."""
        reply = await self._authorize(
            keys=[redis_keys.widget_token(redis_keys.secret_sha256_hex(secret))],
            args=[
                origin, address, redis_keys.API_KEY_PREFIX, redis_keys.PLAN_PREFIX, redis_keys.PROFILE_PREFIX,
                redis_keys.RATE_BUCKET_PREFIX, redis_keys.WIDGET_ORIGINS_PREFIX,
                redis_keys.WIDGET_ADDRESS_BUCKET_PREFIX, ADDRESS_RATE_PER_S, ADDRESS_BURST,
                redis_keys.widget_use_prefix(month_of(time.time())[0]), USE_KEPT_S,
            ],
        )  # fmt: skip
        outcome, *fields = reply
        if outcome != "ok":
            reason = "token" if outcome == "refused" else outcome
            return WidgetRefused(reason, float(fields[0]) if outcome == "address" else 0.0)
        key_json, plan_json, profile_json, wait_s, uses_left = fields
        return WidgetAdmitted(
            key=ApiKey.model_validate_json(key_json),
            plan=Plan.model_validate_json(plan_json),
            profile=Profile.model_validate_json(profile_json),
            retry_after_s=float(wait_s),
            uses_left=int(uses_left),
        )

    async def use(self, key_id: str, now: float | None = None) -> dict[str, int]:
        """The key's widget use this UTC month, every counter present (0 when none)."""
        month = month_of(time.time() if now is None else now)[0]
        counts = await self._redis.hgetall(redis_keys.widget_use(month, key_id))
        return {field: int(counts.get(field, 0)) for field in USE_FIELDS}

    async def signing_secret(self) -> bytes:
        """The verdict signing secret, made by whichever replica asks first (SET NX) and the same for all; kept in
        process once read, since it never changes."""
        if self._signing_secret is None:
            key = redis_keys.widget_signing_secret()
            await self._redis.set(key, secrets.token_hex(SIGNING_SECRET_BYTES), nx=True)
            self._signing_secret = bytes.fromhex(await self._redis.get(key))
        return self._signing_secret

    async def redeem(self, nonce: str, expires_at: float) -> bool:
        """True the first time a verdict's nonce is redeemed, False ever after (until the verdict expires, when it
        is refused as expired anyway)."""
        return bool(await self._redis.set(redis_keys.widget_redeemed(nonce), 1, nx=True, exat=int(expires_at) + 1))
