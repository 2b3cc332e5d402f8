"""A key's widget page: an operator sets the page origins its widget may check from and sees its widget use; the
profile page sets after which warnings "post anyway" is offered."""

from __future__ import annotations

from support.dashboard import ADMIN, post_form

SITE = "https://comments.example"


def test_an_operator_sets_a_keys_origins_and_sees_its_widget_use(api, olga):
    created = api.client.post("/admin/v1/keys", json={"account": "shop", "profile": "default", "plan": "default"},
                              headers=ADMIN).json()  # fmt: skip
    page = f"/dashboard/keys/{created['id']}/widget"
    assert f'href="{page}"' in olga.get("/dashboard/keys").text
    saved = post_form(olga, page, page, origins=f"{SITE}/\nhttps://www.example.com:443")
    assert saved.status_code == 303
    server_key = {"Authorization": f"Bearer {created['key']}"}
    token = api.client.post("/v1/widget/tokens", json={}, headers=server_key).json()["token"]
    for origin in (SITE, "https://evil.example"):
        api.client.post("/v1/widget/check-text", json={"text": "hi"},
                        headers={"Authorization": f"Bearer {token}", "Origin": origin})  # fmt: skip
    shown = olga.get(page).text
    assert f"{SITE}\nhttps://www.example.com</textarea>" in shown
    assert "<td>1</td><td>1</td><td>1</td>" in shown  # a token, a check, a check refused for its origin
    refused = post_form(olga, page, page, origins="https://x.example/path")
    assert refused.status_code == 400 and "Not saved" in refused.text
    assert post_form(olga, "/dashboard/keys/key_nope/widget", page, origins=SITE).status_code == 404


def test_the_profile_page_sets_after_which_warnings_post_anyway_is_offered(api, olga):
    form = {"mode": "enforce", "report_threshold": "3", "keep_review_text": "on", "nsfw.enabled": "on",
            "nsfw.review": "0.4", "nsfw.block": "0.8", "toxic.enabled": "on", "toxic.review": "0.5",
            "toxic.block": "0.8", "widget_post_anyway.shown": "1", "widget_post_anyway.block": "on"}  # fmt: skip
    assert 'name="widget_post_anyway.review"' in olga.get("/dashboard/profiles/default").text
    assert post_form(olga, "/dashboard/profiles/default", "/dashboard/profiles/default", **form).status_code == 303
    assert api.client.get("/admin/v1/profiles/default", headers=ADMIN).json()["widget_post_anyway"] == ["block"]
    del form["widget_post_anyway.shown"]  # a form without the fieldset keeps what the profile has
    assert post_form(olga, "/dashboard/profiles/default", "/dashboard/profiles/default", **form).status_code == 303
    assert api.client.get("/admin/v1/profiles/default", headers=ADMIN).json()["widget_post_anyway"] == ["block"]
