"""The operators' pages: keys (the secret shown once), profiles and plans validated as the admin API validates them,
users, usage per account, and the audit log of what they did."""

from __future__ import annotations

import json
import re

import pytest
import redis
from support.dashboard import ADMIN, PASSWORD, log_in, make_user, post_form

from policy.types import Profile
from store import redis_keys


def test_a_created_keys_secret_is_shown_once_and_works_and_a_revoked_key_stops(api, olga):
    created = post_form(olga, "/dashboard/keys", "/dashboard/keys", account="shop", profile="default", plan="default")
    assert created.status_code == 200 and created.headers["cache-control"] == "no-store"
    secret = re.search(r'id="new-secret" readonly value="([^"]+)"', created.text).group(1)
    key_id = re.search(r"Key <code>(key_[0-9a-f]+)</code>", created.text).group(1)
    assert api.moderate_text({"Authorization": f"Bearer {secret}"}).status_code == 200
    listing = olga.get("/dashboard/keys").text
    assert key_id in listing and secret not in listing
    assert post_form(olga, f"/dashboard/keys/{key_id}/revoke", "/dashboard/keys").status_code == 303
    assert api.moderate_text({"Authorization": f"Bearer {secret}"}).status_code == 401


def test_a_key_for_a_missing_plan_is_not_created(olga):
    refused = post_form(olga, "/dashboard/keys", "/dashboard/keys", account="shop", profile="default", plan="gold")
    assert refused.status_code == 400 and "new-secret" not in refused.text


def _profile_form(**changes) -> dict:
    form = {"mode": "enforce", "report_threshold": "3", "keep_review_text": "on", "nsfw.enabled": "on",
            "nsfw.review": "0.4", "nsfw.block": "0.8", "toxic.enabled": "on", "toxic.review": "0.5",
            "toxic.block": "0.8"}  # fmt: skip
    return {**form, **changes}


def test_a_profile_form_is_validated_like_the_admin_api_and_a_saved_one_decides_the_next_request(
    api, backends, key, olga
):
    before = api.client.get("/admin/v1/profiles/default", headers=ADMIN).json()
    for bad in ({"toxic.review": "0.9"}, {"mode": "lenient"}, {"toxic.block": "1.5"}, {"report_threshold": "x"},
                {"nsfw.enabled": ""}):  # review above block, unknown mode, out of range, not a number, primary off
        assert post_form(olga, "/dashboard/profiles/default", "/dashboard/profiles/default",
                         **_profile_form(**bad)).status_code == 400, bad  # fmt: skip
    assert api.client.get("/admin/v1/profiles/default", headers=ADMIN).json() == before
    backends.toxic = 0.6
    assert api.moderate_text(key).json()["decision"] == "review"
    saved = post_form(olga, "/dashboard/profiles/default", "/dashboard/profiles/default",
                      **_profile_form(**{"toxic.review": "0.7", "threat.review": "0.2", "threat.block": "0.9",
                                         "threat.enabled": "on"}))  # fmt: skip
    assert saved.status_code == 303
    profile = Profile.model_validate(api.client.get("/admin/v1/profiles/default", headers=ADMIN).json())
    assert profile.categories["toxic"].review == 0.7 and profile.categories["threat"].enabled  # a beta one enabled
    assert api.moderate_text(key).json()["decision"] == "allow"


def test_plans_are_created_and_validated(api, olga):
    fields = {"name": "gold", "scope": "both", "monthly_quota": "1000", "rate_per_second": "5", "burst": "10",
              "image_max_bytes": "1000000", "image_max_pixels": "1000000", "text_max_chars": "5000",
              "max_in_flight": "8"}  # fmt: skip
    assert post_form(olga, "/dashboard/plans", "/dashboard/plans", **{**fields, "burst": "0"}).status_code == 400
    assert post_form(olga, "/dashboard/plans", "/dashboard/plans", **{**fields, "name": "../x"}).status_code == 400
    assert post_form(olga, "/dashboard/plans", "/dashboard/plans", **fields).status_code == 303
    assert api.client.get("/admin/v1/plans/gold", headers=ADMIN).json()["monthly_quota"] == 1000


@pytest.mark.parametrize("field, number", [("rate_per_second", "inf"), ("rate_per_second", "1e999"),
                                           ("rate_per_second", "nan"), ("monthly_quota", "1e999")])
def test_a_non_finite_number_in_the_plan_form_is_a_form_error_and_nothing_is_stored(api, olga, field, number):
    fields = {"name": "gold", "scope": "both", "monthly_quota": "1000", "rate_per_second": "5", "burst": "10",
              "image_max_bytes": "1000000", "image_max_pixels": "1000000", "text_max_chars": "5000",
              "max_in_flight": "8", field: number}  # fmt: skip
    refused = post_form(olga, "/dashboard/plans", "/dashboard/plans", **fields)
    assert refused.status_code == 400 and field in refused.text
    assert api.client.get("/admin/v1/plans/gold", headers=ADMIN).status_code == 404


