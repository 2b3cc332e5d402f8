"""The benchmark page's pure parts: the ratio line a script reads, batch sizes from Ray's metrics text, the raw
limit's rows and targets, and a page written again from a run saved before the newer measurements existed."""

from types import SimpleNamespace

from bench.limit import Limit, with_decoding
from bench.load import Point
from bench.report import Baseline, Results, document
from bench.report.ratios import format_ratio_line
from bench.report.sweep import limit_table
from bench.report.targets import overload_lines, paired_lines, raw_limit_lines
from bench.service import batch_sizes


def test_ratio_line_has_two_decimals_and_a_fixed_order():
    line = format_ratio_line({"image_vs_plain": 1.0, "strict_vs_plain": 0.8349, "text_vs_plain": None})
    assert line == "bench: image_vs_plain=1.00 strict_vs_plain=0.83 text_vs_plain=n/a"


def _scrape(counts: dict[str, float], replica: str = "r1") -> str:
    return "\n".join(
        f'ray_moderation_model_batch_size_bucket{{deployment="TextModel",le="{le}",model="text",replica="{replica}"}} {n}'
        for le, n in counts.items()
    ) + '\nray_moderation_model_batch_size_sum{model="text",replica="r1"} 12.5\n'


def test_batch_sizes_come_from_bucket_deltas_over_replicas():
    before = _scrape({"1.0": 4, "2.0": 4, "4.0": 4, "+Inf": 4})
    # Since `before`: 2 batches of one, 1 of two, 1 of four on r1; 1 of four on r2.
    after = _scrape({"1.0": 6, "2.0": 7, "4.0": 8, "+Inf": 8}) + "\n" + _scrape({"1.0": 0, "2.0": 0, "4.0": 1, "+Inf": 1}, "r2")
    mean, ones, batches = batch_sizes(before, after)["text"]
    assert batches == 5
    assert mean == (1 + 1 + 2 + 4 + 4) / 5
    assert ones == 2 / 5


def test_no_batches_no_entry():
    assert batch_sizes("", "") == {}


def _results_with_graph_points(points: list[Point]) -> Results:
    results = Results(plan=None, versions={}, cores=2, levers=[], load_before="")
    results.columns["graph"] = SimpleNamespace(points={"text": points})
    return results


def _point(concurrency: int, requests: int, errors: int = 0, statuses=()) -> Point:
    return Point(concurrency, requests, errors, 1.0, 0.1, 0.2, 0.3, statuses)


def test_the_overload_line_compares_64_clients_with_the_workloads_best_point():
    kept = _results_with_graph_points([_point(16, 100), _point(32, 104), _point(64, 95)])
    [line] = overload_lines(kept)
    assert "95.0 req/s = 0.91 of its peak (104.0 at 32)" in line and "met" in line and "missed" not in line
    collapsed = _results_with_graph_points([_point(16, 100), _point(64, 60, errors=7, statuses=(503,))])
    [line] = overload_lines(collapsed)
    assert "0.60 of its peak" in line and "7 refused (503)" in line and "missed by 30 points" in line


def test_with_back_to_back_pairs_the_target_compares_their_medians_and_the_sweep_is_shown_beside():
    results = _results_with_graph_points([_point(16, 100), _point(32, 104), _point(64, 70)])  # the sweep: 0.67
    # Pairs (32 clients, then 64): 90/88, 80/85, 100/60 -> medians 90 and 85.
    pairs = [_point(32, 90), _point(64, 88), _point(32, 80), _point(64, 85), _point(32, 100), _point(64, 60)]
    results.columns["graph"].overload = {"text": pairs}
    [line] = overload_lines(results)
    assert "85.0 req/s = 0.94 of 90.0 at 32 clients, medians of 3 back-to-back pairs (90.0/88.0, 80.0/85.0, 100.0/60.0)" in line
    assert "in the sweep 70.0 req/s = 0.67 of its peak (104.0 at 32)" in line and "met" in line and "missed" not in line
    pairs[3] = _point(64, 70, errors=5)  # medians 90 and 70: 0.78
    [line] = overload_lines(results)
    assert "0.78 of 90.0" in line and "5 refused at 64" in line and "missed by 12 points" in line


def test_the_image_targets_take_the_median_pair_at_each_client_count_and_the_batch_at_16_clients():
    from bench.cpu import CpuReading

    results = Results(plan=None, versions={}, cores=2, levers=[], load_before="")
    # nsfw at 8 clients: ratios 0.80, 0.96, 1.00 -> median 0.96 (met); strict at 16: 0.90, 0.95, 0.99 -> 0.95 (target 1.0).
    nsfw = [(_point(8, 80), _point(8, 100)), (_point(8, 96), _point(8, 100)), (_point(8, 100), _point(8, 100))]
    strict = [(_point(16, 90), _point(16, 100)), (_point(16, 99), _point(16, 100)), (_point(16, 95), _point(16, 100))]
    reading = CpuReading(clients=16, requests=300, errors=0, seconds=6.0, batch_mean=3.0)
    # nsfw at 1 client: p50 over the plain app's +0, +6 and +9 ms -> +6 (target +5).
    lone = [(Point(1, 50, 0, 1.0, p50, 0.1, 0.1), Point(1, 50, 0, 1.0, 0.030, 0.1, 0.1)) for p50 in (0.030, 0.036, 0.039)]
    text = [(Point(1, 50, 0, 1.0, p50, 0.1, 0.1), Point(1, 50, 0, 1.0, 0.007, 0.1, 0.1)) for p50 in (0.009, 0.011, 0.0095)]
    results.columns["graph"] = SimpleNamespace(points={}, pairs={"image_default": {1: lone, 8: nsfw},
                                                                 "image_strict": {16: strict}, "text": {1: text}},
                                               cpu_image={"graph": {16: reading}})
    p50, first, second, text_p50, batch = paired_lines(results)
    assert "at 1 client: p50 graph - plain = +2.5 ms" in text_p50 and "(target <= +3 ms): **met**" in text_p50
    assert "at 1 client: p50 graph - plain = +6.0 ms, the median of 3 back-to-back pairs (30.0 ms/30.0 ms" in p50
    assert "(target <= +5 ms): **not met**, missed by 1.0 ms" in p50
    assert "at 8 clients: graph / plain = 0.96, the median of 3 back-to-back pairs (80.0/100.0, 96.0/100.0, 100.0/100.0" in first
    assert "(target >= 0.95): **met**" in first
    assert "at 16 clients: graph / plain = 0.95" in second and "(target >= 1.00): **not met**, missed by 5 points" in second
    assert "mean batch at 16 clients" in batch and "3.00 (target >= 4): **not met**, missed by 1.00" in batch
    results.columns["graph"] = SimpleNamespace(points={})  # a run saved before the pairs existed
    assert paired_lines(results) == []


