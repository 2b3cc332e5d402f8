"""The flood's pure parts: a 503 without Retry-After is counted, and the page says met or missed against each bound."""

from collections import Counter

import httpx

from bench.tenant_flood import FloodResult, _flood_requests, _note_503


def test_a_503_without_retry_after_is_counted_and_one_with_it_is_not():
    result = FloodResult(seconds=1)
    _note_503(httpx.Response(503, headers={"Retry-After": "1"}), result)
    _note_503(httpx.Response(429), result)
    assert result.unretryable_503s == 0
    _note_503(httpx.Response(503), result)
    assert result.unretryable_503s == 1


def test_the_page_says_missed_when_the_other_tenants_p99_or_the_store_passes_its_bound():
    calm = FloodResult(seconds=60, other_latencies_s=[0.05] * 98 + [0.2] * 2, other_statuses=Counter({200: 100}),
                       memory_start_bytes=2**20, memory_peak_bytes=2 * 2**20, maxmemory_bytes=512 * 2**20)
    assert "p99 200 ms: met" in "\n".join(calm.lines()) and "(0.4%): met" in "\n".join(calm.lines())
    slow = FloodResult(seconds=60, other_latencies_s=[0.05] * 90 + [1.5] * 10, memory_peak_bytes=450 * 2**20,
                       maxmemory_bytes=512 * 2**20)
    text = "\n".join(slow.lines())
    assert "p99 1500 ms: missed" in text and "(87.9%): missed" in text


def test_each_round_of_the_flood_asks_the_store_to_keep_something_new():
    requests = _flood_requests(0)
    first = [next(requests) for _ in range(4)]
    second = [next(requests) for _ in range(4)]
    assert [action for action, _, _ in first] == ["token", "suggest", "report", "review"]
    assert first[2][2] != second[2][2] and first[3][2] != second[3][2]  # fresh references and texts every round
