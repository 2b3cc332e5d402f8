"""The webhook delivery worker: takes due deliveries from the outbox, sends them, records each attempt.

    python -m runtime.webhook_worker --redis-url redis://moderation@127.0.0.1:6390/0 --redis-password-file PATH

Why a process of its own, started by `make serve` (runtime/webhook_process.py), and not a deployment of the graph:
delivery needs no model and no request path, waits on other people's servers for up to 15 s a try, and must go on
while the graph is redeployed, scaled or restarted; a Serve deployment would take a replica's CPU share for that and
be stopped with the graph. Where the graph runs without `make serve` (`serve run`, KubeRay), run this module beside
it against the same store. Several workers may run at once: each delivery is leased, and an account's share of
attempts in flight is counted in the store for all of them together (store/webhooks/outbox.py).

Its metrics are on its own Prometheus endpoint (127.0.0.1:MODERATION_WEBHOOK_METRICS_PORT, default 8082; 0: none):
`moderation_webhook_deliveries_total{outcome}`, `moderation_webhook_attempt_latency_ms`,
`moderation_webhook_queue_depth`, `moderation_webhook_oldest_undelivered_age_seconds` and
`moderation_webhook_backlog_dropped` (docs/webhooks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from redis.asyncio import Redis

from store.webhooks.outbox import Outbox
from runtime.settings import get_settings
from webhooks.deliveries import Delivery, WebhookRules
from webhooks.lookups import HostLookups
from webhooks.sender import WebhookSender

log = logging.getLogger("moderation.webhooks")

# Deliveries one worker sends at once.
CONCURRENCY = 32
# Deliveries of one account sent at once, by every worker together (counted in the store): a receiver that hangs or
# is firewalled holds at most this many slots for `timeout_s` each, and the other slots go on serving every other
# account. It is also the account's share of the DNS lookup threads (webhooks/lookups.py).
PER_ACCOUNT = 4
# How often an idle worker looks for due deliveries: the delay a new event may wait.
POLL_S = 0.5
# A store that cannot be reached is retried this often (the worker never exits on a store error).
STORE_RETRY_S = 2.0


class _Metrics:
    def __init__(self, port: int):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

        self.registry = CollectorRegistry()
        self.deliveries = Counter(
            "moderation_webhook_deliveries", "Webhook attempts by outcome (delivered, http_error, timeout, gone, ...).",
            ["outcome"], registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            "moderation_webhook_attempt_latency_ms", "One webhook attempt, request to answer.",
            buckets=[5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 15000], registry=self.registry,
        )  # fmt: skip
        self.depth = Gauge("moderation_webhook_queue_depth", "Pending webhook deliveries.", registry=self.registry)
        self.oldest = Gauge(
            "moderation_webhook_oldest_undelivered_age_seconds", "Age of the oldest pending webhook delivery.",
            registry=self.registry,
        )  # fmt: skip
        self.dropped = Gauge(
            "moderation_webhook_backlog_dropped",
            "Webhook deliveries dropped unsent, in all, because their account had too many waiting.",
            registry=self.registry,
        )  # fmt: skip
        if port:
            start_http_server(port, addr="127.0.0.1", registry=self.registry)


class WebhookWorker:
    """Keeps up to `concurrency` attempts going, at most `per_account` of one account (with every other worker's),
    and starts the next due delivery as soon as one is settled: no attempt waits for another to finish."""

    def __init__(self, redis: Redis, rules: WebhookRules, *, metrics_port: int = 0, concurrency: int = CONCURRENCY,
                 per_account: int = PER_ACCOUNT, poll_s: float = POLL_S):  # fmt: skip
        self.outbox = Outbox(redis, rules)
        self.sender = WebhookSender(rules, lookups=HostLookups(per_account=per_account))
        self.metrics = _Metrics(metrics_port)
        self.concurrency, self.per_account, self.poll_s = concurrency, per_account, poll_s
        self._sending: set[asyncio.Task] = set()  # each attempt in progress
        self._stopping = asyncio.Event()

    async def start_due(self) -> int:
        """Claims due deliveries for the free slots, within each account's share, and starts each; how many."""
        free = self.concurrency - len(self._sending)
        if free <= 0:
            return 0
        claimed = await self.outbox.claim(free, self.per_account)
        for delivery in claimed:
            task = asyncio.create_task(self._deliver(delivery))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)
        return len(claimed)

    async def finish_sending(self) -> None:
        """Waits until every attempt under way is recorded: each ends within its timeout, whatever the receiver does."""
        if self._sending:
            await asyncio.wait(set(self._sending))

    async def _deliver(self, delivery: Delivery) -> None:
        attempt = await self.sender.send(delivery)  # never raises: every failure is an outcome
        try:
            logged = await self.outbox.record(delivery, attempt)
        except Exception as exc:  # noqa: BLE001 - the store is away: the lease runs out and the delivery is retried
            log.warning("webhook %s to %s: %s not recorded (%s); retried after its lease", delivery.event_id,
                        delivery.endpoint_id, attempt.outcome, type(exc).__name__)  # fmt: skip
            return
        self.metrics.deliveries.labels(outcome=attempt.outcome).inc()
        self.metrics.latency.observe(attempt.latency_ms)
        log.info("webhook %s to %s: attempt %d %s %s", delivery.event_id, delivery.endpoint_id, logged.attempt,
                 attempt.outcome, attempt.status or "")  # fmt: skip

    async def _report_backlog(self) -> None:
        depth, oldest_s = await self.outbox.backlog()
        self.metrics.depth.set(depth)
        self.metrics.oldest.set(oldest_s)
        self.metrics.dropped.set(await self.outbox.dropped_for_backlog())

    async def run(self) -> None:
        stopping = asyncio.create_task(self._stopping.wait())
        while not self._stopping.is_set():
            try:
                await self.start_due()
                await self._report_backlog()
                wait_s = self.poll_s
            except Exception as exc:  # noqa: BLE001 - a store outage (or restart) is waited out, never fatal
                log.warning("webhook worker: %s; retrying in %.0f s", type(exc).__name__, STORE_RETRY_S)
                wait_s = STORE_RETRY_S
            # Wake as soon as an attempt is settled (its slot takes the next due delivery), or to look again.
            await asyncio.wait({stopping, *self._sending}, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        await self.finish_sending()
        await self.sender.aclose()

    def stop(self) -> None:
        self._stopping.set()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runtime.webhook_worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", help="the store, without its password (default: REDIS_URL)")
    parser.add_argument("--redis-password-file", type=Path, help="a file holding the store's password")
    return parser


async def _main(args: argparse.Namespace) -> None:
    settings = get_settings()
    url = args.redis_url or settings.redis_url
    if not url:
        raise SystemExit("--redis-url or REDIS_URL must be set")
    password = args.redis_password_file.read_text().strip() if args.redis_password_file else None
    redis = Redis.from_url(url, password=password, decode_responses=True, socket_timeout=10, socket_connect_timeout=2)
    worker = WebhookWorker(redis, settings.webhook_rules(), metrics_port=settings.webhook_metrics_port)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, worker.stop)
    log.info("webhook worker started")
    try:
        await worker.run()
    finally:
        await redis.aclose()


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    asyncio.run(_main(_parser().parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
