"""Everything a request handler reaches: the stores, the model backends, the settings."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from policy.limits import Limits
from policy.review_queue import ReviewQueue
from policy.store import ConfigStore
from serve_app.backends import ModelBackends


@dataclass
class Services:
    config: ConfigStore
    limits: Limits
    reviews: ReviewQueue
    backends: ModelBackends
    admin_token: str | None = None
    inference_timeout_s: float = 30.0

    @classmethod
    def connect(
        cls,
        redis_url: str,
        backends: ModelBackends,
        *,
        admin_token: str | None = None,
        inference_timeout_s: float = 30.0,
    ) -> Services:
        redis = Redis.from_url(
            redis_url, decode_responses=True, socket_timeout=5, socket_connect_timeout=2
        )
        return cls(
            config=ConfigStore(redis),
            limits=Limits(redis),
            reviews=ReviewQueue(redis),
            backends=backends,
            admin_token=admin_token,
            inference_timeout_s=inference_timeout_s,
        )
