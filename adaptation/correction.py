"""An account's correction of the served text score, and the check that lets it go live. The home of the per-account
correction: every part, from the labels it is fitted on to its use in an answer, is named here.

- Its labels: adaptation/labels.py `Label`, made from what a queued or reported text keeps (moderation/label_evidence.py
  `label_evidence`) and kept per account by store/labels/labels.py `LabelStore` (a decision keeps its label in its
  own step: store/labels/lua.py `KEEP_DECIDED_LABEL`).
- Fitting it: here, `fit_correction` (live only with `MIN_AUDITED_PER_CLASS` audited labels of each class and a gain
  on the check below), run by moderation/site_adaptation.py `SiteAdaptation.refit` (on demand) and
  `refit_due_accounts` (as labels arrive: runtime/admin_server.py `BackgroundRefits`); the fit, live or not and why,
  is kept by store/labels/corrections.py `CorrectionStore`.
- Applying it: moderation/text_correction.py `AccountCorrections.live` (each replica's copy of the live fit) and
  `corrected` (a text answer's toxic score through `Correction.score`), called on every text answer by
  moderation/flow.py `ModerationFlow._corrected`.
- Operating it: admin/routes_adaptation.py (`adaptation_status`, `refit`, `reset`), dashboard/routes_adaptation.py
  (`adaptation_page`, `refit`, `reset`), and the CLI's `adaptation`, `refit`, `reset-adaptation` (runtime/cli.py
  `ADAPTATION_COMMANDS`).
- Measuring it: its cost, bench/adaptation.py `measure`; its quality and the `L2` below, training/eval_site.py
  `simulate`. The threshold backtest on the same labels is adaptation/backtest.py's; the whole story,
  docs/site-adaptation.md.

corrected logit = served calibrated logit + w . embedding + b

The served score stays the base (a fixed offset with coefficient 1): the correction only learns what this site's
moderators see differently, so with few labels it stays close to the served model instead of relearning it. w is
L2-regularised towards 0 (b is not: a site may simply be stricter or laxer overall). Each label is weighted by the
inverse of its sampling rate, normalised to mean 1, so that the random audits of allowed texts stand for all the
texts they were drawn from: fitted on queue decisions alone, a head learns the model's own flags, not the site's line.

It goes live only when it beats the served score out of sample on the account's own audited labels (flagged and
audit rows, weighted): k-fold cross-validation, every kind of label in the training folds, the held-out flagged and
audit labels scored by the fold's correction and by the served score, weighted ROC AUC of both over all folds'
held-out labels pooled (one AUC over the pooled out-of-fold scores rather than the mean of per-fold AUCs: with 10
harmful audited labels a fold holds two, and a per-fold AUC is mostly noise). Reports are never held out for the
check: they are only ever harmful, so they say nothing about ranking against the fine texts of the same traffic.

The default `L2` and the feature scaling were chosen by `python -m training.eval_site` (each dataset a site left
out of training); its module docstring gives the values tried and what they gave.
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from adaptation.labels import Label, logit

# Per average-weighted label: the fewest harmed sites (training/eval_site.py,
# training/experiments/site_features_probe.py).
L2 = 1000.0
# Fewer audited labels of either class than this, and the check cannot tell a 0.01 gain from noise. At 10 of each
# (an AUC's standard error about 0.07) the check's gain did not predict the gain on the site's later texts
# (correlation -0.25 to +0.22 at 50-200 labels, training/experiments/site_features_probe.py), and through the HTTP
# API one held-out site went live at +0.034 and lost 0.026 (training/experiments/eval_site_http.py); it predicts well
# from about 500 labels (0.77-0.85). At 40 of each, a site's first day (50-80 labels) never goes live; a few hundred
# labels can.
MIN_AUDITED_PER_CLASS = 40
_NEWTON_STEPS, _TOLERANCE = 30, 1e-6
# Below this weighted AUC of the served score on the audited labels, the labels are taken to be inverted (a
# moderator deciding against every flag reads about 1 - the model's AUC, 0.2 for a good one) and nothing is learnt.
# 0.35 was tried: it let one held-out site whose few dozen audited labels read 0.42 go live, and that site lost
# 0.084 AUC (training/experiments/site_features_probe.py): labels that disagree with the model that much are too few
# or too noisy for the check to judge a correction on.
CONTRADICTED_AUC = 0.5


@dataclass(frozen=True)
class Correction:
    weights: np.ndarray  # float32 (dim,), over the raw served embedding (any scaling is folded in)
    bias: float
    version: str

    @classmethod
    def build(cls, weights: np.ndarray, bias: float) -> "Correction":
        weights = np.ascontiguousarray(weights, dtype=np.float32)
        return cls(weights, float(bias), _version(weights, float(bias)))

    @property
    def dim(self) -> int:
        return int(self.weights.shape[0])

    def logit(self, served_logit: float, embedding: np.ndarray) -> float:
        return float(served_logit) + float(np.dot(self.weights, embedding)) + self.bias

    def score(self, served_score: float, embedding: np.ndarray) -> float:
        """The served calibrated probability in, the corrected probability out."""
        z = self.logit(logit(served_score), embedding)
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))

    def document(self) -> dict:
        # the bias unrounded: the version is recomputed from it when the document is read back
        return {"version": self.version, "bias": self.bias, "dim": self.dim,
                "weights": base64.b64encode(self.weights.astype("<f4").tobytes()).decode("ascii")}

    @classmethod
    def from_document(cls, document: dict) -> "Correction":
        try:
            dim, bias = int(document["dim"]), float(document["bias"])
            raw = base64.b64decode(document["weights"], validate=True)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a correction document: {error}") from None
        if dim <= 0 or len(raw) != 4 * dim:
            raise ValueError(f"a correction of dim {dim} has {4 * dim} bytes of weights, not {len(raw)}")
        weights = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        if not (np.isfinite(weights).all() and math.isfinite(bias)):
            raise ValueError("a correction's weights and bias must be finite")
        correction = cls.build(weights, bias)
        if "version" in document and document["version"] != correction.version:
            raise ValueError(f"version {document['version']!r} does not match the weights ({correction.version})")
        return correction


def _version(weights: np.ndarray, bias: float) -> str:
    digest = hashlib.sha256(weights.astype("<f4").tobytes() + struct.pack("<d", bias)).hexdigest()
    return "ad" + digest[:8]


@dataclass(frozen=True)
class FitReport:
    correction: Correction | None
    active: bool
    reason: str
    examples: int
    audited: int  # flagged + audit labels: those the check scores
    served_auc: float | None  # cross-validated, weighted, on the audited labels
    corrected_auc: float | None
    # the corrected logit of each label from the fold that held it out (NaN where none did: reports, or no check
    # ran): for a backtest of the corrected score on the same labels without the in-sample optimism; not stored
    out_of_fold: np.ndarray | None = field(default=None, compare=False, repr=False)

    def document(self) -> dict:
        rounded = lambda v: None if v is None else round(v, 4)  # noqa: E731
        return {"correction": None if self.correction is None else self.correction.document(),
                "active": self.active, "reason": self.reason, "examples": self.examples, "audited": self.audited,
                "served_auc": rounded(self.served_auc), "corrected_auc": rounded(self.corrected_auc)}


def fit_correction(labels: Sequence[Label], *, l2: float = L2, min_gain: float = 0.01, folds: int = 5,
                   seed: int = 0) -> FitReport:
    """Fit the account's correction on `labels` and say whether it may go live (see the module docstring)."""
    n = len(labels)
    if n == 0:
        return FitReport(None, False, "No labels yet.", 0, 0, None, None)
    x = np.stack([np.asarray(label.embedding, dtype=np.float64) for label in labels])
    offset = np.array([label.served_logit for label in labels], dtype=np.float64)
    y = np.array([label.harmful for label in labels], dtype=np.float64)
    weight = np.array([label.weight for label in labels], dtype=np.float64)
    audited = np.array([label.seen in ("flagged", "audit") for label in labels])
    report = lambda correction, reason, served=None, corrected=None: FitReport(  # noqa: E731
        correction, False, reason, n, int(audited.sum()), served, corrected)
    if y.min() == y.max():
        return report(None, f"All {n} labels say {'harmful' if y[0] else 'fine'}: nothing to learn a line from.")
    correction = _fit(x, offset, y, weight, l2)
    harmful, fine = int((y[audited] == 1).sum()), int((y[audited] == 0).sum())
    if min(harmful, fine) < MIN_AUDITED_PER_CLASS:
        return report(correction, f"Too few audited labels to check a correction: {harmful} harmful and {fine} fine "
                                  f"among flagged and audited texts, at least {MIN_AUDITED_PER_CLASS} of each needed.")
    served_auc = weighted_auc(y[audited], offset[audited], weight[audited])
    if served_auc < CONTRADICTED_AUC:
        return report(correction, f"The moderators' labels contradict the served score wholesale (its weighted AUC "
                                  f"on them is {served_auc:.2f}, below {CONTRADICTED_AUC}): not learning from them.",
                      served_auc)
    out_of_fold = np.full(n, np.nan)
    for held in _folds(y, audited, folds, seed):
        train = np.ones(n, dtype=bool)
        train[held] = False
        fold = _fit(x[train], offset[train], y[train], weight[train], l2)
        out_of_fold[held] = offset[held] + x[held] @ fold.weights.astype(np.float64) + fold.bias
    scored = audited & ~np.isnan(out_of_fold)
    served_auc = weighted_auc(y[scored], offset[scored], weight[scored])
    corrected_auc = weighted_auc(y[scored], out_of_fold[scored], weight[scored])
    gain = corrected_auc - served_auc
    if gain < min_gain:
        reason = (f"The correction does not beat the served score on held-out audited labels (AUC "
                  f"{corrected_auc:.3f} against {served_auc:.3f}, a gain of {gain:+.3f}; {min_gain:.2f} needed).")
        return FitReport(correction, False, reason, n, int(audited.sum()), served_auc, corrected_auc, out_of_fold)
    reason = (f"Live: AUC {corrected_auc:.3f} against the served {served_auc:.3f} on held-out audited labels "
              f"({gain:+.3f}).")
    return FitReport(correction, True, reason, n, int(audited.sum()), served_auc, corrected_auc, out_of_fold)


