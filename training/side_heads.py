"""Train the text model's side heads (threat, violent_speech, self_harm) on CPU: `make train-text` runs it.

Each side head is a logistic regression on the fine-tuned encoder's embedding of a text's first window
(`models/text_side_heads.py`), trained on the train split of the real comments plus the hand-written rows of
data/text/ marked `train`. What each category learns from:

- threat: the real rows that label it (personal threats and incitement: EDOS, civil comments' toxic spans) and
  the hand-written threats; every real negative is a non-threat. It replaces the main head's threat output (which
  saw 71 positives) and is gated by the main head's toxic score (models/text_side_heads.py says why). Its rows are
  weighted as they come (the hand-written ones at 1, not balanced by language: balanced, the few hand-written rows
  of French or Italian outweighed thousands of real ones, and the head learned their short, clean sentence shape).
- violent_speech: threats, plans and incitement of violence, against a person or a group: the real threats, Latent
  Hatred's "threatening" tweets (exclusion and incitement against groups), the hand-written threats; negatives are
  real benign comments and the hand-written benign rows (news and fiction about violence among them).
- self_harm: incitement to or intent of self-harm. No real, permissively licensed data exists: positives are the
  hand-written rows only, negatives the real benign comments and the hand-written benign rows (medical talk among
  them). Its figures are a rule test, never evidence; it is served as beta.

Thresholds are chosen on the dev split through the served path (windows, worst window): review flags at most
each head's `review_benign_rate` of benign dev comments (2%; threat 0.5%: a side category adds its flags to the
default profile's, whose budget the main categories already use); block is the lowest score at 95% dev precision
where reachable, else 1.0 (the category never blocks by itself). The
figures on the held-out test split go to `reports/side-heads-report.json`; `thresholds.json` takes the new model version
and the side categories. Run `training.language_calibration` and `training.eval_text` after it (the calibration
file names the served version).

    MODERATION_TEXT_DATA_DIR=/path/to/jsonl-dir .venv/bin/python -m training.side_heads
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np
import torch

from models.text_side_heads import SIDE_HEADS_FILE, document
from models.text_toxicity import DEFAULT_WEIGHTS, THRESHOLDS_FILE, TextToxicityModel, read_thresholds, split_windows
from models.universal_sentence_encoder import pad_batch, tokenize
from training.finetune import fit_linear, language_weights
from training.metrics import block_threshold, review_threshold, roc_auc
from training.reports import REPORTS_DIR
from training.text_data import HandwrittenRow, load_comments, load_handwritten_split
from training.train_text import BLOCK_PRECISION, TRAIN_CHARS


@dataclass(frozen=True)
class HeadSettings:
    beta: bool
    positive_weight: float  # positives are rare (1-2% of rows); weighted up where dev AUC said so
    handwritten_weight: float | None  # None: weighted with the real rows by language (1/sqrt of its row count)
    gate: str | None = None  # a main-head category the head's probability is multiplied by
    review_benign_rate: float = 0.02  # review flags at most this share of benign dev comments


HEADS = {
    # threat is on by default: at 2% of benign dev comments it still sent polite thank-you notes to review
    # (review 0.0049); at 0.5% it keeps 0.78 recall of real held-out threats (target 0.7) and flags 0.5% of
    # benign test comments (2.4% at 2%).
    "threat": HeadSettings(beta=False, positive_weight=1.0, handwritten_weight=1.0, gate="toxic",
                           review_benign_rate=0.005),
    "violent_speech": HeadSettings(beta=True, positive_weight=5.0, handwritten_weight=None),
    "self_harm": HeadSettings(beta=True, positive_weight=5.0, handwritten_weight=None),
}
SIDE_CATEGORIES = tuple(HEADS)
# Latent Hatred's stage-2 class "threatening" is carried in `orig_label`; the corpus leaves `threat` unknown there.
GROUP_THREAT_MARK = "| threatening"
REPORT_FILE = REPORTS_DIR / "side-heads-report.json"


def label(category: str, comment=None, row: HandwrittenRow | None = None) -> float | None:
    """1, 0 or None (unknown: left out of that head's loss) for a real comment or a hand-written row."""
    if row is not None:
        return float(row.kind == ("self_harm" if category == "self_harm" else "threat"))
    if comment.label == 0:
        return 0.0
    if category == "threat":
        known = comment.known("threat")
        return None if known is None else float(known)
    if category == "violent_speech":
        return 1.0 if comment.known("threat") or comment.orig_label.endswith(GROUP_THREAT_MARK) else None
    return None  # self_harm: no real comment is labelled for it


def main() -> None:
    started = time.time()
    log = lambda msg: print(f"[{time.time() - started:5.0f} s] {msg}", flush=True)
    base = TextToxicityModel.load(threads=1, calibrated=False, side_heads=False)
    comments = load_comments()
    handwritten = load_handwritten_split("train")
    train = [c for c in comments if c.split == "train"]
    log(f"{len(train)} real train comments, {len(handwritten)} hand-written rows; embedding first windows")
    x = torch.tensor(embed_first_windows(base, [c.text for c in train] + [r.text for r in handwritten]))
    balanced = language_weights([c.lang for c in train] + [r.language for r in handwritten])
    real_only = language_weights([c.lang for c in train])
    heads = {}
    for category, settings in HEADS.items():
        labels = [label(category, comment=c) for c in train] + [label(category, row=r) for r in handwritten]
        y = torch.tensor([[v or 0.0] for v in labels])
        m = torch.tensor([[float(v is not None)] for v in labels])
        weights = balanced if settings.handwritten_weight is None else np.r_[
            real_only, np.full(len(handwritten), settings.handwritten_weight)]
        w = torch.tensor(weights, dtype=torch.float32) * torch.where(y[:, 0] > 0, settings.positive_weight, 1.0)
        probe = fit_linear(x, y, m, w)  # fit_linear scales x by HEAD_INPUT_SCALE, as the served path does
        heads[category] = {"weights": [round(float(v), 6) for v in probe.weight.detach()[0]],
                           "bias": round(float(probe.bias.detach()[0]), 6), "beta": settings.beta}
        if settings.gate:
            heads[category]["gate"] = settings.gate
        log(f"{category}: {int(y[:, 0].sum())} positives, {int((m[:, 0] > 0).sum())} labelled rows")
    path = DEFAULT_WEIGHTS.with_name(SIDE_HEADS_FILE)
    path.write_text(json.dumps(document(heads, base.model_version)) + "\n", encoding="utf-8")
    served = TextToxicityModel.load(threads=1, calibrated=False)
    log(f"wrote {path.name}; served version {served.model_version}; scoring dev and test through the served path")
    write_thresholds(served, comments, log)


def embed_first_windows(model: TextToxicityModel, texts: list[str], batch: int = 64) -> np.ndarray:
    """The encoder's embedding of each text's first window of TRAIN_CHARS characters (the unit training saw)."""
    tokens = tokenize(model._tokenizer, [(split_windows(t, TRAIN_CHARS) or [""])[0] for t in texts])
    order = sorted(range(len(tokens)), key=lambda i: len(tokens[i]))
    out = np.zeros((len(texts), 512), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, len(order), batch):
            rows = order[start:start + batch]
            ids, lengths = pad_batch([tokens[i][:256] for i in rows])
            out[rows] = model._classifier.encoder(ids, lengths).numpy()
    return out


def write_thresholds(served: TextToxicityModel, comments, log) -> None:
    dev = [c for c in comments if c.split == "dev"]
    test = [c for c in comments if c.split == "test"]
    dev_scores, test_scores = served.predict_raw([c.text for c in dev]), served.predict_raw([c.text for c in test])
    thresholds = read_thresholds()
    thresholds["model_version"] = served.model_version
    report = {"model_version": served.model_version, "categories": {}}
    for category in SIDE_CATEGORIES:
        chosen = _chosen(category, dev, np.array([s[category] for s in dev_scores]))
        thresholds["categories"][category] = chosen
        report["categories"][category] = _test_figures(category, test, np.array([s[category] for s in test_scores]),
                                                       chosen, served)
        log(f"{category}: {chosen} | test {report['categories'][category]['overall']}")
    THRESHOLDS_FILE.write_text(json.dumps(thresholds, indent=2) + "\n", encoding="utf-8")
    REPORT_FILE.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


def _chosen(category: str, dev, scores: np.ndarray) -> dict:
    benign = np.array([c.label == 0 for c in dev])
    review = review_threshold(scores[benign], HEADS[category].review_benign_rate)
    labels = np.array([label(category, comment=c) for c in dev], dtype=object)
    known = np.array([v is not None for v in labels])
    positives = int(sum(v == 1.0 for v in labels[known]))
    block, precision = (1.0, float("nan"))
    if positives:
        block, precision = block_threshold(labels[known].astype(float) > 0, scores[known], BLOCK_PRECISION)
    if not precision >= BLOCK_PRECISION:
        # No score reaches 95% dev precision: the category never blocks by itself (1.0), it only sends to review.
        block = 1.0
    return {"review": round(review, 4), "block": round(max(block, review), 4), "beta": HEADS[category].beta,
            "dev_block_precision": None if np.isnan(precision) else round(precision, 4),
            "dev_positives": positives, "dev_negatives": int(benign.sum())}


def _test_figures(category: str, test, scores: np.ndarray, chosen: dict, served) -> dict:
    """AUC and recall at review per source, the benign flag rate per language, and the hand-written rule test."""
    labels = np.array([label(category, comment=c) for c in test], dtype=object)
    known = np.array([v is not None for v in labels])
    y = np.array([v == 1.0 for v in labels])
    flagged = scores >= chosen["review"]

    def summary(rows) -> dict:
        pos, neg = rows & y, rows & known & ~y
        return {"positives": int(pos.sum()), "negatives": int(neg.sum()),
                "auc": roc_auc(y[rows & known], scores[rows & known]) if pos.any() and neg.any() else None,
                "recall_at_review": round(float(flagged[pos].mean()), 3) if pos.any() else None}

    sources = sorted({c.dataset for c, is_pos in zip(test, y) if is_pos})
    langs = np.array([c.lang for c in test])
    benign = np.array([c.label == 0 for c in test])
    eval_rows = load_handwritten_split("eval")
    rule = served.predict_raw([r.text for r in eval_rows])
    rule_pos = [s[category] >= chosen["review"] for r, s in zip(eval_rows, rule) if label(category, row=r) == 1.0]
    rule_benign = [s[category] >= chosen["review"] for r, s in zip(eval_rows, rule) if r.label == 0]
    return {
        "overall": summary(np.ones(len(test), dtype=bool)),
        "sources": {d: summary(np.array([c.dataset == d for c in test])) for d in sources},
        "benign_flagged": {lang: round(float(flagged[benign & (langs == lang)].mean()), 4)
                           for lang in sorted(set(langs[benign]))},
        "handwritten_rule_test": {
            "positives": len(rule_pos), "recall_at_review": round(float(np.mean(rule_pos)), 3) if rule_pos else None,
            "benign": len(rule_benign), "benign_flagged": round(float(np.mean(rule_benign)), 3)},
    }


if __name__ == "__main__":
    main()
