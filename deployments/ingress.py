"""ModerationIngress: the FastAPI app of `serve_app` as the graph's HTTP entry point."""

from __future__ import annotations

import logging
from pathlib import Path

from ray import serve
from ray.serve.handle import DeploymentHandle

from deployments.handles import ServeBackends
from deployments.metrics import RequestMetrics, record_store_memory
from moderation.model_gates import GateRules
from store.review.queue import ReviewRules
from store.widget.tokens import LIVE_TOKENS_PER_KEY
from runtime.bootstrap import seed_config
from serve_app.app import create_app
from serve_app.client_address import ClientAddresses
from serve_app.deadlines import TimeLimits
from serve_app.health import HealthRules
from serve_app.services import Services

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")


@serve.deployment(max_ongoing_requests=64)
@serve.ingress()
class ModerationIngress:
    async def __init__(
        self,
        image_model: DeploymentHandle,
        text_model: DeploymentHandle,
        policy: DeploymentHandle,
        *,
        redis_url: str,
        inference_timeout_s: float,
        redis_password_file: str | None = None,
        config_dir: str,
        review_rules: ReviewRules | None = None,
        time_limits: TimeLimits = TimeLimits(),
        health_rules: HealthRules = HealthRules(),
        gate_rules: dict[str, GateRules] | None = None,
        proxy_secret_file: str | None = None,
        widget_live_tokens_per_key: int = LIVE_TOKENS_PER_KEY,
        policy_hop: bool = False,
    ):
        # Read here, on the replica's node, so the password is in no Serve argument and no Ray log.
        password = Path(redis_password_file).read_text().strip() if redis_password_file else None
        # Likewise HAProxy's secret: with it the client address HAProxy sends is believed (serve_app/client_address.py).
        proxy_secret = Path(proxy_secret_file).read_text().strip() if proxy_secret_file else None
        self._services = Services.connect(
            redis_url,
            ServeBackends(image_model, text_model, policy, policy_hop=policy_hop),
            redis_password=password,
            inference_timeout_s=inference_timeout_s,
            time_limits=time_limits,
            review_rules=review_rules,
            health_rules=health_rules,
            on_store_memory=record_store_memory,
            model_gates=gate_rules,
            client_addresses=ClientAddresses(proxy_secret),
            widget_live_tokens_per_key=widget_live_tokens_per_key,
        )
        # Idempotent: seeds only the plans and profiles that Redis does not have yet.
        await seed_config(self._services.config, Path(config_dir))
        # /healthz reads the snapshot this keeps fresh: no call costs a deployment call (serve_app/health.py).
        self._services.health.start()

    def __serve_build_asgi_app__(self):
        app = create_app(self._services)
        app.add_middleware(RequestMetrics)  # outermost: counts every answer, the access log's included
        return app
