"""`make bench`'s driver: the back-to-back overload pairs, and the images' stages around the first CPU reading (which
points, in which order)."""

from __future__ import annotations


def test_overload_pairs_alternate_the_best_concurrency_below_64_with_64(monkeypatch):
    from bench import run
    from bench.load import Point, Workload

    asked = []

    def fake_point(base_url, keys, workload, clients, budget, max_s):  # a stand-in for HTTP load, unit test only
        asked.append(clients)
        return Point(clients, 10, 0, 1.0, 0.1, 0.1, 0.1)

    monkeypatch.setattr(run, "run_point", fake_point)
    swept = {"text": [Point(c, n, 0, 1.0, 0.1, 0.1, 0.1) for c, n in ((8, 90), (16, 120), (32, 110), (64, 200))]}
    target = run.Target("http://127.0.0.1:1", {"default": [{}]})
    workloads = {"text": Workload("text", "/v1/moderate-text", "default", [{}]), "other": Workload("o", "/", "default", [{}])}
    found = run.overload_pairs(target, workloads, run.Plan(overload_rounds=2), swept)
    assert asked == [16, 64, 16, 64] and list(found) == ["text"]  # 64 itself is never the "peak"; no sweep, no pairs
    assert run.overload_pairs(target, workloads, run.Plan(overload_rounds=0), swept) == {}


def test_pairs_add_graph_then_plain_points_beside_the_sweeps_own_images_at_1_8_16_and_32_clients_texts_at_1(monkeypatch):
    from bench import run
    from bench.load import Point, Workload

    asked = []

    def fake_point(base_url, keys, workload, clients, budget, max_s):  # a stand-in for HTTP load, unit test only
        asked.append((base_url, clients))
        return Point(clients, 10, 0, 1.0, 0.1, 0.1, 0.1)

    monkeypatch.setattr(run, "run_point", fake_point)
    swept_points = [Point(c, 50, 0, 1.0, 0.1, 0.1, 0.1) for c in (1, 8, 16, 32, 64)]
    swept = {name: {"image_default": swept_points, "text": swept_points, "batch_text": swept_points}
             for name in ("graph", "plain")}
    graph, plain = run.Target("http://graph", {"default": [{}]}), run.Target("http://plain", {"default": [{}]})
    workloads = {"image_default": Workload("i", "/v1/moderate-image", "default", [{}]),
                 "text": Workload("t", "/v1/moderate-text", "default", [{}]),
                 "batch_text": Workload("b", "/v1/moderate-text", "default", [{}])}
    found = run.paired(graph, plain, workloads, run.Plan(pair_rounds=2), swept)
    assert list(found) == ["image_default", "text"] and list(found["image_default"]) == [1, 8, 16, 32]
    assert list(found["text"]) == [1]  # texts: the 1-client p50 only; batch_text: none
    assert [len(pairs) for pairs in found["image_default"].values()] == [3, 3, 3, 3]
    assert found["image_default"][8][0] == (swept_points[1], swept_points[1])  # the sweep's pair first
    assert asked[:4] == [("http://graph", 1), ("http://plain", 1), ("http://graph", 1), ("http://plain", 1)]
    assert len(asked) == 20  # 2 more pairs at each of 4 client counts for images, at 1 for texts
    assert run.paired(graph, plain, workloads, run.Plan(pair_rounds=0), swept)["image_default"][16] == [
        (swept_points[2], swept_points[2])]


def test_the_cpu_readings_wait_for_starting_replicas_and_give_up_in_time(monkeypatch):
    from bench import service

    answers = iter([{"TextModel": {"RUNNING": 1, "STARTING": 1}}, {"TextModel": {"RUNNING": 2}}])
    monkeypatch.setattr(service, "replica_counts", lambda: next(answers))
    assert service.wait_until_running(max_s=5, poll_s=0.01)
    monkeypatch.setattr(service, "replica_counts", lambda: {"TextModel": {"RUNNING": 1, "STARTING": 1}})
    assert not service.wait_until_running(max_s=0.05, poll_s=0.01)


