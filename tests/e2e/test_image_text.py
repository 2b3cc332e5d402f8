"""The words written on an image, read through the real graph (ImageModel -> ImageTextModel -> TextModel): native and
OpenAI answers, and the review item a moderator sees."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image, ImageDraw, ImageFont
from skimage import data as photos

from runtime.bootstrap import load_profiles
from runtime.settings import PROJECT_ROOT

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"


def captioned_photo(lines: list[str]) -> bytes:
    """A real photo (skimage's coffee, scaled to 1600 px wide) captioned in large type, as a meme; JPEG."""
    image = Image.fromarray(photos.coffee()).resize((1600, 1200))
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(FONT, 110)
    for index, line in enumerate(lines):
        draw.text((60, 60 + index * 170), line, font=font, fill="white", stroke_width=6, stroke_fill="black")
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=88)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def reading_key(admin_client, new_key):
    """The shipped strict profile (review mode: a flag queues an item) with `text_toxic` enabled."""
    strict = next(p for p in load_profiles(PROJECT_ROOT / "config") if p.name == "strict")
    body = strict.model_dump(exclude={"name"})
    body["categories"]["text_toxic"]["enabled"] = True
    body["answer_image_text"] = True
    response = admin_client.put("/admin/v1/profiles/e2e-reading", json=body)
    assert response.status_code == 200, response.text
    return new_key(profile="e2e-reading", account="e2e-reading")


def test_an_insult_on_a_photo_is_read_flagged_and_queued_with_the_text_read(client, admin_client, reading_key):
    response = client.post("/v1/moderate", headers=reading_key,
                           files={"image": ("meme.jpg", captioned_photo(["YOU ARE A", "PATHETIC IDIOT"]))})
    body = response.json()
    assert response.status_code == 200, body
    assert "IDIOT" in body["text_read"]["text"].upper(), body
    assert body["categories"]["text_toxic"] >= 0.4138 and body["decision"] == "review", body
    item = admin_client.get(f"/admin/v1/reviews/{body['review_id']}").json()
    assert item["kind"] == "image" and "IDIOT" in item["text"].upper() and "text_toxic" in item["scores"]


def test_a_benign_caption_is_read_and_allowed(client, reading_key):
    body = client.post("/v1/moderate", headers=reading_key,
                       files={"image": ("card.jpg", captioned_photo(["HAPPY BIRTHDAY", "GRANDMA"]))}).json()
    assert "BIRTHDAY" in body["text_read"]["text"].upper() and body["decision"] == "allow", body


def test_openai_counts_an_image_parts_text_toward_harassment(client, reading_key):
    url = "data:image/jpeg;base64," + base64.b64encode(captioned_photo(["YOU ARE A", "PATHETIC IDIOT"])).decode()
    response = client.post("/v1/moderations", headers=reading_key, json={
        "model": "omni-moderation-latest", "input": [{"type": "image_url", "image_url": {"url": url}}]})
    [result] = response.json()["results"]
    assert result["flagged"] and result["category_scores"]["harassment"] >= 0.4138, result
    assert result["category_applied_input_types"]["harassment"] == ["image"]


def test_a_profile_without_text_toxic_reads_nothing(client, new_key):
    body = client.post("/v1/moderate", headers=new_key(),
                       files={"image": ("meme.jpg", captioned_photo(["YOU ARE A", "PATHETIC IDIOT"]))}).json()
    assert "text_read" not in body and "text_toxic" not in body["categories"] and body["decision"] == "allow", body
