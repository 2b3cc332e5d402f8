"""What both sides score: real photos as JPEG bytes, and texts of different lengths."""

from __future__ import annotations

import io

# Photos shipped inside scikit-image (no download); sizes from 300x451 to 1411x1411.
PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "camera", "moon", "retina", "hubble_deep_field")
JPEG_QUALITY = 90

# Eight texts from 3 to about 600 characters: one to three windows of the text model each.
TEXTS = (
    "thanks!",
    "Great video, I learned a lot about sourdough starters.",
    "You are an idiot and nobody wants you here. Go away.",
    "Does anyone know when the next train to Lyon leaves? The board at the station shows nothing.",
    "Ich finde den Artikel gut geschrieben, aber die Zahlen im zweiten Absatz stimmen nicht mit der Quelle überein.",
    "I bought this blender last month. It works fine for smoothies but the lid leaks when you blend anything hot, "
    "and customer service took two weeks to answer my email. Three stars.",
    "Este comentario es una prueba. El servicio de moderación debería marcarlo como seguro, porque no contiene "
    "insultos ni amenazas, solo una opinión sobre el clima de esta semana, que ha sido muy lluvioso.",
    "Honestly this thread is a mess. Half of you did not read the rules, the other half are arguing about a "
    "patch that came out two years ago. The moderators asked twice to keep it on topic. If you want to talk "
    "about the old version, open a new thread. Otherwise please stop posting screenshots of the same bug, we "
    "know about it, it is tracked, and a fix is in the next release. Thanks to everyone who posted logs, they "
    "really helped. And to the person who keeps calling people names: last warning.",
)
LONG_TEXT_CHARS = 20_000


def photo_jpegs() -> list[bytes]:
    import numpy as np
    import skimage.data
    from PIL import Image

    jpegs = []
    for name in PHOTOS:
        pixels = np.asarray(getattr(skimage.data, name)())
        buffer = io.BytesIO()
        Image.fromarray(pixels).convert("RGB").save(buffer, format="JPEG", quality=JPEG_QUALITY)
        jpegs.append(buffer.getvalue())
    return jpegs


def long_text() -> str:
    """About LONG_TEXT_CHARS of benign prose made of the texts above: a plan's largest text."""
    text, parts = "", list(TEXTS[3:])
    while len(text) < LONG_TEXT_CHARS:
        text += " " + parts[len(text) % len(parts)]
    return text[:LONG_TEXT_CHARS].strip()
