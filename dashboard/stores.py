"""What the dashboard's routes reach: its own stores over the service's store connection."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from store.review.claims import Claims
from store.review.stats import QueueStats
from store.review.browse import ReviewBrowser
from store.people.login_brake import LoginBrake
from store.people.sessions import SessionStore
from store.people.users import UserStore


@dataclass(frozen=True)
class DashboardStores:
    users: UserStore
    sessions: SessionStore
    login_brake: LoginBrake
    claims: Claims
    browser: ReviewBrowser
    stats: QueueStats

    @classmethod
    def over(cls, redis: Redis) -> DashboardStores:
        return cls(
            users=UserStore(redis), sessions=SessionStore(redis), login_brake=LoginBrake(redis), claims=Claims(redis),
            browser=ReviewBrowser(redis), stats=QueueStats(redis),
        )  # fmt: skip
