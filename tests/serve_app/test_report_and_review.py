"""POST /v1/report and GET /v1/review/{id}."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from support.api import assert_error


def test_report_escalates_once_the_count_exceeds_the_threshold(api, key, backends):
    answers = [api.report(key, "post-7").json() for _ in range(5)]
    assert [a["reports"] for a in answers] == [1, 2, 3, 4, 5]
    assert [a["escalated"] for a in answers] == [False, False, False, True, True]
    assert answers[3]["review_id"] == answers[4]["review_id"]
    item = api.client.get(f"/v1/review/{answers[3]['review_id']}", headers=key).json()
    assert (item["reason"], item["reference"], item["status"]) == ("report_threshold", "post-7", "pending")
    assert backends.text_calls == [] and backends.image_calls == []  # the model is not called


def test_racing_reports_escalate_one_reference_once(api):
    api.put_plan("busy", scope="both", monthly_quota=10, rate_per_second=1000, burst=1000)
    headers = api.new_key(plan="busy", account="racer")
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: api.report(headers, "hot").json(), range(24)))
    assert sorted(a["reports"] for a in answers) == list(range(1, 25))
    items = api.client.get("/admin/v1/reviews", params={"account": "racer"}, headers=api.admin).json()["items"]
    assert len(items) == 1


def test_report_threshold_comes_from_the_key_profile(api):
    strict = api.new_key(profile="strict")  # report_threshold 1
    assert [api.report(strict, "x").json()["escalated"] for _ in range(2)] == [False, True]


def test_reports_are_counted_per_account(api):
    first, second = api.new_key(account="one"), api.new_key(account="two")
    for _ in range(3):
        api.report(first, "same-ref")
    assert api.report(second, "same-ref").json()["reports"] == 1


def test_report_without_reference_is_no_reference(api, key):
    assert_error(api.client.post("/v1/report", headers=key, files={"image_url": (None, "u")}), 400, "no_reference")
    assert_error(api.report(key, "   "), 400, "no_reference")


def test_report_accepts_a_urlencoded_form_too(api, key):
    response = api.client.post("/v1/report", headers=key, data={"reference": "form-ref"})
    assert response.json()["reference"] == "form-ref"


def test_moderator_decision_is_returned_as_status(api, key, backends):
    backends.image_scores = {"nsfw": 0.5}
    review_id = api.moderate(key).json()["review_id"]
    decided = api.client.post(
        f"/admin/v1/reviews/{review_id}/decision", json={"status": "rejected"}, headers=api.admin
    )
    assert decided.status_code == 200 and decided.json()["decided_at"] is not None
    assert api.client.get(f"/v1/review/{review_id}", headers=key).json()["status"] == "rejected"


def test_deciding_a_decided_item_is_409(api, key, backends):
    backends.image_scores = {"nsfw": 0.5}
    review_id = api.moderate(key).json()["review_id"]
    url = f"/admin/v1/reviews/{review_id}/decision"
    assert api.client.post(url, json={"status": "approved"}, headers=api.admin).status_code == 200
    assert_error(api.client.post(url, json={"status": "rejected"}, headers=api.admin), 409, "already_decided")
