"""Ray is locked: the e2e graph's cluster binds loopback, needs its token, keeps the token 0600, and its logs
hold no API key, admin token or store password; its processes' environments hold neither the admin token nor the
store URL; HAProxy's sockets and config, and Ray's own session files, are in private 0700 directories, none under
/tmp/haproxy-serve or /tmp/ray."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray


JOIN_BOUND_S = 60  # a refused driver must give up within this
# A driver tries to reach the GCS once a second, 20 times by default (Ray's NUM_REDIS_GET_RETRIES): a wrong token took
# 20 s of identical refusals (each logged `Unauthenticated ... InvalidAuthToken`). Three tries show the refusal as well;
# a driver the GCS accepted would join at its first (the control with the token joins in under a second).
REFUSED_DRIVER_TRIES = "3"
JOIN = """
import sys, ray
try:
    ray.init(address=sys.argv[1], namespace="probe", log_to_driver=False)
except Exception as exc:
    print("REFUSED", type(exc).__name__, str(exc)[:300])
    sys.exit(3)
print("JOINED", ray.cluster_resources().get("CPU"))
ray.shutdown()
"""


def _gcs_address() -> str:
    assert ray.is_initialized(), "the e2e graph's driver is this process"
    return ray.get_runtime_context().gcs_address


def _driver(address: str, tmp_path: Path, **auth: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    # A HOME of its own, so no token lying in ~/.ray can be picked up by accident.
    # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: the driver keeps 127.0.0.1 as its node address, as the head does
    # (runtime/ray_cluster.py); without it, it would look for a raylet on the machine's address and wait.
    env.update(HOME=str(tmp_path), RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token",
               RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", **auth)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", JOIN, address], env=env, capture_output=True, text=True, timeout=JOIN_BOUND_S + 30
    )
    return done, time.monotonic() - started


def _listening_hosts(port: int) -> set[str]:
    """The local addresses of the IPv4 sockets listening on `port` (from /proc/net/tcp)."""
    hosts = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, _, hex_port = local.partition(":")
        if state == "0A" and int(hex_port, 16) == port:
            hosts.add(".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return hosts


def test_the_head_binds_loopback(serve_graph):
    host, _, port = _gcs_address().rpartition(":")
    assert _listening_hosts(int(port)) <= {"127.0.0.1"}, _listening_hosts(int(port))
    assert host == "127.0.0.1", host


def test_the_token_file_is_0600(serve_graph):
    token = Path(serve_graph["workdir"]) / "ray" / "auth_token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert token.stat().st_uid == os.getuid()
    assert len(token.read_text().strip()) >= 32


@pytest.mark.parametrize("auth", ["wrong token", "no token"])
def test_a_driver_without_the_token_cannot_join(serve_graph, tmp_path, auth):
    given = {"RAY_AUTH_TOKEN": "wrong-" + "0" * 58} if auth == "wrong token" else {}
    done, took = _driver(_gcs_address(), tmp_path, RAY_gcs_server_port_wait_time_s=REFUSED_DRIVER_TRIES, **given)
    assert done.returncode != 0 and "JOINED" not in done.stdout, done.stdout + done.stderr
    assert took < JOIN_BOUND_S, took
    output = (done.stdout + done.stderr).lower()
    assert "token" in output or "auth" in output, done.stdout + done.stderr[-2000:]


def test_a_driver_with_the_token_joins(serve_graph, tmp_path):
    # The control: the refusals above are the token's doing, not an unreachable address.
    token_path = str(Path(serve_graph["workdir"]) / "ray" / "auth_token")
    done, took = _driver(_gcs_address(), tmp_path, RAY_AUTH_TOKEN_PATH=token_path)
    assert done.returncode == 0 and "JOINED" in done.stdout, done.stdout + done.stderr[-2000:]


def _secrets_in_ray_logs(secrets: dict[str, str]) -> list[str]:
    # Only this graph's Ray session: the one this process (its driver) is connected to.
    session = Path(ray._private.worker._global_node.get_session_dir_path())
    found, read = [], 0
    for path in session.rglob("*"):
        if not path.is_file() or path.is_symlink() or path.stat().st_size > 64 * 1024 * 1024:
            continue
        data = path.read_bytes()
        read += 1
        found += [f"{what} in {path.relative_to(session)}" for what, value in secrets.items() if value.encode() in data]
    assert read > 0
    return found


def test_ray_logs_hold_no_store_password(serve_graph):
    password = serve_graph["store"].password_path.read_text().strip()
    assert not _secrets_in_ray_logs({"store password": password})


def test_ray_logs_hold_no_key_or_admin_token(serve_graph, client, new_key, admin):
    key = new_key(account="ray-logs")
    secret = key["Authorization"].removeprefix("Bearer ")
    assert client.post("/v1/moderate-text", headers=key, json={"text": "hello there"}).status_code == 200
    assert client.post("/v1/moderate-text", headers={"Authorization": "Bearer mod_wrong"}, json={"text": "x"}).status_code == 401
    found = _secrets_in_ray_logs({"API key": secret, "admin token": admin["Authorization"].removeprefix("Bearer ")})
    assert not found, found


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat_file.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat_file.parent.name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _listeners_of(pids: set[int]) -> list[tuple[str, int, str]]:
    """(local address, port, process name) of every TCP socket in LISTEN state that one of `pids` holds."""
    by_inode = {}
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":
                address, _, port = fields[1].partition(":")
                by_inode[fields[9]] = ("0" * width if set(address) == {"0"} else address, int(port, 16))
    found = []
    for pid in pids:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        for link in links:
            inode = link[len("socket:[") : -1] if link.startswith("socket:[") else None
            if inode in by_inode:
                found.append((*by_inode[inode], name))
    return found


def _is_loopback(hex_address: str) -> bool:
    if len(hex_address) == 8:  # IPv4, little-endian: 127.x.x.x
        return hex_address.endswith("7F")
    # IPv6 ::1, or ::ffff:127.x.x.x
    return hex_address == "00000000000000000000000001000000" or (
        hex_address.startswith("0000000000000000FFFF0000") and hex_address.endswith("7F")
    )


def _grpc_answer_without_token(port: int):
    import grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary("/ray.serve.ASGIService/HandleRequest", request_serializer=None,
                                   response_deserializer=None)
        try:
            call(b"", timeout=10)
        except grpc.RpcError as error:
            return error.code()
    return "answered"


def test_only_haproxy_stats_and_token_guarded_grpc_listen_beyond_loopback(serve_graph):
    """Everything of the graph listens on loopback, except (runtime/haproxy.py, SECURITY.md) HAProxy's read-only
    stats page and exporter, on the ports we chose, and Ray's inter-replica gRPC servers, which refuse a caller
    without the cluster's token."""
    import grpc

    listeners = _listeners_of(_descendants(os.getpid()))
    assert any(name == "haproxy" for _, _, name in listeners), "HAProxy is the graph's ingress"
    exposed = [(port, name) for address, port, name in listeners if not _is_loopback(address)]
    haproxy_ports = {int(os.environ["RAY_SERVE_HAPROXY_STATS_PORT"]), int(os.environ["RAY_SERVE_HAPROXY_METRICS_PORT"])}
    assert {port for port, name in exposed if name == "haproxy"} == haproxy_ports, exposed
    replicas = [port for port, name in exposed if name != "haproxy"]
    assert all(name.startswith("ray::ServeRepl") for port, name in exposed if name != "haproxy"), exposed
    assert replicas, "each replica has an inter-deployment gRPC server"
    for port in replicas:
        assert _grpc_answer_without_token(port) == grpc.StatusCode.UNAUTHENTICATED, port


