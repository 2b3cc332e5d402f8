"""Read a multipart (or urlencoded) form into memory, with a hard size limit.

Starlette's own form parser spools files over 1 MB to a temporary file on disk; the
service promises that images live only in memory, and wants to refuse an oversized
upload as soon as it crosses the limit rather than after reading all of it. So the
body is streamed through python-multipart's parser here.

What one form may hold is bounded as it streams, declared Content-Length or not (a chunked body declares none):
the whole body at the route's file limit plus FORM_OVERHEAD_BYTES, one file part kept (the first of the route's
`file_fields`; a later one is counted but not kept), a file part the route does not take refused (400) at its
headers, before any of its bytes are read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from policy.types import MAX_FIELD_CHARS
from serve_app.errors import InvalidRequest

# Form fields (reference, image_url and friends) are capped in bytes as they stream in, at as many bytes as the
# character limit allows characters: a UTF-8 character takes 1 to 4 bytes, so a field within the byte cap is
# always within the character limit, and an ASCII field (every URL, most references) gets the whole limit. A
# non-ASCII field may be refused below it (at as few as 1,024 four-byte characters): stricter, never looser.
MAX_FIELD_BYTES = MAX_FIELD_CHARS
MAX_PARTS = 16
# Multipart framing and the small text fields around the content: the room a form gets beyond its file.
FORM_OVERHEAD_BYTES = 64 * 1024


class PartTooLarge(Exception):
    """A file part, or the whole form, went over its limit; the caller turns it into its own 413."""


@dataclass
class Form:
    fields: dict[str, str] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)


@dataclass
class _Part:
    name: str = ""
    is_file: bool = False
    kept: bool = True  # False: a second file part, counted against the total but not held
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0


async def read_form(
    request: Request, *, max_file_bytes: int, file_fields: frozenset[str] = frozenset()
) -> Form:
    """Parse the request body; raise PartTooLarge once a file part passes `max_file_bytes` or the body passes
    `max_file_bytes + FORM_OVERHEAD_BYTES`.

    A part is a file when it carries a filename or its name is in `file_fields`
    (so `curl -F image=<photo.jpg`, which sends no filename, still works). A file part named otherwise is
    refused with InvalidRequest; only the first file part is kept.
    """
    content_type, options = parse_options_header(request.headers.get("content-type", ""))
    if content_type == b"application/x-www-form-urlencoded":
        return await _read_urlencoded(request)
    if content_type != b"multipart/form-data" or b"boundary" not in options:
        raise InvalidRequest("The body must be multipart/form-data.")
    return await _read_multipart(request, options[b"boundary"], max_file_bytes, file_fields)


async def _read_urlencoded(request: Request) -> Form:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FIELD_BYTES * MAX_PARTS:
            raise InvalidRequest("The form is too large.")
    pairs = parse_qsl(body.decode("utf-8", "replace"))
    if len(pairs) > MAX_PARTS:
        raise InvalidRequest(f"At most {MAX_PARTS} form fields are accepted.")
    # The same per-field cap as multipart: a report must not store more than a reference's worth.
    for name, value in pairs:
        if len(value.encode()) > MAX_FIELD_BYTES:
            raise InvalidRequest(f"The form field {name!r} is too long.")
    return Form(fields=dict(pairs))


async def _read_multipart(
    request: Request, boundary: bytes, max_file_bytes: int, file_fields: frozenset[str]
) -> Form:
    form = Form()
    parts: list[_Part] = []
    header_name = bytearray()
    header_value = bytearray()

    def on_part_begin() -> None:
        if len(parts) >= MAX_PARTS:
            raise InvalidRequest(f"At most {MAX_PARTS} form parts are accepted.")
        parts.append(_Part())

    def on_header_field(data: bytes, start: int, end: int) -> None:
        header_name.extend(data[start:end])

    def on_header_value(data: bytes, start: int, end: int) -> None:
        header_value.extend(data[start:end])

    def on_header_end() -> None:
        if bytes(header_name).lower() == b"content-disposition":
            _, disposition = parse_options_header(bytes(header_value))
            part = parts[-1]
            part.name = disposition.get(b"name", b"").decode("utf-8", "replace")
            part.is_file = b"filename" in disposition or part.name in file_fields
            if part.is_file:
                _admit_file_part(part, parts, file_fields)
        header_name.clear()
        header_value.clear()

    def on_part_data(data: bytes, start: int, end: int) -> None:
        part = parts[-1]
        part.size += end - start
        limit = max_file_bytes if part.is_file else MAX_FIELD_BYTES
        if part.size > limit:
            if part.is_file:
                raise PartTooLarge(part.name)
            raise InvalidRequest(f"The form field {part.name!r} is too long.")
        if part.kept:
            part.chunks.append(data[start:end])

    def on_part_end() -> None:
        part = parts[-1]
        data = b"".join(part.chunks)
        if part.is_file and part.kept:
            form.files.setdefault(part.name, data)
        else:
            form.fields.setdefault(part.name, data.decode("utf-8", "replace"))

    parser = MultipartParser(
        boundary,
        {
            "on_part_begin": on_part_begin,
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_header_end": on_header_end,
            "on_part_data": on_part_data,
            "on_part_end": on_part_end,
        },
    )
    await _feed(request, parser, max_file_bytes + FORM_OVERHEAD_BYTES)
    return form


async def _feed(request: Request, parser: MultipartParser, max_body_bytes: int) -> None:
    """Stream the body through the parser; PartTooLarge once it passes `max_body_bytes`."""
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > max_body_bytes:  # counted here, not from Content-Length: a chunked body declares none
                raise PartTooLarge("")
            parser.write(chunk)
        parser.finalize()
    except MultipartParseError as exc:
        raise InvalidRequest(f"The multipart body is malformed: {exc}") from exc


def _admit_file_part(part: _Part, parts: list[_Part], file_fields: frozenset[str]) -> None:
    """A file part the route takes is kept when it is the first; any other file part is refused before its bytes."""
    if part.name not in file_fields:
        expected = f"; send the file as {' or '.join(repr(name) for name in sorted(file_fields))}" if file_fields else ""
        raise InvalidRequest(f"The form part {part.name!r} is a file this route does not take{expected}.")
    part.kept = not any(other.is_file for other in parts[:-1])
