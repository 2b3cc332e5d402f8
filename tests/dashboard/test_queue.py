"""The moderators' pages: the queue oldest first (an operator's round the accounts) and filtered, an item with its
text and scores, claims, decisions ("decide and next") that the client sees, and the queue's numbers as metrics."""

from __future__ import annotations

import re

import pytest
import redis
from support.dashboard import ADMIN, csrf_of, log_in, make_user, post_form

from dashboard.routes_queue import preview_url
from store import redis_keys

REVIEW_TOXIC = 0.6  # between the test profile's toxic review (0.5) and block (0.8) thresholds


@pytest.fixture
def queued(api, backends, key) -> list[int]:
    """Three text items in review, oldest first."""
    backends.toxic = REVIEW_TOXIC
    ids = []
    for n in range(3):
        body = api.moderate_text(key, f"queued text number {n}", reference=f"ref-{n}").json()
        assert body["decision"] == "review", body
        ids.append(body["review_id"])
    return ids


@pytest.fixture
def mia(client):
    make_user(client, "mia", accounts=["acme", "other"])
    assert log_in(client, "mia").status_code == 303
    return client


def item_ids_of(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'href="/dashboard/items/(\d+)', html)]


def test_the_queue_lists_pending_items_oldest_first(mia, queued):
    assert item_ids_of(mia.get("/dashboard/").text) == queued


def test_an_operators_queue_goes_round_the_accounts_and_decide_and_next_moves_on_to_the_next_one(api, backends, olga,
                                                                                                  queued):
    """Without an account filter, each account's oldest item first, then each one's second oldest...: one account's
    backlog never fills the first page. An account filter (and a moderator's accounts) stays oldest first."""
    backends.image_scores = {"nsfw": 0.5}
    other = api.moderate(api.new_key(account="other")).json()["review_id"]
    assert item_ids_of(olga.get("/dashboard/").text) == [queued[0], other, queued[1], queued[2]]
    assert item_ids_of(olga.get("/dashboard/?account=acme").text) == queued
    first = f"/dashboard/items/{queued[0]}"
    decided = post_form(olga, f"{first}/approve", first, reason_code="false_positive")
    assert decided.headers["location"] == f"/dashboard/items/{other}"


def test_an_item_shows_its_text_scores_against_thresholds_reason_and_reference(mia, queued):
    page = mia.get(f"/dashboard/items/{queued[0]}").text
    assert "queued text number 0" in page and "ref-0" in page and "model flag" in page
    assert re.search(r"toxic</th><td>0\.600</td>\s*<td>0\.500</td>\s*<td>0\.800</td><td>review", page)


def test_a_profile_can_keep_no_text_of_review_items(api, backends, mia):
    api.put_profile("no-text", mode="enforce", categories={"nsfw": {"review": 0.4, "block": 0.8},
                                                           "toxic": {"review": 0.5, "block": 0.8}},
                    keep_review_text=False)  # fmt: skip
    backends.toxic = REVIEW_TOXIC
    item_id = api.moderate_text(api.new_key(profile="no-text"), "a secret-ish text").json()["review_id"]
    item = api.client.get(f"/admin/v1/reviews/{item_id}", headers=ADMIN).json()
    assert item["text"] is None and item["profile"] == "no-text"
    assert "a secret-ish text" not in mia.get(f"/dashboard/items/{item_id}").text


def test_decide_and_next_records_who_and_why_and_the_client_sees_it(api, key, mia, queued):
    token = csrf_of(mia.get(f"/dashboard/items/{queued[0]}").text)
    decided = mia.post(f"/dashboard/items/{queued[0]}/reject", data={"csrf_token": token, "reason_code": "harassment"},
                       follow_redirects=False)  # fmt: skip
    assert decided.status_code == 303 and decided.headers["location"] == f"/dashboard/items/{queued[1]}"
    item = api.client.get(f"/admin/v1/reviews/{queued[0]}", headers=ADMIN).json()
    assert (item["status"], item["decided_by"], item["reason_code"]) == ("rejected", "mia", "harassment")
    assert api.client.get(f"/v1/review/{queued[0]}", headers=key).json()["status"] == "rejected"
    assert "Rejected by <strong>mia</strong>" in mia.get(f"/dashboard/items/{queued[0]}").text
    again = mia.post(f"/dashboard/items/{queued[0]}/approve", data={"csrf_token": token,
                                                                    "reason_code": "false_positive"})  # fmt: skip
    assert again.status_code == 409  # final
    entry = mia.get("/admin/v1/audit", headers=ADMIN).json()["entries"][1]  # [0]: the refused second decision
    assert (entry["actor"], entry["action"], entry["target"]) == ("user:mia", "POST /dashboard/items/{item_id}/reject",
                                                                  str(queued[0]))  # fmt: skip


