"""Reading JSON request bodies with a hard size limit, shared by the native and the compatible routes."""

from __future__ import annotations

import json

from fastapi import Request

from serve_app.errors import InvalidRequest

# Multipart framing and the small text fields around the content.
FORM_OVERHEAD_BYTES = 64 * 1024
# A JSON-escaped character takes at most 6 bytes ("\uXXXX"); plus room for the other fields.
JSON_BYTES_PER_CHAR = 6


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
    """The body as a JSON object, else InvalidRequest naming the `example` shape."""
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: absurdly nested arrays or objects
        raise InvalidRequest(f"The body must be JSON: {example}.") from None
    if not isinstance(raw, dict):
        raise InvalidRequest("The body must be a JSON object.")
    return raw