def test_a_plan_stored_unreadable_before_the_fix_leaves_the_pages_up(api, olga, redis_url):
    bad = {"name": "broken", "scope": "both", "monthly_quota": 10, "rate_per_second": None, "burst": 1}
    with redis.Redis.from_url(redis_url) as store:
        store.set(redis_keys.plan("broken"), json.dumps(bad))
    for page in ("/dashboard/plans", "/dashboard/keys"):
        answer = olga.get(page)
        assert answer.status_code == 200 and "default" in answer.text and "broken" not in answer.text


def test_an_operator_adds_and_deletes_users_but_not_themself(olga):
    assert post_form(olga, "/dashboard/users", "/dashboard/users", name="noor", role="moderator",
                     password="short").status_code == 400  # fmt: skip
    assert post_form(olga, "/dashboard/users", "/dashboard/users", name="noor", role="moderator",
                     password=PASSWORD).status_code == 303  # fmt: skip
    assert "noor" in olga.get("/dashboard/users").text
    assert post_form(olga, "/dashboard/users/olga/delete", "/dashboard/users").status_code == 400
    assert post_form(olga, "/dashboard/users/noor/delete", "/dashboard/users").status_code == 303
    assert [user["name"] for user in olga.get("/admin/v1/users", headers=ADMIN).json()["users"]] == ["olga"]


def test_usage_shows_quota_used_rate_refusals_reports_pending_and_perspective_feedback_per_account(
    api, backends, olga
):
    api.put_plan("tight", scope="both", monthly_quota=100, rate_per_second=0.001, burst=3)
    key = api.new_key(account="busy", plan="tight")
    backends.toxic = 0.6
    assert api.moderate_text(key).json()["decision"] == "review"
    assert api.report(key, "post-1").status_code == 200
    secret = key["Authorization"].split()[1]
    body = {"comment": {"text": "x"}, "clientToken": "c-1",
            "attributeScores": {"TOXICITY": {"summaryScore": {"value": 1}}}}  # fmt: skip
    assert api.client.post("/v1alpha1/comments:suggestscore", params={"key": secret}, json=body).status_code == 200
    assert api.moderate_text(key).status_code == 429
    page = olga.get("/dashboard/accounts").text
    row = re.search(r'<th scope="row">busy</th>(.*?)</tr>', page, re.S).group(1)
    # quota used, rate refusals, reports today, pending review, feedback
    assert re.findall(r"<td>([^<]*)</td>", row) == ["1", "1", "1", "1", "TOXICITY=1.0"]
    assert re.search(r'id="pending-total">1<', page) and re.search(r'id="decisions-hour">0<', page)


def test_operator_actions_and_decisions_are_in_the_audit_log_without_secrets(api, olga):
    created = post_form(olga, "/dashboard/keys", "/dashboard/keys", account="shop", profile="default", plan="default")
    secret = re.search(r'id="new-secret" readonly value="([^"]+)"', created.text).group(1)
    page = olga.get("/dashboard/audit").text
    assert "user:olga" in page and "POST /dashboard/keys" in page and secret not in page
    assert "POST /dashboard/login" in page and PASSWORD not in page


def test_a_new_profile_starts_as_a_copy_and_a_taken_or_bad_name_is_refused(api, olga):
    made = post_form(olga, "/dashboard/profiles", "/dashboard/profiles", name="site-b", base="strict")
    assert made.status_code == 303 and made.headers["location"] == "/dashboard/profiles/site-b"
    copy = api.client.get("/admin/v1/profiles/site-b", headers=ADMIN).json()
    assert {**copy, "name": "strict"} == api.client.get("/admin/v1/profiles/strict", headers=ADMIN).json()
    assert post_form(olga, "/dashboard/profiles", "/dashboard/profiles", name="site-b", base="default").status_code \
        == 409
    for name, base in (("../x", "default"), ("site-c", "missing")):
        assert post_form(olga, "/dashboard/profiles", "/dashboard/profiles", name=name, base=base).status_code == 400


def test_the_profile_form_sets_whether_an_image_answer_says_its_text_and_an_older_form_keeps_it(api, olga):
    def answered() -> bool:
        return api.client.get("/admin/v1/profiles/default", headers=ADMIN).json()["answer_image_text"]

    on = _profile_form(**{"answer_image_text.shown": "1", "answer_image_text": "on", "text_toxic.enabled": "on",
                          "text_toxic.review": "0.5", "text_toxic.block": "0.8"})  # fmt: skip
    assert post_form(olga, "/dashboard/profiles/default", "/dashboard/profiles/default", **on).status_code == 303
    assert answered() is True
    # A form of before the checkbox (no marker) leaves it as it was; the form with the marker unticked turns it off.
    assert post_form(olga, "/dashboard/profiles/default", "/dashboard/profiles/default",
                     **_profile_form()).status_code == 303 and answered() is True  # fmt: skip
    off = _profile_form(**{"answer_image_text.shown": "1"})
    assert post_form(olga, "/dashboard/profiles/default", "/dashboard/profiles/default", **off).status_code == 303
    assert answered() is False
    assert 'name="answer_image_text"' in olga.get("/dashboard/profiles/default").text
