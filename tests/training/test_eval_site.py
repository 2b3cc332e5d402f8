"""The site simulation (training/eval_site.py): the labels a site's queue gives as adaptation keeps them, and what the
report and the model card say; the real-data check skips without MODERATION_TEXT_DATA_DIR. The walk itself:
tests/training/test_label_walk.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from adaptation.labels import logit
from training import eval_site, label_walk
from training.reports import MODEL_CARD
from training.text_data import DATA_DIR_ENV, data_dir


def synthetic_base(n: int = 600, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    label = rng.random(n) < 0.3
    score = 1 / (1 + np.exp(-(rng.normal(size=n) + 2.0 * label - 1.5)))
    embedding = rng.normal(size=(n, 512)).astype(np.float32)
    return {"dataset": np.array(["site-a", "site-b"] * (n // 2)), "lang": np.array(["en"] * n),
            "label": label.astype(int), "score": score, "threshold": np.full(n, 0.5), "embedding": embedding}


def test_a_site_is_flagged_at_its_review_threshold_and_its_labels_keep_the_base_logit_and_language():
    base = synthetic_base()
    history = np.arange(400)
    labels, taken = eval_site.site_labels(base, history, 10_000, np.random.default_rng(1))
    assert taken == 400
    flagged = [lab for lab in labels if lab.seen == "flagged"]
    assert len(flagged) == int((base["score"][history] >= 0.5).sum())
    assert all(lab.sampling_rate == label_walk.AUDIT_RATE for lab in labels if lab.seen == "audit")
    walked = label_walk.walk(base["score"] >= 0.5, base["label"], history, 10_000, np.random.default_rng(1))
    for lab, row in zip(labels, walked.rows):
        assert lab.served_logit == logit(base["score"][row]) and lab.language == "en"


def test_the_labels_stop_at_n_and_say_how_many_rows_it_took():
    base = synthetic_base()
    labels, taken = eval_site.site_labels(base, np.arange(600), 50, np.random.default_rng(2))
    assert len(labels) == 50 and taken < 600 and labels[-1].at == taken


def test_a_site_short_of_n_labels_does_not_count_for_that_n():
    base = synthetic_base(n=400)
    result = eval_site.simulate(base, l2=100.0, seeds=1, sizes=(20, 5000))
    assert result["sizes"]["5000"] == {"sites": 0}
    sizes = result["sizes"]["20"]
    assert sizes["sites"] == 2 and set(sizes["datasets"]) == {"site-a", "site-b"}
    for site in sizes["datasets"].values():
        if not site["active"]:  # off: the served score is the base's
            assert site["served"] == site["base"]


def test_the_committed_report_is_in_the_model_card():
    if not eval_site.REPORT.exists():
        pytest.skip("site-report.json not measured yet (make eval-site)")
    from training.model_card import site

    report = json.loads(eval_site.REPORT.read_text(encoding="utf-8"))
    card = MODEL_CARD.read_text(encoding="utf-8")
    assert site.SITE_HEADING in card
    assert site.site_section() in card
    assert f"{report['sizes']['100']['gain_served']:+.3f}" in card


@pytest.mark.skipif(data_dir() is None, reason=f"{DATA_DIR_ENV} is unset or names no directory: "
                    "the real labelled comments live outside the repository")
def test_the_committed_report_covers_every_dataset_with_both_classes():
    if not eval_site.REPORT.exists():
        pytest.skip("site-report.json not measured yet (make eval-site)")
    from training.text_data import load_comments

    classes: dict[str, set] = {}
    for c in load_comments(splits=("dev", "test")):
        classes.setdefault(c.dataset, set()).add(c.label)
    report = json.loads(eval_site.REPORT.read_text(encoding="utf-8"))
    assert set(report["sizes"]["50"]["datasets"]) <= {d for d, labels in classes.items() if len(labels) == 2}
