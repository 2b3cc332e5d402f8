"""A JSON body's structure, bounded before it is parsed (pure logic, no HTTP).

`json.loads` holds the GIL for its whole run and builds one Python object per value: 14 MB of nested empty arrays
(`[[],[],...]`) is 1.8 s of it and hundreds of MB, however small each text may be. No body of this API needs more
than a few hundred structural tokens (100 texts in one array, a Perspective request's attributes), nor more than a
few levels of nesting; texts are strings, and a long string parses at memcpy speed. So the tokens outside strings
(`[ ] { } , :`), the strings and the nesting depth are counted first, with byte-level scans (`bytes.count`,
`replace`, `split`: C speed, no object per value), and a body over any cap is refused before any parse.
"""

from __future__ import annotations

import re

# Structural tokens outside strings: 100 texts in an array is about 100; a Perspective request with every attribute
# and span annotations about 100 more. 4,096 leaves room for clients that add fields, and parses in well under 1 ms.
MAX_JSON_TOKENS = 4_096
# Strings (keys included): as many as the tokens that separate them.
MAX_JSON_STRINGS = MAX_JSON_TOKENS
# Nesting depth: the deepest body of this API is 4 (`{"input": [{"image_url": {"url": ...}}]}`).
MAX_JSON_DEPTH = 32

_STRUCTURAL = (b"[", b"]", b"{", b"}", b",", b":")
_BRACKETS = re.compile(rb"[\[\]{}]")


class JsonTooComplex(ValueError):
    """The body holds more values or deeper nesting than any request of this API; the message says which."""


def check_json_shape(body: bytes) -> None:
    """Raise JsonTooComplex when the body's tokens, strings or depth are over the caps; else nothing.

    Only a shape check: malformed JSON within the caps is left to the parser's own error.
    """
    if sum(body.count(token) for token in _STRUCTURAL) <= MAX_JSON_DEPTH:
        return  # a short body: under every cap, wherever its tokens are
    # Brackets and commas inside texts are allowed: count them outside strings only. Escapes first: `\\` then `\"`
    # (left to right, as a JSON parser reads them), so every quote left opens or closes a string.
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    quotes = unescaped.count(b'"')
    if quotes > 2 * MAX_JSON_STRINGS:
        raise JsonTooComplex(f"The body holds more than {MAX_JSON_STRINGS} strings.")
    outside = b"".join(unescaped.split(b'"')[::2])  # at most MAX_JSON_STRINGS + 1 pieces, by the check above
    tokens = sum(outside.count(token) for token in _STRUCTURAL)
    if tokens > MAX_JSON_TOKENS:
        raise JsonTooComplex(f"The body holds more than {MAX_JSON_TOKENS} arrays, objects and values.")
    _check_depth(outside)


def _check_depth(outside: bytes) -> None:
    depth = 0
    for match in _BRACKETS.finditer(outside):  # at most MAX_JSON_TOKENS brackets, by the caller's check
        depth += 1 if match.group() in (b"[", b"{") else -1
        if depth > MAX_JSON_DEPTH:
            raise JsonTooComplex(f"The body nests arrays and objects deeper than {MAX_JSON_DEPTH} levels.")
