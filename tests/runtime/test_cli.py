"""moderation-admin: the requests its commands make (the e2e test drives it against the real admin listener)."""

from __future__ import annotations

from runtime.cli import _parser, _request


def test_audit_reads_the_log_page_by_page():
    assert _request(_parser().parse_args(["audit", "--limit", "5"])) == (
        "GET", "/admin/v1/audit", {"params": {"limit": 5}})
    assert _request(_parser().parse_args(["audit", "--before", "17-0"])) == (
        "GET", "/admin/v1/audit", {"params": {"limit": 100, "before": "17-0"}})
