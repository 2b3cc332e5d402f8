"""The dashboard's form bodies, read with a size bound (their CSRF check: dashboard/csrf.py).

Every form is `application/x-www-form-urlencoded` (the browser's default) and small, so the body is read up to
`MAX_FORM_BYTES` and parsed here: a larger one is refused before it is held whole.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from fastapi import Request

from dashboard.errors import PageError

MAX_FORM_BYTES = 64 * 1024


class Form(dict):
    """A form's fields, the first value of each."""

    def text(self, name: str, default: str = "") -> str:
        return self.get(name, default).strip()


async def read_page_form(request: Request) -> Form:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise PageError(413, "The form is larger than the dashboard accepts.")
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True, strict_parsing=False, max_num_fields=500)
    except (UnicodeDecodeError, ValueError):
        raise PageError(400, "The form could not be read.") from None
    return Form({name: values[0] for name, values in fields.items()})

