"""OCR engines on real images with text: accuracy and single-core CPU, per engine, script, image kind and input size.

What it measures, per image:
- CER: Levenshtein distance / reference length, after NFKC, case folding and whitespace collapsing (CJK: all
  whitespace removed, since engines put spaces between boxes). `cer` keeps the engine's reading order;
  `cer_bag` sorts the words (CJK: characters) of both sides first, so a two-column page or a map is not
  penalised for box order, only for misread characters.
- word accuracy (`word_acc`): bag-of-words recall, the share of reference words (multiset) found in the output,
  order-insensitive; for CJK the same over characters.
- CPU seconds per image: time.process_time() around the engine call (rapidocr, in-process) or the children's
  rusage delta (tesseract subprocess). For rapidocr also the det / cls / rec CPU split, by wrapping the three
  stage objects' __call__ with process_time.
- CPU on images without text (a real photo, a flat colour): what detection alone costs on every upload.
- Input size: every image is also downscaled so its longest side is 512, 960 or 1280 px (never upscaled),
  because the service decoder keeps frames at <= 512 px a side.

Images:
- `ocr_images/`: real images from package test data and samples (origins, licences, ground truth in
  ocr_images/SOURCES.md), each with a `<name>.gt.txt` reference.
- rendered at run time from real comments of MODERATION_TEXT_DATA_DIR (default /work/shared/data/text): a
  phone-screenshot-like 1080x1920 white page with ~15 px or ~24 px text, and a meme caption (large white text,
  black outline) over a real photo. The rendered text is the ground truth. Nothing rendered is stored.

Run (each engine lives in its own venv, so one process per engine; one compute thread each):
    cd /work/main
    /tmp/ocrvenv/bin/python  -m bench.experiments.ocr_engines run rapidocr14   # rapidocr-onnxruntime 1.4.4, PP-OCRv4
    /tmp/ocrvenv3/bin/python -m bench.experiments.ocr_engines run rapidocr310  # rapidocr 3.10, PP-OCRv6 small
    /tmp/ocrvenv/bin/python  -m bench.experiments.ocr_engines run tesseract    # Debian tesseract 5.3 CLI
    /tmp/ocrvenv/bin/python  -m bench.experiments.ocr_engines report           # tables -> OCR_EVAL_OUT/results_tables.md
Settings (env): OCR_EVAL_OUT (default /tmp/ocr_eval), OCR_EVAL_PER_CELL (rendered images per script and kind,
default 5, at most 20), OCR_EVAL_SIZES (default "native,1280,960,512"; tesseract keeps only native and 960),
OCR_DET_LIMIT (rapidocr detector resize, e.g. "max:960"; default = package "min:736"), MODERATION_TEXT_DATA_DIR.
Needs fonts: DejaVu (Latin, Cyrillic), WenQuanYi Micro Hei (CJK), Noto Sans Arabic (apt fonts-noto-core), and
Pillow with raqm for Arabic shaping. Top-level imports are stdlib, numpy and PIL only; engines load lazily.
"""

from __future__ import annotations

import collections
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

# One compute thread, set before any engine library is imported (another engineer uses the other core).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_THREAD_LIMIT", "1")  # tesseract's OpenMP

import numpy as np
from PIL import Image, ImageDraw, ImageFont

HERE = Path(__file__).resolve().parent
IMAGES_DIR = HERE / "ocr_images"
OUT_DIR = Path(os.environ.get("OCR_EVAL_OUT", "/tmp/ocr_eval"))
TEXT_DIR = Path(os.environ.get("MODERATION_TEXT_DATA_DIR", "/work/shared/data/text"))
PER_CELL = min(20, int(os.environ.get("OCR_EVAL_PER_CELL", "5")))
SIZES = tuple(os.environ.get("OCR_EVAL_SIZES", "native,1280,960,512").split(","))
SEED = 0
# rapidocr's detector by default UPSCALES so the short side is >= 736 px ("min:736"), whatever the input size;
# "max:960" instead caps the long side at 960. Format "<limit_type>:<side>"; empty keeps the package default.
DET_LIMIT = os.environ.get("OCR_DET_LIMIT", "")

