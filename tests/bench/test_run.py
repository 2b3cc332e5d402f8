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
