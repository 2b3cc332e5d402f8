"""Read the words written on an image: detection first, recognition only on the boxes found, within bounds.

The engine is RapidOCR 3.10's packaging of PaddleOCR's PP-OCRv6 small models (`rapidocr`, Apache-2.0): a text
detector (DB, 9.9 MB ONNX) and a recogniser of Chinese and Latin script (21 MB), both inside the wheel; no download
at run time. Why it and not PP-OCRv4 or tesseract, and the figures: docs/image-models.md, "Text in images". Only its
detection-and-crop and its recognition are used (`RapidOcrEngine`); the pipeline around them is here, so that every
step is bounded:

- The detector sees the first frame at most ``TEXT_FRAME_SIDE_PX`` a side (decoded once with the other frames:
  models/image_decoding.py ``text_side``) and the later frames of an animation as already decoded (512 px), at most
  ``MAX_TEXT_FRAMES`` frames in all. Its cost is fixed by the frame's size, text or not.
- Of the lines found, the ``MAX_TEXT_BOXES`` tallest are recognised (large type is what a reader sees first), in
  reading order. The recogniser's cost grows with a line's length in heights (it reads a line scaled to 48 px
  high), so a line is cut at ``MAX_LINE_HEIGHTS`` heights long, and a run holds at most ``RECOGNITION_BATCH`` lines
  and ``RUN_HEIGHTS`` heights: a poster of 12 px print, 80 heights a line, cost 2 s a run of six. Recognition stops
  when ``READ_BUDGET_S`` of the reading thread's CPU is spent (detection's included), checked before each run and
  frame. CPU, not wall time: on a busy machine a wall-clock budget ran out before a caption's first run, and what it
  bounds is the work one image can cost.
- Lines read with confidence under ``MIN_LINE_CONFIDENCE`` are dropped (texture read as letters), a line already
  read on an earlier frame is not repeated (a GIF's caption stays on every frame), and the text is cut at
  ``MAX_READ_CHARS``.
A bound that left something unread or cut marks the answer ``partial``; it is never an error.

No direction classifier: it costs a third model per line and turns only upside-down text; such text is read badly.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from PIL import Image

# The image category the text read scores as (policy/types.py names it too): its strictest text category.
TEXT_TOXIC = "text_toxic"
TEXT_FRAME_SIDE_PX = 960
MAX_TEXT_FRAMES = 3
MAX_TEXT_BOXES = 32
RECOGNITION_BATCH = 6
MAX_LINE_HEIGHTS = 48
RUN_HEIGHTS = 96
READ_BUDGET_S = 1.5
MIN_LINE_CONFIDENCE = 0.5
MAX_READ_CHARS = 1_000


@dataclass(frozen=True)
class ReadText:
    """What was read on one image: its lines joined by newlines, and whether a bound stopped the reading."""

    text: str
    lines: int
    partial: bool
    version: str


class RapidOcrEngine:
    """RapidOCR's two steps the reader uses: the lines found on a frame, cropped (in reading order), and the text of
    some lines with its confidence."""

    def __init__(self, frame_side: int = TEXT_FRAME_SIDE_PX) -> None:
        from rapidocr import RapidOCR
        from rapidocr.main import RapidOCRError

        # Det "max": the detector shrinks a frame to `frame_side`, never grows it (the package's default grows the
        # short side to 736: a blank 1080x1920 frame cost 2.5 s of detection, a 400x50 line 3-4 s).
        self._engine = RapidOCR(params={
            "Global.use_cls": False, "Global.log_level": "warning",
            "Det.limit_type": "max", "Det.limit_side_len": frame_side,
            "EngineConfig.onnxruntime.intra_op_num_threads": 1, "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        })  # fmt: skip
        self._nothing_found = RapidOCRError

    def lines(self, bgr: np.ndarray) -> list[np.ndarray]:
        try:
            crops, _ = self._engine.detect_and_crop(bgr, {})
        except self._nothing_found:  # its answer for a frame without text
            return []
        return list(crops)

    def recognise(self, crops: list[np.ndarray]) -> list[tuple[str, float]]:
        answer = self._engine.recognize_txt(crops)
        return list(zip(answer.txts or (), answer.scores))


class ImageTextReader:
    """``read(frames)`` -> ReadText. One compute thread (a replica owns a core); not thread-safe: one read at a time."""

    def __init__(self, engine, version: str, *, budget_s: float = READ_BUDGET_S,
                 clock=time.thread_time) -> None:  # fmt: skip
        """`engine`: a ``RapidOcrEngine``, or anything with its ``lines`` and ``recognise``."""
        self._engine, self.version, self._budget_s, self._clock = engine, version, budget_s, clock

    @classmethod
    def load(cls, weights: str | None = None, *, version: str = "ppocrv6-small-rapidocr-3.10.0",
             frame_side: int = TEXT_FRAME_SIDE_PX) -> ImageTextReader:  # fmt: skip
        """The models inside the installed wheel (``weights`` must be None: there is no other source)."""
        if weights is not None:
            raise ValueError("the text reader's models come from the rapidocr wheel; weights must be null")
        reader = cls(RapidOcrEngine(frame_side), version)
        # A first run costs several times a later one (onnxruntime's allocations): spent here, not on a client's image.
        reader.read([_warm_up_frame()])
        return reader

    def read(self, frames: list[Image.Image | np.ndarray]) -> ReadText:
        started = self._clock()
        lines: list[str] = []
        partial = len(frames) > MAX_TEXT_FRAMES
        for frame in frames[:MAX_TEXT_FRAMES]:
            if self._clock() - started > self._budget_s:
                partial = True
                break
            frame_lines, cut = self._read_frame(np.asarray(frame.convert("RGB") if isinstance(frame, Image.Image)
                                                           else frame), started)  # fmt: skip
            partial = partial or cut
            seen = {_plain(line) for line in lines}
            lines.extend(line for line in frame_lines if _plain(line) not in seen)
        text, cut = _within_chars("\n".join(lines), MAX_READ_CHARS)
        return ReadText(text=text, lines=len(lines), partial=partial or cut, version=self.version)

    def read_many(self, images: list[list[Image.Image | np.ndarray]]) -> list[ReadText]:
        """Each image's frames read, one image after the other (a deployment's batch)."""
        return [self.read(frames) for frames in images]

    def _read_frame(self, rgb: np.ndarray, started: float) -> tuple[list[str], bool]:
        """The frame's lines in reading order, and whether a bound left some unread."""
        # The engine's models were trained on BGR input (OpenCV's order).
        found = self._engine.lines(np.ascontiguousarray(rgb[:, :, ::-1]))
        kept = tallest_lines(found, MAX_TEXT_BOXES)
        crops = [_within_heights(crop, MAX_LINE_HEIGHTS) for crop in kept]
        cut = len(kept) < len(found) or any(shortened for _, shortened in crops)
        lines = []
        for run in recognition_runs([crop for crop, _ in crops], RECOGNITION_BATCH, RUN_HEIGHTS):
            if self._clock() - started > self._budget_s:
                return lines, True
            recognised = self._engine.recognise(run)
            lines.extend(text.strip() for text, confidence in recognised
                         if confidence >= MIN_LINE_CONFIDENCE and text.strip())  # fmt: skip
        return lines, cut


