"""Everything a request handler reaches: the stores, the moderation flow, the model backends."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as StoreConnectionError
from redis.exceptions import RedisError

from moderation.model_gates import GateRules, ModelGates
from moderation.backends import ModelBackends
from moderation.flow import ModerationFlow
from moderation.text_correction import AccountCorrections
from store.people.audit_log import AuditLog, AuditRules
from store.score_suggestions import FeedbackStore
from moderation.hash_matching import BankMatcher
from store.hash_bank.bank import HashBank
from store.keys.quota import QuotaStore
from store.webhooks.outbox import Outbox
from store.keys.rate_limit import RateRefusals
from store.review.queue import ReviewQueue, ReviewRules
from store.keys.config import ConfigStore
from store.labels.corrections import CorrectionStore
from store.labels.labels import LabelStore
from store.webhooks.endpoints import WebhookStore
from store.widget.tokens import LIVE_TOKENS_PER_KEY, WidgetStore
from webhooks.deliveries import WebhookRules
from serve_app.client_address import ClientAddresses
from serve_app.deadlines import TimeLimits
from serve_app.health import HealthMonitor, HealthRules, StoreMemory

log = logging.getLogger("moderation.services")


# A client made by from_url has no retry by default: after a store restart (the supervisor's, a failover), every
# pooled connection the restart broke failed its next command, a 503 per connection until the pool had turned over.
# A broken connection is reopened and its command sent again, up to 3 times within about 0.4 s. Only on a connection
# error (as good as always a command that never reached a live server), never on a timeout: a slow command may have
# run, and quota and rate-token scripts must not run twice.
RECONNECT_ONCE_BROKEN = Retry(
    ExponentialBackoff(cap=0.2, base=0.05), retries=3, supported_errors=(StoreConnectionError,)
)

# The connections one process keeps to the store. redis-py's own pool refused a command at once past its 100
# connections ("Too many connections", a 503 for that request): one tenant's burst of simultaneous requests then cost
# other tenants' requests their answers. A command past the bound waits for a connection instead, at most
# STORE_CONNECTION_WAIT_S, and only then is refused (503 `store_unavailable`, Retry-After: a retry can succeed).
STORE_CONNECTIONS = 100
STORE_CONNECTION_WAIT_S = 2.0


@dataclass
class Services:
    config: ConfigStore
    quota: QuotaStore
    reviews: ReviewQueue
    backends: ModelBackends | None  # None in the admin app, which scores nothing
    flow: ModerationFlow
    time_limits: TimeLimits = TimeLimits()
    feedback: FeedbackStore | None = None  # score suggestions of the Perspective-compatible API
    audit: AuditLog | None = None  # the admin audit log (written by the admin app only)
    health: HealthMonitor | None = None  # what /healthz answers; None in the admin app
    webhooks: WebhookStore | None = None  # webhook endpoints (the admin API)
    outbox: Outbox | None = None  # their deliveries' log and redelivery (the admin API)
    hash_bank: HashBank | None = None  # PDQ hashes of rejected images per account
    widget: WidgetStore | None = None  # the browser widget's tokens, origins and verdicts (serve_app/routes_widget.py)
    # Whose word for the client's address to take (HAProxy's, beside its secret, or the peer's), and how much of an
    # address is one client (serve_app/client_address.py). Only the widget's per-address limit reads it.
    client_addresses: ClientAddresses = ClientAddresses()
    redis: Redis | None = None  # the store connection itself, for the dashboard's own stores (dashboard)
    labels: LabelStore | None = None  # each account's kept labels (store/labels/labels.py)
    corrections: CorrectionStore | None = None  # each account's last fit (store/labels/corrections.py)

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
        model_gates: dict[str, GateRules] | None = None,
        webhook_rules: WebhookRules | None = None,
        client_addresses: ClientAddresses = ClientAddresses(),
        widget_live_tokens_per_key: int = LIVE_TOKENS_PER_KEY,
    ) -> Services:
        """`redis_password`: given apart from the URL when the URL must not carry it (None: the URL's own).
        `on_store_memory`: called with the store's memory at each health check (the ingress records a metric).
        `model_gates`: the gates of the models' calls (moderation/model_gates.py); None lets every call through.
        `client_addresses`: whether HAProxy's address header is believed, with its secret (default: the peer's).
        `widget_live_tokens_per_key`: the live widget tokens one key may hold (store/widget/tokens.py)."""
        pool = BlockingConnectionPool.from_url(
            redis_url, password=redis_password, decode_responses=True, socket_timeout=5, socket_connect_timeout=2,
            retry=RECONNECT_ONCE_BROKEN, max_connections=STORE_CONNECTIONS, timeout=STORE_CONNECTION_WAIT_S,
        )
        redis = Redis.from_pool(pool)  # the client closes its pool with it
        quota, reviews = QuotaStore(redis), ReviewQueue(redis, review_rules)
        hash_bank = HashBank(redis, reviews.rules.hash_bank_max_entries)
        labels, corrections = LabelStore(redis, reviews.rules.labels), CorrectionStore(redis)
        return cls(
            config=ConfigStore(redis),
            quota=quota,
            reviews=reviews,
            backends=backends,
            flow=ModerationFlow(
                quota, reviews, backends, inference_timeout_s, BankMatcher(hash_bank),
                gates=ModelGates(model_gates) if model_gates else None,
                labels=labels, corrections=AccountCorrections(corrections),
            ),
            feedback=FeedbackStore(redis),
            audit=AuditLog(redis, audit_rules),
            time_limits=time_limits,
            health=HealthMonitor(redis, backends, health_rules, on_store_memory) if backends is not None else None,
            webhooks=WebhookStore(redis, webhook_rules),
            outbox=Outbox(redis, webhook_rules),
            hash_bank=hash_bank,
            widget=WidgetStore(redis, widget_live_tokens_per_key),
            client_addresses=client_addresses,
            redis=redis,
            labels=labels,
            corrections=corrections,
        )


async def count_rate_refusal(services: Services, account: str) -> None:
    """For the operators' usage page (store/keys/rate_limit.py). A store error here must not turn the 429 into a 503."""
    if services.redis is None:
        return
    try:
        await RateRefusals(services.redis).count(account)
    except RedisError as exc:
        log.warning("rate refusal of %s not counted: %s", account, type(exc).__name__)
