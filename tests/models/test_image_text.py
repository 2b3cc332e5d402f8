"""The image text reader (models/image_text.py): its bounds with an engine this test controls, and the real models
reading what is written on an image."""

from __future__ import annotations

import asyncio
import io

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from models import image_text
from models.decode_pool import ImageDecoder
from models.image_decoding import decode_image
from models.image_scoring import ImageScores
from models.image_text import ImageTextReader, recognition_runs, tallest_lines
from models.image_upload import ImageUpload, NoTextReader, decode_and_score, text_frames

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"


def line(height: int, width: int = 100) -> np.ndarray:
    """A line crop `height` px high and `width` px long."""
    return np.zeros((height, width, 3), np.uint8)


class Engine:
    """Finds the lines it is given on every frame and reads each as `line<n>` at `confidence`; each recognition run
    advances the clock by `run_s`."""

    def __init__(self, lines: list[np.ndarray], confidence: float = 0.9, run_s: float = 0.0):
        self.found, self.confidence, self.run_s = lines, confidence, run_s
        self.now, self.runs, self.read = 0.0, [], 0

    def clock(self) -> float:
        return self.now

    def lines(self, bgr):
        return list(self.found)

    def recognise(self, crops):
        self.runs.append(len(crops))
        self.now += self.run_s
        answers = []
        for _ in crops:
            self.read += 1
            answers.append((f"line{self.read}", self.confidence))
        return answers


def reader(engine: Engine, budget_s: float = 1.0) -> ImageTextReader:
    return ImageTextReader(engine, "ocr-test", budget_s=budget_s, clock=engine.clock)


FRAME = Image.new("RGB", (64, 64))


def test_a_frame_without_text_reads_nothing_and_is_complete():
    read = reader(Engine([])).read([FRAME])
    assert (read.text, read.lines, read.partial) == ("", 0, False)


def test_the_lines_read_come_in_the_engines_reading_order_joined_by_newlines():
    read = reader(Engine([line(20), line(20)])).read([FRAME])
    assert (read.text, read.lines, read.partial, read.version) == ("line1\nline2", 2, False, "ocr-test")


def test_only_the_tallest_boxes_are_read_and_the_answer_says_partial(monkeypatch):
    monkeypatch.setattr(image_text, "MAX_TEXT_BOXES", 2)
    engine = Engine([line(10), line(40), line(5), line(30)])
    read = reader(engine).read([FRAME])
    assert read.lines == 2 and read.partial
    kept = tallest_lines([line(10), line(40), line(5), line(30)], 2)
    assert [crop.shape[0] for crop in kept] == [40, 30]  # the two tallest, in their order


def test_recognition_stops_when_the_time_budget_is_spent_and_says_partial():
    engine = Engine([line(20) for _ in range(12)], run_s=0.6)
    read = reader(engine, budget_s=1.0).read([FRAME])
    # Runs of six lines: the first ends at 0.6 s, the second at 1.2 s; the budget is checked before each run.
    assert engine.runs == [6, 6] and read.lines == 12
    engine = Engine([line(20) for _ in range(18)], run_s=0.6)
    read = reader(engine, budget_s=1.0).read([FRAME])
    assert engine.runs == [6, 6] and read.lines == 12 and read.partial


def test_a_run_is_bounded_by_its_lines_length_in_heights():
    long, short = np.zeros((10, 500, 3)), np.zeros((10, 100, 3))  # 50 and 10 heights long
    runs = recognition_runs([long, long, short, short, short], most=6, heights=96)
    assert [len(run) for run in runs] == [1, 4]
    assert [len(run) for run in recognition_runs([short] * 8, most=6, heights=96)] == [6, 2]


def test_a_line_longer_than_the_bound_is_cut_and_says_partial():
    engine = Engine([line(10, width=10 * (image_text.MAX_LINE_HEIGHTS + 20))])
    read = reader(engine).read([FRAME])
    assert read.lines == 1 and read.partial


def test_lines_read_with_low_confidence_are_dropped():
    assert reader(Engine([line(20)], confidence=0.3)).read([FRAME]).lines == 0


