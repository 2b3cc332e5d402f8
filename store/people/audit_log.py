"""The admin audit log: who did what to which thing, when, and how it ended. Never a secret.

One Redis stream (`store.redis_keys.admin_audit`), appended to by the admin listener (admin.audit_middleware)
for every admin request that changes something and every refused token. An entry holds only these fields:

    at      unix time (float) the request was answered
    actor   who: "admin-token" when the token was right, "unauthenticated" when it was not
    source  the client address the request came from
    action  method and route template, e.g. "POST /admin/v1/keys" (never the concrete URL with its query)
    target  what it acted on: the plan, profile, key id, account or review item named by the route ("" if none)
    status  the HTTP status answered
    account the account whose review item was decided ("" otherwise): what a moderator scoped to accounts may see

Nothing from the request's body, headers or query is taken, so the admin token, a new key's secret (shown once in
the answer to POST /keys) and whatever a script sent never reach the log. A value the route put in its path is
cut to `MAX_FIELD_CHARS`.

Bounded and durable: the stream keeps its newest `max_entries` (exact trim: one old entry out per new one), drops entries
older than `retention_s` at each append, and the key itself expires `retention_s` after the last append. It lives in
the store, so the embedded store's AOF (fsync on every write) keeps it across restarts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel
from redis.asyncio import Redis

from store import redis_keys

DAY_S = 24 * 3600
MAX_FIELD_CHARS = 256
FIELDS = ("at", "actor", "source", "action", "target", "status", "account")
# The most entries one filtered page reads (a moderator's: only their accounts' and their own): a bounded walk.
MAX_SCANNED = 5_000


@dataclass(frozen=True)
class AuditRules:
    max_entries: int = 100_000
    retention_s: int = 365 * DAY_S


class AuditEntry(BaseModel):
    id: str  # the stream id: the cursor to page on
    at: float
    actor: str
    source: str
    action: str
    target: str
    status: int
    account: str = ""


class AuditPage(BaseModel):
    entries: list[AuditEntry]
    next_before: str | None  # pass as `before` for the next (older) page; None when there is none


def entry_fields(
    *, at: float, actor: str, source: str, action: str, target: str, status: int, account: str = ""
) -> dict[str, str]:
    """The stored fields of one entry: exactly FIELDS, each a short string."""
    values = {"at": f"{at:.3f}", "actor": actor, "source": source, "action": action, "target": target,
              "status": str(int(status)), "account": account}  # fmt: skip
    return {name: str(value)[:MAX_FIELD_CHARS] for name, value in values.items()}


def parse_entry(entry_id: str, fields: dict[str, str]) -> AuditEntry:
    return AuditEntry(
        id=entry_id, at=float(fields.get("at", 0)), actor=fields.get("actor", ""), source=fields.get("source", ""),
        action=fields.get("action", ""), target=fields.get("target", ""), status=int(fields.get("status", 0)),
        account=fields.get("account", ""),
    )  # fmt: skip


def min_id(now: float, retention_s: int) -> str:
    """The oldest stream id still within retention (stream ids start with unix milliseconds)."""
    return str(max(0, int((now - retention_s) * 1000)))


class AuditLog:
    def __init__(self, redis: Redis, rules: AuditRules | None = None, clock=time.time):
        self._redis, self.rules, self._clock = redis, rules or AuditRules(), clock

    async def append(
        self, *, actor: str, source: str, action: str, target: str, status: int, account: str = ""
    ) -> None:
        now = self._clock()
        key = redis_keys.admin_audit()
        fields = entry_fields(at=now, actor=actor, source=source, action=action, target=target, status=status,
                              account=account)  # fmt: skip
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.xadd(key, fields, maxlen=self.rules.max_entries, approximate=False)
            pipe.xtrim(key, minid=min_id(now, self.rules.retention_s), approximate=False)
            pipe.expire(key, self.rules.retention_s)
            await pipe.execute()

    async def page(
        self, *, limit: int = 100, before: str | None = None, visible: Callable[[AuditEntry], bool] | None = None
    ) -> AuditPage:
        """Newest first; `before`: an entry id, to read the entries older than it. With `visible`, only the entries
        it accepts, reading at most MAX_SCANNED: `next_before` then goes on from the last entry read."""
        if visible is None:
            upper = f"({before}" if before else "+"
            rows = await self._redis.xrevrange(redis_keys.admin_audit(), max=upper, min="-", count=limit + 1)
            entries = [parse_entry(entry_id, fields) for entry_id, fields in rows[:limit]]
            more = len(rows) > limit
            return AuditPage(entries=entries, next_before=entries[-1].id if more and entries else None)
        found: list[AuditEntry] = []
        scanned, cursor = 0, before
        while len(found) < limit and scanned < MAX_SCANNED:
            page = await self.page(limit=min(limit * 5, MAX_SCANNED - scanned), before=cursor)
            scanned += len(page.entries)
            cursor = page.next_before
            found += [entry for entry in page.entries if visible(entry)]
            if cursor is None:
                break
        return AuditPage(entries=found[:limit], next_before=cursor if len(found) <= limit else found[limit - 1].id)