def _folds(y: np.ndarray, audited: np.ndarray, folds: int, seed: int) -> list[np.ndarray]:
    """Held-out indices per fold, stratified by (audited, harmful) so that every fold gets its share of the rare
    audited harmful labels; only the audited ones are held out (reports always train)."""
    rng = np.random.default_rng(seed)
    held: list[list[int]] = [[] for _ in range(folds)]
    for harmful in (0.0, 1.0):
        rows = np.where(audited & (y == harmful))[0]
        rng.shuffle(rows)
        start = int(rng.integers(folds))  # so that the remainders do not always land in the first folds
        for i, row in enumerate(rows):
            held[(start + i) % folds].append(int(row))
    return [np.array(sorted(h), dtype=np.int64) for h in held if h]


def _fit(x: np.ndarray, offset: np.ndarray, y: np.ndarray, weight: np.ndarray, l2: float) -> Correction:
    """Weighted logistic regression with a fixed offset, L2 on w only, by Newton's method (dim + 1 unknowns).

    The features are the embeddings centred and divided by one global scale (their root-mean-square deviation per
    coordinate), so that `l2` means the same whatever the encoder's norm; the scaling is folded back into the
    returned weights and bias, which apply to the raw embedding."""
    v = weight / weight.mean()
    mean = (v[:, None] * x).sum(axis=0) / v.sum()
    z = x - mean
    scale = float(np.sqrt(np.mean(z * z))) or 1.0
    z /= scale
    theta = newton_with_offset(z, offset, y, v, np.full(z.shape[1], l2))
    w = theta[:-1] / scale
    return Correction.build(w, theta[-1] - float(mean @ w))


