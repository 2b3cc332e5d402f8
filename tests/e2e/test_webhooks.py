"""Decisions reach a client, end to end: the real graph scores an image and queues it, a moderator rejects it through
the admin API, the webhook worker (the process `make serve` runs) delivers `review.created` and `review.decided` to a
real receiver on loopback that verifies each signature with `standardwebhooks`, retrying while the receiver is down
and after the worker was not running at all; then the image's resized, recompressed re-upload is blocked by hash."""

from __future__ import annotations

import io

import httpx
import pytest
import skimage.data
from PIL import Image
from support.webhook_receiver import Answer, WebhookReceiver

from webhooks.deliveries import WebhookRules
from runtime.admin_server import AdminServer
from runtime.embedded_store import free_port
from runtime.webhook_process import WebhookWorkerProcess

from e2e.conftest import ADMIN_TOKEN

pytestmark = pytest.mark.e2e
ACCOUNT = "hooks-e2e"
EVERYTHING = {"review": 0.0, "block": 1.0}
REVIEW_ALL = {"mode": "review", "report_threshold": 0, "categories": {"nsfw": EVERYTHING, "toxic": EVERYTHING}}


def _jpeg(size: tuple[int, int] | None = None, quality: int = 90) -> bytes:
    image = Image.fromarray(skimage.data.astronaut())
    if size is not None:
        image = image.resize(size, Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


@pytest.fixture
def loopback_admin(serve_graph):
    """An admin listener on the graph's store whose operator allows loopback receivers (as the tests need)."""
    server = AdminServer(redis_url=serve_graph["redis_url"], admin_token=ADMIN_TOKEN, host="127.0.0.1",
                         port=free_port(), webhook_rules=WebhookRules(allow_private=True))  # fmt: skip
    server.start()
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30) as http:
        yield http
    server.stop()


@pytest.fixture
def worker_env(monkeypatch):
    monkeypatch.setenv("MODERATION_WEBHOOK_ALLOW_PRIVATE", "1")
    monkeypatch.setenv("MODERATION_WEBHOOK_RETRY_SCHEDULE_S", "[0, 1, 1, 1]")
    monkeypatch.setenv("MODERATION_WEBHOOK_METRICS_PORT", "0")


def test_a_rejection_reaches_the_client_signed_and_the_reupload_is_blocked_by_hash(
    serve_graph, client, loopback_admin, worker_env
):
    assert loopback_admin.put("/admin/v1/profiles/review-all", json=REVIEW_ALL).status_code == 200
    body = {"account": ACCOUNT, "profile": "review-all", "plan": "default"}
    created = loopback_admin.post("/admin/v1/keys", json=body)
    key = {"Authorization": f"Bearer {created.json()['key']}"}
    with WebhookReceiver() as receiver:
        receiver.answers.extend([Answer(503), Answer(502)])  # the client's endpoint is down for its first two tries
        endpoint = loopback_admin.post(f"/admin/v1/accounts/{ACCOUNT}/webhooks", json={"url": receiver.url})
        assert endpoint.status_code == 201, endpoint.text
        receiver.secret = endpoint.json()["secret"]

        # Both events are written while no worker runs: they wait in the store.
        answer = client.post("/v1/moderate", headers=key, files={"image": ("a.jpg", _jpeg(), "image/jpeg")}).json()
        assert answer["decision"] == "review"
        review_id = answer["review_id"]
        decided = loopback_admin.post(f"/admin/v1/reviews/{review_id}/decision", json={"status": "rejected"})
        assert decided.status_code == 200 and len(decided.json()["pdq"]) == 64

        store = serve_graph["store"]
        worker = WebhookWorkerProcess(store.url_without_password, store.password_path).start()
        try:
            receiver.wait_for(4, timeout_s=60)  # two failed tries, then both events
        finally:
            worker.stop()
        events = {event["type"]: event for event in receiver.verified_events()}
        assert len(receiver.verified_events()) == len(receiver.received) == 4  # every request verified
        assert set(events) == {"review.created", "review.decided"}
        assert events["review.created"]["data"]["id"] == events["review.decided"]["data"]["id"] == review_id
        assert events["review.decided"]["data"]["status"] == "rejected"
        assert events["review.decided"]["data"]["decided_at"] is not None
        log = loopback_admin.get(f"/admin/v1/webhooks/{endpoint.json()['id']}/deliveries").json()["attempts"]
        assert sorted(a["outcome"] for a in log) == ["delivered", "delivered", "http_error", "http_error"]

    reupload = _jpeg(size=(320, 320), quality=55)
    blocked = client.post("/v1/moderate", headers=key, files={"image": ("b.jpg", reupload, "image/jpeg")}).json()
    assert blocked["decision"] == "block" and blocked["blocked_by"] == ["hash_match"]
    assert blocked["hash_match"]["review_id"] == review_id and "review_id" not in blocked
