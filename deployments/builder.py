"""The Ray Serve application builder named by serve_config.yaml's `import_path`.

Composition happens here and only here: the ingress gets handles to the two model
deployments and the policy. The settings are read once, here, and handed to the
deployments as plain constructor arguments (Ray's app-builder pattern), so no
deployment reads the environment itself. Replicas, batching, autoscaling and model
versions come from serve_config.yaml.
"""

from __future__ import annotations

from ray.serve import Application

from deployments.image_model import ImageModel
from deployments.ingress import ModerationIngress
from deployments.policy import Policy
from deployments.text_model import TextModel
from runtime.settings import get_settings


def build_app(args: dict) -> Application:
    """`args` may carry `redis_url` (else REDIS_URL of the replicas' environment)."""
    settings = get_settings()
    registry = str(settings.model_registry)
    return ModerationIngress.bind(
        ImageModel.bind(model_registry=registry),
        TextModel.bind(model_registry=registry),
        Policy.bind(),
        redis_url=args.get("redis_url") or settings.redis_url,
        redis_password_file=args.get("redis_password_file"),
        inference_timeout_s=settings.inference_timeout_s,
        body_idle_timeout_s=settings.body_idle_timeout_s,
        body_timeout_s=settings.body_timeout_s,
        request_timeout_s=settings.request_timeout_s,
        max_in_flight_per_account=settings.max_in_flight_per_account,
        config_dir=str(settings.config_dir),
        review_rules=settings.review_rules(),
    )
