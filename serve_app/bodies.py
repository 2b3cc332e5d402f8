"""Reading request bodies with a hard size limit, and the preamble every JSON route shares (`read_json`).

An upload's limits, every part of them: models/image_upload.py."""

from __future__ import annotations

import asyncio
import json

from fastapi import Request

from moderation.errors import TextTooLong, UploadTooLarge
from moderation.flow import Caller
from moderation.limits import require_scope
from policy.types import ContentKind, Plan
from serve_app.errors import InvalidRequest, NoImage
from serve_app.form_reader import FORM_OVERHEAD_BYTES, PartTooLarge, read_form
from serve_app.json_shape import JsonTooComplex, check_json_shape

# A JSON-escaped character takes at most 6 bytes ("\uXXXX"); plus room for the other fields.
JSON_BYTES_PER_CHAR = 6
# A body above this size is checked and parsed on a worker thread, not the event loop. The C parser holds the GIL
# while it runs, so the thread does not make a parse free; what it buys is that the loop takes turns with it
# between the check's steps (each a few ms on the largest body), instead of waiting for the whole check and parse.
# Below this size the whole work is under a millisecond, less than the hop to a thread.
PARSE_OFF_LOOP_BYTES = 64 * 1024


# The multipart part an image comes in, and its alias.
IMAGE_FIELDS = frozenset({"image", "file"})


def json_bytes_for(chars: int) -> int:
    """The largest JSON body that can carry `chars` characters of text and the small fields around them."""
    return chars * JSON_BYTES_PER_CHAR + FORM_OVERHEAD_BYTES


def refuse_declared_oversize(request: Request, max_body_bytes: int, error: Exception) -> None:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_body_bytes:
        raise error


async def read_body(request: Request, max_bytes: int, too_large: Exception) -> bytes:
    """The whole body, refused with `too_large` as soon as it passes `max_bytes` (declared or streamed)."""
    refuse_declared_oversize(request, max_bytes, too_large)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def json_object(body: bytes, example: str) -> dict:
    """The body as a JSON object, else InvalidRequest naming the `example` shape (or the cap its shape is over)."""
    try:
        check_json_shape(body)  # before the parse: a parse's cost is in its values, not its bytes
    except JsonTooComplex as error:
        raise InvalidRequest(str(error)) from None
    try:
        # As UTF-8 only (RFC 8259): json.loads would also take UTF-16 and UTF-32 bytes, where an escaped quote is
        # no `\"` byte pair, and the shape check above counts the bytes as UTF-8. UnicodeDecodeError is a ValueError.
        raw = json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError):  # RecursionError: absurdly nested arrays or objects
        raise InvalidRequest(f"The body must be JSON: {example}.") from None
    if not isinstance(raw, dict):
        raise InvalidRequest("The body must be a JSON object.")
    return raw


async def read_json(request: Request, caller: Caller, scope: ContentKind | None, max_bytes: int, example: str) -> dict:
    """The preamble of the JSON routes: the caller's plan covers `scope` (None: the route checks each item's kind),
    then the body is read, refused past `max_bytes` (413 `text_too_long`: the texts are what makes a JSON body
    large), its shape checked (400 past serve_app.json_shape's caps) and parsed as a JSON object (else 400 naming
    the `example` shape), on a worker thread when it is large."""
    if scope is not None:
        require_scope(caller.plan, scope)
    too_large = TextTooLong(f"The request is above {max_bytes} bytes.")
    body = await read_body(request, max_bytes, too_large)
    if len(body) > PARSE_OFF_LOOP_BYTES:
        return await asyncio.to_thread(json_object, body, example)
    return json_object(body, example)


def image_too_large(max_bytes: int) -> UploadTooLarge:
    """413 `image_too_large`: an image past the plan's `max_bytes`, a form's part (`read_image_form`) or a data: URL
    (serve_app/routes_openai.py `_image_bytes`)."""
    return UploadTooLarge(f"The image is above the plan's limit of {max_bytes} bytes.")


async def read_image_form(request: Request, plan: Plan) -> tuple[bytes, dict[str, str]]:
    """An image upload's bytes (part `image`, or its alias `file`) and the form's text fields: 413 `image_too_large`
    past the plan's bytes (declared or streamed), 400 `no_image` without the part."""
    max_bytes = plan.image_max_bytes
    too_large = image_too_large(max_bytes)
    refuse_declared_oversize(request, max_bytes + FORM_OVERHEAD_BYTES, too_large)
    try:
        form = await read_form(request, max_file_bytes=max_bytes, file_fields=IMAGE_FIELDS)
    except PartTooLarge:
        raise too_large from None
    data = form.files.get("image") or form.files.get("file")
    if not data:
        raise NoImage()
    request.state.log_fields.update(bytes=len(data))
    return data, form.fields
