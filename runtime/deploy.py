"""Deploy serve_config.yaml from Python, as `serve run` / `serve deploy` do.

`make serve` and the end-to-end tests use this rather than the `serve` CLI: they need
their own host, port and Redis URL in the config, and the tests re-deploy a changed
`user_config` (a model swap) without the dashboard that `serve deploy` needs. It is
the same code path the CLI takes (`ServeDeploySchema` + `deploy_apps`).
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml
from ray import serve
from ray.serve._private.api import serve_start
from ray.serve.schema import ServeDeploySchema

APP_NAME = "moderation"


def read_serve_config(
    path: Path,
    *,
    host: str,
    port: int,
    redis_url: str | None = None,
    redis_password_file: Path | None = None,
    env_vars: dict[str, str] | None = None,
) -> dict:
    """serve_config.yaml with this run's address, Redis URL and replica environment filled in.

    The store's password travels as the path of its 0600 file, never inside the URL: Serve's
    application arguments end up in Ray's logs.
    """
    config = yaml.safe_load(Path(path).read_text())
    config["http_options"] = {**config.get("http_options", {}), "host": host, "port": port}
    for app in config["applications"]:
        if redis_url:
            app.setdefault("args", {})["redis_url"] = redis_url
        if redis_password_file:
            app.setdefault("args", {})["redis_password_file"] = str(redis_password_file)
        runtime_env = app.setdefault("runtime_env", {})
        runtime_env["env_vars"] = {**runtime_env.get("env_vars", {}), **(env_vars or {})}
    return config


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
