"""The decode pool (models/decode_pool.py): busy past its cap, the deadline, errors passed through."""

from __future__ import annotations

import asyncio
import io
import struct
import threading
import time

import pytest
from PIL import Image

from models.image_decoding import DecodeTimeout, ImageTooLarge, InvalidImage
from models.decode_pool import DecodeBusy, ImageDecoder

SLOW_MAX_PIXELS = 80_000_000  # under Pillow's own bomb limit (89 M), so the slow GIF below is accepted


def small_png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 20, 30)).save(buffer, "PNG")
    return buffer.getvalue()


def slow_gif() -> bytes:
    """One pixel on an 80 MP screen: ~70 bytes that take 0.5-1 s to decode (the screen is converted and shrunk)."""
    header = b"GIF89a" + struct.pack("<HHBBB", 10_000, 8_000, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
    return header + b"\x2c" + struct.pack("<HHHHB", 0, 0, 1, 1, 0) + b"\x02\x02\x44\x01\x00\x3b"


async def wait_until_idle(decoder: ImageDecoder, within_s: float) -> float:
    started = time.perf_counter()
    while decoder.in_flight and time.perf_counter() - started < within_s:
        await asyncio.sleep(0.01)
    return time.perf_counter() - started


def with_decoder(scenario, **limits):
    """`await scenario(decoder)`'s answer, with a decoder of `limits`, closed afterwards whatever happens."""
    decoder = ImageDecoder(**limits)
    try:
        return asyncio.run(scenario(decoder))
    finally:
        decoder.close()


def test_an_image_decodes_through_the_decoder_and_errors_pass_through():
    async def scenario(decoder):
        decoded = await decoder.decode(small_png(), 1_000_000)
        assert (decoded.width, decoded.height, len(decoded.frames)) == (64, 48, 1)
        with pytest.raises(InvalidImage):
            await decoder.decode(b"not an image", 1_000_000)
        with pytest.raises(ImageTooLarge):
            await decoder.decode(small_png(), 1_000)
        assert decoder.in_flight == 0

    with_decoder(scenario)


def test_the_work_after_decoding_runs_in_the_decode_worker_and_holds_its_place_until_done():
    async def scenario(decoder):
        seen: list[tuple[str, int]] = []

        def prepare(image):
            seen.append((threading.current_thread().name, decoder.in_flight))
            return image.width * image.height

        image, prepared = await decoder.decode_then(small_png(), 1_000_000, prepare)
        assert prepared == 64 * 48 and image.width == 64
        ((thread, in_flight),) = seen
        assert thread.startswith("image-decode") and in_flight == 1  # the worker's place is held meanwhile
        with pytest.raises(ValueError):  # the work's own error reaches the caller, and the place is given back
            await decoder.decode_then(small_png(), 1_000_000, lambda image: int("not a number"))
        assert decoder.in_flight == 0

    with_decoder(scenario, workers=1, max_waiting=0, deadline_s=30)


def test_a_full_decoder_answers_busy_at_once_and_recovers():
    async def scenario(decoder):
        slow = asyncio.create_task(decoder.decode(slow_gif(), SLOW_MAX_PIXELS))
        await asyncio.sleep(0)  # the slow decode is in flight
        started = time.perf_counter()
        with pytest.raises(DecodeBusy) as raised:
            await decoder.decode(small_png(), 1_000_000)
        assert time.perf_counter() - started < 0.1
        assert raised.value.retry_after_s >= 1
        assert len((await slow).frames) == 1
        assert len((await decoder.decode(small_png(), 1_000_000)).frames) == 1

    with_decoder(scenario, workers=1, max_waiting=0, deadline_s=30)


def test_the_deadline_answers_the_caller_in_time_and_the_worker_is_freed_when_its_work_ends():
    async def scenario(decoder) -> bool:
        """False when the machine was too slow for the scenario: the running decode passed its own deadline before
        its first frame (its worker then freed at once), so the worker was never held."""
        # The running work is held past both callers' deadline, whatever the machine's load: were it to end at its
        # own deadline, the queued decode might start in the instant before its caller's deadline fires.
        held, holding = threading.Event(), threading.Event()

        def hold(image):
            holding.set()
            held.wait(10)

        started = time.perf_counter()
        running = asyncio.create_task(decoder.decode_then(small_png(), 1_000_000, hold))
        queued = asyncio.create_task(decoder.decode(small_png(), 1_000_000))
        results = await asyncio.gather(running, queued, return_exceptions=True)
        answered_s = time.perf_counter() - started
        if not holding.is_set():
            await wait_until_idle(decoder, within_s=5)
            return False
        assert [type(result) for result in results] == [DecodeTimeout, DecodeBusy]  # queued: cancelled, never ran
        assert answered_s < 1.0
        assert decoder.in_flight == 1  # the caller left; the worker's place stays taken until its work ends
        held.set()
        assert await wait_until_idle(decoder, within_s=5) < 5
        assert decoder.in_flight == 0
        return True

    # Under a loaded CI machine the first try may not hold the worker; one of five must.
    assert any(with_decoder(scenario, workers=1, max_waiting=1, deadline_s=0.05) for _ in range(5))


@pytest.mark.parametrize("arguments", [{"workers": 0}, {"max_waiting": -1}, {"deadline_s": 0}])
def test_nonsense_limits_are_refused(arguments):
    with pytest.raises(ValueError):
        ImageDecoder(**arguments)
