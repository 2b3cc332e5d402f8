"""Training and evaluation code of the text model: data format, split, loss masking, thresholds, real-data smoke."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from training.finetune import language_weights, masked_bce
from training.metrics import block_threshold, review_threshold, roc_auc
from training.text_data import DATA_DIR_ENV, Comment, data_dir, load_comments, split_of


def _write(tmp_path, rows):
    (tmp_path / "xx.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_loader_reads_fine_labels_and_treats_missing_keys_as_unknown(tmp_path):
    _write(tmp_path, [
        {"text": "you idiot", "label": 1, "lang": "xx", "source": "s", "orig_label": "OFF", "insult": True},
        {"text": "nice day", "label": 0, "lang": "xx", "source": "s", "orig_label": "NOT"},
    ])
    toxic, benign = sorted(load_comments(tmp_path), key=lambda c: -c.label)
    assert toxic.known("toxic") is True and toxic.known("insult") is True
    assert toxic.known("threat") is None  # unknown, not false
    assert benign.known("insult") is False and benign.known("threat") is False


def test_split_is_deterministic_ignores_case_and_spacing_and_is_about_80_10_10():
    assert split_of("Hello  World") == split_of("hello world")
    splits = [split_of(f"comment number {i}") for i in range(5000)]
    shares = {s: splits.count(s) / len(splits) for s in ("train", "dev", "test")}
    assert shares["train"] == pytest.approx(0.8, abs=0.03)
    assert shares["dev"] == pytest.approx(0.1, abs=0.02) and shares["test"] == pytest.approx(0.1, abs=0.02)


def test_dataset_names_fold_the_sources_own_splits():
    make = lambda source: Comment("t", 0, "pt", source)
    assert make("told-br-train").dataset == make("told-br-validation").dataset == "told-br"
    assert make("germeval2018-training").dataset == "germeval2018-training"


def test_unknown_labels_add_nothing_to_the_loss():
    logits = torch.tensor([[2.0, -1.0], [0.5, 3.0]])
    y = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    w = torch.ones(2)
    masked = masked_bce(logits, y, torch.tensor([[1.0, 0.0], [1.0, 0.0]]), w)
    changed = masked_bce(logits.clone().index_put_((torch.tensor([0, 1]), torch.tensor([1, 1])),
                                                   torch.tensor([9.0, -9.0])), y,
                         torch.tensor([[1.0, 0.0], [1.0, 0.0]]), w)
    assert masked == pytest.approx(changed.item())


def test_language_weights_favour_small_languages():
    w = language_weights(["tr"] * 16 + ["da"] * 4)
    assert w[-1] == pytest.approx(2 * w[0]) and w.mean() == pytest.approx(1.0)


def test_review_threshold_flags_at_most_the_allowed_share_of_negatives():
    negatives = np.linspace(0, 1, 1000)
    threshold = review_threshold(negatives, 0.10)
    assert (negatives >= threshold).mean() <= 0.10
    assert (negatives >= threshold).mean() >= 0.099


def test_block_threshold_reaches_precision_or_reports_what_it_reached():
    labels = np.array([0] * 50 + [1] * 50)
    scores = np.r_[np.linspace(0, 0.6, 50), np.linspace(0.4, 1, 50)]
    threshold, precision = block_threshold(labels, scores, 0.95)
    flagged = scores >= threshold
    assert labels[flagged].mean() >= 0.95 and precision >= 0.95
    _, reached = block_threshold(np.array([0, 1] * 20), np.linspace(0, 1, 40), 0.95)
    assert reached < 0.95


def test_roc_auc_handles_ties():
    assert roc_auc([0, 1, 0, 1], [0.1, 0.9, 0.5, 0.5]) == pytest.approx(0.875)


@pytest.mark.skipif(data_dir() is None, reason=f"{DATA_DIR_ENV} is unset or names no directory: "
                    "the real labelled comments live outside the repository")
def test_served_model_ranks_real_held_out_comments():
    """Real-data smoke check: a few hundred held-out test comments per language, AUC above a floor."""
    from models.text_toxicity import TextToxicityModel

    test = load_comments(splits=("test",))
    rng = np.random.default_rng(0)
    sample = [test[i] for i in rng.choice(len(test), size=min(600, len(test)), replace=False)]
    scores = [s["toxic"] for s in TextToxicityModel.load(threads=1).predict([c.text for c in sample])]
    assert roc_auc([c.label for c in sample], scores) >= 0.80
