"""Everything a request handler reaches: the stores, the moderation flow, the model backends."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from models.image_limits import ImageDecoder
from moderation.backends import ModelBackends
from moderation.flow import ModerationFlow
from policy.limits import Limits
from policy.review_queue import ReviewQueue, ReviewRules
from policy.store import ConfigStore
from serve_app.deadlines import TimeLimits


@dataclass
class Services:
    config: ConfigStore
    limits: Limits
    reviews: ReviewQueue
    backends: ModelBackends | None  # None in the admin app, which scores nothing
    flow: ModerationFlow
    decoder: ImageDecoder
    time_limits: TimeLimits = TimeLimits()

    @classmethod
    def connect(
        cls,
        redis_url: str,
        backends: ModelBackends | None,
        *,
        inference_timeout_s: float = 30.0,
        body_idle_timeout_s: float = TimeLimits.body_idle_timeout_s,
        body_timeout_s: float = TimeLimits.body_timeout_s,
        request_timeout_s: float = TimeLimits.request_timeout_s,
        max_in_flight_per_account: int = TimeLimits.max_in_flight_per_account,
        review_rules: ReviewRules | None = None,
    ) -> Services:
        redis = Redis.from_url(
            redis_url, decode_responses=True, socket_timeout=5, socket_connect_timeout=2
        )
        limits, reviews = Limits(redis), ReviewQueue(redis, review_rules)
        return cls(
            config=ConfigStore(redis),
            limits=limits,
            reviews=reviews,
            backends=backends,
            flow=ModerationFlow(limits, reviews, backends, inference_timeout_s),
            decoder=ImageDecoder(),
            time_limits=TimeLimits(
                body_idle_timeout_s=body_idle_timeout_s,
                body_timeout_s=body_timeout_s,
                request_timeout_s=request_timeout_s,
                max_in_flight_per_account=max_in_flight_per_account,
            ),
        )
