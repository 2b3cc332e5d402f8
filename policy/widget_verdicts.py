"""The widget's verdict: what the service answered about one content, signed so that the browser cannot forge it.

A verdict is `v1.<payload>.<signature>`: the payload is base64url JSON naming the key it was made for, the decision,
the kind of content (text or image), the SHA-256 of the exact content, when it was made and until when it may be
redeemed, and a random nonce; the signature is HMAC-SHA256 over `v1.<payload>` with the service's widget signing
secret (store/widget/tokens.py keeps it). The site's backend hands the verdict, the kind of content it received and
its hash back to the service, which checks it here and redeems its nonce once (store/widget/tokens.py), so an
`allow` is never reused for other content, for the same bytes posted as the other kind, or twice.

Pure code: no Redis, no HTTP. The clock and the nonce are arguments, so the rules are tested as they are.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import asdict, dataclass

from policy.types import Action, ContentKind, Profile

VERSION = "v1"
# How long a verdict may be redeemed after it was made: long enough for a person to finish and post a comment after
# the check, short enough that a verdict picked up from a page is soon worth nothing.
VERDICT_LIFETIME_S = 30 * 60


class VerdictRefused(Exception):
    """A verdict that proves nothing; each reason is a subclass, so each answers with its own error code."""


class InvalidVerdict(VerdictRefused):
    """Malformed, or its signature does not match: not made by this service, or changed since."""


class VerdictForOtherKey(VerdictRefused):
    pass


class VerdictForOtherContent(VerdictRefused):
    pass


class VerdictForOtherKind(VerdictRefused):
    """A text's verdict redeemed for a photo, or a photo's for a text: the same bytes checked as one kind prove nothing
    about them as the other (an ASCII-only image file passes a text check)."""


class VerdictExpired(VerdictRefused):
    pass


class VerdictUsed(VerdictRefused):
    """Redeemed before: a verdict vouches for one post."""


@dataclass(frozen=True)
class Verdict:
    key_id: str
    decision: Action
    kind: ContentKind
    content_sha256: str
    issued_at: float
    expires_at: float
    nonce: str
    origin: str


def may_post(decision: Action, profile: Profile) -> bool:
    """Whether the widget lets the person post the content as it is: always after an allow, after a warning only
    where the profile says so (`Profile.widget_post_anyway`)."""
    return decision == "allow" or decision in profile.widget_post_anyway


def text_sha256(text: str) -> str:
    """The hash a text verdict is bound to: its UTF-8 with line ends as LF. A browser's textarea holds LF, but a form
    posts CRLF, so the site's backend and the service would otherwise hash two different texts."""
    return hashlib.sha256(text.replace("\r\n", "\n").encode("utf-8")).hexdigest()


def bytes_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sign(verdict: Verdict, secret: bytes) -> str:
    payload = _b64(json.dumps(asdict(verdict), separators=(",", ":"), sort_keys=True).encode())
    return f"{VERSION}.{payload}.{_b64(_mac(payload, secret))}"


def check(token: str, secret: bytes, *, key_id: str, kind: ContentKind, content_sha256: str, now: float) -> Verdict:
    """The verdict `token` holds, when it is genuine, made for `key_id`, about content of `kind` hashed
    `content_sha256` and not expired; else the VerdictRefused that says why. Redeeming it once is the caller's step
    (its nonce)."""
    verdict = _genuine(token, secret)
    if verdict.key_id != key_id:
        raise VerdictForOtherKey("The verdict was made for another API key.")
    if verdict.kind != kind:
        raise VerdictForOtherKind(f"The verdict is about {verdict.kind} content, not {kind}.")
    if not hmac.compare_digest(verdict.content_sha256, content_sha256.lower()):
        raise VerdictForOtherContent("The verdict is about other content than this.")
    if now >= verdict.expires_at:
        raise VerdictExpired("The verdict has expired; check the content again.")
    return verdict


def _genuine(token: str, secret: bytes) -> Verdict:
    malformed = InvalidVerdict("The verdict is malformed or its signature does not match.")
    version, _, rest = token.partition(".")
    payload, _, signature = rest.partition(".")
    if version != VERSION or not payload or not signature:
        raise malformed
    try:
        genuine = hmac.compare_digest(_unb64(signature), _mac(payload, secret))
    except ValueError:
        raise malformed from None
    if not genuine:
        raise malformed
    try:
        return Verdict(**json.loads(_unb64(payload)))
    except (ValueError, TypeError):
        raise malformed from None


def _mac(payload: str, secret: bytes) -> bytes:
    return hmac.new(secret, f"{VERSION}.{payload}".encode(), hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
