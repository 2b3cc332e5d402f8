"""What Ray's processes inherit from the runner: no admin token, no store URL; an external store's password
travels to the replicas as a 0600 file, never inside the URL (the e2e test reads the real workers' environments)."""

from __future__ import annotations

import stat

from runtime.ray_cluster import SECRET_VARIABLES, drop_secrets_from_environment, url_and_password_file


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
