"""The admin audit log against a real store: newest first, paged, bounded by count and by age, no extra fields."""

from __future__ import annotations

import pytest

from store import redis_keys
from store.people.audit_log import FIELDS, MAX_FIELD_CHARS, AuditLog, AuditRules

pytestmark = pytest.mark.anyio


async def _append(log: AuditLog, n: int, **fields) -> None:
    for i in range(n):
        await log.append(**{"actor": "admin-token", "source": "127.0.0.1", "action": "PUT /admin/v1/plans/{name}",
                            "target": f"plan-{i}", "status": 200, **fields})


async def test_pages_run_newest_first_and_end(redis_client):
    log = AuditLog(redis_client)
    await _append(log, 5)
    first = await log.page(limit=2)
    assert [e.target for e in first.entries] == ["plan-4", "plan-3"] and first.next_before
    second = await log.page(limit=2, before=first.next_before)
    third = await log.page(limit=2, before=second.next_before)
    assert [e.target for e in second.entries + third.entries] == ["plan-2", "plan-1", "plan-0"]
    assert third.next_before is None


async def test_the_log_keeps_its_newest_max_entries(redis_client):
    log = AuditLog(redis_client, AuditRules(max_entries=3, retention_s=3600))
    await _append(log, 10)
    assert await redis_client.xlen(redis_keys.admin_audit()) == 3
    assert [e.target for e in (await log.page()).entries] == ["plan-9", "plan-8", "plan-7"]


async def test_entries_older_than_retention_go_and_the_key_expires(redis_client):
    now = [1_700_000_000.0]
    log = AuditLog(redis_client, AuditRules(max_entries=100, retention_s=60), clock=lambda: now[0])
    await redis_client.xadd(redis_keys.admin_audit(), {"at": "1"}, id=f"{int((now[0] - 120) * 1000)}-0")
    await _append(log, 1)
    assert [e.target for e in (await log.page()).entries] == ["plan-0"]
    assert 0 < await redis_client.ttl(redis_keys.admin_audit()) <= 60


async def test_an_entry_holds_only_its_fields_cut_short(redis_client):
    log = AuditLog(redis_client)
    await _append(log, 1, target="x" * 10_000)
    [(_, stored)] = await redis_client.xrange(redis_keys.admin_audit())
    assert tuple(stored) == FIELDS and len(stored["target"]) == MAX_FIELD_CHARS
