"""The page origins an operator may allow for a key's widget (policy/widget_tokens.py): the form a browser sends in
`Origin`, anything else refused."""

from __future__ import annotations

import pytest

from policy.widget_tokens import MAX_ORIGINS_PER_KEY, InvalidOrigin, normal_origin, normal_origins


@pytest.mark.parametrize(("given", "normal"), [
    ("https://www.example.com", "https://www.example.com"),
    ("HTTPS://WWW.Example.com/", "https://www.example.com"),
    ("https://example.com:443", "https://example.com"),
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
    ("http://[::1]:3000", "http://[::1]:3000"),
])  # fmt: skip
def test_an_origin_is_kept_in_the_form_a_browser_sends(given, normal):
    assert normal_origin(given) == normal


@pytest.mark.parametrize("bad", ["", "example.com", "ftp://example.com", "https://example.com/page",
                                 "https://example.com?x=1", "https://user:pw@example.com", "https://example.com:99999",
                                 "javascript:alert(1)", "https://", "*", "https://" + "a" * 300 + ".com"])  # fmt: skip
def test_anything_but_an_origin_is_refused(bad):
    with pytest.raises(InvalidOrigin):
        normal_origin(bad)


def test_a_list_loses_repeats_and_keeps_its_order():
    assert normal_origins(["https://b.example", "https://a.example", "https://B.example/"]) == [
        "https://b.example", "https://a.example"]


def test_a_key_allows_a_bounded_number_of_origins():
    with pytest.raises(InvalidOrigin):
        normal_origins([f"https://s{n}.example" for n in range(MAX_ORIGINS_PER_KEY + 1)])