def test_an_images_stages_are_read_around_the_graphs_first_client_count_only_and_batches_around_each(monkeypatch):
    from bench import cpu, image_time, run, service
    from bench.load import Workload

    events = []

    def fake_measure(base_url, keys, workload, clients, seconds, pids):  # a stand-in for HTTP load, unit test only
        events.append(f"{base_url} {clients}")
        return cpu.CpuReading(clients, 10, 0, 1.0, p50_s=0.05)

    monkeypatch.setattr(cpu, "measure", fake_measure)
    monkeypatch.setattr(service, "wait_until_running", lambda max_s: True)
    monkeypatch.setattr(service, "scrape", lambda url: events.append("scrape") or "")
    monkeypatch.setattr(image_time, "scrape_when_pushed",
                        lambda url, before, calls: events.append(f"pushed {calls}") or "")
    graph, plain = (run.Target(url, {"default": [{}]}) for url in ("graph", "plain"))
    image = Workload("image_default", "/v1/moderate", "default", [{}])
    found, stages = run.images_by_process(graph, plain, image, run.Plan(image_cpu_clients=(1, 16)), set(), "metrics")
    # 10 measured + the clients' warm-up requests; the batches of each graph reading are read around it
    assert events == ["scrape", "graph 1", "plain 1", "pushed 11", "scrape", "graph 16", "plain 16", "pushed 26"]
    assert {name: sorted(readings) for name, readings in found.items()} == {"graph": [1, 16], "plain": [1, 16]}
    assert stages.clients == 1 and stages.client_p50_s == 0.05 and stages.call.count == 0


def test_a_sweep_tells_the_cascade_watch_around_each_point_and_a_workload_runs_only_at_its_client_counts(monkeypatch):
    from bench import run
    from bench.load import Point, Workload

    events = []

    def fake_point(base_url, keys, workload, clients, budget, max_s):  # a stand-in for HTTP load, unit test only
        events.append(f"{base_url} {workload.name} {clients}")
        return Point(clients, 10 if base_url == "graph" else 20, 0, 1.0, 0.1, 0.1, 0.1)

    class Watch:
        def before_point(self, name, workload, clients, first):
            events.append(f"before {name} {clients}{' first' if first else ''}")

        def after_point(self, name, workload, clients, point, last):
            events.append(f"after {name} {clients} {point.requests}{' last' if last else ''}")

    monkeypatch.setattr(run, "run_point", fake_point)
    targets = {name: run.Target(name, {"default": [{}]}) for name in ("graph", "plain")}
    workloads = {name: Workload(name, "/v1/moderate-text", "default", [{}]) for name in ("text", "text_sure")}
    points = run.side_by_side(targets, workloads, run.Plan(), (1, 16), Watch())
    assert events == [
        "before text 1 first", "graph text 1", "plain text 1", "after text 1 10",
        "before text 16", "graph text 16", "plain text 16", "after text 16 10 last",
        "before text_sure 1 first", "graph text_sure 1", "plain text_sure 1", "after text_sure 1 10 last",
    ]
    assert [p.concurrency for p in points["plain"]["text_sure"]] == [1]
    assert run.clients_of("text_sure", (1, 8, 16, 32, 64)) == (1,) and run.clients_of("text", (1, 16)) == (1, 16)
    assert run.clients_of("text_perspective", (1, 8, 16, 32, 64)) == (4, 16)  # its own, whatever the plan's


def test_a_sweep_that_never_reached_64_clients_gets_no_overload_pairs(monkeypatch):
    from bench import run
    from bench.load import Point, Workload

    monkeypatch.setattr(run, "run_point", lambda *args: (_ for _ in ()).throw(AssertionError("no point expected")))
    swept = {"text_sure": [Point(1, 10, 0, 1.0, 0.1, 0.1, 0.1)]}
    workloads = {"text_sure": Workload("text_sure", "/v1/moderate-text", "default", [{}])}
    assert run.overload_pairs(run.Target("x", {"default": [{}]}), workloads, run.Plan(), swept) == {}


def test_without_real_comments_the_benign_mix_is_skipped_and_said_so(monkeypatch):
    from bench import run

    monkeypatch.delenv("MODERATION_TEXT_DATA_DIR", raising=False)
    skipped = []
    workloads = run.workloads_of(run.Plan(workloads=("text", "text_benign_mix", "text_sure")), skipped)
    assert list(workloads) == ["text", "text_sure"]
    assert len(skipped) == 1 and skipped[0].startswith("text_benign_mix: MODERATION_TEXT_DATA_DIR")


def test_the_cascade_lever_runs_by_default_on_the_text_workloads_with_the_cascade_off():
    from bench import run

    assert run.LEVERS["without_cascade"] == {"MODERATION_TEXT_CASCADE": "false"}
    assert "without_cascade" in run.DEFAULT_LEVERS["full"].split(",") and "without_haproxy" in run.DEFAULT_LEVERS["full"]
    assert run.DEFAULT_LEVERS["quick"] == "without_cascade"
    assert set(run.LEVER_WORKLOADS["without_cascade"]) >= {"text", "text_benign_mix", "text_sure"}
    assert {"text", "text_benign_mix", "text_sure"} <= set(run.FULL.workloads) and "text" in run.QUICK.workloads
    assert 16 in run.QUICK.concurrency and 16 in run.QUICK.lever_concurrency
