"""The decode pool: a deadline and a concurrency cap around ``decode_image``, for whoever decodes uploads.

Under Ray Serve that is each ImageModel replica (the upload's bytes travel to it, not decoded frames); in the
plain app, the one process.

Why threads and not a process pool: ``decode_image`` bounds its own work before spending it (first 8 frames,
per-frame and total pixel budgets), so a decode cannot run away and needs no killing; Pillow releases the GIL while
it decodes, so two threads use both cores of the reference box. A process pool would add a pickle round trip of up
to 8 frames per request and a Python + Pillow + numpy interpreter per worker, and killing one decode means killing
its worker (and every decode queued on it). The numbers behind this are in docs/image-models.md.

What is bounded:
- ``workers`` decodes run at once per process; at most ``max_waiting`` more wait. Beyond that: ``DecodeBusy``.
- A caller waits at most ``deadline_s`` (queue wait included). A decode still queued then is cancelled
  (``DecodeBusy``); one that is running gets ``DecodeTimeout`` and stops at its next frame boundary, keeping its
  worker until then, so the cap counts the work really running.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from models.image_decoding import DecodedImage, DecodeTimeout, ImageRefused, decode_image

Prepared = TypeVar("Prepared")

# One decode per core of the 2-core reference box: a third would only queue for a core and hold its memory
# (a 40 MP frame is 120-160 MB while it is converted).
DECODE_WORKERS = 2
# Decodes that may wait for a worker: as many as one process may be handed at once (the plain app's 64 requests
# minus the 2 running; an ImageModel replica takes at most its max_ongoing_requests), so the decoder never refuses
# before Serve's own limits do; the deadline below sheds a
# queue that does not drain. With 8 (the first choice) twelve concurrent uploads on a busy 2-core machine already
# got 503s. A typical upload decodes in 10-25 ms, so a full queue is under a second of work; the bytes it holds
# are held by the waiting requests anyway.
DECODE_MAX_WAITING = 62
# The bounded worst cases measured (two frames of a 40 MP screen; one 40 MP progressive JPEG or WebP frame) take
# 0.5-1.6 s on one core; 3 s leaves room for a busy shared box, far below the 30 s a request may take end to end.
DECODE_DEADLINE_S = 3.0
# What DecodeBusy suggests as Retry-After: the queue drains in well under a second.
RETRY_AFTER_S = 1


class DecodeBusy(ImageRefused, RuntimeError):
    """Every decode worker is taken and the queue is full (or the wait used up the deadline): try again later."""

    def __init__(self, message: str, retry_after_s: int = RETRY_AFTER_S) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ImageDecoder:
    """``await decoder.decode(data, max_pixels)``; one instance per process (e.g. per ImageModel replica)."""

    def __init__(
        self,
        workers: int = DECODE_WORKERS,
        max_waiting: int = DECODE_MAX_WAITING,
        deadline_s: float = DECODE_DEADLINE_S,
    ) -> None:
        if workers < 1 or max_waiting < 0 or deadline_s <= 0:
            raise ValueError("workers >= 1, max_waiting >= 0 and deadline_s > 0 are required")
        self.workers, self.max_waiting, self.deadline_s = workers, max_waiting, deadline_s
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="image-decode")
        self._lock = threading.Lock()  # done-callbacks run on worker threads
        self._in_flight = 0  # running + waiting; released when the work really ends, not when the caller leaves

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def decode(self, data: bytes, max_pixels: int) -> DecodedImage:
        """Raises InvalidImage, ImageTooLarge, DecodeBusy or DecodeTimeout."""
        image, _ = await self.decode_then(data, max_pixels, _nothing)
        return image

    async def decode_then(
        self, data: bytes, max_pixels: int, then: Callable[[DecodedImage], Prepared], text_side: int | None = None
    ) -> tuple[DecodedImage, Prepared]:
        """`decode`, then `then(image)` in the same worker, under the same deadline: the image work that follows
        decoding (the models' resizing and normalising) runs in parallel across requests, not in their batch.
        `text_side`: keep the first frame that large as well, for the text reader (decode_image)."""
        with self._lock:
            if self._in_flight >= self.workers + self.max_waiting:
                raise DecodeBusy(f"{self._in_flight} image decodes in flight; the limit is reached")
            self._in_flight += 1
        deadline = time.monotonic() + self.deadline_s
        try:
            future = self._pool.submit(_decoded_then, data, max_pixels, deadline, then, text_side)
        except BaseException:
            self._release(None)
            raise
        future.add_done_callback(self._release)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.deadline_s)
        except TimeoutError:
            if future.cancel():  # never started: it waited behind others for the whole deadline
                raise DecodeBusy(f"no decode worker free within {self.deadline_s} s") from None
            raise DecodeTimeout(f"image decoding took more than {self.deadline_s} s") from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _release(self, _future: Future | None) -> None:
        with self._lock:
            self._in_flight -= 1


def _decoded_then(
    data: bytes, max_pixels: int, deadline: float, then: Callable[[DecodedImage], Prepared], text_side: int | None
) -> tuple[DecodedImage, Prepared]:
    image = decode_image(data, max_pixels, deadline=deadline, text_side=text_side)
    return image, then(image)


def _nothing(_image: DecodedImage) -> None:
    return None
