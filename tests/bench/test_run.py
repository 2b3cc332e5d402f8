"""`make bench`'s driver: the back-to-back overload pairs (which points, in which order)."""

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
