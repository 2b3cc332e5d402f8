"""`LabelStore`: an account's kept labels (adaptation/labels.py), never its texts; key schema in `store.redis_keys`.

Two lists per account, each capped: the labels of its decided text items (flagged or audited, kept by the deciding
script: `store.labels.lua`) and the labels its backend reported (`POST /v1/feedback`, `comments:suggestscore`). A
flood of reports only turns over the reported list. Both expire `retention_s` after their newest label, and an
operator's reset erases them (with the fit: `CorrectionStore.erase`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from redis.asyncio import Redis

from adaptation.labels import Label, label_document, label_from_document
from store import redis_keys
from store.labels import lua

log = logging.getLogger("moderation.labels")


@dataclass(frozen=True)
class LabelRules:
    # The labels a refit reads: 10,000 decisions fit in about a second on one core, and hold ~16 MB of the store.
    labels_per_account: int = 10_000
    reported_per_account: int = 2_000
    retention_s: int = 365 * 24 * 3600


def decision_args(rules: LabelRules) -> list:
    """The arguments of KEEP_DECIDED_LABEL in the deciding script (store/labels/lua.py)."""
    return [redis_keys.LABELS_PREFIX, rules.labels_per_account, rules.retention_s, redis_keys.labels_due()]


class LabelStore:
    def __init__(self, redis: Redis, rules: LabelRules | None = None):
        self._redis, self.rules = redis, rules or LabelRules()
        self._add_reported = redis.register_script(lua.ADD_REPORTED_LABEL)

    async def add_reported(self, account: str, label: Label) -> None:
        if label.seen != "report":
            raise ValueError("only a reported label is added directly; a decision keeps its own")
        await self._add_reported(
            keys=[redis_keys.reported_labels(account), redis_keys.labels_due()],
            args=[json.dumps(label_document(label)), self.rules.reported_per_account, self.rules.retention_s,
                  account, repr(label.at)],
        )

    async def labels(self, account: str) -> list[Label]:
        """Every kept label of the account, decided ones first, each list newest first; a label that no longer
        reads (a record from another version) is skipped and logged."""
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.lrange(redis_keys.labels(account), 0, -1)
            pipe.lrange(redis_keys.reported_labels(account), 0, -1)
            decided, reported = await pipe.execute()
        out = []
        for entry in [*decided, *reported]:
            try:
                out.append(label_from_document(json.loads(entry)))
            except (ValueError, KeyError, TypeError):
                log.warning("skipped a label of %s that does not read", account)
        return out

    async def counts(self, account: str) -> dict[str, int]:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.llen(redis_keys.labels(account))
            pipe.llen(redis_keys.reported_labels(account))
            decided, reported = await pipe.execute()
        return {"decided": int(decided), "reported": int(reported)}

    async def erase(self, account: str) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(redis_keys.labels(account), redis_keys.reported_labels(account))
            pipe.zrem(redis_keys.labels_due(), account)
            await pipe.execute()

    async def due(self, older_than: float, limit: int = 20) -> list[str]:
        """Accounts whose first label since their last fit came before `older_than`."""
        return list(await self._redis.zrangebyscore(redis_keys.labels_due(), "-inf", older_than, start=0, num=limit))

    async def take_due(self, account: str) -> None:
        """Before a fit reads the labels: a label kept during the fit marks the account due again."""
        await self._redis.zrem(redis_keys.labels_due(), account)
