"""Text in images at load: what reading an image's words costs and what it catches, through the running graph.

A section of `make bench` (graph and plain app side by side), or alone: `python -m bench.image_text` starts both.

- Cost. The bench photos (skimage's samples, 512 px) with a caption written on them and without, sent with a
  profile that reads the text (`image-text`: the shipped default with `text_toxic` on), and the same photos with the
  default profile (nsfw only), at 1 and 4 clients: throughput and latency, then the CPU per image of the service's
  processes (bench/cpu.py) at one client. The plain app (the same flow in one process) is measured beside.
- Quality. Real comments of the test split (MODERATION_TEXT_DATA_DIR; no one here wrote them), toxic and benign,
  written on a real photo as a meme caption (1600 px JPEG, large bold type with an outline) and as a phone screenshot
  (1080 px PNG, 40 px text), sent at QUALITY_CLIENTS clients with the `image-text` profile. Caught: a toxic comment's
  image not allowed; flagged: a benign one's not allowed. Beside it, the same comments sent as text with the default
  profile: what the text model decides on them typed, the most the image can reach. The rendering is ours; the words
  are not. A script the bundled fonts cannot draw (CJK, Korean) is not measured and is said so.
"""

from __future__ import annotations

import asyncio
import io
import os
import random
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import cpu
from bench.inputs import DATA_DIR_VARIABLE, PHOTOS, Comment, test_split_comments
from bench.load import Point, Workload, run_point
from bench.service import IMAGE_TEXT_PROFILE, image_workload

FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
BOLD, REGULAR = FONT_DIR / "DejaVuSans-Bold.ttf", FONT_DIR / "DejaVuSans.ttf"
# Languages whose script DejaVu draws (Latin, Cyrillic); Korean and Chinese need fonts this machine may not have.
DRAWN_LANGUAGES = ("da", "de", "en", "es", "fr", "it", "pl", "pt", "ru", "tr")
PER_LABEL = 10  # comments per language and label
MAX_CHARS = 100  # a caption or a screenshot's post, not an essay
SEED = 20261202
QUALITY_CLIENTS = 4
COST_CLIENTS = (1, 4)
COST_MAX_REQUESTS, COST_MAX_S, CPU_S = 40, 8.0, 6.0
CAPTIONS = ("YOU ARE A PATHETIC IDIOT", "NOBODY WANTS YOU HERE", "HAPPY BIRTHDAY GRANDMA", "SEE YOU AT THE GAME")
REQUEST_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Answer:
    """One comment written on an image in one style: the image's decision and what was read; the typed text's."""

    style: str
    lang: str
    label: int
    image_decision: str
    text_decision: str
    read_chars: int
    partial: bool


@dataclass
class ImageTextResult:
    points: dict[tuple[str, str, int], Point] = field(default_factory=dict)  # (target, workload, clients)
    cpu: dict[tuple[str, str], cpu.CpuReading] = field(default_factory=dict)  # (target, workload), one client
    answers: list[Answer] = field(default_factory=list)
    not_measured: list[str] = field(default_factory=list)


def _font(path: Path, size: int):
    from PIL import ImageFont

    return ImageFont.truetype(str(path), size)


def caption_jpeg(text: str, photo) -> bytes:
    """`text` as a meme caption on `photo` (an RGB array), scaled to 1600 px: bold white type, black outline."""
    from PIL import Image, ImageDraw

    image = Image.fromarray(photo).convert("RGB").resize((1600, 1600))
    draw, font = ImageDraw.Draw(image), _font(BOLD, 96)
    for index, line in enumerate(textwrap.wrap(text, 24)[:6]):
        draw.text((50, 50 + index * 140), line, font=font, fill="white", stroke_width=6, stroke_fill="black")
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=88)
    return buffer.getvalue()


def screenshot_png(text: str) -> bytes:
    """`text` as a post in a phone screenshot: 1080 px wide, a name line, then 40 px text on white."""
    from PIL import Image, ImageDraw

    lines = textwrap.wrap(text, 42)[:8]
    image = Image.new("RGB", (1080, 400 + 56 * len(lines)), "white")
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, 1080, 140), fill=(245, 245, 245))
    draw.text((40, 170), "user_2741 · 3h", font=_font(BOLD, 34), fill=(90, 90, 90))
    for index, line in enumerate(lines):
        draw.text((40, 240 + index * 56), line, font=_font(REGULAR, 40), fill=(20, 20, 20))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


STYLES = ("caption", "screenshot")


def _styled(style: str, text: str, photo) -> tuple[str, bytes, str]:
    if style == "caption":
        return "meme.jpg", caption_jpeg(text, photo), "image/jpeg"
    return "screenshot.png", screenshot_png(text), "image/png"


