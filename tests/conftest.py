"""Shared fixtures: one real store server (runtime.embedded_store) for the session, a clean database per test."""

from __future__ import annotations

import pytest
import redis
import redis.asyncio

from runtime.embedded_store import EmbeddedStore


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    # Session scope so that fixtures of any scope may be async.
    return "asyncio"


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory):
    with EmbeddedStore(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: EmbeddedStore) -> str:
    """The session server's URL (the service's user), with its database emptied first so no test sees
    another's data. FLUSHDB is not the service's to run: the owner's URL does it."""
    with redis.Redis.from_url(redis_server.admin_url) as client:
        client.flushdb()
    return redis_server.url


@pytest.fixture
async def redis_client(redis_url: str):
    client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()