def weighted_auc(labels: np.ndarray, scores: np.ndarray, weights: np.ndarray) -> float:
    """The chance that a harmful text outranks a fine one, each pair weighted by the product of the two labels'
    weights (ties count half): the traffic's AUC estimated from weighted samples. NaN without both classes."""
    labels = np.asarray(labels, dtype=bool)
    scores, weights = np.asarray(scores, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    positive, negative = weights[labels].sum(), weights[~labels].sum()
    if positive == 0 or negative == 0:
        return float("nan")
    distinct, index = np.unique(scores, return_inverse=True)
    pos = np.bincount(index, weights=np.where(labels, weights, 0.0), minlength=len(distinct))
    neg = np.bincount(index, weights=np.where(labels, 0.0, weights), minlength=len(distinct))
    below = np.cumsum(neg) - neg  # fine weight strictly below each distinct score
    return float(np.sum(pos * (below + 0.5 * neg)) / (positive * negative))


def newton_with_offset(z: np.ndarray, offset: np.ndarray, y: np.ndarray, v: np.ndarray,
                       penalty: np.ndarray) -> np.ndarray:
    """(w, b) of the weighted logistic regression y ~ offset + z.w + b with an L2 `penalty` per feature of w (b is
    not penalised), by Newton's method with backtracking (dim + 1 unknowns)."""
    d = z.shape[1]
    theta = np.zeros(d + 1)  # w, then b
    penalty = np.r_[penalty, 0.0]

    def loss(t: np.ndarray) -> float:
        eta = offset + z @ t[:-1] + t[-1]
        return float(np.sum(v * (np.logaddexp(0.0, eta) - y * eta)) + 0.5 * np.sum(penalty * t * t))

    current = loss(theta)
    for _ in range(_NEWTON_STEPS):
        eta = offset + z @ theta[:-1] + theta[-1]
        p = 1.0 / (1.0 + np.exp(-eta))
        r = v * (p - y)
        gradient = np.r_[z.T @ r, r.sum()] + penalty * theta
        h = v * p * (1.0 - p)
        hessian = np.empty((d + 1, d + 1))
        hessian[:d, :d] = (z * h[:, None]).T @ z
        hessian[:d, d] = hessian[d, :d] = z.T @ h
        hessian[d, d] = h.sum() + 1e-9  # keeps the solve defined when every p is 0 or 1
        hessian[np.diag_indices(d + 1)] += penalty
        step = np.linalg.solve(hessian, gradient)
        for _ in range(20):  # backtracking: a full Newton step can overshoot on nearly separable labels
            candidate = theta - step
            new = loss(candidate)
            if new <= current + 1e-12:
                break
            step /= 2
        decrease = current - new
        theta, current = candidate, new
        if decrease < _TOLERANCE * (1.0 + abs(current)):
            break
    return theta
