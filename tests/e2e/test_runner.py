"""`make serve`'s runner (python -m runtime.run): first-start key, clean stop, nothing lost on restart."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import httpx
import pytest
from support.processes import processes_of_session

from runtime.local_graph import free_port
from runtime.ray_cluster import DRAIN_PERIOD_VARIABLE
from runtime.settings import PROJECT_ROOT

pytestmark = pytest.mark.e2e
KEY_PATTERN = re.compile(r"^\s+(mod_\S+)$", re.M)


def start_runner(data_dir, port: int, log_path) -> subprocess.Popen:
    # Free ports for everything it listens on: the defaults (8000, 8080) may be taken on a shared machine.
    env = {**os.environ, "MODERATION_PORT": str(port), "MODERATION_DATA_DIR": str(data_dir),
           "MODERATION_METRICS_PORT": str(free_port()), "MODERATION_WEBHOOK_METRICS_PORT": str(free_port())}
    env.pop("REDIS_URL", None)
    env.pop(DRAIN_PERIOD_VARIABLE, None)  # `make serve`'s own drain, not the session graph's (e2e/conftest.py)
    log = open(log_path, "w")
    # A session of its own: the test stops exactly this runner and what it started.
    return subprocess.Popen(
        [sys.executable, "-m", "runtime.run"], cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_ready(process: subprocess.Popen, log_path, timeout_s: float = 300) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log_path.read_text()
        if "Moderation service ready" in text:
            return text
        if process.poll() is not None:
            raise AssertionError(f"runner exited early:\n{text[-3000:]}")
        time.sleep(0.5)
    raise TimeoutError(log_path.read_text()[-3000:])


def stop(process: subprocess.Popen, timeout_s: float = 60) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=timeout_s)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)


def test_first_start_prints_a_key_once_and_a_restart_keeps_everything(tmp_path):
    data_dir, port = tmp_path / "data", free_port()
    base_url = f"http://127.0.0.1:{port}"

    first = start_runner(data_dir, port, tmp_path / "first.log")
    try:
        log = wait_ready(first, tmp_path / "first.log")
        assert "webhook worker started" in log  # the delivery worker, a child of the runner (its session)
        (secret,) = KEY_PATTERN.findall(log)
        headers = {"Authorization": f"Bearer {secret}"}
        assert httpx.get(f"{base_url}/healthz", timeout=30).status_code == 200
        for _ in range(4):
            escalated = httpx.post(f"{base_url}/v1/report", headers=headers, files={"reference": (None, "r1")}, timeout=30).json()
        assert escalated["escalated"] is True
    finally:
        stopping = time.monotonic()
        code = stop(first)
    assert code == 0
    assert processes_of_session(first.pid) == []  # Serve, Ray and Redis all stopped
    # Serve stopped on its own, within the ingress's short drain: not cut off (which can end the runner before it
    # stops the store), and not Ray's 30 s default drain for outside load balancers.
    assert "did not finish" not in (tmp_path / "first.log").read_text()
    assert time.monotonic() - stopping < 25

    second = start_runner(data_dir, port, tmp_path / "second.log")
    try:
        log = wait_ready(second, tmp_path / "second.log")
        assert KEY_PATTERN.findall(log) == []  # the key is printed on first start only
        item = httpx.get(f"{base_url}/v1/review/{escalated['review_id']}", headers=headers, timeout=30)
        assert item.status_code == 200 and item.json()["reason"] == "report_threshold"
        report = httpx.post(f"{base_url}/v1/report", headers=headers, files={"reference": (None, "r1")}, timeout=30)
        assert report.json()["reports"] == 5
    finally:
        assert stop(second) == 0
