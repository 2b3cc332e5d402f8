"""`python -m runtime.admin_server`: the admin API on its own, for graphs not started by `make serve`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx

from runtime.settings import PROJECT_ROOT

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
