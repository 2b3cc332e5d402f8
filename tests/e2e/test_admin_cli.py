"""The admin CLI against the running graph: keys, plans, profiles, review decisions and the audit log."""

from __future__ import annotations

import json

import pytest

from runtime.cli import main

pytestmark = pytest.mark.e2e


@pytest.fixture
def cli(serve_graph, monkeypatch, capsys, admin):
    monkeypatch.setenv("MODERATION_ADMIN_TOKEN", admin["Authorization"].split()[1])

    def run(*args: str) -> tuple[int, dict]:
        code = main(["--url", serve_graph["admin_url"], *args])
        return code, json.loads(capsys.readouterr().out)

    return run


def test_cli_creates_and_revokes_a_key(cli, client):
    code, created = cli("keys", "create", "--account", "cli-co")
    assert code == 0 and created["account"] == "cli-co"
    headers = {"Authorization": f"Bearer {created['key']}"}
    assert client.post("/v1/moderate-text", headers=headers, json={"text": "hello"}).status_code == 200
    assert cli("usage", "cli-co")[1]["used"] == 1
    assert cli("keys", "revoke", created["id"])[0] == 0
    assert client.post("/v1/moderate-text", headers=headers, json={"text": "hello"}).status_code == 401


def test_cli_puts_a_profile_from_a_file_and_decides_reviews(cli, client, tmp_path):
    profile = tmp_path / "everything-reviewed.yaml"
    profile.write_text(
        "mode: review\nreport_threshold: 0\ncategories:\n"
        "  nsfw: {review: 0.0, block: 1.0}\n  toxic: {review: 0.0, block: 1.0}\n"
    )
    assert cli("profiles", "put", "everything-reviewed", "--file", str(profile))[0] == 0
    _, created = cli("keys", "create", "--account", "cli-review", "--profile", "everything-reviewed")
    headers = {"Authorization": f"Bearer {created['key']}"}
    review_id = client.post("/v1/moderate-text", headers=headers, json={"text": "hello"}).json()["review_id"]

    _, listed = cli("reviews", "list", "--account", "cli-review", "--status", "pending")
    assert [item["id"] for item in listed["items"]] == [review_id]
    assert cli("reviews", "decide", str(review_id), "approved")[0] == 0
    assert client.get(f"/v1/review/{review_id}", headers=headers).json()["status"] == "approved"
    code, refused = cli("reviews", "decide", str(review_id), "rejected")
    assert code == 1 and refused["error"]["code"] == "already_decided"


def test_cli_reads_the_audit_log_of_its_changes_without_their_secrets(cli, serve_graph):
    _, created = cli("keys", "create", "--account", "cli-audit")
    assert cli("keys", "revoke", created["id"])[0] == 0
    code, page = cli("audit", "--limit", "2")
    assert code == 0
    assert [(e["action"], e["target"], e["status"]) for e in page["entries"]] == [
        ("DELETE /admin/v1/keys/{key_id}", created["id"], 204),
        ("POST /admin/v1/keys", created["id"], 201),
    ]
    assert all(e["actor"] == "admin-token" and e["source"] == "127.0.0.1" for e in page["entries"])
    _, older = cli("audit", "--limit", "1", "--before", page["next_before"])
    assert older["entries"] and older["entries"][0]["id"] not in {e["id"] for e in page["entries"]}
    assert created["key"] not in json.dumps(page) + json.dumps(older)