def _this_clusters_processes(serve_graph) -> dict[int, bytes]:
    """pid -> environment (NUL-separated bytes) of every process of the e2e graph's Ray instance: those started with
    its token file (the raylet, the GCS, every worker and replica, HAProxy's manager)."""
    marker = f"RAY_AUTH_TOKEN_PATH={serve_graph['workdir'] / 'ray' / 'auth_token'}".encode()
    found = {}
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            data = environ.read_bytes()
        except OSError:
            continue
        if int(environ.parent.name) != os.getpid() and marker in data.split(b"\0"):
            found[int(environ.parent.name)] = data
    return found


def test_ray_processes_inherit_neither_the_admin_token_nor_the_store_url(serve_graph, client, new_key, admin):
    """Ray inherits the environment of the process that starts it; the conftest put both secrets there first
    (CANARY_REDIS_URL's password is `canary-store-password-0123`), as `make serve`'s environment has them."""
    admin_token = admin["Authorization"].removeprefix("Bearer ")
    key = new_key(account="ray-env")
    assert client.post("/v1/moderate-text", headers=key, json={"text": "hello there"}).status_code == 200
    processes = _this_clusters_processes(serve_graph)
    assert len(processes) >= 5, processes.keys()  # GCS, raylet, and the replicas' workers at least
    for pid, data in processes.items():
        names = {entry.split(b"=", 1)[0] for entry in data.split(b"\0")}
        assert b"MODERATION_ADMIN_TOKEN" not in names and b"REDIS_URL" not in names, pid
        assert admin_token.encode() not in data and b"canary-store-password" not in data, pid
    assert "MODERATION_ADMIN_TOKEN" not in os.environ and "REDIS_URL" not in os.environ


def test_haproxy_sockets_and_config_are_in_a_private_dir_and_none_in_tmp(serve_graph):
    if os.environ.get("RAY_SERVE_ENABLE_HA_PROXY") != "1":
        pytest.skip("this graph runs without HAProxy (MODERATION_HAPROXY=0)")
    node_id = ray.get_runtime_context().get_node_id()
    run_dir = Path(os.environ["RAY_SERVE_HAPROXY_SOCKET_PATH"]).parent
    info = run_dir.lstat()
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) == 0o700
    assert stat.S_ISSOCK((run_dir / node_id / "admin.sock").lstat().st_mode)
    assert (run_dir / node_id / "haproxy.cfg").is_file()
    assert not Path("/tmp/haproxy-serve", node_id).exists()
    assert not str(run_dir).startswith("/tmp/haproxy-serve")


def test_rays_session_files_are_in_a_private_dir_not_the_shared_tmp_ray(serve_graph):
    session = Path(ray._private.worker._global_node.get_session_dir_path())
    private = session.parent.parent  # Ray makes its own temp dir (session.parent) 0777: the lock is the dir above
    info = private.lstat()
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) == 0o700
    assert not str(session).startswith("/tmp/ray/")
    assert (serve_graph["workdir"] / "ray-temp.path").read_text() == str(private)
    assert any(path.is_socket() for path in (session / "sockets").iterdir())  # Ray's own sockets are in there
