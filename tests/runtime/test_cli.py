"""moderation-admin: the requests its commands make (the e2e test drives it against the real admin listener)."""

from __future__ import annotations

from runtime.cli import _parser, _request


def test_audit_reads_the_log_page_by_page():
    assert _request(_parser().parse_args(["audit", "--limit", "5"])) == (
        "GET", "/admin/v1/audit", {"params": {"limit": 5}})
    assert _request(_parser().parse_args(["audit", "--before", "17-0"])) == (
        "GET", "/admin/v1/audit", {"params": {"limit": 100, "before": "17-0"}})


def test_webhook_commands_make_the_admin_apis_requests():
    def request(*argv):
        return _request(_parser().parse_args(list(argv)))

    assert request("webhooks", "create", "acme", "https://h.example/x", "--events", "review.decided") == (
        "POST", "/admin/v1/accounts/acme/webhooks",
        {"json": {"url": "https://h.example/x", "events": ["review.decided"], "description": ""}})
    assert request("webhooks", "list", "acme") == ("GET", "/admin/v1/accounts/acme/webhooks", {})
    assert request("webhooks", "disable", "whk_1") == (
        "PATCH", "/admin/v1/webhooks/whk_1", {"json": {"enabled": False}})
    assert request("webhooks", "rotate-secret", "whk_1") == ("POST", "/admin/v1/webhooks/whk_1/rotate-secret", {})
    assert request("webhooks", "deliveries", "whk_1") == ("GET", "/admin/v1/webhooks/whk_1/deliveries", {})
    assert request("webhooks", "redeliver", "whk_1", "msg_a_1") == (
        "POST", "/admin/v1/webhooks/whk_1/deliveries/msg_a_1/redeliver", {})
    assert request("webhooks", "delete", "whk_1") == ("DELETE", "/admin/v1/webhooks/whk_1", {})


def test_hash_bank_commands_make_the_admin_apis_requests(tmp_path):
    csv = tmp_path / "bank.csv"
    csv.write_text("ab" * 32 + ",,,\n")

    def request(*argv):
        return _request(_parser().parse_args(list(argv)))

    assert request("hashbank", "list", "acme") == (
        "GET", "/admin/v1/accounts/acme/hash-bank", {"params": {"limit": 100}})
    assert request("hashbank", "remove", "acme", "ab" * 32) == (
        "DELETE", f"/admin/v1/accounts/acme/hash-bank/{'ab' * 32}", {})
    assert request("hashbank", "export", "acme") == ("GET", "/admin/v1/accounts/acme/hash-bank/export", {})
    assert request("hashbank", "import", "acme", str(csv)) == (
        "POST", "/admin/v1/accounts/acme/hash-bank/import",
        {"content": csv.read_bytes(), "headers": {"content-type": "text/csv"}})


def test_user_commands_assign_a_moderators_accounts_and_role(monkeypatch):
    def request(*argv):
        return _request(_parser().parse_args(list(argv)))

    monkeypatch.setenv("MODERATION_USER_PASSWORD", "a-long-enough-password")
    assert request("users", "create", "mia", "--account", "site-a", "--account", "site-b") == (
        "POST", "/admin/v1/users", {"json": {"name": "mia", "role": "moderator", "password": "a-long-enough-password",
                                             "accounts": ["site-a", "site-b"]}})
    assert request("users", "assign", "mia", "--account", "site-c") == (
        "PATCH", "/admin/v1/users/mia", {"json": {"accounts": ["site-c"]}})
    assert request("users", "assign", "mia", "--role", "operator") == (
        "PATCH", "/admin/v1/users/mia", {"json": {"role": "operator"}})


def test_widget_commands_set_a_keys_origins_and_read_its_widget_use():
    def request(*argv):
        return _request(_parser().parse_args(list(argv)))

    assert request("keys", "widget-origins", "key_1", "https://a.example", "https://b.example") == (
        "PUT", "/admin/v1/keys/key_1/widget", {"json": {"origins": ["https://a.example", "https://b.example"]}})
    assert request("keys", "widget-origins", "key_1") == ("PUT", "/admin/v1/keys/key_1/widget", {"json": {"origins": []}})
    assert request("keys", "widget", "key_1") == ("GET", "/admin/v1/keys/key_1/widget", {})


def test_adaptation_commands_make_the_admin_apis_requests():
    def request(*argv):
        return _request(_parser().parse_args(list(argv)))

    assert request("adaptation", "acme") == ("GET", "/admin/v1/accounts/acme/text-adaptation", {})
    assert request("refit", "acme") == ("POST", "/admin/v1/accounts/acme/text-adaptation/refit", {})
    assert request("refit", "acme", "--profile", "site-b") == (
        "POST", "/admin/v1/accounts/acme/text-adaptation/refit", {"params": {"profile": "site-b"}})
    assert request("backtest", "acme", "site-b") == ("GET", "/admin/v1/accounts/acme/profiles/site-b/backtest", {})
    assert request("apply-thresholds", "acme", "site-b") == (
        "POST", "/admin/v1/accounts/acme/profiles/site-b/backtest/apply", {})
    assert request("reset-adaptation", "acme") == ("DELETE", "/admin/v1/accounts/acme/text-adaptation", {})
