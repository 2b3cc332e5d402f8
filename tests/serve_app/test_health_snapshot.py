"""/healthz is cheap and true (serve_app/health.py): it answers a snapshot refreshed in the background, never a
check per call, and says 503 when the store refuses writes (full or gone) or a model deployment does not answer.
Against a real store; the model deployments are the stub backends."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
import redis
import redis.asyncio
from fastapi.testclient import TestClient
from support.api import StubBackends, assert_error, public_and_admin

from store import redis_keys
from runtime.embedded_store import EmbeddedStore
from serve_app.health import HealthMonitor, HealthRules, StoreMemory
from serve_app.services import Services


class CountingBackends(StubBackends):
    """Counts the health check's calls to the deployments."""

    version_calls: int = 0

    async def model_versions(self) -> dict[str, str]:
        self.version_calls += 1
        return await super().model_versions()


def _client(url: str, backends: StubBackends, rules: HealthRules | None = None) -> tuple[TestClient, Services]:
    services = Services.connect(url, backends, inference_timeout_s=2, health_rules=rules)
    return TestClient(public_and_admin(services), raise_server_exceptions=False), services


def test_many_healthz_calls_cost_one_check(redis_url):
    backends = CountingBackends()
    client, _ = _client(redis_url, backends, HealthRules(interval_s=30))
    with client:
        assert [client.get("/healthz").status_code for _ in range(50)] == [200] * 50
    assert backends.version_calls == 1


@pytest.mark.anyio
async def test_concurrent_calls_with_no_snapshot_share_one_check(redis_client):
    backends = CountingBackends()
    monitor = HealthMonitor(redis_client, backends, HealthRules(interval_s=30))
    snapshots = await asyncio.gather(*(monitor.current() for _ in range(100)))
    assert backends.version_calls == 1 and len({id(s) for s in snapshots}) == 1


@pytest.mark.anyio
async def test_the_background_loop_keeps_the_snapshot_fresh_and_calls_only_read_it(redis_client):
    backends = CountingBackends()
    monitor = HealthMonitor(redis_client, backends, HealthRules(interval_s=0.2))
    monitor.start()
    try:
        await asyncio.sleep(0.1)
        first = await monitor.current()
        assert first.store_error is None and first.models == {"image.nsfw": "stub-1", "text.toxic": "stub-text-1"}
        checks = backends.version_calls
        await asyncio.gather(*(monitor.current() for _ in range(200)))
        assert backends.version_calls == checks  # calls read the snapshot
        backends.failing = True
        await asyncio.sleep(0.6)  # a model goes down: the loop sees it within an interval or two
        assert (await monitor.current()).models is None
        assert backends.version_calls > checks
    finally:
        await monitor.stop()


@pytest.mark.anyio
async def test_the_probe_is_one_expiring_key_per_replica(redis_client):
    monitor = HealthMonitor(redis_client, StubBackends())
    for _ in range(3):
        await monitor._check()
    keys = [key async for key in redis_client.scan_iter(redis_keys.health_probe("*"))]
    assert len(keys) == 1 and 0 < await redis_client.pttl(keys[0]) <= 30_000


def test_healthz_is_503_store_unavailable_naming_a_full_store_and_200_again_after(tmp_path, caplog):
    """The answer says why (it said "full, read-only or unreachable" whatever the cause), and the change is logged
    once each way."""
    with EmbeddedStore(tmp_path / "store") as store:
        client, _ = _client(store.url, StubBackends(), HealthRules(interval_s=0.01))
        logs = caplog.at_level(logging.INFO, "moderation.health")
        with client, redis.Redis.from_url(store.admin_url) as owner, logs:
            assert client.get("/healthz").status_code == 200
            owner.config_set("maxmemory", owner.info("memory")["used_memory"] // 2)  # full: writes refused
            time.sleep(0.05)  # past the snapshot's interval
            try:
                response = client.get("/healthz")
                client.get("/healthz")
                assert_error(response, 503, "store_unavailable")
                assert int(response.headers["retry-after"]) >= 1
                assert response.json()["error"]["message"].startswith("The store is full: its used memory reached")
            finally:
                owner.config_set("maxmemory", 512 * 1024 * 1024)
            time.sleep(0.05)
            assert client.get("/healthz").status_code == 200
    changes = [r.getMessage() for r in caplog.records if "the store" in r.getMessage()]
    assert changes == [f"the store refuses writes: {response.json()['error']['message']}", "the store takes writes again"]


def test_healthz_is_503_store_unavailable_naming_a_store_that_is_gone(tmp_path):
    with EmbeddedStore(tmp_path / "store") as store:
        client, _ = _client(store.url, StubBackends(), HealthRules(interval_s=0.01, timeout_s=2))
        with client:
            assert client.get("/healthz").status_code == 200
            store.stop()
            time.sleep(0.05)
            response = client.get("/healthz")
            assert_error(response, 503, "store_unavailable")
            assert response.json()["error"]["message"] == "The store does not answer (down or unreachable)."


@pytest.mark.anyio
async def test_the_memory_watch_reports_used_memory_and_alerts_past_its_threshold(redis_client, caplog):
    seen: list[StoreMemory] = []
    monitor = HealthMonitor(redis_client, StubBackends(), HealthRules(memory_limit_bytes=100 * 1024 * 1024,
                                                                      memory_alert_ratio=0.5), seen.append)
    await monitor._check()
    assert seen[-1].used_bytes > 0 and seen[-1].limit_bytes == 100 * 1024 * 1024 and seen[-1].alert is False
    monitor.rules = HealthRules(memory_limit_bytes=seen[-1].used_bytes, memory_alert_ratio=0.5)
    with caplog.at_level(logging.WARNING, logger="moderation.health"):
        await monitor._check()
        await monitor._check()
    assert seen[-1].alert is True
    assert len([r for r in caplog.records if "alert" in r.getMessage() or "past" in r.getMessage()]) == 1


def test_health_rules_refuse_nonsense():
    for bad in ({"interval_s": 0}, {"timeout_s": -1}, {"memory_limit_bytes": 0}, {"memory_alert_ratio": 1.5}):
        with pytest.raises(ValueError):
            HealthRules(**bad)
