"""`python -m runtime.admin_server`: the admin API on its own, for graphs not started by `make serve`."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time

import httpx
import redis
import redis.asyncio

from runtime.settings import PROJECT_ROOT
from store import redis_keys
from store.review.queue import ReviewQueue

TOKEN = "standalone-admin-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_it_seeds_prints_the_first_key_once_and_serves_the_admin_api(redis_url):
    port = free_port()
    env = {**os.environ, "REDIS_URL": redis_url, "MODERATION_ADMIN_TOKEN": TOKEN, "MODERATION_ADMIN_PORT": str(port)}
    process = subprocess.Popen(
        [sys.executable, "-m", "runtime.admin_server"], cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        lines = []
        while not any("Admin API at" in line for line in lines):
            line = process.stdout.readline()
            assert line, f"exited early: {lines}"
            lines.append(line)
        assert any(line.strip().startswith("mod_") or "shown only this once" in line for line in lines)
        deadline = time.monotonic() + 10
        while True:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/admin/v1/plans/default",
                                   headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert answer.status_code == 200 and answer.json()["name"] == "default"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_it_refuses_to_start_without_a_store_or_a_token():
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MODERATION_ADMIN_TOKEN")}
    done = subprocess.run([sys.executable, "-m", "runtime.admin_server"], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "REDIS_URL" in done.stderr


def test_the_listener_decides_and_banks_by_the_settings_review_rules(redis_url):
    """Its decisions used the defaults whatever the settings said: a decided item kept 30 days past
    MODERATION_REVIEW_RETENTION_DAYS, and no bank cap but the default."""
    port = free_port()
    env = {**os.environ, "REDIS_URL": redis_url, "MODERATION_ADMIN_TOKEN": TOKEN, "MODERATION_ADMIN_PORT": str(port),
           "MODERATION_REVIEW_RETENTION_DAYS": "2", "MODERATION_HASH_BANK_MAX_PER_ACCOUNT": "1"}  # fmt: skip
    item = asyncio.run(_queued_item(redis_url))
    process = subprocess.Popen([sys.executable, "-m", "runtime.admin_server"], cwd=PROJECT_ROOT, env=env,
                               stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        admin = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {TOKEN}"})
        deadline = time.monotonic() + 30
        while True:
            try:
                decided = admin.post(f"/admin/v1/reviews/{item}/decision", json={"status": "approved"})
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert decided.status_code == 200, decided.text
        with redis.Redis.from_url(redis_url) as store:
            assert 0 < store.ttl(redis_keys.review_item(item)) <= 2 * 24 * 3600 + 1
        two = "".join(f"{n:064x}\n" for n in range(2))
        refused = admin.post("/admin/v1/accounts/acme/hash-bank/import", content=two)
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "hash_bank_full"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def _queued_item(redis_url: str) -> int:
    client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
    try:
        item = await ReviewQueue(client).create(account="acme", reason="model_flagged", kind="text", reference=None,
                                                image_url=None, scores={"toxic": 0.7}, model_version="m")  # fmt: skip
        return item.id
    finally:
        await client.aclose()
