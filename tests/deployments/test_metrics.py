"""The metrics the Ray shells record: bounded labels, every answer counted, never a failed request."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx
import pytest
from fastapi import FastAPI, HTTPException

from deployments import metrics
from policy.decisions import decide
from policy.types import Profile


class _Recorded:
    def __init__(self):
        self.seen = Counter()

    def inc(self, value=1.0, tags=None):
        self.seen[tuple(sorted(tags.items()))] += value

    def observe(self, value, tags=None):
        self.seen[tuple(sorted(tags.items()))] += 1

    def set(self, value, tags=None):  # a gauge: the last value
        self.seen[tuple(sorted((tags or {}).items()))] = value


@pytest.fixture
def recorded(monkeypatch):
    fake = metrics._Metrics(*(_Recorded() for _ in metrics._Metrics.__dataclass_fields__))
    monkeypatch.setattr(metrics, "metrics", lambda: fake)
    return fake


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/v1/review/{review_id}")
    async def review(review_id: int):
        return {"id": review_id}

    @app.post("/v1/moderate")
    async def moderate():
        raise HTTPException(status_code=402)

    @app.get("/boom")
    async def boom():
        raise RuntimeError("bug")

    app.add_middleware(metrics.RequestMetrics)
    return app


@pytest.mark.anyio
async def test_requests_are_counted_by_route_template_and_status(recorded):
    transport = httpx.ASGITransport(app=_app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        assert (await client.get("/v1/review/12")).status_code == 200
        assert (await client.get("/v1/review/13")).status_code == 200
        assert (await client.post("/v1/moderate")).status_code == 402
        assert (await client.get("/no/such/path/" + "x" * 500)).status_code == 404
        assert (await client.get("/boom")).status_code == 500
    assert dict(recorded.requests.seen) == {
        (("endpoint", "/v1/review/{review_id}"), ("method", "GET"), ("status", "200")): 2,
        (("endpoint", "/v1/moderate"), ("method", "POST"), ("status", "402")): 1,
        (("endpoint", "unmatched"), ("method", "GET"), ("status", "404")): 1,  # never the raw path
        (("endpoint", "/boom"), ("method", "GET"), ("status", "500")): 1,
    }
    assert dict(recorded.quota_refusals.seen) == {(("endpoint", "/v1/moderate"),): 1}


@pytest.mark.anyio
async def test_a_metric_that_fails_never_fails_the_request(monkeypatch):
    def broken():
        raise RuntimeError("metrics agent gone")

    monkeypatch.setattr(metrics, "metrics", broken)
    transport = httpx.ASGITransport(app=_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        assert (await client.get("/v1/review/1")).status_code == 200
    metrics.record_batch("text", 3, 0.01)
    metrics.record_call("text", "ok", 0.01)


def test_the_policy_records_each_enabled_categorys_own_verdict():
    profile = Profile(
        name="p",
        mode="review",
        categories={
            "nsfw": {"review": 0.4, "block": 0.8},
            "weapon": {"enabled": True, "review": 0.5, "block": 0.85},
            "violence": {"enabled": False, "review": 0.5, "block": 0.8},
            "toxic": {"review": 0.3, "block": 0.6},
        },
    )
    scores = {"nsfw": 0.9, "weapon": 0.6, "violence": 0.99}
    assert decide(scores, profile, "image").verdicts == {"nsfw": "block", "weapon": "review"}
    assert decide(scores, profile, "image", 0.95).verdicts == {"nsfw": "allow", "weapon": "allow"}


@pytest.mark.anyio
async def test_decisions_are_counted_together_once_a_second_on_an_event_loop(recorded, monkeypatch):
    monkeypatch.setattr(metrics, "DECISION_FLUSH_S", 0.05)
    for _ in range(3):
        metrics.record_decision("text", "review", "review", "enforce", {"toxic": "review", "threat": "allow"})
    assert not recorded.decisions.seen  # counted in process, not yet added
    await asyncio.sleep(0.2)
    decided = (("decision", "review"), ("kind", "text"), ("mode", "enforce"), ("recommended", "review"))
    assert recorded.decisions.seen == {decided: 3}
    assert recorded.category_verdicts.seen == {
        (("category", "toxic"), ("kind", "text"), ("mode", "enforce"), ("verdict", "review")): 3,
        (("category", "threat"), ("kind", "text"), ("mode", "enforce"), ("verdict", "allow")): 3,
    }


def test_without_an_event_loop_a_decision_is_counted_at_once(recorded):
    metrics.record_decision("image", "allow", "allow", "monitor", {"nsfw": "allow"})
    assert sum(recorded.decisions.seen.values()) == 1 and sum(recorded.category_verdicts.seen.values()) == 1


def test_the_store_memory_watch_is_three_gauges(recorded):
    from serve_app.health import StoreMemory

    metrics.record_store_memory(StoreMemory(used_bytes=900, limit_bytes=1000, alert_ratio=0.8))
    assert (recorded.store_used_memory.seen[()], recorded.store_memory_limit.seen[()]) == (900, 1000)
    assert recorded.store_memory_alert.seen[()] == 1
    metrics.record_store_memory(StoreMemory(used_bytes=700, limit_bytes=1000, alert_ratio=0.8))
    assert recorded.store_memory_alert.seen[()] == 0
