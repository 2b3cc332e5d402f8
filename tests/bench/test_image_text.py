"""bench/image_text.py's pieces that need no graph: the images it makes, the comments it picks, its tables."""

from __future__ import annotations

import io
import json

import numpy as np
from PIL import Image

from bench import image_text
from bench.image_text import Answer, ImageTextResult, caption_jpeg, quality_comments, quality_table, screenshot_png
from bench.inputs import split_of


def test_a_caption_is_a_phone_sized_jpeg_and_a_screenshot_a_1080_px_png():
    caption = Image.open(io.BytesIO(caption_jpeg("you are a pathetic idiot", np.zeros((64, 64, 3), np.uint8))))
    screenshot = Image.open(io.BytesIO(screenshot_png("a post " * 20)))
    assert (caption.format, caption.size) == ("JPEG", (1600, 1600))
    assert screenshot.format == "PNG" and screenshot.width == 1080


def test_the_comments_are_test_split_rows_of_the_drawn_languages_each_label_alike(tmp_path):
    rows = [{"text": f"comment number {i} in {lang}", "label": i % 2, "lang": lang}
            for lang in ("en", "ko") for i in range(400)]
    for lang in ("en", "ko"):
        (tmp_path / f"{lang}.jsonl").write_text("\n".join(json.dumps(r) for r in rows if r["lang"] == lang))
    comments, others = quality_comments(tmp_path)
    assert others == ["ko"] and {c.lang for c in comments} == {"en"}
    assert [c.label for c in comments].count(0) == [c.label for c in comments].count(1) == image_text.PER_LABEL
    assert all(split_of(c.text) == "test" for c in comments)
    assert quality_comments(tmp_path / "absent") is None


def test_the_quality_table_counts_caught_and_flagged_on_the_image_and_typed():
    answers = [Answer("caption", "en", 1, "block", "block", 1, False), Answer("caption", "en", 1, "allow", "review", 0,
               False), Answer("caption", "en", 0, "review", "allow", 2, True)]  # fmt: skip
    rows = [line for line in quality_table(answers) if line.startswith("| caption | en")]
    assert rows == ["| caption | en | 2 | 50% | 100% | 1 | 100% | 0% | 1 |"]


def test_the_section_says_what_was_not_measured():
    lines = image_text.section(ImageTextResult(not_measured=["quality: no data"]))
    assert "Not measured: quality: no data." in lines and image_text.section(None) == []
