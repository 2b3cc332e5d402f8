"""POST /v1/moderate-text with {"texts": [...]}: per-item results, one unit per item, limits, all or nothing."""

from __future__ import annotations

import pytest
from support.api import assert_error


def batch(api, headers, texts, params=None):
    return api.client.post("/v1/moderate-text", headers=headers, json={"texts": texts}, params=params)


def usage(api, account="acme") -> int:
    return api.client.get(f"/admin/v1/accounts/{account}/usage", headers=api.admin).json()["used"]


def test_a_batch_answers_one_result_per_text_in_order_in_the_single_shape(api, key, backends):
    single = api.moderate_text(key, "one").json()
    response = batch(api, key, ["one", "two", "three"])
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert len(results) == 3 and all(set(r) == set(single) for r in results)
    assert sorted(backends.text_calls) == sorted(["one", "one", "two", "three"])


def test_each_item_takes_one_unit_and_is_decided_and_queued_on_its_own(api, key, backends):
    backends.toxic = 0.6  # review under the test profile
    response = batch(api, key, [{"text": "a", "reference": "c-1"}, {"text": "b", "reference": "c-2"}])
    results = response.json()["results"]
    assert [r["decision"] for r in results] == ["review", "review"]
    items = [api.client.get(f"/v1/review/{r['review_id']}", headers=key).json() for r in results]
    assert [i["reference"] for i in items] == ["c-1", "c-2"]
    assert usage(api) == 2


def test_the_single_form_is_unchanged(api, key):
    assert "results" not in api.moderate_text(key, "hello").json()


def test_a_batch_that_does_not_fit_the_quota_takes_nothing(api, backends):
    api.put_plan("five", scope="both", monthly_quota=5, rate_per_second=50, burst=50)
    headers = api.new_key(account="small", plan="five")
    assert batch(api, headers, ["x"] * 3).status_code == 200
    assert_error(batch(api, headers, ["x"] * 3), 402, "quota_exceeded")
    assert usage(api, "small") == 3 and len(backends.text_calls) == 3
    assert batch(api, headers, ["x"] * 2).status_code == 200


def test_a_failing_model_fails_the_batch_and_gives_every_unit_back(api, key, backends):
    backends.failing = True
    assert_error(batch(api, key, ["a", "b", "c"]), 503, "inference_unavailable")
    assert usage(api) == 0


@pytest.mark.parametrize("texts", [[], ["x"] * 101, "not a list", [42], [{"reference": "r"}]])
def test_malformed_batches_are_invalid_request(api, key, texts):
    assert_error(batch(api, key, texts), 400, "invalid_request")
    assert usage(api) == 0


def test_item_and_total_characters_are_capped_by_the_plan(api):
    api.put_plan("short", scope="both", monthly_quota=1000, rate_per_second=50, burst=50, text_max_chars=10)
    headers = api.new_key(plan="short")
    assert batch(api, headers, ["x" * 10] * 10).status_code == 200  # 100 characters: 10 x the plan's limit
    assert_error(batch(api, headers, ["x" * 11]), 413, "text_too_long")
    assert_error(batch(api, headers, ["x" * 10] * 11), 413, "text_too_long")


def test_batch_threshold_and_scope_apply_as_for_one_text(api, key, backends):
    backends.toxic = 0.6
    assert [r["decision"] for r in batch(api, key, ["a"], params={"threshold": "0.7"}).json()["results"]] == ["allow"]
    assert_error(batch(api, api.new_key(plan="images-only"), ["a"]), 403, "capability_required")


def test_a_batch_costs_the_model_one_call_and_the_policy_one_call(api, key, backends):
    response = api.client.post("/v1/moderate-text", headers=key, json={"texts": ["a", "b", "c", "d", "e"]})
    assert response.status_code == 200, response.text
    assert backends.text_batches == [5] and backends.decide_calls == 1


def test_a_single_text_is_scored_alone_so_the_model_batches_it_with_other_requests(api, key, backends):
    assert api.moderate_text(key, "hello").status_code == 200
    assert backends.text_batches == [] and backends.text_calls == ["hello"]
