"""The text scorer: each request gets exactly its enabled categories, from one predict call per batch."""

from __future__ import annotations

import pytest

from models.text_scoring import CategoryNotServed, TextRequest, TextScorer


class FakeModel:
    """Scores every text by its length under each category it serves (a fake inside this unit test)."""

    def __init__(self, categories=("toxic", "insult", "threat")):
        self.categories, self.calls = categories, []

    def predict(self, texts):
        self.calls.append(list(texts))
        return [{c: len(t) / 100 for c in self.categories} for t in texts]


def test_one_predict_call_per_batch_and_each_request_gets_its_categories():
    model = FakeModel()
    scores = TextScorer(model, "v1").score([TextRequest("ab", ("toxic",)), TextRequest("abcd", ("toxic", "threat"))])
    assert model.calls == [["ab", "abcd"]]
    assert [s.categories for s in scores] == [{"toxic": 0.02}, {"toxic": 0.04, "threat": 0.04}]
    assert {s.model_version for s in scores} == {"v1"}


def test_a_category_the_model_does_not_serve_fails_instead_of_scoring_clean():
    with pytest.raises(CategoryNotServed, match="sexual"):
        TextScorer(FakeModel(), "v1").score([TextRequest("x", ("toxic", "sexual"))])


def test_every_text_request_is_scored_for_toxic():
    with pytest.raises(ValueError, match="toxic"):
        TextScorer(FakeModel(), "v1").score([TextRequest("x", ("insult",))])
