"""training/decision_route.py keeps both stages' scores of its sample (.data/decision-route.npz); a kept score is
read back only for the same texts scored by the same cascade version, so a retrained second stage is scored again."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from training import decision_route


def test_kept_scores_are_read_back_only_for_the_same_texts_and_version(tmp_path, monkeypatch):
    calls = []

    def scored(comments):
        calls.append(len(comments))
        return {"scores": np.full((len(comments), 2), float(len(calls))), "blend": np.full(len(comments), 0.5)}

    monkeypatch.setattr(decision_route, "CACHE", tmp_path / "route.npz")
    monkeypatch.setattr(decision_route, "scored", scored)
    comments = [SimpleNamespace(text="one"), SimpleNamespace(text="two")]
    first = decision_route.cached_scores("dev", comments, "v1")
    again = decision_route.cached_scores("dev", comments, "v1")
    assert calls == [2] and np.array_equal(first["scores"], again["scores"])
    retrained = decision_route.cached_scores("dev", comments, "v2")
    assert calls == [2, 2] and retrained["scores"][0, 0] == 2.0
    decision_route.cached_scores("dev", comments[:1], "v2")
    assert calls == [2, 2, 1]