# Package / sample images with text: name -> (kind, script, tesseract languages). See ocr_images/SOURCES.md.
PACKAGE_IMAGES = {
    "crom.png": ("package", "Latin", "eng"),
    "typewriter.png": ("package", "Latin", "eng+fra+deu+spa"),  # Dutch text; no nld pack installed
    "linn.png": ("package", "Latin", "eng"),
    "baiona.png": ("package", "Latin", "eng+fra+spa"),  # Basque place names; no eus pack
    "skimage_page.png": ("package", "Latin", "eng"),
}
NO_TEXT_PHOTOS = ("chelsea.png", "coffee.png")  # scikit-image CC0 photos without writing
MEME_PHOTOS = ("chelsea.png", "coffee.png", "astronaut.png")

# Script -> (corpus languages, tesseract languages that a per-script deployment would load).
SCRIPTS = {
    "Latin": (("en", "fr", "de", "es"), "eng+fra+deu+spa"),
    "Cyrillic": (("ru",), "rus+eng"),
    "Arabic": (("ar",), "ara+eng"),
    "CJK": (("zh",), "chi_sim+eng"),
}
FONTS = {
    "Latin": ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"),
    "Cyrillic": ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"),
    "Arabic": ("/usr/share/fonts/truetype/noto/NotoSansArabic-Regular.ttf", "/usr/share/fonts/truetype/noto/NotoSansArabic-Bold.ttf"),
    "CJK": ("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc", "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
}
PAGE_W, PAGE_H = 1080, 1920  # a phone screenshot (portrait, 1080 px wide)
SCREEN_PX = {"screenshot_small": 15, "screenshot_large": 24}
MEME_PX = 64


# ---------------------------------------------------------------- text normalisation and metrics


def normalise(text: str, script: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[•·●▪]", " ", text)  # bullets: the reference omits them, engines print them or not
    text = re.sub(r"[‐-―−]", "-", text)  # dash variants are one character for our purpose
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    if script == "CJK":
        return re.sub(r"\s+", "", text)
    return re.sub(r"\s+", " ", text).strip()


def tokens(text: str, script: str) -> list[str]:
    """Words stripped of edge punctuation (CJK: characters, punctuation dropped): the units of word accuracy."""
    if script == "CJK":
        return [c for c in text if not unicodedata.category(c).startswith(("P", "Z", "S"))]
    words = (w.strip("\"'.,;:!?()[]{}«»-_*") for w in text.split())
    return [w for w in words if w]


def levenshtein(a: str, b: str) -> int:
    """Edit distance, one numpy row at a time (pure Python is too slow for the 4,500-character linn page)."""
    if not a:
        return len(b)
    if not b:
        return len(a)
    bb = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    ar = np.arange(len(b) + 1)
    prev = ar.copy()
    for i, ch in enumerate(a.encode("utf-32-le").decode("utf-32-le"), start=1):
        cost = (bb != ord(ch)).astype(np.int64)
        t = np.empty_like(prev)
        t[0] = i
        t[1:] = np.minimum(prev[1:] + 1, prev[:-1] + cost)
        # insertions along the row: d[j] = min_k<=j (t[k] + j - k), a running minimum
        prev = np.minimum.accumulate(t - ar) + ar
    return int(prev[-1])


def score(reference: str, hypothesis: str, script: str) -> dict:
    ref, hyp = normalise(reference, script), normalise(hypothesis, script)
    ref_tok, hyp_tok = tokens(ref, script), tokens(hyp, script)
    joiner = "" if script == "CJK" else " "
    bag_ref, bag_hyp = joiner.join(sorted(ref_tok)), joiner.join(sorted(hyp_tok))
    found = sum((collections.Counter(ref_tok) & collections.Counter(hyp_tok)).values())
    return {
        "cer": levenshtein(ref, hyp) / max(1, len(ref)),
        "cer_bag": levenshtein(bag_ref, bag_hyp) / max(1, len(bag_ref)),
        "word_acc": found / max(1, len(ref_tok)),
        "ref_chars": len(ref),
    }


# ---------------------------------------------------------------- real comments from the corpus


def clean_comment(text: str) -> str:
    """Drop what a font cannot draw or a screenshot would not show as body text: URLs, @handles, emoji."""
    text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)  # escapes kept as text in rows
    text = re.sub(r"https?://\S+|www\.\S+|\[id\d+\|([^\]]*)\]|@\w+", lambda m: m.group(1) or "", text)
    kept = [c for c in text if unicodedata.category(c)[0] in "LMNPZ" or c in "+=<>$%&#"]
    return re.sub(r"\s+", " ", "".join(kept)).strip()


def load_comments(script: str, rng: random.Random, count: int, min_len: int = 25, max_len: int = 220) -> list[str]:
    """`count` real comments of the script's languages, cleaned, 25-220 characters, mostly in that script."""
    pool = []
    for lang in SCRIPTS[script][0]:
        path = TEXT_DIR / f"{lang}.jsonl"
        if path.exists():
            with path.open(encoding="utf-8") as f:
                pool += [json.loads(line)["text"] for line in f]
    rng.shuffle(pool)
    chosen = []
    for raw in pool:  # the glyph check is slow, so it runs only on shuffled rows until enough are kept
        text = clean_comment(raw)
        if not (min_len <= len(text) <= max_len):
            continue
        text = drawable(text, script)
        letters = [c for c in text if c.isalpha()]
        if len(text) < min_len or not letters:
            continue
        if script != "Latin" and sum(in_script(c, script) for c in letters) < 0.8 * len(letters):
            continue  # e.g. a Russian row that is mostly an English quote
        chosen.append(text)
        if len(chosen) == count:
            break
    return chosen


_GLYPH_CACHE: dict[tuple[str, str], bool] = {}


def _glyph(font, ch: str) -> bytes:
    img = Image.new("L", (64, 64), 0)
    ImageDraw.Draw(img).text((8, 8), ch, font=font, fill=255)
    return img.tobytes()


def drawable(text: str, script: str) -> str:
    """Keep only characters both fonts of the script can draw, so the reference never holds a tofu box."""
    fonts = [ImageFont.truetype(path, 32) for path in dict.fromkeys(FONTS[script])]
    notdefs = [_glyph(font, "\uffff") for font in fonts]  # a code point no font maps draws its .notdef box
    out = []
    for ch in text:
        key = (script, ch)
        if key not in _GLYPH_CACHE:
            _GLYPH_CACHE[key] = ch.isspace() or all(
                (g := _glyph(font, ch)) != notdef and any(g) for font, notdef in zip(fonts, notdefs))
        if _GLYPH_CACHE[key]:
            out.append(ch)
    return re.sub(r"\s+", " ", "".join(out)).strip()


def in_script(ch: str, script: str) -> bool:
    o = ord(ch)
    return {
        "Cyrillic": 0x0400 <= o <= 0x052F,
        "Arabic": 0x0600 <= o <= 0x06FF or 0x0750 <= o <= 0x077F or 0xFB50 <= o <= 0xFEFF,
        "CJK": 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF,
    }.get(script, True)


# ---------------------------------------------------------------- rendering


def wrap(draw: ImageDraw.ImageDraw, text: str, font, width: int, script: str) -> list[str]:
    """Greedy line wrap by measured width: by words, or by characters for CJK (no spaces)."""
    units = list(text) if script == "CJK" else text.split(" ")
    sep = "" if script == "CJK" else " "
    lines, line = [], ""
    for unit in units:
        trial = f"{line}{sep}{unit}" if line else unit
        if draw.textlength(trial, font=font) <= width or not line:
            line = trial
        else:
            lines.append(line)
            line = unit
    if line:
        lines.append(line)
    return lines


def draw_line(draw, xy_left: int, right: int, y: int, line: str, font, script: str, **kw) -> None:
    """Arabic is right-aligned and shaped right-to-left (raqm); other scripts start at the left margin."""
    # Baseline anchors: Arabic and CJK fonts carry tall ascender metrics that would push "top" anchors down.
    baseline = y + int(font.size * 0.95)
    if script == "Arabic":
        draw.text((right, baseline), line, font=font, anchor="rs", direction="rtl", **kw)
    else:
        draw.text((xy_left, baseline), line, font=font, anchor="ls", **kw)


def render_screenshot(comments: list[str], script: str, px: int) -> tuple[Image.Image, str]:
    """A white 1080x1920 page: a grey app bar, then comments as "name / text" blocks until ~600 characters."""
    img = Image.new("RGB", (PAGE_W, PAGE_H), "white")
    draw = ImageDraw.Draw(img)
    regular = ImageFont.truetype(FONTS[script][0], px)
    draw.rectangle((0, 0, PAGE_W, 3 * px), fill=(240, 240, 240))
    margin, y, shown, used = 40, 5 * px, [], 0
    for text in comments:
        lines = wrap(draw, text, regular, PAGE_W - 2 * margin, script)
        height = len(lines) * int(px * 1.45) + px
        if y + height > PAGE_H - 2 * px or used > 600:
            break
        for line in lines:
            draw_line(draw, margin, PAGE_W - margin, y, line, regular, script, fill=(20, 20, 20))
            y += int(px * 1.45)
        draw.line((margin, y + px // 2, PAGE_W - margin, y + px // 2), fill=(225, 225, 225), width=1)
        y += px
        shown.append("\n".join(lines))
        used += len(text)
    return img, "\n".join(shown)


def render_meme(text: str, script: str, photo: Image.Image) -> tuple[Image.Image, str]:
    """A real photo scaled to 1080 px wide with the comment as a top and bottom caption, white on a black outline."""
    scale = PAGE_W / photo.width
    img = photo.convert("RGB").resize((PAGE_W, round(photo.height * scale)), Image.Resampling.BICUBIC)
    draw = ImageDraw.Draw(img)
    font = ImageFont.truetype(FONTS[script][1], MEME_PX)
    caption = text.upper() if script in ("Latin", "Cyrillic") else text  # memes are set in capitals
    lines = wrap(draw, caption, font, PAGE_W - 60, script)[:4]  # at most two lines top, two bottom
    top, bottom = lines[: (len(lines) + 1) // 2], lines[(len(lines) + 1) // 2 :]
    step = int(MEME_PX * 1.2)
    positions = [(20 + i * step, ln) for i, ln in enumerate(top)]
    positions += [(img.height - 20 - (len(bottom) - i) * step, ln) for i, ln in enumerate(bottom)]
    for y, line in positions:
        width = draw.textlength(line, font=font, direction="rtl" if script == "Arabic" else None)
        x = int((PAGE_W - width) / 2)
        draw_line(draw, x, x + int(width), y, line, font, script, fill="white", stroke_width=4, stroke_fill="black")
    return img, "\n".join(lines)


def build_images() -> list[dict]:
    """Every evaluation image, deterministic for a given data dir and PER_CELL."""
    items = []
    for name, (kind, script, langs) in PACKAGE_IMAGES.items():
        gt = (IMAGES_DIR / name).with_suffix(".gt.txt").read_text(encoding="utf-8")
        items.append(dict(id=name, kind=kind, script=script, langs=langs, image=Image.open(IMAGES_DIR / name).convert("RGB"), gt=gt))
    for name in NO_TEXT_PHOTOS:
        items.append(dict(id=name, kind="no_text", script="-", langs="eng", image=Image.open(IMAGES_DIR / name).convert("RGB"), gt=""))
    items.append(dict(id="flat_1080x1920", kind="no_text", script="-", langs="eng", image=Image.new("RGB", (PAGE_W, PAGE_H), (200, 205, 210)), gt=""))
    photos = [Image.open(IMAGES_DIR / p) for p in MEME_PHOTOS]
    for script, (_, langs) in SCRIPTS.items():
        rng = random.Random(f"{SEED}-{script}")
        comments = load_comments(script, rng, PER_CELL * 12)
        if not comments:
            print(f"no comments for {script} under {TEXT_DIR}", file=sys.stderr)
            continue
        for kind, px in SCREEN_PX.items():
            for i in range(PER_CELL):
                chunk = comments[(i * 6) % len(comments) :][:6] or comments[:6]
                img, gt = render_screenshot(chunk, script, px)
                items.append(dict(id=f"{kind}-{script}-{i}", kind=kind, script=script, langs=langs, image=img, gt=gt))
        short = [c for c in comments if len(c) <= 90] or comments
        for i in range(PER_CELL):
            img, gt = render_meme(short[i % len(short)], script, photos[i % len(photos)])
            items.append(dict(id=f"meme-{script}-{i}", kind="meme", script=script, langs=langs, image=img, gt=gt))
    return items


def resize_longest(img: Image.Image, size: str) -> Image.Image:
    """Downscale so the longest side is `size` px; never upscale (the decoder never does)."""
    if size == "native" or max(img.size) <= int(size):
        return img
    scale = int(size) / max(img.size)
    return img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))), Image.Resampling.LANCZOS)


