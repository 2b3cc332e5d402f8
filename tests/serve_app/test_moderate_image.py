"""POST /v1/moderate through the app: fields, decisions, limits and errors."""

from __future__ import annotations

import io

import pytest
from support.api import TEST_THRESHOLDS, assert_error, photo_bytes
from PIL import Image


def test_result_has_every_field_of_the_spec(api, key):
    response = api.moderate(key)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {
        "scores", "categories", "blocked_by", "decision", "recommended_action",
        "mode", "threshold", "profile", "model_version",
    }
    assert set(body["scores"]) == {"nsfw", "safe"}
    assert body["categories"] == {"nsfw": pytest.approx(0.05)}
    assert body["profile"] == "default"
    assert body["mode"] == "enforce"
    assert body["model_version"] == "nsfw=stub-1"


def test_alias_field_file_is_accepted(api, key):
    assert api.moderate(key, field="file").status_code == 200


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF"])
def test_every_accepted_format_is_scored_whatever_the_declared_type(api, key, fmt):
    response = api.moderate(key, photo_bytes(fmt))
    assert response.status_code == 200, response.text


def test_missing_image_is_no_image(api, key):
    response = api.client.post("/v1/moderate", headers=key, data={"reference": "r1"}, files={"x": (None, "y")})
    assert_error(response, 400, "no_image")


def test_undecodable_image_is_invalid_image(api, key):
    assert_error(api.moderate(key, b"this is not an image at all"), 400, "invalid_image")


def test_non_multipart_body_is_invalid_request(api, key):
    response = api.client.post("/v1/moderate", headers=key, content=photo_bytes(), params={})
    assert_error(response, 400, "invalid_request")


def test_image_over_the_byte_limit_is_413(api):
    api.put_plan("tiny", scope="both", monthly_quota=100, rate_per_second=50, burst=50, image_max_bytes=1000)
    headers = api.new_key(plan="tiny")
    assert_error(api.moderate(headers, photo_bytes("PNG", (200, 200))), 413, "image_too_large")


def test_image_over_the_pixel_limit_is_413(api):
    api.put_plan("small", scope="both", monthly_quota=100, rate_per_second=50, burst=50, image_max_pixels=1000)
    headers = api.new_key(plan="small")
    assert_error(api.moderate(headers, photo_bytes("PNG", (40, 40))), 413, "image_too_large")


@pytest.mark.parametrize("value", ["-0.1", "1.5", "abc", "nan"])
def test_threshold_outside_zero_to_one_is_invalid_threshold(api, key, value):
    assert_error(api.moderate(key, params={"threshold": value}), 400, "invalid_threshold")


def test_threshold_override_makes_the_decision_binary(api, key, backends):
    backends.image_scores = {"nsfw": 0.5}
    assert api.moderate(key).json()["decision"] == "review"
    body = api.moderate(key, params={"threshold": "0.45"}).json()
    assert (body["decision"], body["threshold"]) == ("block", 0.45)
    assert api.moderate(key, params={"threshold": "0.55"}).json()["decision"] == "allow"


def test_review_decision_creates_a_queue_item_and_returns_its_id(api, key, backends):
    backends.image_scores = {"nsfw": 0.5}
    body = api.moderate(key, reference="post-1", image_url="https://cdn.example/p1.jpg").json()
    assert body["decision"] == "review"
    item = api.client.get(f"/v1/review/{body['review_id']}", headers=key).json()
    assert item == {
        "id": body["review_id"], "status": "pending", "reason": "model_flagged",
        "reference": "post-1", "image_url": "https://cdn.example/p1.jpg", "kind": "image",
        "created_at": item["created_at"],
    }


@pytest.mark.parametrize("score", [0.05, 0.95])
def test_review_id_only_when_decision_is_review(api, key, backends, score):
    backends.image_scores = {"nsfw": score}
    assert "review_id" not in api.moderate(key).json()


