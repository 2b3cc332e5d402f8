"""The widget's signed verdict (policy/widget_verdicts.py): genuine ones pass; one for other content, an expired one,
one for another key, one about the other kind of content, a tampered one and garbage are refused, each with its own
reason."""

from __future__ import annotations

import base64
import json

import pytest

from policy.types import Profile
from policy.widget_verdicts import (
    InvalidVerdict,
    Verdict,
    VerdictExpired,
    VerdictForOtherContent,
    VerdictForOtherKey,
    VerdictForOtherKind,
    _b64,
    _mac,
    bytes_sha256,
    check,
    may_post,
    sign,
    text_sha256,
)

SECRET = b"s" * 32
NOW = 1_800_000_000.0
CONTENT = text_sha256("You are lovely.")


def verdict(**changes) -> Verdict:
    fields = dict(key_id="key_a", decision="allow", kind="text", content_sha256=CONTENT, issued_at=NOW,
                  expires_at=NOW + 60, nonce="n1", origin="https://site.example")  # fmt: skip
    return Verdict(**{**fields, **changes})


def redeemed_as(token: str, *, secret: bytes = SECRET, now: float = NOW, **expected) -> Verdict:
    """`check` as the redemption asks it: for key_a, about the text CONTENT, unless `expected` says otherwise."""
    return check(token, secret, **{"key_id": "key_a", "kind": "text", "content_sha256": CONTENT, **expected}, now=now)


def test_a_genuine_verdict_of_the_key_about_the_content_passes():
    assert redeemed_as(sign(verdict(), SECRET), now=NOW + 59) == verdict()


def test_a_verdict_about_other_content_is_refused():
    with pytest.raises(VerdictForOtherContent):
        redeemed_as(sign(verdict(), SECRET), content_sha256=text_sha256("You idiot."))


@pytest.mark.parametrize(("checked_as", "redeemed_as_kind"), [("text", "image"), ("image", "text")])
def test_a_verdict_is_refused_for_the_same_bytes_as_the_other_kind(checked_as, redeemed_as_kind):
    """An ASCII-only image file sent to check-text gets a text's `allow`; the photo it is must not redeem it."""
    data = b"P1 2 2 0 1 1 0"  # a PBM image that is also plain ASCII text
    token = sign(verdict(kind=checked_as, content_sha256=bytes_sha256(data)), SECRET)
    assert redeemed_as(token, kind=checked_as, content_sha256=bytes_sha256(data)).kind == checked_as
    with pytest.raises(VerdictForOtherKind):
        redeemed_as(token, kind=redeemed_as_kind, content_sha256=bytes_sha256(data))


def test_an_expired_verdict_is_refused():
    with pytest.raises(VerdictExpired):
        redeemed_as(sign(verdict(), SECRET), now=NOW + 60)


def test_a_verdict_of_another_key_is_refused():
    with pytest.raises(VerdictForOtherKey):
        redeemed_as(sign(verdict(key_id="key_b"), SECRET))


def test_a_tampered_verdict_is_refused():
    """A block turned into an allow, with the signature of the block kept."""
    version, payload, signature = sign(verdict(decision="block"), SECRET).split(".")
    fields = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged = base64.urlsafe_b64encode(json.dumps({**fields, "decision": "allow"}).encode()).rstrip(b"=").decode()
    with pytest.raises(InvalidVerdict):
        redeemed_as(f"{version}.{forged}.{signature}")


def test_a_verdict_signed_with_another_secret_is_refused():
    with pytest.raises(InvalidVerdict):
        redeemed_as(sign(verdict(), b"x" * 32))


@pytest.mark.parametrize("garbage", ["", "v1", "v1..", "v2.a.b", "v1.!!!.###", "v1.e30.AAAA", "v1.\u00e9.\u00e9",
                                     "v1." + "A" * 50 + ".B"])  # fmt: skip
def test_garbage_is_refused_as_invalid(garbage):
    with pytest.raises(InvalidVerdict):
        redeemed_as(garbage)


def test_a_signed_payload_that_is_no_verdict_is_refused_as_invalid():
    """Should the payload's shape ever change, a verdict of the old shape must be refused, not crash the check."""
    payload = _b64(b'{"key_id": "key_a"}')
    with pytest.raises(InvalidVerdict):
        redeemed_as(f"v1.{payload}.{_b64(_mac(payload, SECRET))}")


def test_a_text_hashes_the_same_with_the_line_ends_a_form_posts():
    assert text_sha256("one\r\ntwo") == text_sha256("one\ntwo") != text_sha256("one two")


def test_a_photo_hashes_its_bytes():
    assert bytes_sha256(b"\x89PNG") != bytes_sha256(b"\x89PNH")


@pytest.mark.parametrize(("decision", "post_anyway", "allowed"), [
    ("allow", [], True), ("review", ["review"], True), ("block", ["review"], False), ("review", [], False),
    ("block", ["review", "block"], True),
])  # fmt: skip
def test_the_profile_says_after_which_warnings_a_person_may_post(decision, post_anyway, allowed):
    profile = Profile(mode="enforce", categories={"nsfw": {"review": 0.4, "block": 0.8},
                                                  "toxic": {"review": 0.5, "block": 0.8}},
                      widget_post_anyway=post_anyway)  # fmt: skip
    assert may_post(decision, profile) is allowed
