"""The admin API's own listener: uvicorn in a thread of the process that runs the service.

The admin token stays in this process: the Ray replicas never see it (nothing secret in
their runtime_env), and the admin API is never on the public port. The default address
is loopback only; `MODERATION_ADMIN_HOST` opens it wider on purpose.
"""

from __future__ import annotations

import threading
import time

import uvicorn

from serve_app.app import create_admin_app
from serve_app.services import Services


class AdminServer:
    def __init__(self, *, redis_url: str, admin_token: str, host: str, port: int):
        app = create_admin_app(Services.connect(redis_url, backends=None), admin_token)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="admin-api", daemon=True)
        self.url = f"http://{host}:{port}"

    def start(self, timeout_s: float = 10) -> str:
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the admin API could not listen on {self.url}")
            time.sleep(0.02)
        return self.url

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
