"""The admin API's own listener: uvicorn in a thread of the process that runs the service.

The admin token stays in this process: the Ray replicas never see it (nothing secret in
their runtime_env), and the admin API is never on the public port. The default address
is loopback only; `MODERATION_ADMIN_HOST` opens it wider on purpose.

Where the graph runs without `make serve` (`serve run`, a KubeRay cluster), run the admin
API on its own against the same store: `REDIS_URL=... MODERATION_ADMIN_TOKEN=...
python -m runtime.admin_server` seeds plans and profiles, creates and prints the first key
if the store has none, and serves until Ctrl-C.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import uvicorn

from store.people.audit_log import AuditRules
from store.review.queue import ReviewRules
from webhooks.deliveries import WebhookRules
from runtime.bootstrap import prepare_store
from runtime.settings import Settings, get_settings

from admin.app import create_admin_app
from dashboard import install as install_dashboard
from dashboard.stores import DashboardStores
from moderation.site_adaptation import SiteAdaptation, refit_due_accounts
from serve_app.services import Services


def create_admin_listener_app(services: Services, admin_token: str, image_previews: bool = True):
    """The admin listener's ASGI app: the admin API with the dashboard's pages beside it."""
    app = create_admin_app(services, admin_token)
    if services.redis is not None:  # Services without a store connection of their own (tests) get no dashboard
        install_dashboard(app, DashboardStores.over(services.redis), image_previews=image_previews)
    return app


class BackgroundRefits:
    """Each account's refit as its labels arrive (moderation/site_adaptation.py `refit_due_accounts`), in a thread
    of the admin listener's process with its own event loop and store connection."""

    def __init__(self, redis_url: str, review_rules: ReviewRules | None = None):
        self._redis_url, self._review_rules = redis_url, review_rules
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name="refits", daemon=True)

    def start(self) -> None:
        self._thread.start()

    async def _run(self) -> None:
        services = Services.connect(self._redis_url, backends=None, review_rules=self._review_rules)
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        try:
            await refit_due_accounts(SiteAdaptation(services.labels, services.corrections, services.config), self._stop)
        finally:
            await services.redis.aclose()

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)


class AdminServer:
    """`review_rules`: how the decisions made here keep items and bank hashes (the settings' under `make serve`)."""

    def __init__(self, *, redis_url: str, admin_token: str, host: str, port: int, audit_rules: AuditRules | None = None,
                 webhook_rules: WebhookRules | None = None, image_previews: bool = True,
                 review_rules: ReviewRules | None = None):  # fmt: skip
        services = Services.connect(redis_url, backends=None, audit_rules=audit_rules, webhook_rules=webhook_rules,
                                    review_rules=review_rules)  # fmt: skip
        app = create_admin_listener_app(services, admin_token, image_previews)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="admin-api", daemon=True)
        self._refits = BackgroundRefits(redis_url, review_rules)
        self.url = f"http://{host}:{port}"

    @classmethod
    def of_settings(cls, settings: Settings, redis_url: str) -> AdminServer:
        """The admin listener as the settings say (`make serve` and `python -m runtime.admin_server`)."""
        return cls(
            redis_url=redis_url, admin_token=settings.admin_token, host=settings.admin_host, port=settings.admin_port,
            audit_rules=settings.audit_rules(), webhook_rules=settings.webhook_rules(),
            image_previews=settings.dashboard_image_previews, review_rules=settings.review_rules(),
        )  # fmt: skip

    def start(self, timeout_s: float = 10) -> str:
        self._thread.start()
        self._refits.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the admin API could not listen on {self.url}")
            time.sleep(0.02)
        return self.url

    def stop(self) -> None:
        self._server.should_exit = True
        self._refits.stop()
        self._thread.join(timeout=10)


def main() -> int:
    settings = get_settings()
    if not settings.redis_url or not settings.admin_token:
        print("REDIS_URL and MODERATION_ADMIN_TOKEN must be set.", file=sys.stderr)
        return 2
    first_key = asyncio.run(prepare_store(settings, settings.redis_url))
    if first_key:
        print(f"First start: created an API key; it is shown only this once:\n\n    {first_key}\n", flush=True)
    server = AdminServer.of_settings(settings, settings.redis_url)
    print(f"Admin API at {server.start()}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
