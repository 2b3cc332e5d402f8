"""moderation-admin's adaptation commands against a real admin listener (uvicorn) and store: what each answers, and
a refusal's exit status."""

from __future__ import annotations

import json

import pytest
from support.api import TEST_THRESHOLDS

from runtime.admin_server import AdminServer
from runtime.cli import main
from runtime.embedded_store import free_port

TOKEN = "cli-admin-token-0123456789abcdef0123"


@pytest.fixture
def cli(redis_url, monkeypatch, capsys):
    server = AdminServer(redis_url=redis_url, admin_token=TOKEN, host="127.0.0.1", port=free_port())
    server.start()
    monkeypatch.setenv("MODERATION_ADMIN_TOKEN", TOKEN)

    def run(*args: str) -> tuple[int, dict]:
        code = main(["--url", server.url, *args])
        return code, json.loads(capsys.readouterr().out)

    yield run
    server.stop()


def test_an_accounts_adaptation_is_read_refitted_backtested_and_reset_from_the_cli(cli, tmp_path):
    profile = tmp_path / "site-b.json"
    profile.write_text(json.dumps({"mode": "enforce", "categories": TEST_THRESHOLDS}))
    assert cli("profiles", "put", "site-b", "--file", str(profile))[0] == 0
    code, status = cli("adaptation", "acme")
    assert code == 0 and (status["active"], status["labels"]) == (False, {"decided": 0, "reported": 0})
    code, refit = cli("refit", "acme", "--profile", "site-b")
    assert code == 0 and refit["profile"] == "site-b" and refit["backtest"]["reason"].startswith("No labels yet")
    code, backtest = cli("backtest", "acme", "site-b")
    assert code == 0 and backtest["suggested_thresholds"] is None and backtest["review"] is None
    code, refused = cli("apply-thresholds", "acme", "site-b")
    assert code == 1 and refused["error"]["code"] == "no_suggested_thresholds"
    assert cli("backtest", "acme", "nosuch")[0] == 1
    assert cli("reset-adaptation", "acme") == (0, {"ok": True})
