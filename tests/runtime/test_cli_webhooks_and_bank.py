"""moderation-admin's webhooks and hashbank commands against a real admin listener (uvicorn) and store."""

from __future__ import annotations

import json

import pytest

from webhooks.deliveries import WebhookRules
from runtime.admin_server import AdminServer
from runtime.cli import main
from runtime.embedded_store import free_port

TOKEN = "cli-admin-token-0123456789abcdef0123"


@pytest.fixture
def cli(redis_url, monkeypatch, capsys):
    server = AdminServer(redis_url=redis_url, admin_token=TOKEN, host="127.0.0.1", port=free_port(),
                         webhook_rules=WebhookRules(allow_private=True))  # fmt: skip
    server.start()
    monkeypatch.setenv("MODERATION_ADMIN_TOKEN", TOKEN)

    def run(*args: str) -> tuple[int, str]:
        code = main(["--url", server.url, *args])
        return code, capsys.readouterr().out

    yield run
    server.stop()


def test_a_webhook_endpoint_is_created_disabled_and_listed_from_the_cli(cli):
    code, out = cli("webhooks", "create", "acme", "http://127.0.0.1:9/hook", "--events", "review.decided")
    created = json.loads(out)
    assert code == 0 and created["secret"].startswith("whsec_") and created["events"] == ["review.decided"]
    assert cli("webhooks", "disable", created["id"])[0] == 0
    [listed] = json.loads(cli("webhooks", "list", "acme")[1])["endpoints"]
    assert listed["enabled"] is False and "secret" not in listed
    code, out = cli("webhooks", "create", "acme", "ftp://example.com/")
    assert code == 1 and json.loads(out)["error"]["code"] == "invalid_request"


def test_a_bank_is_imported_exported_and_a_hash_removed_from_the_cli(cli, tmp_path):
    hashes = ["ab" * 32, "cd" * 32]
    source = tmp_path / "in.csv"
    source.write_text("".join(f"{h},,2026-11-25T00:00:00+0000,peer\n" for h in hashes))
    code, out = cli("hashbank", "import", "acme", str(source))
    assert code == 0 and json.loads(out)["added"] == 2
    code, exported = cli("hashbank", "export", "acme")
    assert code == 0 and sorted(line.split(",")[0] for line in exported.splitlines()) == hashes
    assert cli("hashbank", "remove", "acme", hashes[0])[0] == 0
    assert [e["hash"] for e in json.loads(cli("hashbank", "list", "acme")[1])["entries"]] == [hashes[1]]
