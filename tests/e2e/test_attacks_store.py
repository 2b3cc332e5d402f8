"""Attacks on the store and on /healthz, against the real graph (SECURITY.md lists each).

- Unauthenticated fan-out: /healthz needs no key. Hundreds of calls at once cost no model call (each ingress
  replica checks the deployments every 2 s whatever the rate; Serve's own request counter of the model
  deployments shows it), HAProxy refuses one address's keyless requests past its limit before the ingress sees
  them, and another account's text is answered within 5 s meanwhile.
- A full store: /healthz said 200 while every write failed. It says 503 `store_unavailable` within a few health
  intervals of the store refusing writes, naming the cause, and 200 again within 30 s of room coming back; meanwhile
  every request that needs a write is 503 `store_unavailable` with Retry-After, the admin API's reads are served,
  and nothing acknowledged before is lost.
- The review queue fills the store: an account at its cap of pending review items (10,000 by default, 300 here) gets its
  flagged results with 429 `review_queue_full` and nothing queued, while another account still queues items.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import redis
import redis.asyncio

from e2e.conftest import E2E_PENDING_CAP, METRICS_REPORT_S
from e2e.test_metrics import find, metrics_url, samples

from store import redis_keys
from store.review.queue import ReviewQueue, ReviewRules
from runtime.haproxy import FALLBACK_RECORD, RUN_DIR
from runtime.haproxy_rules import MARKER

OTHER_BOUND_S = 5  # another account is answered within this, during and after each attack
HEALTHY_BOUND_S = 30  # healthy again within this after an attack ends
HEALTH_CALLS = 400
FLOOD_CALLERS = 16
FLOOD_ADDRESS = "127.0.0.2"  # another client address on loopback: the limits are per address
# Review everything: every text scores at least 0 (review) and below 1 (block), so every text is decided `review`.
REVIEW_ALL = {
    "mode": "review", "report_threshold": 3,
    "categories": {"nsfw": {"review": 0.0, "block": 1.0}, "toxic": {"review": 0.0, "block": 1.0}},
}  # fmt: skip


def _timed_text(base_url: str, key: dict, text: str = "a friendly hello") -> tuple[int, float]:
    started = time.monotonic()
    response = httpx.post(f"{base_url}/v1/moderate-text", headers=key, json={"text": text}, timeout=60)
    return response.status_code, time.monotonic() - started


def _model_requests() -> float:
    """Requests Serve counted on the model and policy deployments so far (its built-in counter, all replicas)."""
    found = samples(httpx.get(metrics_url(), timeout=10).text)
    return sum(
        value
        for deployment in ("TextModel", "ImageModel", "Policy")
        for _, value in find(found, "ray_serve_deployment_request_counter_total", deployment=deployment)
    )


def _settled_model_requests(wait_s: float = METRICS_REPORT_S + 3) -> float:
    """The counter once every replica has reported what happened so far: one report interval of the graph's Ray
    (tests/e2e/conftest.py), the replicas' 1 s of cached Serve metrics (runtime/ray_cluster.py IDLE_LOOPS) and 2 s
    more for a busy machine (13 s at Ray's default interval of 10 s)."""
    time.sleep(wait_s)
    return _model_requests()


def test_a_keyless_flood_from_one_address_is_refused_by_haproxy_and_others_are_served(serve_graph, client, new_key):
    """400 `/healthz` calls from 16 callers at one address: HAProxy answers past its per-address limit of keyless
    requests (runtime/haproxy_rules.py) with 429, so the ingress's event loop sees about 100 of them; none costs a
    model call; another account's text is answered within 5 s during the flood and after; the flooding address is
    served again within 30 s of its end."""
    base_url = serve_graph["base_url"]
    config = next(_haproxy_run_dir(serve_graph["workdir"]).rglob("haproxy.cfg")).read_text()
    assert MARKER in config  # the graph runs with the limits, as `make serve` does
    other = new_key(account="healthz-other")
    baseline = _timed_text(base_url, other)
    assert baseline[0] == 200
    before, started = _settled_model_requests(), time.monotonic()
    with httpx.Client(transport=httpx.HTTPTransport(local_address=FLOOD_ADDRESS), timeout=30) as attacker:
        with ThreadPoolExecutor(max_workers=FLOOD_CALLERS) as pool:
            flood = [pool.submit(attacker.get, f"{base_url}/healthz") for _ in range(HEALTH_CALLS)]
            status, waited = _timed_text(base_url, other)  # during the flood
            answers = [future.result() for future in flood]
        elapsed = time.monotonic() - started
        statuses = Counter(answer.status_code for answer in answers)
        refused = next(answer for answer in answers if answer.status_code == 429)
        after = _settled_model_requests()
        print(f"\n{HEALTH_CALLS} /healthz calls from {FLOOD_CALLERS} callers in {elapsed:.1f} s: {dict(statuses)}; "
              f"another account's text: {status} in {waited:.2f} s (before the flood: {baseline[1]:.2f} s); "
              f"model and policy requests meanwhile: {after - before:.0f}")  # fmt: skip
        assert set(statuses) == {200, 429} and statuses[429] >= HEALTH_CALLS / 2
        assert refused.json()["error"]["code"] == "rate_limited" and int(refused.headers["Retry-After"]) > 0
        assert status == 200 and waited < OTHER_BOUND_S
        # The health loop's own checks (3 deployment calls every 2 s) and the one text (a model and a policy call):
        # a few dozen at most over the run, never one per /healthz call.
        assert 0 < after - before < HEALTH_CALLS / 4  # the counter is live (the loop's checks), and small
        assert _timed_text(base_url, other)[1] < OTHER_BOUND_S  # after
        _until(lambda: attacker.get(f"{base_url}/healthz").status_code == 200, HEALTHY_BOUND_S, "the address served")


def _haproxy_run_dir(data_dir: Path) -> Path:
    """`<data dir>/hap`, or the short temp dir recorded there when the data dir's path is too long for its sockets."""
    record = data_dir / FALLBACK_RECORD
    return Path(record.read_text()) if record.exists() else data_dir / RUN_DIR


def _until(check, bound_s: float, what: str):
    deadline = time.monotonic() + bound_s
    while True:
        answer = check()
        if answer:
            return answer
        assert time.monotonic() < deadline, f"{what} not within {bound_s} s"
        time.sleep(0.25)


def _refused_for_the_store(answer: httpx.Response, envelope: str = "native") -> None:
    """503 `store_unavailable` in the route's documented error body, with Retry-After: never a 500 or a traceback."""
    assert answer.status_code == 503, answer.text
    assert int(answer.headers["Retry-After"]) >= 1 and "Traceback" not in answer.text
    error = answer.json()["error"]
    if envelope == "openai":
        assert (error["code"], error["type"]) == ("store_unavailable", "server_error")
    else:
        assert set(answer.json()) == {"error"} and error["code"] == "store_unavailable"


def test_healthz_says_503_while_the_store_refuses_writes_and_200_again_after(
    serve_graph, client, admin_client, new_key
):
    """Valkey at its `maxmemory` (set below what it uses): every request that needs a write (a rate token, a quota
    unit, a report) answers 503 `store_unavailable` with Retry-After; /healthz says 503 and why (the store is full);
    reads that need no write (the admin API's listing and item, the account's usage) are served; and once there is room
    again, everything acknowledged before is there and no counter moved for the refused requests."""
    assert admin_client.put("/admin/v1/profiles/store-full-review", json=REVIEW_ALL).status_code == 200
    key = new_key(account="store-full", profile="store-full-review")
    queued = [client.post("/v1/moderate-text", headers=key, json={"text": f"queued before {n}"}).json()["review_id"]
              for n in range(3)]  # fmt: skip
    assert all(isinstance(item, int) for item in queued)
    assert client.post("/v1/report", headers=key, data={"reference": "post-full"}).json()["reports"] == 1
    usage = admin_client.get("/admin/v1/accounts/store-full/usage").json()
    store = serve_graph["store"]
    with redis.Redis.from_url(store.admin_url) as owner:
        limit = owner.config_get("maxmemory")["maxmemory"]
        owner.config_set("maxmemory", owner.info("memory")["used_memory"] // 2)  # full: every write refused
        filled = time.monotonic()
        try:
            health = _until(lambda: (r := client.get("/healthz")).status_code == 503 and r, 15, "503 when full")
            print(f"\n/healthz 503 {time.monotonic() - filled:.1f} s after the store filled: {health.json()}")
            _refused_for_the_store(health)
            assert health.json()["error"]["message"].startswith("The store is full")
            _refused_for_the_store(client.post("/v1/moderate-text", headers=key, json={"text": "after"}))
            _refused_for_the_store(client.post("/v1/moderate-text", headers=key, json={"texts": ["a", "b"]}))
            _refused_for_the_store(client.post("/v1/moderations", headers=key, json={"input": "after"}), "openai")
            _refused_for_the_store(client.post("/v1/report", headers=key, data={"reference": "post-full"}))
            # The public item read takes a rate token, a write: refused too. The admin API's reads take none.
            _refused_for_the_store(client.get(f"/v1/review/{queued[0]}", headers=key))
            listing = admin_client.get("/admin/v1/reviews", params={"account": "store-full"})
            assert listing.status_code == 200, listing.text
            assert sorted(item["id"] for item in listing.json()["items"]) == sorted(queued)
            item = admin_client.get(f"/admin/v1/reviews/{queued[0]}")
            assert (item.status_code, item.json()["status"]) == (200, "pending")
            assert admin_client.get("/admin/v1/accounts/store-full/usage").json() == usage
        finally:
            owner.config_set("maxmemory", limit)  # room again
    _until(lambda: client.get("/healthz").status_code == 200, HEALTHY_BOUND_S, "healthy after room came back")
    assert [client.get(f"/v1/review/{item}", headers=key).json()["status"] for item in queued] == ["pending"] * 3
    assert admin_client.get("/admin/v1/accounts/store-full/usage").json() == usage  # nothing taken by the 503s
    assert client.post("/v1/report", headers=key, data={"reference": "post-full"}).json()["reports"] == 2


def _fill_pending(redis_url: str, account: str, count: int) -> None:
    """`count` real pending items of `account`, queued through the review queue itself (as model flags would)."""

    async def fill() -> None:
        client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
        queue = ReviewQueue(client, ReviewRules())
        try:
            for start in range(0, count, 50):
                await asyncio.gather(*(
                    queue.create(account=account, reason="model_flagged", kind="text", reference=f"post-{i}",
                                 image_url=None, scores={"toxic": 0.6}, model_version="e2e")
                    for i in range(start, min(count, start + 50))
                ))  # fmt: skip
        finally:
            await client.aclose()

    asyncio.run(fill())


def test_an_account_at_its_pending_cap_gets_its_results_with_429_while_another_still_queues(
    serve_graph, client, admin_client, new_key
):
    assert admin_client.put("/admin/v1/profiles/review-all", json=REVIEW_ALL).status_code == 200
    cap = E2E_PENDING_CAP  # the graph's cap (MODERATION_REVIEW_PENDING_PER_ACCOUNT), not the default 10,000
    attacker = new_key(account="queue-filler", profile="review-all")
    other = new_key(account="queue-other", profile="review-all")
    _fill_pending(serve_graph["redis_url"], "queue-filler", cap - 5)
    # A batch of 20 texts, each decided `review`: the first 5 fill the cap, the 15 others are not queued.
    texts = [f"borderline comment number {i}" for i in range(20)]
    started = time.monotonic()
    refused = client.post("/v1/moderate-text", headers=attacker, json={"texts": texts})
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "review_queue_full" and int(refused.headers["Retry-After"]) >= 1
    results = refused.json()["result"]["results"]
    assert [r["decision"] for r in results] == ["review"] * 20  # every result answered
    assert sum("review_id" in r for r in results) == 5
    # Another account is served and still queues its flagged text, within the bound.
    status, waited = _timed_text(serve_graph["base_url"], other)
    queued = client.post("/v1/moderate-text", headers=other, json={"text": "borderline"}).json()
    print(f"\nat the cap: 429 in {time.monotonic() - started:.2f} s; another account answered in {waited:.2f} s")
    assert status == 200 and waited < OTHER_BOUND_S and isinstance(queued["review_id"], int)
    # The attacker's next flagged text: 429 with its result, nothing queued; the store holds exactly the cap.
    again = client.post("/v1/moderate-text", headers=attacker, json={"text": "one more"})
    assert again.status_code == 429 and again.json()["result"]["decision"] == "review"
    with redis.Redis.from_url(serve_graph["redis_url"], decode_responses=True) as store:
        assert store.zcard(redis_keys.review_pending_of("queue-filler")) == cap
    assert client.get("/healthz").status_code == 200