def quality_comments(directory: Path | None = None) -> tuple[list[Comment], list[str]] | None:
    """PER_LABEL toxic and PER_LABEL benign comments of at most MAX_CHARS per drawn language, seeded, and the
    languages left out; None without a data directory."""
    if directory is None:
        value = os.environ.get(DATA_DIR_VARIABLE, "").strip()
        directory = Path(value) if value else None
    if directory is None or not directory.is_dir():
        return None
    rng = random.Random(SEED)
    comments = [c for c in test_split_comments(directory) if 8 <= len(c.text.strip()) <= MAX_CHARS]
    picked, others = [], sorted({c.lang for c in comments} - set(DRAWN_LANGUAGES))
    for lang in DRAWN_LANGUAGES:
        for label in (0, 1):
            pool = sorted({c.text: c for c in comments if c.lang == lang and c.label == label}.values(),
                          key=lambda c: c.text)  # fmt: skip
            picked += rng.sample(pool, min(PER_LABEL, len(pool)))
    return picked, others


async def _answers(base_url: str, image_keys: list[dict], text_keys: list[dict], comments: list[Comment],
                   clients: int) -> list[Answer]:  # fmt: skip
    from skimage import data as photos

    photo_pixels = [getattr(photos, name)() for name in PHOTOS]
    jobs = [(style, index, comment) for index, comment in enumerate(comments) for style in STYLES]
    limit, answers = asyncio.Semaphore(clients), []
    async with httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT_S) as http:
        text_decisions = {}

        async def typed(index: int, comment: Comment) -> None:
            async with limit:
                response = await http.post("/v1/moderate-text", json={"text": comment.text},
                                           headers=text_keys[index % len(text_keys)])  # fmt: skip
                text_decisions[index] = response.json().get("decision", f"http_{response.status_code}")

        await asyncio.gather(*(typed(index, comment) for index, comment in enumerate(comments)))

        async def written(style: str, index: int, comment: Comment) -> None:
            name, data, content_type = await asyncio.to_thread(_styled, style, comment.text,
                                                               photo_pixels[index % len(photo_pixels)])  # fmt: skip
            async with limit:
                response = await http.post("/v1/moderate", files={"image": (name, data, content_type)},
                                           headers=image_keys[index % len(image_keys)])  # fmt: skip
            body = response.json()
            read = body.get("text_read") or {}
            answers.append(Answer(style, comment.lang, comment.label, body.get("decision", f"http_{response.status_code}"),
                                  text_decisions[index], read.get("lines", 0), bool(read.get("partial"))))

        await asyncio.gather(*(written(*job) for job in jobs))
    return answers


def cost_workloads() -> dict[str, Workload]:
    from bench.inputs import photo_jpegs
    from skimage import data as photos

    captioned = [caption_jpeg(text, getattr(photos, name)()) for text, name in zip(CAPTIONS, PHOTOS)]
    return {
        "captioned_read": image_workload("captioned_read", IMAGE_TEXT_PROFILE, captioned),
        "photos_read": image_workload("photos_read", IMAGE_TEXT_PROFILE, photo_jpegs()),
        "photos_default": image_workload("photos_default", "default", photo_jpegs()),
    }


def measure(targets: dict[str, tuple[str, dict[str, list[dict]], Callable[[], set[int]]]],
            log: Callable[[str], None] = print) -> ImageTextResult:  # fmt: skip
    """`targets`: name ("graph", "plain") -> (base URL, keys by profile, the pids of its processes). The graph's
    quality is measured when MODERATION_TEXT_DATA_DIR names the real comments."""
    result = ImageTextResult()
    workloads = cost_workloads()
    for name, workload in workloads.items():
        for target, (base_url, keys, pids) in targets.items():
            for clients in COST_CLIENTS:
                point = run_point(base_url, keys[workload.profile], workload, clients, COST_MAX_REQUESTS, COST_MAX_S)
                result.points[(target, name, clients)] = point
                log(f"  image text cost {target} {name} {clients} clients: {point.rps:.2f}/s p50 {point.p50_s * 1000:.0f}"
                    f" ms p99 {point.p99_s * 1000:.0f} ms errors {point.errors}")
            reading = cpu.measure(base_url, keys[workload.profile], workload, 1, CPU_S, pids)
            result.cpu[(target, name)] = reading
            log(f"  image text CPU {target} {name}: {reading.ms_per_request(reading.service_cpu_s):.0f} ms an image")
    found = quality_comments()
    if found is None:
        result.not_measured.append("quality: MODERATION_TEXT_DATA_DIR names no directory of real comments")
        return result
    comments, others = found
    if others:
        result.not_measured.append(f"quality in {', '.join(others)}: the bundled font draws Latin and Cyrillic only")
    base_url, keys, _ = targets["graph"]
    log(f"  image text quality: {len(comments)} real comments x {len(STYLES)} styles at {QUALITY_CLIENTS} clients ...")
    result.answers = asyncio.run(_answers(base_url, keys[IMAGE_TEXT_PROFILE], keys["default"], comments,
                                          QUALITY_CLIENTS))  # fmt: skip
    return result