# ---------------------------------------------------------------- engines


class StageClock:
    """process_time spent inside one rapidocr stage object (det / cls / rec), by wrapping its class __call__."""

    def __init__(self, cls):
        self.seconds = 0.0
        original = cls.__call__

        def timed(obj, *args, **kwargs):
            start = time.process_time()
            try:
                return original(obj, *args, **kwargs)
            finally:
                self.seconds += time.process_time() - start

        cls.__call__ = timed


class RapidOCR14:
    name = "rapidocr14 (PP-OCRv4)"

    def __init__(self):
        from rapidocr_onnxruntime import RapidOCR

        kwargs = {}
        if DET_LIMIT:
            kind, side = DET_LIMIT.split(":")
            kwargs = {"det_limit_type": kind, "det_limit_side_len": int(side)}
            self.name += f" det {DET_LIMIT}"
        self.ocr = RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1, **kwargs)
        self.clocks = {s: StageClock(type(getattr(self.ocr, f"text_{s}"))) for s in ("det", "cls", "rec")}

    def __call__(self, rgb: np.ndarray, langs: str) -> tuple[str, int]:
        result, _ = self.ocr(rgb)
        return "\n".join(r[1] for r in result or []), len(result or [])


class RapidOCR310:
    name = "rapidocr310 (PP-OCRv6 small)"

    def __init__(self):
        from rapidocr import RapidOCR

        threads = {"EngineConfig.onnxruntime.intra_op_num_threads": 1, "EngineConfig.onnxruntime.inter_op_num_threads": 1,
                   "Global.log_level": "warning"}
        if DET_LIMIT:
            kind, side = DET_LIMIT.split(":")
            threads.update({"Det.limit_type": kind, "Det.limit_side_len": int(side)})
            self.name += f" det {DET_LIMIT}"
        self.ocr = RapidOCR(params=threads)
        self.ocr(np.full((64, 256, 3), 255, np.uint8))  # 3.x builds its stages lazily: build them before timing
        warm = np.full((96, 400, 3), 255, np.uint8)
        import cv2

        cv2.putText(warm, "warm up", (10, 60), cv2.FONT_HERSHEY_SIMPLEX, 1.5, (0, 0, 0), 3)
        self.ocr(warm)
        self.clocks = {s: StageClock(type(getattr(self.ocr, f"text_{s}"))) for s in ("det", "cls", "rec") if getattr(self.ocr, f"text_{s}", None) is not None}

    def __call__(self, rgb: np.ndarray, langs: str) -> tuple[str, int]:
        out = self.ocr(rgb)
        txts = getattr(out, "txts", None) or ()
        return "\n".join(txts), len(txts)


