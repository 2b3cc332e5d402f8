"""The candidate encoders' leave-one-source-out figures (training/loso_encoders.py), on small synthetic features:
the mix at each end is exactly one encoder's LOSO, and the sample is capped per dataset."""

from __future__ import annotations

import json

import numpy as np

from training import loso, loso_encoders
from training.metrics import roc_auc
from training.reports import MODEL_CARD
from training.text_data import Comment


def _comments(datasets=("s1", "s2", "s3"), per_dataset=300):
    return [Comment(f"text {source} {i}", i % 2, "en", source) for source in datasets for i in range(per_dataset)]


def test_the_sample_caps_train_and_scored_rows_per_dataset():
    comments = _comments(per_dataset=200)
    rows = loso_encoders.sample_rows(comments, train_per_dataset=7, scored_per_dataset=3)
    for source in ("s1", "s2", "s3"):
        assert sum(c.source == source and c.split == "train" for c in rows) == 7
        assert sum(c.source == source and c.split in loso.SCORED_SPLITS for c in rows) == 3


def _features(comments, informative: bool, seed: int):
    """One feature row per comment: the label plus noise when `informative`, else noise alone."""
    rng = np.random.default_rng(seed)
    labels = np.array([c.label for c in comments], dtype=np.float32)
    noise = rng.normal(size=(len(comments), 4)).astype(np.float32)
    if informative:
        noise[:, 0] += 3.0 * labels
    return noise


def test_share_one_is_the_served_encoders_loso_and_share_zero_the_candidates():
    comments = _comments()
    train = [c for c in comments if c.split == "train"]
    scored = [c for c in comments if c.split != "train"]
    owner = np.arange(len(scored))  # one window a text
    detected = ["en"] * len(scored)
    served = (_features(train, True, 1), _features(scored, True, 2))
    gemma = (_features(train, False, 3), _features(scored, False, 4))
    held = loso_encoders.leave_each_out(train, scored, owner, detected, {"served": served, "gemma": gemma})
    alone = loso._leave_each_out(train, served[0], scored, served[1], owner, detected, lambda c: True, print)
    labels = np.array([c.label for c in scored])
    for source in ("s1", "s2", "s3"):
        mine = np.array([c.source == source for c in scored])
        assert roc_auc(labels[mine], held[1.0]["score"][mine]) == roc_auc(labels[mine], alone["score"][mine])
        assert (held[1.0]["flagged"][mine] == alone["flagged"][mine]).all()
        assert roc_auc(labels[mine], held[1.0]["score"][mine]) > 0.75  # the informative encoder
        assert abs(roc_auc(labels[mine], held[0.0]["score"][mine]) - 0.5) < 0.2  # the noise: near chance


def test_the_committed_candidate_figures_are_in_the_model_card():
    stored = json.loads(loso.REPORT.read_text(encoding="utf-8"))
    candidates = stored.get("candidate_encoders")
    card = MODEL_CARD.read_text(encoding="utf-8")
    if candidates is None:
        assert "python -m training.loso_encoders" in card
        return
    assert "#### Candidate encoders" in card
    best = str(float(candidates["best_share"]))
    assert f"**{candidates['blend_best']['macro_languages']:.3f}**" in card
    assert candidates["macro_languages"][best] == max(candidates["macro_languages"].values())
