"""What Ray's processes inherit from the runner: no admin token, no store URL; an external store's password
travels to the replicas as a 0600 file, never inside the URL (the e2e test reads the real workers' environments).
Ray's session files go to a private directory of their own, not the shared /tmp/ray."""

from __future__ import annotations

import os
import stat

from runtime.ray_cluster import (
    IDLE_LOOPS,
    RAY_TEMP_RECORD,
    SECRET_VARIABLES,
    drop_secrets_from_environment,
    private_ray_temp_dir,
    remove_ray_temp_dir,
    slow_idle_loops,
    url_and_password_file,
)


def test_the_secrets_leave_the_environment_ray_inherits():
    environ = {"MODERATION_ADMIN_TOKEN": "t" * 32, "REDIS_URL": "redis://u:pw@db:6379/0", "MODERATION_PORT": "8000"}
    drop_secrets_from_environment(environ)
    assert environ == {"MODERATION_PORT": "8000"}
    assert {"MODERATION_ADMIN_TOKEN", "REDIS_URL"} <= SECRET_VARIABLES


def test_an_external_store_password_goes_to_a_0600_file(tmp_path):
    url, path = url_and_password_file("rediss://svc:p%40ss-w0rd@db.internal:6380/2", tmp_path)
    assert url == "rediss://svc@db.internal:6380/2" and "p%40ss" not in url
    assert path.read_text() == "p@ss-w0rd" and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_url_without_a_password_is_passed_as_it_is(tmp_path):
    assert url_and_password_file("redis://db:6379/0", tmp_path) == ("redis://db:6379/0", None)


def test_rays_session_files_go_to_a_fresh_private_dir_and_the_next_start_removes_the_last(tmp_path):
    data_dir = tmp_path / "data"
    first = private_ray_temp_dir(data_dir)
    try:
        assert first.is_dir() and stat.S_IMODE(first.stat().st_mode) == 0o700 and first.stat().st_uid == os.getuid()
        assert not str(first).startswith("/tmp/ray/") and (data_dir / RAY_TEMP_RECORD).read_text() == str(first)
        (first / "session_latest").mkdir()  # a run's logs, kept until the next start
        second = private_ray_temp_dir(data_dir)
        assert not first.exists() and second.is_dir() and second != first
    finally:
        remove_ray_temp_dir(data_dir)
    assert not second.exists() and not (data_dir / RAY_TEMP_RECORD).exists()


def test_a_recorded_path_that_is_not_ours_is_never_removed(tmp_path):
    data_dir, elsewhere = tmp_path / "data", tmp_path / "precious"
    elsewhere.mkdir()
    data_dir.mkdir()
    (data_dir / RAY_TEMP_RECORD).write_text(str(elsewhere))  # an edited record
    remove_ray_temp_dir(data_dir)
    assert elsewhere.is_dir() and not (data_dir / RAY_TEMP_RECORD).exists()


def test_rays_idle_loops_are_slowed_unless_the_operator_set_them():
    environ = {"REPORTER_UPDATE_INTERVAL_MS": "5000"}
    slow_idle_loops(environ)
    assert environ["REPORTER_UPDATE_INTERVAL_MS"] == "5000"  # the operator's
    assert {name: environ[name] for name in IDLE_LOOPS if name != "REPORTER_UPDATE_INTERVAL_MS"} == {
        name: value for name, value in IDLE_LOOPS.items() if name != "REPORTER_UPDATE_INTERVAL_MS"}


def test_each_idle_loop_variable_is_one_the_installed_ray_reads():
    """A Ray upgrade that renames one would silently bring the old cost back: this fails instead."""
    from pathlib import Path

    import ray

    root = Path(ray.__file__).parent
    readers = {
        "RAY_SERVE_METRICS_EXPORT_INTERVAL_MS": root / "serve" / "_private" / "constants.py",
        "RAY_LOG_MONITOR_MANY_FILES_THRESHOLD": root / "_private" / "log_monitor.py",
        "REPORTER_UPDATE_INTERVAL_MS": root / "dashboard" / "modules" / "reporter" / "reporter_consts.py",
    }
    assert set(readers) == set(IDLE_LOOPS)
    for name, path in readers.items():
        assert f'"{name}"' in path.read_text(), f"{path} no longer reads {name}"
