"""The embedded redis-server: loopback only, AOF persistence, clean start and stop."""

from __future__ import annotations

import socket

import pytest
import redis
import redis.asyncio

from policy.limits import Limits
from policy.review_queue import ReviewQueue
from runtime.embedded_store import EmbeddedStore


def test_start_returns_a_loopback_url_that_answers_ping(tmp_path):
    with EmbeddedStore(tmp_path / "data") as server:
        assert server.url.startswith("redis://127.0.0.1:")
        with redis.Redis.from_url(server.url) as client:
            assert client.ping()
            assert client.config_get("bind") == {"bind": "127.0.0.1"}


def test_it_persists_with_aof_in_its_data_dir(tmp_path):
    data_dir = tmp_path / "new" / "data"
    with EmbeddedStore(data_dir) as server:
        with redis.Redis.from_url(server.url, decode_responses=True) as client:
            assert client.config_get("appendonly") == {"appendonly": "yes"}
            assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
            assert client.config_get("dir") == {"dir": str(data_dir)}
    assert any(path.name.startswith("appendonly") for path in data_dir.iterdir())


def test_it_listens_on_the_port_it_is_given(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with EmbeddedStore(tmp_path, port=port) as server:
        assert server.url == f"redis://127.0.0.1:{port}/0"
        with redis.Redis.from_url(server.url) as client:
            assert client.ping()


def test_stop_ends_the_server(tmp_path):
    server = EmbeddedStore(tmp_path)
    server.start()
    server.stop()
    with redis.Redis.from_url(server.url, socket_connect_timeout=1, retry=None) as client:
        with pytest.raises(redis.ConnectionError):
            client.ping()


def test_start_fails_when_the_port_is_taken(tmp_path):
    with EmbeddedStore(tmp_path / "first") as first:
        with pytest.raises(RuntimeError):
            EmbeddedStore(tmp_path / "second", port=first.port).start(timeout_s=5)


@pytest.mark.anyio
@pytest.mark.parametrize("stop", ["shutdown", "sigkill"])
async def test_review_items_and_counters_survive_a_restart(tmp_path, stop):
    """Also after SIGKILL: Redis writes its AOF before it answers, so nothing acknowledged is lost
    (only a power loss can cost the last second: appendfsync everysec)."""
    server = EmbeddedStore(tmp_path / "data")
    server.start()
    client = redis.asyncio.Redis.from_url(server.url, decode_responses=True)
    item = await ReviewQueue(client).create(
        account="acme", reason="model_flagged", kind="text", reference="c-1",
        image_url=None, scores={"toxic": 0.93}, model_version="text-1",
    )  # fmt: skip
    report = await ReviewQueue(client).report(account="acme", reference="c-2", image_url=None, threshold=0)
    assert await Limits(client).take_quota("acme", 10)
    await client.aclose()
    if stop == "shutdown":
        server.stop()
    else:
        server._kill()  # no SHUTDOWN, no final flush

    server.start()
    client = redis.asyncio.Redis.from_url(server.url, decode_responses=True)
    try:
        queue = ReviewQueue(client)
        assert await queue.get(item.id) == item
        assert (await queue.get(report.review_id)).reference == "c-2"
        again = await queue.report(account="acme", reference="c-2", image_url=None, threshold=0)
        assert (again.reports, again.review_id) == (2, report.review_id)
        assert await Limits(client).quota_used("acme") == 1
        assert (await queue.create(
            account="acme", reason="model_flagged", kind="text", reference=None,
            image_url=None, scores={}, model_version=None,
        )).id == report.review_id + 1  # fmt: skip
    finally:
        await client.aclose()
        server.stop()