def _warm_up_frame() -> Image.Image:
    from PIL import ImageDraw

    frame = Image.new("RGB", (320, 96), "white")
    ImageDraw.Draw(frame).rectangle((16, 32, 300, 64), fill="black")
    return frame


def tallest_lines(crops: list[np.ndarray], keep: int) -> list[np.ndarray]:
    """The `keep` line crops of the largest height (the text's size), in their given order."""
    chosen = sorted(range(len(crops)), key=lambda index: -crops[index].shape[0])[:keep]
    return [crops[index] for index in sorted(chosen)]


def heights_long(crop: np.ndarray) -> float:
    """A line's length in its own heights: what the recogniser's cost grows with."""
    return crop.shape[1] / max(crop.shape[0], 1)


def recognition_runs(crops: list[np.ndarray], most: int, heights: float) -> list[list[np.ndarray]]:
    """The crops in order, in runs of at most `most` crops and `heights` heights long together (one crop alone may
    be longer)."""
    runs: list[list[np.ndarray]] = []
    length = 0.0
    for crop in crops:
        if not runs or len(runs[-1]) >= most or length + heights_long(crop) > heights:
            runs.append([])
            length = 0.0
        runs[-1].append(crop)
        length += heights_long(crop)
    return runs


def _within_heights(crop: np.ndarray, most: float) -> tuple[np.ndarray, bool]:
    """The crop cut to `most` heights long from its start, and whether it was cut."""
    width = int(most * crop.shape[0])
    return (crop, False) if crop.shape[1] <= width else (crop[:, :width], True)


def _plain(line: str) -> str:
    return "".join(line.split()).casefold()


def _within_chars(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)
