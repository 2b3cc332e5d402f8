"""The Ray Serve application builder named by serve_config.yaml's `import_path`.

Composition happens here and only here: the ingress gets handles to the two model
deployments and the policy; the ImageModel gets one to the image text reader (ImageTextModel); the TextModel gets
one to the text cascade's second stage (GemmaModel), unless MODERATION_TEXT_CASCADE is off. The settings are read once, here, and handed to the
deployments as plain constructor arguments (Ray's app-builder pattern), so no
deployment reads the environment itself. Replicas, batching, autoscaling and model
versions come from serve_config.yaml.
"""

# No `from __future__ import annotations` here: Ray reads `build_app`'s annotation as a class to
# validate the config's `args` into a `BuildArgs`; as a string it would hand over the raw dict.

from pydantic import BaseModel
from ray.serve import Application

from deployments.gemma_model import GemmaModel
from deployments.image_model import ImageModel
from deployments.image_text_model import ImageTextModel
from deployments.ingress import ModerationIngress
from deployments.policy import Policy
from deployments.text_model import TextModel
from runtime.settings import get_settings


class BuildArgs(BaseModel):
    """serve_config.yaml's `args` of the application: `{}` there; runtime/deploy.py fills them in under `make serve`."""

    # Unset (or empty): REDIS_URL of the replicas' environment.
    redis_url: str | None = None
    # The store's password, as the path of its 0600 file: a password in `args` would end up in Ray's logs.
    redis_password_file: str | None = None


def build_app(args: BuildArgs) -> Application:
    settings = get_settings()
    registry = str(settings.model_registry)
    second_stage = GemmaModel.bind(model_registry=registry) if settings.text_cascade else None
    return ModerationIngress.bind(
        ImageModel.bind(model_registry=registry, text_reader=ImageTextModel.bind(model_registry=registry)),
        TextModel.bind(model_registry=registry, second_stage=second_stage,
                       second_stage_timeout_s=settings.text_second_stage_timeout_s),
        Policy.bind(),
        redis_url=args.redis_url or settings.redis_url,
        redis_password_file=args.redis_password_file,
        inference_timeout_s=settings.inference_timeout_s,
        config_dir=str(settings.config_dir),
        review_rules=settings.review_rules(),
        time_limits=settings.time_limits(),
        health_rules=settings.health_rules(),
        gate_rules=settings.gate_rules(),
        # The path of the secret HAProxy sends beside the client's address (runtime/haproxy.py), never the secret.
        proxy_secret_file=str(settings.proxy_secret_file) if settings.haproxy and settings.proxy_secret_file else None,
        widget_live_tokens_per_key=settings.widget_live_tokens_per_key,
        policy_hop=settings.policy_hop,
    )
