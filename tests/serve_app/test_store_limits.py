"""The store's limits as a client meets them: a report over the daily cap is 429, a full store is 503, an account at
its cap of pending review items gets 429 review_queue_full (with the result), and every key a tenant grows expires."""

from __future__ import annotations

import re

import redis
from fastapi.testclient import TestClient
from support.api import Api, StubBackends, assert_error, public_and_admin

from store.review.queue import ReviewRules
from runtime.embedded_store import EmbeddedStore
from serve_app.services import Services



def _eager_reporter(api) -> dict:
    """A key whose profile escalates the first report of a reference to review."""
    api.put_profile("eager", mode="enforce", report_threshold=0, categories={
        "nsfw": {"review": 0.4, "block": 0.8}, "toxic": {"review": 0.5, "block": 0.8}})  # fmt: skip
    return api.new_key(profile="eager")

def _api(url: str, backends: StubBackends, rules: ReviewRules | None = None) -> tuple[TestClient, Api]:
    services = Services.connect(url, backends, inference_timeout_s=2, review_rules=rules)
    client = TestClient(public_and_admin(services), raise_server_exceptions=False)
    return client, Api(client, backends)


def test_a_report_over_the_daily_cap_is_429_with_retry_after_and_counts_nothing(redis_url):
    client, api = _api(redis_url, StubBackends(), ReviewRules(reports_per_account_per_day=2))
    with client:
        api.seed()
        key, other = api.new_key(account="acme"), api.new_key(account="other")
        assert [api.report(key, "post-1").status_code for _ in range(2)] == [200, 200]
        refused = api.report(key, "post-1")
        assert_error(refused, 429, "report_limit_exceeded")
        assert 1 <= int(refused.headers["retry-after"]) <= 24 * 3600
        assert api.report(other, "post-1").json()["reports"] == 1  # another account is served


def test_an_escalation_over_the_daily_cap_is_429(redis_url):
    client, api = _api(redis_url, StubBackends(), ReviewRules(escalations_per_account_per_day=1))
    with client:
        api.seed()
        key = api.new_key()
        key = _eager_reporter(api)
        assert api.report(key, "a").json()["escalated"] is True
        assert_error(api.report(key, "b"), 429, "report_limit_exceeded")


def test_a_report_reference_over_4096_characters_is_400_not_500(redis_url):
    client, api = _api(redis_url, StubBackends())
    with client:
        api.seed()
        response = client.post("/v1/report", headers=api.new_key(), data={"reference": "r" * 5000})
        assert response.status_code == 400, response.text


