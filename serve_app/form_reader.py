"""Read a multipart (or urlencoded) form into memory, with a hard size limit.

Starlette's own form parser spools files over 1 MB to a temporary file on disk; the
service promises that images live only in memory, and wants to refuse an oversized
upload as soon as it crosses the limit rather than after reading all of it. So the
body is streamed through python-multipart's parser here.

What one form may hold is bounded as it streams, declared Content-Length or not (a chunked body declares none):
the whole body at the route's file limit plus FORM_OVERHEAD_BYTES, one file part kept (the first of the route's
`file_fields`; a later one is counted but not kept), a file part the route does not take refused (400) at its
headers, before any of its bytes are read. An image upload's limits, every part: models/image_upload.py.
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
    collector = _FormCollector(max_file_bytes, file_fields)
    await _feed(request, MultipartParser(boundary, collector.callbacks()), max_file_bytes + FORM_OVERHEAD_BYTES)
    return collector.form


class _FormCollector:
    """python-multipart's callbacks: builds the form part by part, and refuses a part at the limit it passes."""

    def __init__(self, max_file_bytes: int, file_fields: frozenset[str]):
        self.form = Form()
        self._max_file_bytes, self._file_fields = max_file_bytes, file_fields
        self._parts: list[_Part] = []
        self._header_name, self._header_value = bytearray(), bytearray()

    def callbacks(self) -> dict:
        return {
            "on_part_begin": self._on_part_begin,
            "on_header_field": self._on_header_field,
            "on_header_value": self._on_header_value,
            "on_header_end": self._on_header_end,
            "on_part_data": self._on_part_data,
            "on_part_end": self._on_part_end,
        }

    def _on_part_begin(self) -> None:
        if len(self._parts) >= MAX_PARTS:
            raise InvalidRequest(f"At most {MAX_PARTS} form parts are accepted.")
        self._parts.append(_Part())

    def _on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_name.extend(data[start:end])

    def _on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value.extend(data[start:end])

    def _on_header_end(self) -> None:
        if bytes(self._header_name).lower() == b"content-disposition":
            _, disposition = parse_options_header(bytes(self._header_value))
            part = self._parts[-1]
            part.name = disposition.get(b"name", b"").decode("utf-8", "replace")
            part.is_file = b"filename" in disposition or part.name in self._file_fields
            if part.is_file:
                _admit_file_part(part, self._parts, self._file_fields)
        self._header_name.clear()
        self._header_value.clear()

    def _on_part_data(self, data: bytes, start: int, end: int) -> None:
        part = self._parts[-1]
        part.size += end - start
        limit = self._max_file_bytes if part.is_file else MAX_FIELD_BYTES
        if part.size > limit:
            if part.is_file:
                raise PartTooLarge(part.name)
            raise InvalidRequest(f"The form field {part.name!r} is too long.")
        if part.kept:
            part.chunks.append(data[start:end])

    def _on_part_end(self) -> None:
        part = self._parts[-1]
        data = b"".join(part.chunks)
        if part.is_file and part.kept:
            self.form.files.setdefault(part.name, data)
        else:
            self.form.fields.setdefault(part.name, data.decode("utf-8", "replace"))


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
