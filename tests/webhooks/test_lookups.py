"""DNS lookups of the webhook sender: a nameserver that never answers for one account's host holds only that
account's share of the lookup threads, and every other account's deliveries still resolve and go out at once."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest
from support.webhook_receiver import WebhookReceiver

from webhooks import url_guard
from webhooks.deliveries import Delivery, EndpointForDelivery, WebhookRules
from webhooks.lookups import PER_ACCOUNT, HostLookups, LookupFailed
from webhooks.sender import WebhookSender
from webhooks.signing import new_secret

pytestmark = pytest.mark.anyio
RULES = WebhookRules(allow_private=True, timeout_s=2, jitter=0.0)
STUCK, PROMPT = "stuck.example", "hooks.example"


class Nameserver:
    """The test's DNS: PROMPT answers 127.0.0.1 at once; STUCK never answers until the test ends (`release`)."""

    def __init__(self):
        self.released = threading.Event()
        self.waiting = 0  # lookups of STUCK holding a thread now
        self.most_waiting = 0
        self._lock = threading.Lock()

    def resolve(self, target: url_guard.WebhookTarget) -> list[str]:
        if target.host == PROMPT:
            return ["127.0.0.1"]
        if target.host != STUCK:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        with self._lock:
            self.waiting += 1
            self.most_waiting = max(self.most_waiting, self.waiting)
        self.released.wait()
        with self._lock:
            self.waiting -= 1
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")


@pytest.fixture
def nameserver(monkeypatch):
    server = Nameserver()
    monkeypatch.setattr(url_guard, "resolve", server.resolve)
    yield server
    server.released.set()  # the stuck threads end with the test


def _delivery(account: str, url: str, secret: str, n: int) -> Delivery:
    endpoint = EndpointForDelivery(id=f"whk_{account}", url=url, enabled=True, secrets=[secret])
    return Delivery(member=f"msg_{n}:whk_{account}", account=account, event_id=f"msg_{n}",
                    event_type="review.created", body=b'{"type": "review.created"}', attempts=0, round_start=0,
                    created_at=time.time(), endpoint=endpoint)  # fmt: skip


async def test_a_hanging_nameserver_holds_only_its_accounts_share_and_other_accounts_deliver_at_once(nameserver):
    sender = WebhookSender(RULES)
    with WebhookReceiver(secret=new_secret()) as receiver:
        try:
            # More lookups of the stuck name than any default pool has threads (at most 32), as rounds of a
            # worker would start them: each attempt gives up at its time-out, its lookup does not.
            stuck = [asyncio.create_task(sender.send(_delivery("slowco", f"http://{STUCK}:9/hooks", "whsec_x", n)))
                     for n in range(40)]  # fmt: skip
            await asyncio.sleep(0.2)
            started = time.monotonic()
            prompt = await asyncio.gather(*(
                sender.send(_delivery("acme", f"http://{PROMPT}:{receiver.port}/hooks", receiver.secret, n))
                for n in range(3)
            ))  # fmt: skip
            assert time.monotonic() - started < 1.0
            assert [attempt.outcome for attempt in prompt] == ["delivered"] * 3
            assert nameserver.most_waiting <= PER_ACCOUNT  # the stuck account never held more threads
            outcomes = [attempt.outcome for attempt in await asyncio.gather(*stuck)]
            # Its share waited until the attempts' time-out; every lookup past the share failed at once.
            assert outcomes.count("dns_error") == 40 - PER_ACCOUNT and outcomes.count("timeout") == PER_ACCOUNT
            assert sender.lookups.held("slowco") == PER_ACCOUNT  # still counted while their threads wait
        finally:
            nameserver.released.set()  # before the event loop closes, which waits for the threads of its own pool
            await sender.aclose()


async def test_a_lookup_past_its_time_fails_and_its_thread_counts_against_the_account_until_it_ends(nameserver):
    lookups = HostLookups(per_account=1, timeout_s=0.2)
    target = url_guard.parse_webhook_url(f"https://{STUCK}/hooks")
    started = time.monotonic()
    with pytest.raises(LookupFailed, match="no DNS answer within 0.2 s"):
        await lookups.allowed_addresses("slowco", target, allow_private=False)
    assert time.monotonic() - started < 0.5
    with pytest.raises(LookupFailed, match="still waiting"):  # at once: its one thread is still held
        await lookups.allowed_addresses("slowco", target, allow_private=False)
    prompt = url_guard.parse_webhook_url(f"http://{PROMPT}/hooks")
    assert await lookups.allowed_addresses("acme", prompt, allow_private=True) == ["127.0.0.1"]
    nameserver.released.set()
    for _ in range(50):
        if lookups.held("slowco") == 0:
            break
        await asyncio.sleep(0.01)
    assert lookups.held("slowco") == 0  # the thread ended: the account's share is free again
    with pytest.raises(OSError):
        await lookups.allowed_addresses("slowco", target, allow_private=False)  # now an answer: no such name
    lookups.close()