class Tesseract:
    name = "tesseract 5.3"

    def __init__(self):
        self.clocks = {}
        self.env = dict(os.environ, OMP_THREAD_LIMIT="1")
        self.tmp = Path(tempfile.mkdtemp(prefix="ocr_eval_tess_"))

    def __call__(self, rgb: np.ndarray, langs: str) -> tuple[str, int]:
        path = self.tmp / "in.png"
        Image.fromarray(rgb).save(path, compress_level=1)  # outside the measured CPU: see run_engine
        self.child_cpu = 0.0
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run(["tesseract", str(path), "stdout", "-l", langs], capture_output=True, env=self.env, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.child_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        text = out.stdout.decode("utf-8", "replace")
        return text, sum(1 for line in text.splitlines() if line.strip())


ENGINES = {"rapidocr14": RapidOCR14, "rapidocr310": RapidOCR310, "tesseract": Tesseract}


def run_engine(key: str) -> Path:
    engine = ENGINES[key]()
    items = build_images()
    out_path = OUT_DIR / f"raw_{key}{'_det-' + DET_LIMIT.replace(':', '') if DET_LIMIT and key != 'tesseract' else ''}.jsonl"
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    sizes = SIZES if key != "tesseract" else tuple(s for s in SIZES if s in ("native", "960"))  # CPU budget
    # Warm-up call so the first measured image does not pay session creation / allocation.
    engine(np.asarray(items[0]["image"]), items[0]["langs"])
    with out_path.open("w", encoding="utf-8") as out:
        for size in sizes:
            for item in items:
                rgb = np.asarray(resize_longest(item["image"], size))
                stage_before = {s: c.seconds for s, c in engine.clocks.items()}
                start = time.process_time()
                text, boxes = engine(rgb, item["langs"])
                cpu = time.process_time() - start
                if key == "tesseract":
                    cpu = engine.child_cpu  # the parent only waited; the child did the work
                row = dict(engine=engine.name, size=size, id=item["id"], kind=item["kind"], script=item["script"],
                           w=rgb.shape[1], h=rgb.shape[0], cpu=cpu, boxes=boxes, text=text,
                           **{f"cpu_{s}": c.seconds - stage_before[s] for s, c in engine.clocks.items()})
                if item["gt"]:
                    row.update(score(item["gt"], text, item["script"]), gt=item["gt"])
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                out.flush()
                print(f"{key} {size:>6} {item['id']:<28} cpu={cpu:6.2f}s boxes={boxes:3d} "
                      f"cer={row.get('cer', float('nan')):.3f} wacc={row.get('word_acc', float('nan')):.3f}", flush=True)
    return out_path


# ---------------------------------------------------------------- report


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def percentile(values, q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def table(rows: list[dict], keys: tuple[str, ...], title: str) -> str:
    """One markdown table grouped by `keys`: mean CER (ordered, bag, spaces ignored), word accuracy, CPU, boxes."""
    groups = collections.defaultdict(list)
    for r in rows:
        groups[tuple(r[k] for k in keys)].append(r)
    head = list(keys) + ["n", "CER", "CER bag", "CER no-space", "word acc", "CPU s mean", "CPU s p90", "boxes", "det/cls/rec s", "rec s/box"]
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    order = {"native": "0", "1280": "1", "960": "2", "512": "3"}
    for key in sorted(groups, key=lambda k: tuple(order.get(x, x) for x in k)):
        g = groups[key]
        scored = [r for r in g if "cer" in r]
        cells = list(key) + [str(len(g))]
        for metric in ("cer", "cer_bag", "cer_nospace", "word_acc"):
            cells.append(f"{mean(r[metric] for r in scored):.3f}" if scored else "-")
        cells += [f"{mean(r['cpu'] for r in g):.2f}", f"{percentile([r['cpu'] for r in g], 0.9):.2f}",
                  f"{mean(r['boxes'] for r in g):.1f}"]
        split = [mean(r.get("cpu_" + s, 0.0) for r in g) for s in ("det", "cls", "rec")]
        has_split = any("cpu_det" in r for r in g)
        cells.append("/".join(f"{x:.2f}" for x in split) if has_split else "-")
        boxes = sum(r["boxes"] for r in g)
        cells.append(f"{sum(r.get('cpu_rec', 0.0) for r in g) / boxes:.3f}" if has_split and boxes else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def load_rows() -> list[dict]:
    rows = []
    for path in sorted(OUT_DIR.glob("raw_*.jsonl")):
        for line in path.open(encoding="utf-8"):
            r = json.loads(line)
            if "gt" in r:  # spaces dropped between words is PP-OCR's commonest error: show CER without them too
                script = r["script"]
                ref = normalise(r["gt"], script).replace(" ", "")
                r["cer_nospace"] = levenshtein(ref, normalise(r["text"], script).replace(" ", "")) / max(1, len(ref))
            rows.append(r)
    return rows


def report() -> Path:
    rows = load_rows()
    text_rows = [r for r in rows if r["kind"] != "no_text"]
    rendered = [r for r in text_rows if r["kind"] != "package"]
    sections = ["# OCR engines: accuracy and single-core CPU", "",
                "CER = Levenshtein / reference length (NFKC, case-folded, whitespace collapsed; CJK whitespace removed), "
                "in the engine's reading order; CER bag = same after sorting words (CJK: characters); CER no-space = "
                "ordered CER with all spaces removed from both sides; word acc = bag-of-words recall of reference words "
                "(CJK: characters). CPU = process CPU seconds per image on one thread (tesseract: child rusage); "
                "det/cls/rec = CPU inside each rapidocr stage. size = longest side after downscaling (native = as is).", "",
                table(text_rows, ("engine", "size", "kind"), "By engine, input size and image kind (all scripts)"),
                table(rendered, ("engine", "size", "script"), "Rendered screenshots and memes by engine, input size and script"),
                table(rendered, ("engine", "size", "kind", "script"), "Rendered, by engine, size, kind and script"),
                table([r for r in text_rows if r["kind"] == "package"], ("engine", "size", "id"), "Package / sample images"),
                table([r for r in rows if r["kind"] == "no_text"], ("engine", "size", "id"), "Images without text (detection cost)")]
    out = OUT_DIR / "results_tables.md"
    out.write_text("\n".join(sections), encoding="utf-8")
    return out


def main(argv: list[str]) -> None:
    if len(argv) >= 2 and argv[0] == "run" and argv[1] in ENGINES:
        print(run_engine(argv[1]))
    elif argv[:1] == ["report"]:
        print(report())
    elif argv[:1] == ["render"]:  # write the rendered images to OUT_DIR/rendered for a visual check
        target = OUT_DIR / "rendered"
        target.mkdir(parents=True, exist_ok=True)
        for item in build_images():
            if item["kind"] not in ("package", "no_text"):
                item["image"].save(target / f"{item['id']}.png")
                (target / f"{item['id']}.gt.txt").write_text(item["gt"], encoding="utf-8")
        print(target)
    else:
        print(__doc__)
        print("usage: python -m bench.experiments.ocr_engines run {" + ",".join(ENGINES) + "} | report | render")


if __name__ == "__main__":
    main(sys.argv[1:])
