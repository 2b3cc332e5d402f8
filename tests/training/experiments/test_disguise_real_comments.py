"""The record of what reading disguised words does to real comments (training/experiments/disguise_real_comments.py):
its counts of decisions before and after are per label, at the default profile's toxic thresholds."""

from __future__ import annotations

import numpy as np

from training.experiments.disguise_real_comments import BLOCK, REVIEW, decision_changes


def test_decisions_are_counted_per_label_at_the_default_thresholds():
    labels = np.array([1, 1, 0, 0])
    before = np.array([0.2, REVIEW, 0.1, BLOCK])
    after = np.array([BLOCK, REVIEW, REVIEW - 0.01, BLOCK])
    changes = decision_changes(labels, before, after)
    assert changes["toxic"] == {"comments": 2, "review_before": 1, "review_after": 2, "block_before": 0,
                                "block_after": 1}
    assert changes["benign"] == {"comments": 2, "review_before": 1, "review_after": 1, "block_before": 1,
                                 "block_after": 1}


def test_the_thresholds_are_the_default_profiles():
    import yaml

    from runtime.settings import PROJECT_ROOT

    profiles = yaml.safe_load((PROJECT_ROOT / "config" / "profiles.yaml").read_text(encoding="utf-8"))
    assert profiles["default"]["categories"]["toxic"] == {"review": REVIEW, "block": BLOCK}
