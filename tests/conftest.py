"""Shared fixtures: one real store server (runtime.embedded_store) for the session, a clean database per test; and
the order of the session: the end-to-end tests last."""

from __future__ import annotations

import os

import pytest
import redis
import redis.asyncio

from runtime.embedded_store import EmbeddedStore


CASCADE_VARIABLE = "MODERATION_TEXT_CASCADE"
_cascade_note: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """`make test` sets up EmbeddingGemma for the default text cascade; where it is absent (`make test-fast` on a
    machine that never ran `make gemma`), the tests run the service as MODERATION_TEXT_CASCADE=false runs it, and
    the cascade's own tests skip, saying so."""
    from models import embeddinggemma

    if CASCADE_VARIABLE not in os.environ and not embeddinggemma.available():
        os.environ[CASCADE_VARIABLE] = "false"
        _cascade_note.append("EmbeddingGemma is not set up (`make gemma`): the text cascade is off in these tests, "
                             "and its own tests skip")


def pytest_report_header(config: pytest.Config) -> list[str]:
    return list(_cascade_note)


@pytest.hookimpl(trylast=True)  # after tests/e2e/conftest.py has marked its tests e2e, and after any deselection
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The e2e tests run last; of those, the ones that start a Ray cluster of their own (test_runner, test_autoscaling,
    test_two_nodes) run before the session's graph starts.

    The session's graph (tests/e2e/conftest.py) stays up from the first test that needs it to the end of the session,
    and idle it still takes about a sixth of a core: on 2 cores everything beside it ran slower, most of all the tests
    that start a whole cluster next to it (those three: 200 s next to it, 153 s alone). Nothing here depends on the
    order: each of these tests passes alone, and `make test-fast` runs the others without any graph."""

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("e2e") is None:
            return 0
        return 2 if "serve_graph" in getattr(item, "fixturenames", ()) else 1

    items[:] = sorted(items, key=rank)  # a stable sort: within each group, the order of collection


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