def _share(answers: list[Answer], decision: Callable[[Answer], str]) -> str:
    return f"{sum(decision(a) != 'allow' for a in answers) / len(answers):.0%}" if answers else ""


def quality_table(answers: list[Answer]) -> list[str]:
    """Per style and language: toxic caught and benign flagged, written on the image and typed."""
    lines = ["| Style | Language | Toxic | Caught on the image | Caught typed | Benign | Flagged on the image | "
             "Flagged typed | Partial reads |", "|---|---|---|---|---|---|---|---|---|"]
    groups = sorted({(a.style, a.lang) for a in answers}) + sorted({(a.style, "all") for a in answers})
    for style, lang in groups:
        rows = [a for a in answers if a.style == style and (lang == "all" or a.lang == lang)]
        toxic, benign = [a for a in rows if a.label == 1], [a for a in rows if a.label == 0]
        lines.append(f"| {style} | {'**all**' if lang == 'all' else lang} | {len(toxic)} | "
                     f"{_share(toxic, lambda a: a.image_decision)} | {_share(toxic, lambda a: a.text_decision)} | "
                     f"{len(benign)} | {_share(benign, lambda a: a.image_decision)} | "
                     f"{_share(benign, lambda a: a.text_decision)} | {sum(a.partial for a in rows)} |")
    return lines


def cost_table(result: ImageTextResult) -> list[str]:
    lines = ["| Workload | Clients | Graph images/s | Graph p50 / p99 | Plain images/s | Plain p50 / p99 | Graph errors |",
             "|---|---|---|---|---|---|---|"]
    for name in ("photos_default", "photos_read", "captioned_read"):
        for clients in COST_CLIENTS:
            graph, plain = result.points.get(("graph", name, clients)), result.points.get(("plain", name, clients))
            if graph is None:
                continue
            cells = [f"{p.rps:.2f} | {p.p50_s * 1000:.0f} / {p.p99_s * 1000:.0f} ms" if p else " | " for p in (graph, plain)]
            lines.append(f"| {name} | {clients} | {cells[0]} | {cells[1]} | {graph.errors} |")
    lines += ["", "| Workload | Graph CPU an image | Plain CPU an image |", "|---|---|---|"]
    for name in ("photos_default", "photos_read", "captioned_read"):
        readings = [result.cpu.get((target, name)) for target in ("graph", "plain")]
        cells = [f"{r.ms_per_request(r.service_cpu_s):.0f} ms" if r and r.requests else "" for r in readings]
        lines.append(f"| {name} | {cells[0]} | {cells[1]} |")
    return lines


def section(result: ImageTextResult | None) -> list[str]:
    """The `## Text in images` section of docs/benchmarks.md (none when not measured)."""
    if result is None:
        return []
    lines = ["## Text in images", "",
             "`bench/image_text.py`: photos_default is the bench photos with the default profile (nsfw only: no text "
             "read); photos_read the same photos with the `image-text` profile (the default with `text_toxic` on: the "
             "text reader runs, finds nothing); captioned_read the photos with a caption written on them (the reader "
             "reads it and the text model scores it). CPU: every process of the service over a fixed run at one "
             "client, divided by the images answered.", "", *cost_table(result), ""]
    if result.answers:
        lines += ["Real comments of the test split written on a photo (caption) or in a phone screenshot, at "
                  f"{QUALITY_CLIENTS} clients with the `image-text` profile; typed: the same comment sent as text "
                  "with the default profile.", "", *quality_table(result.answers), ""]
    lines += [f"Not measured: {note}." for note in result.not_measured]
    return lines + ([""] if result.not_measured else [])


def main() -> None:
    """The graph and the plain app on this machine, the section printed."""
    import tempfile

    from bench.memory import descendants
    from bench.plain import plain_app
    from bench.run import replica_environment, serve_config
    from bench.service import ADMIN_TOKEN, bench_keys
    from runtime.deploy import served_model_versions
    from runtime.local_graph import local_graph

    profiles = {IMAGE_TEXT_PROFILE, "default"}
    with tempfile.TemporaryDirectory() as workdir:
        config = serve_config()
        with plain_app(Path(workdir) / "plain", admin_token=ADMIN_TOKEN, versions=served_model_versions(config),
                       env=replica_environment(config)) as app:  # fmt: skip
            plain_pids = {app.pid}
            with local_graph(Path(workdir) / "graph", admin_token=ADMIN_TOKEN) as graph:
                targets = {
                    "graph": (graph.base_url, bench_keys(graph.admin_url, profiles),
                              lambda: set(descendants()) - plain_pids),
                    "plain": (app.base_url, bench_keys(app.admin_url, profiles), lambda: set(plain_pids)),
                }
                result = measure(targets, log=lambda line: print(line, flush=True))
    print("\n".join(section(result)))


if __name__ == "__main__":
    sys.exit(main())
