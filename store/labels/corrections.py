"""`CorrectionStore`: each account's last fit (moderation/site_adaptation.py writes it), as one JSON document: the
correction (adaptation/correction.py), whether it is live and why, its cross-validated figures and when it was
fitted. The ingress reads it (and keeps it a few seconds); a new fit replaces it in one write, so a request sees the
old correction or the new one, never a mix.
"""

from __future__ import annotations

import json

from redis.asyncio import Redis

from store import redis_keys


class CorrectionStore:
    def __init__(self, redis: Redis):
        self._redis = redis

    async def get(self, account: str) -> dict | None:
        raw = await self._redis.get(redis_keys.adaptation(account))
        return json.loads(raw) if raw else None

    async def put(self, account: str, document: dict) -> None:
        await self._redis.set(redis_keys.adaptation(account), json.dumps(document))

    async def erase(self, account: str) -> None:
        await self._redis.delete(redis_keys.adaptation(account))
