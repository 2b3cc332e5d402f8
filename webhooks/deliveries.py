"""What a webhook delivery is, apart from where it is kept: the operator's rules, the endpoint as the sender sees it,
one delivery, one attempt's outcome, and when to try again.

Plain records and one pure rule, shared by the store (store/webhooks/outbox.py keeps deliveries, store/webhooks/endpoints.py
keeps endpoints) and the sender (webhooks/sender.py), which never touches the store.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

DAY_S = 24 * 3600
# The outcome of an attempt that reached the receiver and was accepted, as the log and the metrics name it.
DELIVERED = "delivered"
# Deliveries one account may have waiting (due, or between retries while a receiver is down); a new one past it
# drops the account's oldest unsent (outcome `backlog_full` in its endpoint's log). Measured on the embedded store:
# a delivery costs about 1.3 KB (its 0.9 KB record and three index entries of about 130 bytes), about 26 KB at
# worst (a 4,096-character reference of control characters, 24.9 KB of escaped JSON): so about 1.3 MB per account,
# 26 MB at worst. The review scripts write deliveries in the replicas: a constant of the code, not a setting.
MAX_UNDELIVERED_PER_ACCOUNT = 1000


@dataclass(frozen=True)
class WebhookRules:
    """The operator's rules for webhooks (docs/configuration.md, docs/webhooks.md)."""

    # Loopback, private and link-local receivers are refused unless this is set (SECURITY.md, Outbound requests).
    allow_private: bool = False
    # Seconds before each try: the Standard Webhooks schedule (the last try about 28 hours after the event).
    retry_schedule_s: tuple[float, ...] = (0, 5, 300, 1800, 7200, 18000, 36000, 36000)
    # Each wait is spread by up to this share either way, so that many failed deliveries do not all retry at once.
    jitter: float = 0.1
    # A receiver's Retry-After is honoured up to this long.
    max_retry_after_s: float = DAY_S
    # One try: connect, send and read the answer within this.
    timeout_s: float = 15.0
    max_endpoints_per_account: int = 10
    # After a rotation the previous secret still signs for this long.
    secret_overlap_s: int = DAY_S
    # Attempts kept in each endpoint's log, and how long a finished delivery (and the log) is kept.
    log_entries: int = 1000
    done_retention_s: int = 7 * DAY_S

    def __post_init__(self) -> None:
        if not self.retry_schedule_s or min(self.retry_schedule_s) < 0:
            raise ValueError("the retry schedule needs at least one wait, none negative")
        if self.timeout_s <= 0 or not 0 <= self.jitter < 1:
            raise ValueError("timeout_s must be positive and jitter in [0, 1)")


@dataclass(frozen=True)
class EndpointForDelivery:
    """What the worker needs of an endpoint: where, whether, and the secrets that sign now."""

    id: str
    url: str
    enabled: bool
    secrets: list[str]


def next_try_in(
    rules: WebhookRules, tries_this_round: int, retry_after_s: float | None, rng: random.Random
) -> float | None:
    """Seconds until the next try after `tries_this_round` failed ones, or None when the schedule is spent.

    The schedule's wait, spread by the jitter; a longer Retry-After (capped) wins."""
    if tries_this_round >= len(rules.retry_schedule_s):
        return None
    wait = rules.retry_schedule_s[tries_this_round] * rng.uniform(1 - rules.jitter, 1 + rules.jitter)
    if retry_after_s is not None:
        wait = max(wait, min(retry_after_s, rules.max_retry_after_s))
    return wait


@dataclass(frozen=True)
class Delivery:
    member: str  # `{event_id}:{endpoint_id}`
    account: str  # whose delivery: the worker's per-account share counts it
    event_id: str
    event_type: str
    body: bytes
    attempts: int
    round_start: int
    created_at: float
    endpoint: EndpointForDelivery | None  # None: the endpoint was deleted

    @property
    def endpoint_id(self) -> str:
        return self.member.split(":", 1)[1]


@dataclass(frozen=True)
class Attempt:
    """One attempt's outcome as the worker saw it."""

    outcome: str  # delivered, http_error, timeout, connect_error, redirect_refused, unsafe_url, gone, ...
    status: int | None = None
    latency_ms: float = 0.0
    retry_after_s: float | None = None
    error: str | None = None  # a short reason, never a body
    disable_endpoint: bool = False  # a 410: the receiver says the endpoint is gone for good
    final: bool = False  # no retry whatever the schedule says (delivered, dropped)
