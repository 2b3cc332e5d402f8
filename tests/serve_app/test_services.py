"""The service's store client: a burst past its connections waits for one instead of failing."""

from __future__ import annotations

import asyncio

import pytest

from serve_app import services as services_module
from serve_app.services import Services


@pytest.mark.anyio
async def test_a_burst_past_the_pools_connections_waits_for_one_and_every_command_is_answered(redis_url, monkeypatch):
    """redis-py's own pool refused a command at once past its connections ("Too many connections": a 503 for that
    request), so one tenant's burst cost others their answers. Here 8 connections serve 60 simultaneous commands."""
    monkeypatch.setattr(services_module, "STORE_CONNECTIONS", 8)
    services = Services.connect(redis_url, None)
    redis = services.redis

    async def slow_command(n: int) -> int:
        # BLPOP on an empty list holds its connection 50 ms without holding the server, so the burst really needs
        # more than 8 connections at once.
        await redis.blpop([f"mod:test:nothing:{n}"], timeout=0.05)
        return int(await redis.echo(str(n)))

    try:
        answers = await asyncio.gather(*(slow_command(n) for n in range(60)), return_exceptions=True)
    finally:
        await redis.aclose()
    assert answers == list(range(60))
