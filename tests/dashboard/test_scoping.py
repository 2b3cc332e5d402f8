"""Moderators scoped to accounts: an operator assigns each moderator the accounts they work on, and everything that
shows or decides review items keeps to them (queue, filters, item pages, claims, decisions, the audit log); another
account's item is a 404, like one that does not exist. A moderator with no accounts sees nothing; operators see all."""

from __future__ import annotations

import re

import pytest
from support.dashboard import ADMIN, log_in, make_user, post_form

REVIEW_TOXIC = 0.6


@pytest.fixture
def items(api, backends) -> dict[str, int]:
    """One pending text item in each of the accounts site-a and site-b."""
    backends.toxic = REVIEW_TOXIC
    return {account: api.moderate_text(api.new_key(account=account), f"text of {account}").json()["review_id"]
            for account in ("site-a", "site-b")}  # fmt: skip


def item_ids_of(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'href="/dashboard/items/(\d+)', html)]


def signed_in(client, name: str, role: str = "moderator", accounts: list[str] | None = None):
    client.cookies.clear()
    make_user(client, name, role, accounts)
    assert log_in(client, name).status_code == 303
    return client


def test_a_moderator_sees_only_their_accounts_items_in_the_queue_and_its_filters(client, items):
    mia = signed_in(client, "mia", accounts=["site-a"])
    assert item_ids_of(mia.get("/dashboard/").text) == [items["site-a"]]
    assert item_ids_of(mia.get("/dashboard/?account=site-b").text) == []
    assert item_ids_of(mia.get("/dashboard/?account=site-a").text) == [items["site-a"]]


def test_another_accounts_item_is_a_404_like_a_missing_one_for_reading_claiming_and_deciding(api, client, items):
    mia = signed_in(client, "mia", accounts=["site-a"])
    other, missing = mia.get(f"/dashboard/items/{items['site-b']}"), mia.get("/dashboard/items/999999")
    assert other.status_code == missing.status_code == 404
    said = [re.search(r'class="error"[^>]*>([^<]*)<', page.text).group(1) for page in (other, missing)]
    assert said[0].replace(str(items["site-b"]), "N") == said[1].replace("999999", "N")
    page = f"/dashboard/items/{items['site-a']}"
    assert post_form(mia, f"/dashboard/items/{items['site-b']}/claim", page).status_code == 404
    refused = post_form(mia, f"/dashboard/items/{items['site-b']}/reject", page, reason_code="harassment")
    assert refused.status_code == 404
    assert api.client.get(f"/admin/v1/reviews/{items['site-b']}", headers=ADMIN).json()["status"] == "pending"
    assert post_form(mia, f"{page}/reject", page, reason_code="harassment").status_code == 303


def test_a_moderator_with_no_accounts_sees_nothing_and_an_operator_sees_everything(client, items):
    noor = signed_in(client, "noor")
    queue = noor.get("/dashboard/").text
    assert item_ids_of(queue) == [] and "No accounts are assigned to you" in queue
    assert noor.get(f"/dashboard/items/{items['site-a']}").status_code == 404
    olga = signed_in(client, "olga", "operator")
    assert item_ids_of(olga.get("/dashboard/").text) == [items["site-a"], items["site-b"]]
    assert olga.get(f"/dashboard/items/{items['site-b']}").status_code == 200


def test_an_operator_assigns_accounts_on_the_users_page_and_they_apply_at_the_moderators_next_request(
    client, client_from, items
):
    mia = signed_in(client, "mia", accounts=["site-a"])
    olga = signed_in(client_from("198.51.100.5"), "olga", "operator")
    assert 'value="site-a"' in olga.get("/dashboard/users").text
    assert post_form(olga, "/dashboard/users/mia/assign", "/dashboard/users", role="moderator",
                     accounts="site-b").status_code == 303  # fmt: skip
    assert item_ids_of(mia.get("/dashboard/").text) == [items["site-b"]]
    assert mia.get(f"/dashboard/items/{items['site-a']}").status_code == 404
    too_many = ",".join(f"a{n}" for n in range(101))
    assert post_form(olga, "/dashboard/users/mia/assign", "/dashboard/users", role="moderator",
                     accounts=too_many).status_code == 400  # fmt: skip
    assert post_form(olga, "/dashboard/users/olga/assign", "/dashboard/users", role="moderator",
                     accounts="").status_code == 400  # not their own role  # fmt: skip


def test_a_moderator_sees_the_audit_entries_of_their_accounts_and_their_own_never_another_accounts(client, items):
    olga = signed_in(client, "olga", "operator")
    post_form(olga, f"/dashboard/items/{items['site-b']}/reject", f"/dashboard/items/{items['site-b']}",
              reason_code="harassment")  # fmt: skip
    mia = signed_in(client, "mia", accounts=["site-a"])
    post_form(mia, f"/dashboard/items/{items['site-a']}/approve", f"/dashboard/items/{items['site-a']}",
              reason_code="false_positive")  # fmt: skip
    noor = signed_in(client, "noor", accounts=["site-a"])
    page = noor.get("/dashboard/audit").text
    assert "/approve" in page and "user:mia" in page  # a decision on site-a, by a colleague
    assert "/reject" not in page and "/admin/v1/users" not in page  # site-b's, and an operator's change
    assert "/reject" in signed_in(client, "oscar", "operator").get("/dashboard/audit").text
    entry = client.get("/admin/v1/audit", headers=ADMIN).json()["entries"]
    assert any(e["account"] == "site-a" and e["action"].endswith("/approve") for e in entry)


def test_an_admin_token_decision_is_audited_with_its_account_so_that_accounts_moderators_see_it(client, items):
    decided = client.post(f"/admin/v1/reviews/{items['site-a']}/decision", json={"status": "approved"}, headers=ADMIN)
    assert decided.status_code == 200
    entry = client.get("/admin/v1/audit", headers=ADMIN).json()["entries"][0]
    assert (entry["actor"], entry["account"]) == ("admin-token", "site-a")
    assert "admin-token" in signed_in(client, "mia", accounts=["site-a"]).get("/dashboard/audit").text
    assert "admin-token" not in signed_in(client, "noor", accounts=["site-b"]).get("/dashboard/audit").text
