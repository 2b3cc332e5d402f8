"""The Ray Serve application builder named by serve_config.yaml's `import_path`.

Composition happens here and only here: the ingress gets handles to the two model
deployments and the policy. Replicas, batching, autoscaling and model versions come
from serve_config.yaml.
"""

from __future__ import annotations

from ray.serve import Application

from deployments.image_model import ImageModel
from deployments.ingress import ModerationIngress
from deployments.policy import Policy
from deployments.text_model import TextModel


def build_app(args: dict) -> Application:
    """`args` may carry `redis_url` (else REDIS_URL of the replicas' environment)."""
    return ModerationIngress.bind(
        ImageModel.bind(), TextModel.bind(), Policy.bind(), redis_url=args.get("redis_url")
    )