def test_a_decision_needs_the_csrf_token_and_a_known_reason(api, mia, queued):
    forged = mia.post(f"/dashboard/items/{queued[0]}/approve", data={"reason_code": "false_positive"})
    assert forged.status_code == 403
    no_reason = post_form(mia, f"/dashboard/items/{queued[0]}/approve", "/dashboard/", reason_code="because")
    assert no_reason.status_code == 400
    assert api.client.get(f"/admin/v1/reviews/{queued[0]}", headers=ADMIN).json()["status"] == "pending"


def test_opening_an_item_claims_nothing_the_claim_button_does_and_another_moderator_cannot_decide_it(
    api, mia, queued, redis_url
):
    page = mia.get(f"/dashboard/items/{queued[0]}").text  # a GET changes nothing
    assert 'id="claim-form"' in page and 'id="approve-form"' in page
    with redis.Redis.from_url(redis_url) as store:
        assert not store.exists(redis_keys.review_claim(queued[0]))
    assert mia.post(f"/dashboard/items/{queued[0]}/claim", data={"csrf_token": "forged"}).status_code == 403
    claimed = post_form(mia, f"/dashboard/items/{queued[0]}/claim", f"/dashboard/items/{queued[0]}")
    assert claimed.status_code == 303 and claimed.headers["location"] == f"/dashboard/items/{queued[0]}"
    assert 'id="claim-state"' in mia.get(f"/dashboard/items/{queued[0]}").text
    mia.cookies.clear()
    make_user(mia, "noor", accounts=["acme"])
    log_in(mia, "noor")
    page = mia.get(f"/dashboard/items/{queued[0]}").text
    assert "mia is working on this item" in page and 'id="approve-form"' not in page
    assert re.search(rf"#{queued[0]}</a></td>(.|\n)*?<td>mia</td>", mia.get("/dashboard/").text)
    refused = post_form(mia, f"/dashboard/items/{queued[0]}/approve", "/dashboard/", reason_code="false_positive")
    assert refused.status_code == 409
    assert api.client.get(f"/admin/v1/reviews/{queued[0]}", headers=ADMIN).json()["status"] == "pending"


def test_deciding_an_unclaimed_item_claims_it_in_the_same_request(api, mia, queued, redis_url):
    decided = post_form(mia, f"/dashboard/items/{queued[1]}/approve", "/dashboard/", reason_code="false_positive")
    assert decided.status_code == 303
    with redis.Redis.from_url(redis_url) as store:
        assert not store.exists(redis_keys.review_claim(queued[1]))  # released after the decision
    assert api.client.get(f"/admin/v1/reviews/{queued[1]}", headers=ADMIN).json()["decided_by"] == "mia"


def test_filters_narrow_the_queue_and_an_unknown_value_is_a_400(api, backends, mia, queued):
    backends.image_scores = {"nsfw": 0.5}
    image_id = api.moderate(api.new_key(account="other")).json()["review_id"]
    assert item_ids_of(mia.get("/dashboard/?kind=image").text) == [image_id]
    assert item_ids_of(mia.get("/dashboard/?account=other").text) == [image_id]
    assert item_ids_of(mia.get("/dashboard/?category=toxic&reason=model_flagged").text) == queued
    assert item_ids_of(mia.get("/dashboard/?min_age_h=1").text) == []
    assert mia.get("/dashboard/?kind=video").status_code == 400
    assert mia.get("/dashboard/?min_age_h=soon").status_code == 400


