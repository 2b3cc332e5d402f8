"""The streaming form reader: multipart and urlencoded bodies, in memory, with hard limits."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from starlette.requests import Request

from serve_app.errors import ApiError
from serve_app.form_reader import FORM_OVERHEAD_BYTES, MAX_FIELD_BYTES, MAX_PARTS, PartTooLarge, read_form

pytestmark = pytest.mark.anyio
BOUNDARY = "b0undary"
IMAGE = frozenset({"image", "file"})


def request_of(body: bytes, content_type: str, chunk_bytes: int = 7, received: list | None = None) -> Request:
    """A Starlette request whose body arrives in small chunks, as from a slow client (and, like a chunked body,
    with no Content-Length). `received` collects each chunk as it is handed over."""
    chunks = [body[i : i + chunk_bytes] for i in range(0, len(body), chunk_bytes)] or [b""]

    async def receive():
        chunk = chunks.pop(0)
        if received is not None:
            received.append(chunk)
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    scope = {"type": "http", "method": "POST", "path": "/", "headers": [(b"content-type", content_type.encode())]}
    return Request(scope, receive)


@contextmanager
def invalid_request(match: str):
    with pytest.raises(ApiError, match=match) as refused:
        yield
    assert (refused.value.status, refused.value.code) == (400, "invalid_request")


def multipart(*parts: tuple[str, bytes, str | None]) -> bytes:
    body = b""
    for name, data, filename in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        body += f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + data + b"\r\n"
    return body + f"--{BOUNDARY}--\r\n".encode()


MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"


async def test_fields_and_files_are_read_into_memory():
    body = multipart(("reference", b"post-1", None), ("image", b"\x89PNG...", "a.png"))
    form = await read_form(request_of(body, MULTIPART), max_file_bytes=100, file_fields=IMAGE)
    assert form.fields == {"reference": "post-1"}
    assert form.files == {"image": b"\x89PNG..."}


async def test_a_named_file_field_is_a_file_even_without_a_filename():
    body = multipart(("image", b"bytes", None))
    form = await read_form(request_of(body, MULTIPART), max_file_bytes=100, file_fields=frozenset({"image"}))
    assert form.files == {"image": b"bytes"} and form.fields == {}


async def test_a_file_over_the_limit_stops_the_read():
    body = multipart(("image", b"x" * 101, "a.png"))
    with pytest.raises(PartTooLarge):
        await read_form(request_of(body, MULTIPART), max_file_bytes=100, file_fields=IMAGE)


async def test_a_field_over_its_limit_is_an_invalid_request():
    body = multipart(("reference", b"r" * (MAX_FIELD_BYTES + 1), None))
    with invalid_request(match="too long"):
        await read_form(request_of(body, MULTIPART, chunk_bytes=1024), max_file_bytes=100)


async def test_too_many_parts_is_an_invalid_request():
    body = multipart(*[(f"f{i}", b"v", None) for i in range(MAX_PARTS + 1)])
    with invalid_request(match="form parts"):
        await read_form(request_of(body, MULTIPART), max_file_bytes=100)


async def test_a_body_that_is_not_a_form_is_an_invalid_request():
    with invalid_request(match="multipart"):
        await read_form(request_of(b'{"text": "hi"}', "application/json"), max_file_bytes=100)


async def test_malformed_multipart_is_an_invalid_request():
    with invalid_request(match="malformed"):
        await read_form(request_of(b"--wrong\r\ngarbage", MULTIPART), max_file_bytes=100)


async def test_urlencoded_fields_are_read():
    form = await read_form(
        request_of(b"reference=post-9&image_url=https%3A%2F%2Fx.test%2Fa.jpg", "application/x-www-form-urlencoded"),
        max_file_bytes=0,
    )
    assert form.fields == {"reference": "post-9", "image_url": "https://x.test/a.jpg"}


async def test_an_oversized_urlencoded_body_is_an_invalid_request():
    body = b"reference=" + b"r" * (MAX_FIELD_BYTES * MAX_PARTS + 1)
    with invalid_request(match="too large"):
        await read_form(request_of(body, "application/x-www-form-urlencoded", 4096), max_file_bytes=0)


async def test_an_urlencoded_field_over_its_limit_is_an_invalid_request():
    body = b"reference=" + b"r" * (MAX_FIELD_BYTES + 1)
    with invalid_request(match="too long"):
        await read_form(request_of(body, "application/x-www-form-urlencoded", 4096), max_file_bytes=0)


async def test_too_many_urlencoded_fields_is_an_invalid_request():
    body = "&".join(f"f{i}=v" for i in range(MAX_PARTS + 1)).encode()
    with invalid_request(match="form fields"):
        await read_form(request_of(body, "application/x-www-form-urlencoded"), max_file_bytes=0)


async def test_a_form_over_the_file_limit_plus_overhead_stops_the_read_without_content_length():
    # Many fields under their own cap, and a file under its own: the body as a whole is what is over.
    fields = [(f"f{i}", b"v" * (MAX_FIELD_BYTES - 200), None) for i in range(MAX_PARTS - 1)]
    body = multipart(*fields, ("image", b"x" * 100, "a.png")) + b"-" * FORM_OVERHEAD_BYTES
    received: list[bytes] = []
    with pytest.raises(PartTooLarge):
        await read_form(request_of(body, MULTIPART, 4096, received), max_file_bytes=100, file_fields=IMAGE)
    assert sum(map(len, received)) <= 100 + FORM_OVERHEAD_BYTES + 4096  # stopped at the chunk that passed the cap


async def test_a_second_file_part_is_counted_but_not_kept():
    body = multipart(("image", b"first", "a.png"), ("file", b"second", "b.png"), ("image", b"third", "c.png"))
    form = await read_form(request_of(body, MULTIPART), max_file_bytes=100, file_fields=IMAGE)
    assert form.files == {"image": b"first"}


async def test_many_big_file_parts_stop_at_the_total_not_at_each_parts_limit():
    # The attack: 16 parts each at the file limit. Each part alone is within its limit; the total is not.
    limit = FORM_OVERHEAD_BYTES
    body = multipart(*[("image", b"x" * limit, "a.png") for _ in range(MAX_PARTS)])
    received: list[bytes] = []
    with pytest.raises(PartTooLarge):
        await read_form(request_of(body, MULTIPART, 4096, received), max_file_bytes=limit, file_fields=IMAGE)
    assert sum(map(len, received)) <= limit + FORM_OVERHEAD_BYTES + 4096  # about 2 parts of the 16


@pytest.mark.parametrize("name, filename", [("other", "x.png"), ("image2", None)])
async def test_a_file_part_the_route_does_not_take_is_refused_at_its_headers(name, filename):
    body = multipart((name, b"x" * 50_000, filename or "x.bin"), ("image", b"img", "a.png"))
    received: list[bytes] = []
    with invalid_request(match="does not take"):
        await read_form(request_of(body, MULTIPART, 1024, received), max_file_bytes=100_000, file_fields=IMAGE)
    assert sum(map(len, received)) <= 1024  # refused in the first chunk, before the part's bytes were read


async def test_a_route_without_file_fields_refuses_any_file_part():
    body = multipart(("reference", b"r", None), ("image", b"x", "a.png"))
    with invalid_request(match="does not take"):
        await read_form(request_of(body, MULTIPART), max_file_bytes=0)
