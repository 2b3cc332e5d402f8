"""`make serve` checks its ports and its transport before it starts anything, and says what to change in one line."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from contextlib import closing

import pytest
from support.processes import processes_of_session

from moderation.model_messages import largest_text_message_bytes
from policy.types import MAX_TEXT_CHARS
from runtime.embedded_store import free_port
from runtime.preflight import (
    REPLICA_MESSAGE_CAP_VARIABLE, StartRefused, WantedPort, check_model_transport, check_ports, wanted_ports,
)
from runtime.settings import PROJECT_ROOT, Settings

ADMIN_TOKEN = "preflight-admin-token-0123456789abcdef"
# Each port `make serve` may listen on: its setting, and the address the check and the real listener bind.
PORT_SETTINGS = {
    "MODERATION_PORT": "127.0.0.1",
    "MODERATION_METRICS_PORT": "127.0.0.1",
    "MODERATION_ADMIN_PORT": "127.0.0.1",
    "MODERATION_WEBHOOK_METRICS_PORT": "127.0.0.1",
    "MODERATION_HAPROXY_STATS_PORT": "0.0.0.0",
    "MODERATION_HAPROXY_METRICS_PORT": "0.0.0.0",
}


def listening(host: str, port: int) -> socket.socket:
    holder = socket.socket()
    holder.bind((host, port))
    holder.listen()
    return holder


def free_ports_env() -> dict[str, str]:
    ports: set[int] = set()
    while len(ports) < len(PORT_SETTINGS):
        ports.add(unshared_free_port())
    return {name: str(port) for name, port in zip(sorted(PORT_SETTINGS), sorted(ports))} | \
        {"MODERATION_ADMIN_TOKEN": ADMIN_TOKEN}


def unshared_free_port() -> int:
    """A free port below the kernel's ephemeral range (32768 and up on Linux): `free_port()` draws from that range,
    where any process's outgoing connection may take the port between the pick and the service's check, and the
    service then rightly names a port the test did not hold (seen once in a clean-clone run)."""
    for port in random.sample(range(20000, 32000), 200):
        try:
            with closing(socket.socket()) as probe:
                probe.bind(("0.0.0.0", port))
            return port
        except OSError:
            continue
    return free_port()


def test_every_port_the_service_binds_is_checked(monkeypatch):
    for name, value in free_ports_env().items():
        monkeypatch.setenv(name, value)
    wanted = {want.setting: want for want in wanted_ports(Settings())}
    assert set(wanted) == set(PORT_SETTINGS)
    assert {setting: want.host for setting, want in wanted.items()} == PORT_SETTINGS


def test_a_port_in_use_is_refused_with_its_setting_named():
    port = free_port()
    with closing(listening("127.0.0.1", port)):
        with pytest.raises(StartRefused, match=f"port {port} on 127.0.0.1 for the admin API is already in use; "
                                               "set MODERATION_ADMIN_PORT to a free port"):
            check_ports([WantedPort("127.0.0.1", port, "the admin API", "MODERATION_ADMIN_PORT")])
    check_ports([WantedPort("127.0.0.1", port, "the admin API", "MODERATION_ADMIN_PORT")])  # free again: no refusal


def test_a_port_wanted_twice_is_refused():
    port = free_port()
    twice = [WantedPort("127.0.0.1", port, "the public API", "MODERATION_PORT"),
             WantedPort("127.0.0.1", port, "the admin API", "MODERATION_ADMIN_PORT")]
    with pytest.raises(StartRefused, match="wanted by both the public API .MODERATION_PORT. and the admin API"):
        check_ports(twice)


def test_a_transport_cap_below_the_largest_text_request_is_refused():
    needed = largest_text_message_bytes(MAX_TEXT_CHARS)
    check_model_transport({})  # Ray's default cap carries it
    check_model_transport({REPLICA_MESSAGE_CAP_VARIABLE: str(needed)})
    with pytest.raises(StartRefused, match=REPLICA_MESSAGE_CAP_VARIABLE):
        check_model_transport({REPLICA_MESSAGE_CAP_VARIABLE: str(needed - 1)})
    with pytest.raises(StartRefused, match="not a number"):
        check_model_transport({REPLICA_MESSAGE_CAP_VARIABLE: "4M"})


def run_service(tmp_path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`make serve`'s runner in a session of its own; it must give up at once, so a short timeout."""
    environment = {**os.environ, **env, "MODERATION_DATA_DIR": str(tmp_path / "data")}
    environment.pop("REDIS_URL", None)
    process = subprocess.Popen([sys.executable, "-m", "runtime.run"], cwd=PROJECT_ROOT, env=environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 9)
    assert processes_of_session(process.pid) == []  # nothing it started is left running
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.mark.parametrize("taken", sorted(PORT_SETTINGS))
def test_make_serve_stops_in_one_line_when_a_port_is_taken(tmp_path, taken):
    env = free_ports_env()
    port = int(env[taken])
    with closing(listening("127.0.0.1", port)):
        result = run_service(tmp_path, env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"Not starting: port {port} ") and f"set {taken} to a free port" in lines[0]
    assert not (tmp_path / "data" / "redis").exists()  # the embedded store was never started


def test_make_serve_stops_in_one_line_when_the_transport_is_too_small(tmp_path):
    result = run_service(tmp_path, free_ports_env() | {REPLICA_MESSAGE_CAP_VARIABLE: str(1024 * 1024)})
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"Not starting: {REPLICA_MESSAGE_CAP_VARIABLE}=1048576 is below")


def test_the_text_cascade_without_embeddinggemma_refuses_to_start_and_names_both_ways_out():
    from runtime.preflight import check_text_cascade

    with pytest.raises(StartRefused, match=r"make gemma.*MODERATION_TEXT_CASCADE=false"):
        check_text_cascade(Settings(text_cascade=True), gemma_ready=False)
    check_text_cascade(Settings(text_cascade=True), gemma_ready=True)
    check_text_cascade(Settings(text_cascade=False), gemma_ready=False)