def test_no_64_client_point_no_overload_line():
    assert overload_lines(_results_with_graph_points([_point(16, 100)])) == []


def test_the_hash_bank_section_lists_each_bank_size_and_edit_with_what_matched():
    from bench.hash_bank import HashBankResults, section

    results = HashBankResults(match_ms={1000: 0.03, 1_000_000: 24.6}, replica_bytes_per_million=40_000_000,
                              store_bytes_per_hash=153, pdq_ms=1.7, robustness={"mirrored": [10, 40]})
    lines = section(results)
    assert "| 1,000 | 0.03 |" in lines and "| 1,000,000 | 24.61 |" not in lines and "| 1,000,000 | 24.60 |" in lines
    assert "| mirrored | 10, 40 | 1 of 2 |" in lines
    assert any("38 MiB per million" in line for line in lines)


def _images_against_the_raw_limit() -> Results:
    results = Results(plan=None, versions={}, cores=2, levers=[], load_before="")
    images = {"image_default": [_point(1, 14), _point(8, 26), _point(16, 20)], "image_strict": [_point(16, 9)]}
    results.columns["graph"] = SimpleNamespace(points=images)
    results.columns["plain"] = SimpleNamespace(points={})
    results.limit_one = {"image_default": Limit(1, 30.0, 0.032), with_decoding("image_default"): Limit(1, 25.0, 0.035)}
    results.limit = {"image_default": Limit(2, 55.0, 0.032), with_decoding("image_default"): Limit(2, 40.0, 0.035),
                     "image_strict": Limit(2, 11.0, 0.125), with_decoding("image_strict"): Limit(2, 10.0, 0.13)}
    return results


def test_the_raw_limit_with_decoding_is_a_row_of_its_own_against_the_graphs_same_workload():
    table = limit_table(_images_against_the_raw_limit())
    assert "| image, nsfw only (profile \"default\") | 30.0 | 32.0 ms | 55.0 | 0.36 |" in table
    decoding = "image, nsfw only, decoding included (each process decodes the bench JPEGs)"
    assert f"| {decoding} | 25.0 | 35.0 ms | 40.0 | 0.50 |" in table


def test_the_graphs_best_is_held_to_the_raw_limit_with_decoding_too():
    lines = raw_limit_lines(_images_against_the_raw_limit())
    assert ("Best throughput against the raw limit with decoding, image, nsfw only (profile \"default\"): graph 26.0 "
            "req/s at 8 clients = 0.65 of 40.0 items/s (target >= 0.6): **met**.") in lines
    assert ("Best throughput against the raw limit with decoding, image, nsfw + weapon + violence (profile "
            "\"strict\"): graph 9.0 req/s at 16 clients = 0.90 of 10.0 items/s (target >= 0.8): **met**.") in lines
    assert any(line.startswith("Best throughput against the raw limit, image, nsfw only") and "0.47 of 55.0" in line
               and "missed by 13 points" in line for line in lines)


def test_a_run_saved_before_the_image_readings_and_the_decoding_rows_is_written_again():
    from bench.run import QUICK, Column

    results = Results(plan=QUICK, versions={"text.toxic": "v1"}, cores=2, levers=[], load_before="1/1/1")
    results.limit_one = results.limit = {"text": Limit(1, 100.0, 0.006)}
    results.columns = {"graph": Column(points={"text": [_point(1, 30)]}),
                       "plain": Column(points={"text": [_point(1, 40)]})}
    baseline = Baseline("an earlier run", {"text": [_point(1, 20)]}, {}, {}, {})
    for old in (*results.columns.values(), baseline):
        del old.__dict__["cpu_image"]  # as unpickled from a run that had no such field
    results.baseline = baseline
    page = document(results)
    assert "## CPU per request, by process (image" not in page and "with decoding" not in page


def test_perspectives_p99_is_judged_at_4_and_16_clients_against_corals_timeout():
    from bench.report.targets import perspective_lines

    results = Results(plan=None, versions={}, cores=2, levers=[], load_before="")
    points = [Point(4, 100, 0, 1.0, 0.1, 0.2, 0.5), Point(16, 100, 0, 1.0, 0.3, 0.7, 0.95)]
    results.columns["graph"] = SimpleNamespace(points={"text_perspective": points})
    at_4, at_16 = perspective_lines(results)
    assert at_4.startswith("p99 at 4 clients") and "500.0 ms" in at_4 and "met" in at_4 and "missed" not in at_4
    assert at_16.startswith("p99 at 16 clients") and "missed by 150.0 ms" in at_16
    results.columns["graph"] = SimpleNamespace(points={})
    assert perspective_lines(results) == []