def test_an_image_item_shows_the_clients_preview_blurred_until_the_moderator_turns_it_off(api, backends, mia):
    backends.image_scores = {"nsfw": 0.5}
    url = "https://images.example/1.jpg"
    item_id = api.moderate(api.new_key(), image_url=url).json()["review_id"]
    page = mia.get(f"/dashboard/items/{item_id}").text
    assert f'src="{url}"' in page and 'class="preview blurred"' in page
    post_form(mia, "/dashboard/settings", "/dashboard/", back=f"/dashboard/items/{item_id}")  # box unticked
    assert 'class="preview "' in mia.get(f"/dashboard/items/{item_id}").text


def test_only_https_image_urls_reach_the_moderators_browser_and_none_when_previews_are_off():
    # The public API refuses others than http(s) already; plain http would show the network what moderators see.
    for url in ("javascript:alert(1)", None, "http://x.example/a.png", "data:image/png;base64,AAAA"):
        assert preview_url(url, previews_on=True) == "", url
    assert preview_url("HTTPS://x.example/a.png", previews_on=True) == "HTTPS://x.example/a.png"
    assert preview_url("https://x.example/a.png", previews_on=False) == ""


def test_an_http_preview_is_not_shown_and_the_pages_csp_allows_images_only_over_https(api, backends, mia):
    backends.image_scores = {"nsfw": 0.5}
    item_id = api.moderate(api.new_key(), image_url="http://images.example/1.jpg").json()["review_id"]
    page = mia.get(f"/dashboard/items/{item_id}")
    assert "images.example" not in page.text.split("<dt>Reference")[0] and "No preview" in page.text
    csp = page.headers["content-security-policy"]
    assert "img-src 'self' https: data:;" in csp and "http:" not in csp


def test_with_previews_off_no_item_shows_one_and_the_csp_allows_no_outside_image(api, backends, client_from):
    backends.image_scores = {"nsfw": 0.5}
    item_id = api.moderate(api.new_key(), image_url="https://images.example/1.jpg").json()["review_id"]
    browser = client_from("198.51.100.4", image_previews=False)
    make_user(browser, "mia", accounts=["acme"])
    log_in(browser, "mia")
    page = browser.get(f"/dashboard/items/{item_id}")
    assert 'id="preview"' not in page.text and "previews are off" in page.text
    assert "img-src 'self' data:;" in page.headers["content-security-policy"]


def test_the_queues_numbers_are_prometheus_metrics_behind_the_admin_token(mia, queued):
    assert mia.get("/metrics").status_code == 401
    text = mia.get("/metrics", headers=ADMIN).text
    assert 'moderation_review_pending{account="acme"} 3' in text
    assert re.search(r"^moderation_review_oldest_pending_age_seconds \d", text, re.M)
    item = f"/dashboard/items/{queued[0]}"
    post_form(mia, f"{item}/approve", item, reason_code="false_positive")
    text = mia.get("/metrics", headers=ADMIN).text
    assert "moderation_review_decisions_last_hour 1" in text and 'pending{account="acme"} 2' in text


def test_the_reject_reason_starts_on_the_one_of_the_items_top_category(mia, queued):
    page = mia.get(f"/dashboard/items/{queued[0]}").text
    assert re.search(r'<option value="harassment" selected>', page)  # toxic
    assert re.search(r'<option value="not_a_violation" selected>', page)


def test_an_image_item_shows_the_text_read_on_it_beside_its_preview(api, backends, mia):
    categories = {"nsfw": {"review": 0.4, "block": 0.8}, "toxic": {"review": 0.5, "block": 0.8},
                  "text_toxic": {"review": 0.5, "block": 0.9}}  # fmt: skip
    api.put_profile("reading", mode="enforce", categories=categories)
    backends.image_text, backends.toxic = "nobody wants you here", REVIEW_TOXIC
    body = api.moderate(api.new_key(profile="reading"), image_url="https://images.example/2.jpg").json()
    page = mia.get(f"/dashboard/items/{body['review_id']}").text
    assert 'id="image-text"' in page and "nobody wants you here" in page and 'class="preview blurred"' in page
