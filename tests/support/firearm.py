"""A revolver rendered by code: a firearm picture this project may ship and test with.

No photo of a real firearm with a usable licence ships in any package reachable here, so the
weapon tests draw one: blued-steel gradient with a specular band, cylinder flutes, ejector rod,
hammer, trigger guard and a wooden grip on a soft background, with a drop shadow and sensor-like
noise. It is not a photo: it shows the model reads a recognisable revolver, not its recall on
real photos. Deterministic (seeded).
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageChops, ImageDraw, ImageFilter

WIDTH, HEIGHT = 448, 336


def _mask(draw) -> Image.Image:
    mask = Image.new("L", (WIDTH, HEIGHT), 0)
    draw(ImageDraw.Draw(mask))
    return mask


def _steel(rng: np.random.Generator) -> Image.Image:
    y = np.linspace(0, 1, HEIGHT)[:, None, None]
    colour = np.array([80, 84, 95]) * (1 - y) + np.array([12, 12, 16]) * y
    specular = np.exp(-(((y - 0.35) / 0.05) ** 2)) * 70
    pixels = colour + specular + rng.normal(0, 6, (HEIGHT, WIDTH, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def _metal_parts(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([140, 110, 420, 140], fill=255)  # barrel
    d.rectangle([408, 102, 420, 110], fill=255)  # front sight
    d.rectangle([215, 142, 330, 152], fill=255)  # ejector rod
    d.rectangle([325, 140, 338, 154], fill=255)
    d.rounded_rectangle([125, 98, 215, 162], radius=14, fill=255)  # cylinder
    d.polygon([(100, 104), (140, 98), (140, 170), (115, 180), (98, 148)], fill=255)  # frame
    d.polygon([(98, 110), (80, 86), (92, 82), (112, 104)], fill=255)  # hammer
    d.arc([130, 150, 190, 210], 0, 180, fill=255, width=7)  # trigger guard
    d.line([150, 160, 160, 190], fill=255, width=6)  # trigger


def rendered_revolver(seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    background = np.linspace(200, 150, WIDTH)[None, :, None] + rng.normal(0, 4, (HEIGHT, WIDTH, 3))
    image = Image.fromarray(np.clip(background, 0, 255).astype(np.uint8))
    metal = _mask(_metal_parts)
    grip = _mask(lambda d: d.polygon([(98, 148), (122, 170), (110, 275), (62, 280), (56, 256), (80, 158)], fill=255))

    shadow = ImageChops.lighter(metal, grip).filter(ImageFilter.GaussianBlur(8)).point(lambda v: v // 2)
    image.paste((60, 55, 50), (8, 10), shadow)
    image.paste(_steel(rng), (0, 0), metal.filter(ImageFilter.GaussianBlur(0.7)))
    grain = np.array([120, 70, 35]) + np.sin(np.linspace(0, 40, WIDTH))[None, :, None] * 15
    wood = np.clip(grain + rng.normal(0, 10, (HEIGHT, WIDTH, 3)), 0, 255).astype(np.uint8)
    image.paste(Image.fromarray(wood), (0, 0), grip.filter(ImageFilter.GaussianBlur(0.7)))
    flutes = ImageDraw.Draw(image)
    for x in (148, 170, 192):
        flutes.line([x, 102, x, 158], fill=(15, 15, 18), width=3)
    return image.filter(ImageFilter.GaussianBlur(0.6))