def test_a_full_store_answers_503_store_unavailable_and_loses_nothing(tmp_path):
    """maxmemory with noeviction: writes are refused (503), reads and everything stored stay."""
    with EmbeddedStore(tmp_path / "store") as store:
        backends = StubBackends()
        client, api = _api(store.url, backends)
        with client:
            api.seed()
            key = api.new_key()
            backends.toxic = 0.6  # review
            queued = api.moderate_text(key).json()["review_id"]
            with redis.Redis.from_url(store.admin_url) as owner:
                # Full at once and for sure: the limit below what is already used.
                owner.config_set("maxmemory", owner.info("memory")["used_memory"] // 2)
                # Every authenticated request takes a rate token, a write: all of them are refused.
                assert_error(api.moderate_text(key), 503, "store_unavailable")
                assert_error(api.report(key, "post-1"), 503, "store_unavailable")
                assert_error(client.get(f"/v1/review/{queued}", headers=key), 503, "store_unavailable")
                owner.config_set("maxmemory", 512 * 1024 * 1024)  # room again (an operator raised the limit)
            item = client.get(f"/v1/review/{queued}", headers=key)
            assert (item.status_code, item.json()["status"]) == (200, "pending")  # nothing was evicted
            assert api.moderate_text(key).status_code == 200


# The cap of pending review items per account (SECURITY.md: the review queue cannot fill the store).


def _assert_queue_full(response) -> None:
    """429 review_queue_full in the error shape, with the result beside the error."""
    assert response.status_code == 429, response.text
    body = response.json()
    assert set(body) == {"error", "result"} and body["error"]["code"] == "review_queue_full"
    assert int(response.headers["retry-after"]) >= 1


def test_a_review_decision_over_the_pending_cap_is_429_with_its_result_and_queues_nothing(redis_url):
    backends = StubBackends(toxic=0.6)  # review
    client, api = _api(redis_url, backends, ReviewRules(pending_per_account=2))
    with client:
        api.seed()
        key, other = api.new_key(account="acme"), api.new_key(account="other")
        queued = [api.moderate_text(key).json()["review_id"] for _ in range(2)]
        assert all(isinstance(review_id, int) for review_id in queued)
        refused = api.moderate_text(key, reference="post-3")
        _assert_queue_full(refused)
        assert int(refused.headers["retry-after"]) >= 1
        result = refused.json()["result"]  # the answer a 200 would have carried, without a review item
        assert (result["decision"], result["scores"]["unsafe"], "review_id" in result) == ("review", 0.6, False)
        backends.image_scores = {"nsfw": 0.6}  # images too: nsfw 0.6 is a review
        image = api.moderate(key)
        _assert_queue_full(image)
        assert image.json()["result"]["decision"] == "review" and "review_id" not in image.json()["result"]
        assert api.moderate_text(other).json()["review_id"] not in (None, *queued)  # another account still queues
        backends.toxic = 0.05
        assert api.moderate_text(key).status_code == 200  # what needs no review is answered as always
        assert [r.status_code for r in (client.get(f"/v1/review/{i}", headers=key) for i in queued)] == [200, 200]


def test_a_batch_over_the_pending_cap_answers_every_result_and_names_the_unqueued_ones(redis_url):
    backends = StubBackends(toxic=0.6)
    client, api = _api(redis_url, backends, ReviewRules(pending_per_account=2))
    with client:
        api.seed()
        key = api.new_key()
        refused = client.post("/v1/moderate-text", headers=key, json={"texts": ["a", "b", "c"]})
        _assert_queue_full(refused)
        results = refused.json()["result"]["results"]
        assert [r["decision"] for r in results] == ["review"] * 3
        assert sum("review_id" in r for r in results) == 2  # two queued, one not


def test_a_report_over_the_pending_cap_is_429_review_queue_full_and_counts_nothing(redis_url):
    backends = StubBackends(toxic=0.6)
    client, api = _api(redis_url, backends, ReviewRules(pending_per_account=1))
    with client:
        api.seed()
        key = _eager_reporter(api)
        assert api.report(key, "a").json()["escalated"] is True
        assert_error(api.report(key, "b"), 429, "review_queue_full")


def test_the_compatible_routes_answer_as_always_when_the_pending_cap_is_reached(redis_url):
    """OpenAI's and Perspective's answers carry no review item; a 429 would make their SDKs resend and pay again."""
    backends = StubBackends(toxic=0.6)
    client, api = _api(redis_url, backends, ReviewRules(pending_per_account=0))
    with client:
        api.seed()
        key = api.new_key()
        response = client.post("/v1/moderations", headers=key, json={"input": "hello"})
        assert response.status_code == 200 and response.json()["results"][0]["flagged"] is True
        _assert_queue_full(api.moderate_text(key))


# Keys that may live without a TTL: configuration (an operator's), and the review queue's counter and indexes, whose
# members are items that expire and leave them (tests/store/review/test_queue.py).
UNEXPIRING = re.compile(
    r"mod:(plan|profile|apikey|apikey-sha256):.+|mod:apikeys:live|mod:review:(next-id|all|expiring|pending-accounts)"
    r"|mod:review:(status|account|pending|pending-ids):.+"
)


def test_every_key_a_tenant_can_grow_expires(redis_url):
    """Whatever a tenant does through the public API (moderate, queue reviews, report, escalate, suggest scores,
    call /healthz), every key it makes the store hold has a TTL, except configuration and the queue's indexes."""
    backends = StubBackends(toxic=0.6, image_scores={"nsfw": 0.6})  # review: items are queued
    client, api = _api(redis_url, backends)
    with client:
        api.seed()
        key = api.new_key()
        assert api.moderate_text(key, reference="post-1").json()["review_id"]
        assert api.moderate(key).json()["review_id"]
        assert [api.report(key, "post-9").status_code for _ in range(4)] == [200] * 4
        suggestion = {"comment": {"text": "t"}, "attributeScores": {"TOXICITY": {"summaryScore": {"value": 1}}}}
        assert client.post("/v1alpha1/comments:suggestscore", headers=key, json=suggestion).status_code == 200
        assert client.get("/healthz").status_code == 200
        with redis.Redis.from_url(redis_url, decode_responses=True) as store:
            keys = list(store.scan_iter("mod:*"))
            forever = [k for k in keys if not UNEXPIRING.fullmatch(k) and store.ttl(k) < 0]
    assert len(keys) > 15 and forever == []
