"""Deploy serve_config.yaml from Python, as `serve run` / `serve deploy` do.

`make serve` and the end-to-end tests use this rather than the `serve` CLI: they need
their own host, port and Redis URL in the config, and the tests re-deploy a changed
`user_config` (a model swap) without the dashboard that `serve deploy` needs. It is
the same code path the CLI takes (`ServeDeploySchema` + `deploy_apps`).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import yaml
from ray import serve
from ray.serve._private.api import serve_start
from ray.serve.schema import ServeDeploySchema

from models.registry import DEFAULT_REGISTRY, find_entry, first_stage_alone
from models.tasks import SECOND_STAGE_TASKS
from runtime.settings import get_settings

APP_NAME = "moderation"
CASCADE_VARIABLE = "MODERATION_TEXT_CASCADE"


def read_serve_config(
    path: Path,
    *,
    host: str,
    port: int,
    redis_url: str | None = None,
    redis_password_file: Path | None = None,
    env_vars: dict[str, str] | None = None,
    text_cascade: bool | None = None,
) -> dict:
    """serve_config.yaml with this run's address, Redis URL and replica environment filled in; without the text
    cascade when `text_cascade` is false (None: MODERATION_TEXT_CASCADE).

    The store's password travels as the path of its 0600 file, never inside the URL: Serve's
    application arguments end up in Ray's logs.
    """
    config = yaml.safe_load(Path(path).read_text())
    if not (get_settings().text_cascade if text_cascade is None else text_cascade):
        config = without_text_cascade(config)
    config["http_options"] = {**config.get("http_options", {}), "host": host, "port": port}
    for app in config["applications"]:
        if redis_url:
            app.setdefault("args", {})["redis_url"] = redis_url
        if redis_password_file:
            app.setdefault("args", {})["redis_password_file"] = str(redis_password_file)
        runtime_env = app.setdefault("runtime_env", {})
        runtime_env["env_vars"] = {**runtime_env.get("env_vars", {}), **(env_vars or {})}
    return config


def without_text_cascade(config: dict, registry: Path = DEFAULT_REGISTRY) -> dict:
    """`config` serving usem3 alone: deployments of the cascade's second stage dropped, and a cascade named as
    `text.toxic` replaced by its first stage alone (the registry's `use_head` version of the same weights)."""
    config = copy.deepcopy(config)
    for app in config["applications"]:
        # The builder reads it too (deployments/builder.py): it then binds no GemmaModel.
        runtime_env = app.setdefault("runtime_env", {})
        runtime_env["env_vars"] = {**runtime_env.get("env_vars", {}), CASCADE_VARIABLE: "false"}
        app["deployments"] = [d for d in app["deployments"] if not set(_models_of(d)) & set(SECOND_STAGE_TASKS)]
        for deployment in app["deployments"]:
            models = _models_of(deployment)
            if isinstance(models.get("text.toxic"), str):
                models["text.toxic"] = first_stage_alone(find_entry("text.toxic", models["text.toxic"], registry),
                                                         registry).version
    return config


def _models_of(deployment: dict) -> dict:
    return deployment.get("user_config", {}).get("models", {})


def served_model_versions(config: dict) -> dict[str, str]:
    """task -> version (or inline entry) of every model deployment's user_config."""
    versions = {}
    for app in config["applications"]:
        for deployment in app["deployments"]:
            versions.update(deployment.get("user_config", {}).get("models", {}))
    return versions


def deploy(config: dict) -> None:
    """Start Serve if needed and apply `config`; returns once the controller has it."""
    schema = ServeDeploySchema.model_validate(config)
    client = serve_start(http_options=schema.http_options.model_dump(), proxy_location=schema.proxy_location)
    client.deploy_apps(schema, _blocking=False)


def wait_until_running(timeout_s: float = 300, poll_s: float = 0.5) -> None:
    """Block until the application is RUNNING; raise with Serve's message if it fails."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        app = serve.status().applications.get(APP_NAME)
        if app is not None and app.status == "RUNNING":
            return
        if app is not None and app.status == "DEPLOY_FAILED":
            raise RuntimeError(f"deploy failed: {app.message}")
        time.sleep(poll_s)
    raise TimeoutError(f"{APP_NAME} not running after {timeout_s} s")


def wait_until_healthy(base_url: str, timeout_s: float = 60, poll_s: float = 0.5) -> bool:
    """Block until `GET /healthz` answers 200, at most `timeout_s`; False (and the caller says so) when it never did.

    RUNNING means every replica passed Serve's own check, but the ingress's health snapshot may have been taken
    while a model replica was still loading (it is refreshed every 2 s): "ready" should mean that /healthz agrees.
    """
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base_url}/healthz", timeout=5).status_code == 200:
                return True
        except httpx.HTTPError:
            pass  # the port may not accept connections yet
        time.sleep(poll_s)
    return False
