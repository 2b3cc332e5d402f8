"""The application builder: serve_config.yaml's `args` go through Ray's own builder call into the ingress."""

from __future__ import annotations

import pytest
from ray.serve._private.api import call_user_app_builder_with_args_if_necessary

from deployments import builder
from runtime.deploy import read_serve_config
from runtime.settings import PROJECT_ROOT, Settings
from serve_app.deadlines import TimeLimits


def ingress_arguments(args: dict) -> dict:
    """The keyword arguments the ingress is bound with when Serve builds the application from `args`."""
    return call_user_app_builder_with_args_if_necessary(builder.build_app, args)._bound_deployment.init_kwargs


@pytest.fixture
def settings(monkeypatch) -> Settings:
    """Settings of this test's environment, as the builder reads them (`get_settings` caches the process's)."""
    monkeypatch.setenv("REDIS_URL", "redis://from-the-environment:6379/0")
    monkeypatch.setenv("MODERATION_REQUEST_TIMEOUT_S", "42")
    settings = Settings()
    monkeypatch.setattr(builder, "get_settings", lambda: settings)
    return settings


def test_the_args_make_serve_fills_in_reach_the_ingress(settings, tmp_path):
    config = read_serve_config(
        PROJECT_ROOT / "serve_config.yaml", host="127.0.0.1", port=8000,
        redis_url="redis://127.0.0.1:6390/0", redis_password_file=tmp_path / "password",
    )
    kwargs = ingress_arguments(config["applications"][0]["args"])
    assert kwargs["redis_url"] == "redis://127.0.0.1:6390/0"
    assert kwargs["redis_password_file"] == str(tmp_path / "password")


def test_without_args_the_store_is_the_environment_s(settings):
    kwargs = ingress_arguments({})
    assert (kwargs["redis_url"], kwargs["redis_password_file"]) == ("redis://from-the-environment:6379/0", None)


def test_the_time_limits_of_the_settings_reach_the_ingress_whole(settings):
    limits = ingress_arguments({})["time_limits"]
    assert isinstance(limits, TimeLimits)
    assert limits == settings.time_limits() and limits.request_timeout_s == 42