def test_a_caption_repeated_on_every_frame_is_read_once():
    engine = Engine([line(20)])
    engine.recognise = lambda crops: [("Same Caption", 0.9)] * len(crops)
    read = reader(engine).read([FRAME, FRAME, FRAME])
    assert read.text == "Same Caption" and read.lines == 1


def test_the_text_read_is_cut_at_its_character_bound_and_says_partial(monkeypatch):
    monkeypatch.setattr(image_text, "MAX_READ_CHARS", 8)
    read = reader(Engine([line(20), line(20)])).read([FRAME])
    assert read.text == "line1\nli" and read.partial


def test_more_frames_than_the_bound_say_partial():
    read = reader(Engine([])).read([FRAME] * (image_text.MAX_TEXT_FRAMES + 1))
    assert read.partial


def jpeg(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def test_the_decoder_keeps_a_larger_first_frame_for_the_reader_only_when_asked():
    data = jpeg(Image.new("RGB", (2400, 1800), (30, 60, 90)))
    plain = decode_image(data, 40_000_000)
    asked = decode_image(data, 40_000_000, text_side=960)
    assert plain.text_frame is None and max(plain.frames[0].size) == 512
    assert asked.text_frame.size == (960, 720) and max(asked.frames[0].size) == 512


def test_the_reader_reads_the_first_frame_at_its_size_then_a_few_later_frames():
    frames = [Image.new("RGB", (8, 8), (i, i, i)) for i in range(8)]
    big = Image.new("RGB", (16, 16))

    class Decoded:
        pass

    decoded = Decoded()
    decoded.frames, decoded.text_frame = frames, big
    chosen = text_frames(decoded)
    assert len(chosen) == image_text.MAX_TEXT_FRAMES and chosen[0] is big and chosen[-1] is frames[-1]


def test_an_upload_asking_for_its_text_fails_where_there_is_no_reader():
    upload = ImageUpload(jpeg(Image.new("RGB", (32, 32))), 40_000_000, ("nsfw",), read_text=True)

    async def score(_prepared):
        return ImageScores({"nsfw": 0.0}, 1.0, "nsfw-1")

    with pytest.raises(NoTextReader):
        asyncio.run(decode_and_score(upload, ImageDecoder(), lambda request: request, score))


@pytest.fixture(scope="module")
def real_reader() -> ImageTextReader:
    return ImageTextReader.load()


def captioned(lines: list[str], size=(1600, 1200), font_px: int = 90) -> Image.Image:
    """A photo-sized image with `lines` in large type, as a meme caption."""
    image = Image.new("RGB", size, (40, 90, 160))
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(FONT, font_px)
    for index, line in enumerate(lines):
        draw.text((60, 80 + index * int(font_px * 1.6)), line, font=font, fill="white", stroke_width=4,
                  stroke_fill="black")  # fmt: skip
    return image


def test_the_real_models_read_a_caption_written_on_a_photo(real_reader):
    decoded = decode_image(jpeg(captioned(["NOBODY LIKES YOU", "Tu es nul"])), 40_000_000, text_side=960)
    read = real_reader.read(text_frames(decoded))
    words = "".join(read.text.split()).casefold()
    assert "nobodylikesyou" in words and "tuesnul" in words and not read.partial


def test_the_real_models_read_nothing_on_a_flat_photo(real_reader):
    read = real_reader.read([Image.new("RGB", (960, 720), (90, 120, 60))])
    assert (read.text, read.partial) == ("", False)


def test_the_real_models_are_bounded_on_a_poster_of_tiny_print(real_reader):
    poster = Image.new("RGB", (960, 960), "white")
    draw = ImageDraw.Draw(poster)
    font = ImageFont.truetype(FONT.replace("-Bold", ""), 12)
    for row in range(70):
        draw.text((4, 4 + row * 13), f"row {row} of small print that goes on and on across the page " * 2,
                  font=font, fill="black")  # fmt: skip
    read = real_reader.read([poster])
    assert read.partial and len(read.text) <= image_text.MAX_READ_CHARS
