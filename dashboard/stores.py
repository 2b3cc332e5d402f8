"""What the dashboard's routes reach: its own stores over the service's store connection."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from policy.claims import Claims
from policy.queue_stats import QueueStats
from policy.review_browse import ReviewBrowser
from policy.sessions import LoginThrottle, SessionStore
from policy.users import UserStore


@dataclass(frozen=True)
class DashboardStores:
    users: UserStore
    sessions: SessionStore
    logins: LoginThrottle
    claims: Claims
    browser: ReviewBrowser
    stats: QueueStats

    @classmethod
    def over(cls, redis: Redis) -> DashboardStores:
        return cls(
            users=UserStore(redis), sessions=SessionStore(redis), logins=LoginThrottle(redis), claims=Claims(redis),
            browser=ReviewBrowser(redis), stats=QueueStats(redis),
        )  # fmt: skip