def test_monitor_mode_allows_and_reports_the_recommendation(api, backends):
    headers = api.new_key(profile="monitor")
    backends.image_scores = {"nsfw": 0.95}
    body = api.moderate(headers).json()
    assert (body["decision"], body["recommended_action"], body["mode"]) == ("allow", "block", "monitor")


def test_beta_categories_appear_only_when_the_profile_enables_them(api, key, backends):
    backends.image_scores = {"nsfw": 0.1, "weapon": 0.95, "violence": 0.2}
    assert set(api.moderate(key).json()["categories"]) == {"nsfw"}
    assert backends.image_calls[-1].categories == ("nsfw",)
    body = api.moderate(api.new_key(profile="strict")).json()
    assert set(body["categories"]) == {"nsfw", "weapon", "violence"}
    assert body["blocked_by"] == ["weapon"]


def test_profile_change_takes_effect_on_the_next_request(api, key, backends):
    backends.image_scores = {"nsfw": 0.5}
    assert api.moderate(key).json()["decision"] == "review"
    profile = api.client.get("/admin/v1/profiles/default", headers=api.admin).json()
    profile["categories"]["nsfw"] = {"enabled": True, "review": 0.45, "block": 0.49}
    api.put_profile("default", **{k: v for k, v in profile.items() if k != "name"})
    assert api.moderate(key).json()["decision"] == "block"


def test_plan_without_images_is_capability_required(api):
    headers = api.new_key(plan="text-only")
    assert_error(api.moderate(headers), 403, "capability_required")


def test_image_is_decoded_from_its_bytes_not_its_name(api, key):
    buffer = io.BytesIO()
    Image.new("RGB", (30, 30), "red").save(buffer, format="PNG")
    files = {"image": ("photo.jpg", buffer.getvalue(), "image/jpeg")}
    assert api.client.post("/v1/moderate", headers=key, files=files).status_code == 200


def reading_profile(api, name: str = "reading", **fields) -> dict:
    """A key whose profile enables `text_toxic` (at 0.6 / 0.9), with `fields` of the profile."""
    categories = {**TEST_THRESHOLDS, "text_toxic": {"review": 0.6, "block": 0.9}}
    api.put_profile(name, mode="enforce", categories=categories, **fields)
    return api.new_key(profile=name)


def test_the_words_on_an_image_decide_as_text_toxic_and_the_text_is_answered_only_where_asked(api, backends):
    backends.image_text, backends.toxic = "you are a disgrace", 0.95
    shown = api.moderate(reading_profile(api, "shown", answer_image_text=True)).json()
    assert shown["categories"]["text_toxic"] >= 0.9 and shown["blocked_by"] == ["text_toxic"]
    assert shown["decision"] == "block" and shown["text_read"] == {"lines": 1, "partial": False,
                                                                   "text": "you are a disgrace"}
    assert shown["model_version"] == "nsfw=stub-1;text_toxic=reader=stub-1+stub-text-1"
    assert backends.text_calls[-1] == "you are a disgrace"
    hidden = api.moderate(reading_profile(api, "hidden")).json()
    assert hidden["text_read"] == {"lines": 1, "partial": False} and hidden["decision"] == "block"


def test_a_partial_read_is_said_and_nothing_read_scores_zero_without_a_text_call(api, backends):
    key = reading_profile(api)
    backends.image_text, backends.image_text_partial = "", True
    calls = len(backends.text_calls)
    body = api.moderate(key).json()
    assert body["text_read"] == {"lines": 0, "partial": True} and body["categories"]["text_toxic"] == 0.0
    assert len(backends.text_calls) == calls and body["decision"] == "allow"


def test_an_image_answer_has_no_text_read_where_the_profile_leaves_text_toxic_off(api, key, backends):
    backends.image_text = "you are a disgrace"
    body = api.moderate(key).json()
    assert "text_read" not in body and "text_toxic" not in body["categories"]
