"""Everything a request handler reaches: the stores, the moderation flow, the model backends."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from redis.asyncio import Redis

from moderation.backends import ModelBackends
from moderation.flow import ModerationFlow
from policy.audit import AuditLog, AuditRules
from policy.feedback import FeedbackStore
from policy.limits import Limits
from policy.review_queue import ReviewQueue, ReviewRules
from policy.store import ConfigStore
from serve_app.deadlines import TimeLimits
from serve_app.health import HealthMonitor, HealthRules, StoreMemory


@dataclass
class Services:
    config: ConfigStore
    limits: Limits
    reviews: ReviewQueue
    backends: ModelBackends | None  # None in the admin app, which scores nothing
    flow: ModerationFlow
    time_limits: TimeLimits = TimeLimits()
    feedback: FeedbackStore | None = None  # score suggestions of the Perspective-compatible API
    audit: AuditLog | None = None  # the admin audit log (written by the admin app only)
    health: HealthMonitor | None = None  # what /healthz answers; None in the admin app

    @classmethod
    def connect(
        cls,
        redis_url: str,
        backends: ModelBackends | None,
        *,
        inference_timeout_s: float = TimeLimits.inference_timeout_s,
        time_limits: TimeLimits = TimeLimits(),
        review_rules: ReviewRules | None = None,
        redis_password: str | None = None,
        audit_rules: AuditRules | None = None,
        health_rules: HealthRules | None = None,
        on_store_memory: Callable[[StoreMemory], None] | None = None,
    ) -> Services:
        """`redis_password`: given apart from the URL when the URL must not carry it (None: the URL's own).
        `on_store_memory`: called with the store's memory at each health check (the ingress records a metric)."""
        redis = Redis.from_url(
            redis_url, password=redis_password, decode_responses=True, socket_timeout=5, socket_connect_timeout=2
        )
        limits, reviews = Limits(redis), ReviewQueue(redis, review_rules)
        return cls(
            config=ConfigStore(redis),
            limits=limits,
            reviews=reviews,
            backends=backends,
            flow=ModerationFlow(limits, reviews, backends, inference_timeout_s),
            feedback=FeedbackStore(redis),
            audit=AuditLog(redis, audit_rules),
            time_limits=time_limits,
            health=HealthMonitor(redis, backends, health_rules, on_store_memory) if backends is not None else None,
        )
