"""The store supervisor with the real embedded store and a real client: a SIGKILLed valkey-server is started again
on the same port with its data, the client carries on by itself; a failed restart is retried; a stop is a stop."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time

import pytest
from support.quota import took
import redis
import redis.asyncio

from store.review.queue import ReviewQueue
from runtime.embedded_store import LOOPBACK, EmbeddedStore
from runtime.store_supervisor import StoreSupervisor

BACK_WITHIN_S = 10


def _until(condition, within_s: float = BACK_WITHIN_S) -> float:
    """Seconds until `condition()` held; fails past `within_s`."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < within_s, "not within the bound"
        time.sleep(0.05)
    return time.monotonic() - start


def _answers(url: str) -> bool:
    try:
        with redis.Redis.from_url(url, socket_timeout=1) as client:
            return client.ping()
    except redis.RedisError:
        return False


@pytest.mark.anyio
async def test_a_sigkilled_store_is_restarted_with_its_data_and_the_same_client_carries_on(tmp_path):
    store = EmbeddedStore(tmp_path / "data")
    url = store.start()
    client = redis.asyncio.Redis.from_url(url, decode_responses=True)  # one client, never rebuilt
    try:
        with StoreSupervisor(store, first_backoff_s=0.1) as supervisor:
            item = await ReviewQueue(client).create(
                account="acme", reason="model_flagged", kind="text", reference="before-the-kill",
                image_url=None, scores={"toxic": 0.93}, model_version="text-1",
            )  # fmt: skip
            killed_pid = store.pid
            os.kill(killed_pid, signal.SIGKILL)  # no SHUTDOWN, no final flush: what an OOM kill or a crash does
            _until(lambda: supervisor.restarts == 1 and _answers(url))
            assert store.pid != killed_pid and store.url == url
            deadline = time.monotonic() + BACK_WITHIN_S
            while True:  # the first command on a dead connection may fail; redis-py reconnects on the next
                try:
                    assert await ReviewQueue(client).get(item.id) == item
                    break
                except redis.ConnectionError:
                    assert time.monotonic() < deadline
    finally:
        await client.aclose()
        store.stop()


def test_a_restart_that_fails_is_retried_until_it_works(tmp_path, caplog):
    store = EmbeddedStore(tmp_path / "data")
    url = store.start()
    os.kill(store.pid, signal.SIGKILL)
    _until(lambda: not _answers(url))
    blocker = socket.socket()
    blocker.bind((LOOPBACK, store.port))  # the port taken: valkey-server cannot start again
    blocker.listen()
    try:
        with StoreSupervisor(store, first_backoff_s=0.1, max_backoff_s=0.5):
            time.sleep(1.5)
            assert not _answers(url) and "did not start again" in caplog.text
            blocker.close()
            _until(lambda: _answers(url))
    finally:
        blocker.close()
        store.stop()


def test_a_store_stopped_on_purpose_stays_stopped(tmp_path):
    store = EmbeddedStore(tmp_path / "data")
    url = store.start()
    with StoreSupervisor(store, poll_s=0.05) as supervisor:
        store.stop()
        time.sleep(0.5)
        assert store.pid is None and not _answers(url) and supervisor.restarts == 0


def test_the_backoff_doubles_up_to_its_cap():
    supervisor = StoreSupervisor(EmbeddedStore.__new__(EmbeddedStore), first_backoff_s=0.5, max_backoff_s=10)
    assert [supervisor._backoff(n) for n in range(8)] == [0, 0.5, 1, 2, 4, 8, 10, 10]


class CrashLoopingStore:
    """A unit-test stand-in: starts fine, and is dead again at once."""

    pid, log_path = 1, "valkey.log"

    def __init__(self):
        self.starts = 0

    def died(self) -> bool:
        return True

    def restart_if_died(self) -> bool:
        self.starts += 1
        return True


def test_a_crash_loop_is_backed_off_not_restarted_every_poll():
    store = CrashLoopingStore()
    with StoreSupervisor(store, poll_s=0.01, first_backoff_s=0.2, max_backoff_s=0.4):
        time.sleep(2)
    # Every poll would be about 200 starts; with the backoff (0, 0.2, 0.4, 0.4, ...) it is about 6.
    assert 3 <= store.starts <= 10, store.starts


@pytest.mark.anyio
async def test_the_services_client_carries_every_pooled_connection_over_a_restart_without_a_failed_command(tmp_path):
    # Before RECONNECT_ONCE_BROKEN, each pooled connection the restart broke failed its next command (a 503 each).
    from serve_app.services import Services

    store = EmbeddedStore(tmp_path / "data")
    store.start()
    services = Services.connect(store.url_without_password, None, redis_password=store.password_path.read_text().strip())
    limits = services.quota
    try:
        with StoreSupervisor(store, first_backoff_s=0.1) as supervisor:
            await asyncio.gather(*(took(limits, f"acct-{n}", 10) for n in range(20)))  # 20 pooled connections
            os.kill(store.pid, signal.SIGKILL)
            _until(lambda: supervisor.restarts == 1 and _answers(store.url))
            taken = await asyncio.gather(*(took(limits, f"acct-{n}", 10) for n in range(20)))
            assert taken == [True] * 20
            assert [await limits.quota_used(f"acct-{n}") for n in range(20)] == [2] * 20  # each ran once
    finally:
        store.stop()
