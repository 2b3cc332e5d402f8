"""Score suggestions sent to the Perspective-compatible `comments:suggestscore` (Coral sends its moderators'
decisions there): kept per account for the operator to read, never the comment's text.

Each suggestion is one entry per attribute: `{"attribute", "score", "client_token", "at"}`. An account's
list keeps its newest `MAX_PER_ACCOUNT` entries and expires `FEEDBACK_TTL_S` after its last suggestion,
like the report counters (key schema in `store.redis_keys`).
"""

from __future__ import annotations

import json
import time

from pydantic import BaseModel, Field
from redis.asyncio import Redis

from store import redis_keys

FEEDBACK_TTL_S = 30 * 24 * 3600
MAX_PER_ACCOUNT = 10_000


class Suggestion(BaseModel):
    attribute: str = Field(max_length=64)
    score: float | None = Field(default=None, ge=0, le=1)
    client_token: str | None = Field(default=None, max_length=256)
    at: float


class FeedbackStore:
    def __init__(self, redis: Redis, ttl_s: int = FEEDBACK_TTL_S, max_per_account: int = MAX_PER_ACCOUNT):
        self._redis, self.ttl_s, self.max_per_account = redis, ttl_s, max_per_account

    async def record(self, account: str, suggestions: list[Suggestion]) -> None:
        key = redis_keys.feedback(account)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.lpush(key, *(s.model_dump_json() for s in suggestions))
            pipe.ltrim(key, 0, self.max_per_account - 1)
            pipe.expire(key, self.ttl_s)
            await pipe.execute()

    async def list(self, account: str, limit: int = 100) -> list[Suggestion]:
        """The account's suggestions, newest first."""
        entries = await self._redis.lrange(redis_keys.feedback(account), 0, max(limit, 1) - 1)
        return [Suggestion.model_validate(json.loads(entry)) for entry in entries]


def suggestion(attribute: str, score: float | None, client_token: str | None, now: float | None = None) -> Suggestion:
    return Suggestion(attribute=attribute, score=score, client_token=client_token, at=time.time() if now is None else now)
