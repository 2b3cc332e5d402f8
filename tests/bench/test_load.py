"""The load generator's pure parts: percentiles and a point's summary."""

import math

import httpx

from bench.load import percentile, point_budget, retry_after_s, summarize


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == 50
    assert percentile(values, 95) == 95
    assert percentile(values, 99) == 99
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([7.0], 99) == 7.0


def test_percentile_of_nothing_is_nan():
    assert math.isnan(percentile([], 50))


def test_summary_counts_requests_per_second_and_failures():
    point = summarize(8, [0.01, 0.02, 0.03, 0.04], errors=2, seconds=2.0, statuses=[503, 503, 429])
    assert point.rps == 2.0
    assert (point.p50_s, point.p99_s) == (0.02, 0.04)
    assert point.errors == 2 and point.statuses == (429, 503)


def test_point_budget_grows_with_clients():
    assert point_budget(1, 40) == 40
    assert point_budget(64, 40) == 256


def test_a_refusals_retry_after_is_honoured_and_nothing_else_waits():
    def answer(status: int, **headers: str) -> httpx.Response:
        return httpx.Response(status, headers=headers)

    assert retry_after_s(answer(503, **{"Retry-After": "2"})) == 2.0
    assert retry_after_s(answer(429, **{"Retry-After": "1"})) == 1.0
    assert retry_after_s(answer(503)) == 0.0
    assert retry_after_s(answer(400, **{"Retry-After": "5"})) == 0.0  # only refusals a retry can fix
    assert retry_after_s(answer(503, **{"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"})) == 0.0  # no dates here
