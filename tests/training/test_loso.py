"""The leave-one-source-out figures (training/loso.py) and average precision, on small synthetic inputs: what
each number means, without the model or the real data."""

from __future__ import annotations

import numpy as np
import pytest

from training import loso
from training.metrics import average_precision
from training.reports import MODEL_CARD
from training.text_data import DATA_DIR_ENV, Comment, data_dir, load_comments


def test_average_precision_is_the_step_area_under_precision_recall():
    # ranked: pos, neg, pos -> precision 1 at recall 0.5, 2/3 at recall 1
    assert average_precision([1, 0, 1], [0.9, 0.8, 0.7]) == pytest.approx(0.5 * 1 + 0.5 * 2 / 3)
    assert average_precision([1, 1, 0], [0.9, 0.8, 0.1]) == 1.0
    assert average_precision([0, 0], [0.3, 0.2]) != average_precision([0, 0], [0.3, 0.2])  # nan: no positives


def test_thresholds_per_language_need_enough_dev_rows_and_fall_back_to_all():
    rng = np.random.default_rng(0)
    scores = rng.random(400)
    labels = np.r_[np.zeros(300, dtype=int), np.ones(100, dtype=int)]
    langs = np.array(["de"] * 150 + ["da"] * 20 + ["de"] * 130 + ["de"] * 90 + ["da"] * 10)
    thresholds = loso._thresholds(scores, labels, langs)
    assert set(thresholds) == {"*", "de"}  # da: 20 benign, 10 toxic dev rows are too few
    benign_de = scores[(labels == 0) & (langs == "de")]
    assert np.mean(benign_de >= thresholds["de"]) <= loso.REVIEW_MAX_BENIGN


def test_threat_labels_known_only_where_the_source_says():
    assert loso.threat_label(Comment("a", 0, "en", "davidson2017-hate-offensive")) is False
    assert loso.threat_label(Comment("b", 1, "en", "davidson2017-hate-offensive")) is None
    assert loso.threat_label(Comment("c", 1, "en", "edos-semeval2023-t10", {"threat": True})) is True
    hatred = "latent-hatred-elsherief2021"
    assert loso.threat_label(Comment("d", 1, "en", hatred, orig_label="implicit_hate | threatening")) is True
    assert loso.threat_label(Comment("e", 1, "en", hatred, orig_label="implicit_hate")) is False


def test_training_rows_are_capped_per_dataset_and_every_dev_and_test_row_is_scored(monkeypatch):
    monkeypatch.setattr(loso, "TRAIN_ROWS_PER_DATASET", 5)
    comments = [Comment(f"text {source} {i}", i % 2, "en", source) for source in ("s1", "s2") for i in range(60)]
    rows = loso._rows(comments)
    train = [c for c in rows if c.split == "train"]
    assert {c.source: sum(t.source == c.source for t in train) for c in train} == {"s1": 5, "s2": 5}
    assert [c for c in rows if c.split != "train"] == [c for c in comments if c.split != "train"]


def test_summary_macro_skips_datasets_without_both_classes():
    comments = [Comment("a", 1, "en", "positives-only"), Comment("b", 1, "en", "mixed"), Comment("c", 0, "en", "mixed")]
    held = {"score": np.array([0.9, 0.8, 0.1]), "flagged": np.array([True, True, False])}
    summary = loso._summary(comments, held)
    assert summary["datasets"]["positives-only"]["auc"] != summary["datasets"]["positives-only"]["auc"]  # nan
    assert summary["macro_datasets"] == 1.0 and summary["datasets"]["mixed"]["recall"] == 1.0


def test_the_committed_report_is_of_the_served_model_and_in_the_model_card():
    import json

    from models.text_toxicity import TextToxicityModel

    stored = json.loads(loso.REPORT.read_text(encoding="utf-8"))
    assert stored["key"]["model_version"] == TextToxicityModel.load(threads=1).model_version
    card = MODEL_CARD.read_text(encoding="utf-8")
    assert f"leave-one-source-out **{stored['served_encoder']['all']['macro_languages']:.3f}**" in card


@pytest.mark.skipif(data_dir() is None, reason=f"{DATA_DIR_ENV} is unset or names no directory: "
                    "the real labelled comments live outside the repository")
def test_the_committed_report_is_of_this_data():
    import json

    from models.text_toxicity import TextToxicityModel

    stored = json.loads(loso.REPORT.read_text(encoding="utf-8"))
    assert stored["key"] == loso._key(TextToxicityModel.load(threads=1), load_comments())
