"""The logs of a whole run of requests hold no API key, no admin token, no text and no image bytes.

Every logger at DEBUG (the app's, the access log, FastAPI's, Starlette's, redis-py's, httpx's) and
everything written to stdout/stderr is captured while one run goes through the in-process app:
images (valid, invalid, oversized, at review), texts (allowed, flagged, too long, malformed), reports
up to an escalation, review reads, admin calls (keys, plans, reviews, a decision, a revocation), wrong
keys and wrong admin tokens, a model failure (503) and an unexpected exception (500, whose traceback
is logged). Then no rendering of a secret or of the content may appear anywhere in the capture.
"""

from __future__ import annotations

import base64
import io
import logging

import numpy as np
from PIL import Image
from support.api import ADMIN_TOKEN, Api

from policy.widget_verdicts import text_sha256
from store.review.queue import ReviewQueue

# Distinctive content: found in a log only if the content itself was logged.
TEXT_MARKER = "zqxjv-Secret-Comment-Body-7731"
REFERENCE_TEXT = f"You are an idiot, {TEXT_MARKER}, nobody likes you"


def distinctive_image() -> bytes:
    pixels = np.random.default_rng(7731).integers(0, 255, (40, 56, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def renderings(data: bytes) -> list[str]:
    """How bytes could show up in a log line: repr, latin-1, hex, base64 (of a slice from the middle)."""
    chunk = data[len(data) // 2 : len(data) // 2 + 24]
    return [
        repr(chunk)[2:-1],
        chunk.decode("latin-1"),
        chunk.hex(),
        chunk.hex(" "),
        base64.b64encode(chunk)[:24].decode(),
        base64.b64encode(data[:48])[:40].decode(),  # the start of a base64 of the whole upload
    ]


async def broken(*args, **kwargs):
    raise RuntimeError("a bug in the review queue")


def test_a_whole_run_logs_no_key_token_text_or_image(api: Api, caplog, capfd, monkeypatch):
    caplog.set_level(logging.DEBUG)  # the root logger and so every logger below it
    for name in ("moderation", "moderation.access", "moderation.errors", "uvicorn", "fastapi", "httpx", "redis"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    image = distinctive_image()
    key_header = api.new_key(account="logged")
    key_secret = key_header["Authorization"].removeprefix("Bearer ")
    created = api.client.post("/admin/v1/keys", json={"account": "logged2", "profile": "default", "plan": "default"},
                              headers=api.admin).json()  # fmt: skip
    other_secret = created["key"]
    wrong_key = "mod_WrongKeyThatLooksReal0123456789abcdefXYZ"
    wrong_admin = "wrong-admin-token-ZZZ-0123456789abcdefghij"
    statuses = []

    def note(response):
        statuses.append(response.status_code)
        return response

    # Images: allowed, flagged for review, invalid, over the plan's bytes.
    note(api.moderate(key_header, image, reference="post-1", image_url="https://example.com/p/1.png"))
    api.backends.image_scores["nsfw"] = 0.6
    review = note(api.moderate(key_header, image, reference="post-2")).json()
    api.backends.image_scores["nsfw"] = 0.05
    note(api.moderate(key_header, b"\x89PNG\r\n\x1a\n" + image[100:400]))
    api.put_plan("tiny", scope="both", monthly_quota=100, rate_per_second=100, burst=100,
                 image_max_bytes=1024, image_max_pixels=1_000_000, text_max_chars=40)  # fmt: skip
    tiny = {"Authorization": f"Bearer {api.client.post('/admin/v1/keys', json={'account': 'tiny', 'profile': 'default', 'plan': 'tiny'}, headers=api.admin).json()['key']}"}
    note(api.moderate(tiny, image))
    # Texts: allowed, flagged, too long, malformed, with a threshold.
    note(api.moderate_text(key_header, REFERENCE_TEXT))
    api.backends.toxic = 0.6
    note(api.moderate_text(key_header, REFERENCE_TEXT, reference="comment-9"))
    api.backends.toxic = 0.05
    note(api.moderate_text(tiny, REFERENCE_TEXT * 3))
    note(api.client.post("/v1/moderate-text", headers=key_header, content=f'{{"text": "{TEXT_MARKER}'))
    note(api.moderate_text(key_header, REFERENCE_TEXT, params={"threshold": "0.3"}))
    # Reports up to an escalation; review reads.
    for _ in range(4):
        note(api.report(key_header, "post-77", image_url="https://example.com/77"))
    note(api.client.get(f"/v1/review/{review['review_id']}", headers=key_header))
    note(api.client.get("/v1/review/999999", headers=key_header))
    # Wrong keys and wrong admin tokens.
    note(api.moderate_text({"Authorization": f"Bearer {wrong_key}"}, REFERENCE_TEXT))
    note(api.client.get("/admin/v1/reviews", headers={"Authorization": f"Bearer {wrong_admin}"}))
    # Admin: read the queue, decide, read a key, revoke one.
    note(api.client.get("/admin/v1/reviews", headers=api.admin))
    note(api.client.post(f"/admin/v1/reviews/{review['review_id']}/decision", json={"status": "approved"},
                         headers=api.admin))  # fmt: skip
    note(api.client.get(f"/admin/v1/keys/{created['id']}", headers=api.admin))
    note(api.client.delete(f"/admin/v1/keys/{created['id']}", headers=api.admin))
    note(api.moderate_text({"Authorization": f"Bearer {other_secret}"}, REFERENCE_TEXT))
    # The browser widget: a token minted, a check from its page, the verdict redeemed.
    site_key = api.client.post("/admin/v1/keys", json={"account": "site", "profile": "default", "plan": "default"},
                               headers=api.admin).json()  # fmt: skip
    site_header = {"Authorization": f"Bearer {site_key['key']}"}
    widget_origin = {"origins": ["https://site.example"]}
    api.client.put(f"/admin/v1/keys/{site_key['id']}/widget", json=widget_origin, headers=api.admin)
    widget_token = note(api.client.post("/v1/widget/tokens", headers=site_header, json={})).json()["token"]
    widget_check = {"Authorization": f"Bearer {widget_token}", "Origin": "https://site.example"}
    verdict = note(api.client.post("/v1/widget/check-text", headers=widget_check,
                                   json={"text": REFERENCE_TEXT})).json()["verdict"]  # fmt: skip
    redeemed = note(api.client.post("/v1/widget/verdicts/redeem", headers=site_header,
                                    json={"verdict": verdict, "kind": "text",
                                          "content_sha256": text_sha256(REFERENCE_TEXT)}))  # fmt: skip
    assert redeemed.status_code == 200, redeemed.text
    # A model failure (503), then an unexpected exception (500, logged with its traceback).
    api.backends.failing = True
    note(api.moderate(key_header, image))
    note(api.moderate_text(key_header, REFERENCE_TEXT))
    api.backends.failing = False
    with monkeypatch.context() as patch:
        patch.setattr(ReviewQueue, "get", broken)
        note(api.client.get(f"/v1/review/{review['review_id']}", headers=key_header))

    assert {200, 400, 401, 404, 413, 500, 503} <= set(statuses), statuses
    out, err = capfd.readouterr()
    logs = "\n".join(
        [caplog.text, out, err]
        + [str(record.__dict__) for record in caplog.records]  # args, extras and exc_info too
    )
    # The run was logged, tracebacks included.
    assert '"status": 500' in caplog.text and "Traceback" in caplog.text and "RuntimeError" in caplog.text
    secrets = {
        "API key": key_secret, "another API key": other_secret, "a wrong API key": wrong_key,
        "admin token": ADMIN_TOKEN, "a wrong admin token": wrong_admin, "text": TEXT_MARKER,
        "part of the text": "nobody likes you", "widget token": widget_token, "the site's API key": site_key["key"], "widget verdict": verdict,
        "the verdict's signature": verdict.rsplit(".", 1)[1],
    }  # fmt: skip
    secrets.update({f"image bytes ({i})": r for i, r in enumerate(renderings(image))})
    found = {what for what, secret in secrets.items() if secret in logs}
    assert not found, f"in the logs: {sorted(found)}"
