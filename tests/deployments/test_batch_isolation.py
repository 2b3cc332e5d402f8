"""One item never fails the batch it shares: the TextModel and ImageModel replicas, run in process with a scorer
that fails on one request, answer every other caller of the same batch (models/batch_queue.py)."""

from __future__ import annotations

import asyncio

import pytest

from deployments import image_model, text_model
from models.batch_isolation import raised_if_failed, scored_apart
from models.image_scoring import ImageRequest, ImageScores
from models.text_scoring import CategoryNotServed, TextRequest, TextScores


class PoisonedScorer:
    """Scores every request, but raises for the whole call when `poison` is among its requests."""

    def __init__(self, poison, answer):
        self.poison, self.answer, self.calls = poison, answer, []

    def score(self, requests):
        self.calls.append(len(requests))
        if self.poison in requests:
            raise CategoryNotServed("the served model does not score this")
        return [self.answer(request) for request in requests]

    score_prepared = score  # the ImageModel's batch runs prepared images (models/image_scoring.py)


def test_a_batch_that_scores_is_one_call():
    scorer = PoisonedScorer(poison="bad", answer=str.upper)
    assert scored_apart(scorer.score, ["a", "b"]) == ["A", "B"] and scorer.calls == [2]


def test_a_failing_batch_is_scored_apart_and_only_the_culprit_fails():
    scorer = PoisonedScorer(poison="bad", answer=str.upper)
    results = scored_apart(scorer.score, ["a", "bad", "c"])
    assert results[0] == "A" and results[2] == "C" and isinstance(results[1], CategoryNotServed)
    assert scorer.calls == [3, 1, 1, 1]
    with pytest.raises(CategoryNotServed):
        raised_if_failed(results[1])
    assert raised_if_failed(results[0]) == "A"


def _replica(cls, scorer):
    replica = cls.func_or_class.__new__(cls.func_or_class)
    replica.__init__("unused-registry")
    replica._scorer = scorer
    return replica


async def _answers(calls):
    return await asyncio.gather(*calls, return_exceptions=True)


@pytest.mark.anyio
async def test_text_model_one_callers_failure_leaves_the_other_callers_of_its_batch_answered():
    poison = TextRequest(text="odd", categories=("toxic", "self_harm"))
    scorer = PoisonedScorer(poison, lambda request: TextScores({"toxic": 0.1}, "v1"))
    replica = _replica(text_model.TextModel, scorer)
    requests = [TextRequest(text=f"text {n}", categories=("toxic",)) for n in range(3)]
    answers = await _answers([replica.score(requests[0]), replica.score(poison), *map(replica.score, requests[1:])])
    assert isinstance(answers[1], CategoryNotServed)
    assert [answers[0], *answers[2:]] == [TextScores({"toxic": 0.1}, "v1")] * 3
    assert scorer.calls[0] == 4  # they did share one batch


@pytest.mark.anyio
async def test_image_model_one_callers_failure_leaves_the_other_callers_of_its_batch_answered():
    poison = ImageRequest(frames=["odd frame"], categories=("nsfw", "weapon"))
    scores = ImageScores(categories={"nsfw": 0.1}, safe=0.9, model_version="v1")
    scorer = PoisonedScorer(poison, lambda request: scores)
    replica = _replica(image_model.ImageModel, scorer)
    requests = [ImageRequest(frames=[f"frame {n}"], categories=("nsfw",)) for n in range(3)]
    answers = await _answers([replica._batched(poison), *map(replica._batched, requests)])
    assert isinstance(answers[0], CategoryNotServed) and answers[1:] == [scores] * 3
    assert scorer.calls[0] == 4


class RedLevel:
    """A model whose input is a frame's red level and whose score is that level / 255 (unit test only)."""

    def prepare(self, frame):
        return frame.getpixel((0, 0))[0]

    def run(self, inputs):
        return [{"nsfw": level / 255, "safe": 1 - level / 255} for level in inputs]


def _png(red: int) -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), (red, 0, 0)).save(buffer, "PNG")
    return buffer.getvalue()


@pytest.mark.anyio
async def test_an_upload_for_a_category_the_replica_lacks_fails_alone_in_its_decode_worker():
    from models.image_scoring import ImageScorer
    from models.image_upload import ImageUpload

    replica = _replica(image_model.ImageModel, ImageScorer({"nsfw": RedLevel()}, {"nsfw": "red-1"}))
    uploads = [ImageUpload(_png(51), 1_000_000, ("nsfw",)), ImageUpload(_png(0), 1_000_000, ("nsfw", "weapon")),
               ImageUpload(_png(102), 1_000_000, ("nsfw",))]
    first, lacking, third = await _answers([replica.score_upload(upload) for upload in uploads])
    assert isinstance(lacking, ValueError) and "weapon" in str(lacking)
    assert first.categories == pytest.approx({"nsfw": 0.2}) and third.categories == pytest.approx({"nsfw": 0.4})
    assert first.model_version == "nsfw=red-1" and first.pdq is not None
