"""The application builder: serve_config.yaml's `args` go through Ray's own builder call into the ingress."""

from __future__ import annotations

import pytest
from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
from ray.serve.schema import ServeDeploySchema

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


def _text_model_arguments(args: dict) -> dict:
    """The TextModel's keyword arguments in the application the builder makes."""
    ingress = call_user_app_builder_with_args_if_necessary(builder.build_app, args)._bound_deployment
    (text_model,) = [a for a in ingress.init_args if getattr(a, "_bound_deployment", None)
                     and a._bound_deployment.name == "TextModel"]
    return text_model._bound_deployment.init_kwargs


def test_the_text_cascade_binds_its_second_stage_to_the_text_model_unless_turned_off(monkeypatch):
    on = Settings()
    monkeypatch.setattr(builder, "get_settings", lambda: on)
    second_stage = _text_model_arguments({})["second_stage"]
    assert second_stage is not None and second_stage._bound_deployment.name == "GemmaModel"
    monkeypatch.setenv("MODERATION_TEXT_CASCADE", "false")
    off = Settings()
    monkeypatch.setattr(builder, "get_settings", lambda: off)
    assert _text_model_arguments({})["second_stage"] is None


def test_without_the_cascade_serve_config_serves_usem3_alone_and_tells_the_builder():
    from models.registry import find_entry, first_stage_alone

    on = read_serve_config(PROJECT_ROOT / "serve_config.yaml", host="127.0.0.1", port=8000, text_cascade=True)
    off = read_serve_config(PROJECT_ROOT / "serve_config.yaml", host="127.0.0.1", port=8000, text_cascade=False)
    names = lambda config: [d["name"] for d in config["applications"][0]["deployments"]]  # noqa: E731
    assert "GemmaModel" in names(on) and "GemmaModel" not in names(off)
    text = lambda config: next(d for d in config["applications"][0]["deployments"]  # noqa: E731
                               if d["name"] == "TextModel")["user_config"]["models"]["text.toxic"]
    cascade = find_entry("text.toxic", text(on))
    assert cascade.loader == "use_cascade"
    assert text(off) == first_stage_alone(cascade).version and find_entry("text.toxic", text(off)).loader == "use_head"
    assert off["applications"][0]["runtime_env"]["env_vars"]["MODERATION_TEXT_CASCADE"] == "false"
    ServeDeploySchema.model_validate(off)  # still a config Serve takes
