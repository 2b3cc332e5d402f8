"""The site adaptation page: an account's correction and a profile's backtest on its labels (kept in the store as
the service keeps them: decided review items with label evidence, and reports), the chart drawn as inline SVG, the
operators' actions (refit, reset, apply the suggested thresholds) behind CSRF, and a moderator's view of their own
accounts only. Also the profile form's adaptation fields and the item page's audit reason."""

from __future__ import annotations

import asyncio
import json
import re
from html import unescape

import numpy as np
import pytest
from support.dashboard import ADMIN, csrf_of, log_in, make_user, post_form

from adaptation.labels import Label, evidence_document
from serve_app.services import Services

PAGE = "/dashboard/accounts/site-a/adaptation"
REVIEW, BLOCK = 0.5, 0.8  # the test profile's toxic thresholds (tests/support/api.py TEST_THRESHOLDS)


def keep_labels(redis_url: str, account: str, decided: list[tuple[float, bool, str]], reported: int = 0) -> list[int]:
    """Labels as the service keeps them: for each (served toxic score, harmful, how seen), a text item queued with
    its label evidence and decided; then `reported` harmful reports. Answers the items' ids."""

    async def keep() -> list[int]:
        services = Services.connect(redis_url, None)
        rng, ids = np.random.default_rng(0), []
        try:
            for score, harmful, seen in decided:
                evidence = evidence_document(rng.normal(size=512).astype(np.float32), score, seen=seen,
                                             sampling_rate=0.1 if seen == "audit" else 1.0, language="en",
                                             profile="default", scores={})  # fmt: skip
                item = await services.reviews.create(
                    account=account, reason="audit" if seen == "audit" else "model_flagged", kind="text",
                    reference=f"post-{len(ids)}", image_url=None, scores={"toxic": score}, model_version="stub",
                    profile="default", text="a text", evidence=json.dumps(evidence))  # fmt: skip
                await services.reviews.decide(item.id, "rejected" if harmful else "approved", decided_by="mia",
                                              reason_code="harassment" if harmful else "not_a_violation")  # fmt: skip
                ids.append(item.id)
            for i in range(reported):
                await services.labels.add_reported(account, Label(rng.normal(size=512).astype(np.float32), -2.0,
                                                                  True, "report", 1.0, "en", 1.0 + i, "default"))
        finally:
            await services.redis.aclose()
        return ids

    return asyncio.run(keep())


def a_sites_labels() -> list[tuple[float, bool, str]]:
    """Flagged texts (decided both ways) and audited allowed ones, harmful ones scoring higher on the whole."""
    flagged = [(0.55 + 0.03 * i, i % 3 != 0, "flagged") for i in range(14)]
    audits = [(0.04 + 0.03 * i, i in (9, 12), "audit") for i in range(14)]
    return flagged + audits


@pytest.fixture
def labelled(redis_url, api) -> list[int]:
    return keep_labels(redis_url, "site-a", a_sites_labels(), reported=2)


def signed_in(client, name: str, role: str = "moderator", accounts: list[str] | None = None):
    client.cookies.clear()
    make_user(client, name, role, accounts)
    assert log_in(client, name).status_code == 303
    return client


def toxic_of(api, profile: str = "default") -> dict:
    return api.client.get(f"/admin/v1/profiles/{profile}", headers=ADMIN).json()["categories"]["toxic"]


def test_an_operator_sees_the_correction_the_backtest_and_its_chart_as_inline_svg(labelled, olga):
    page = olga.get(f"{PAGE}?profile=default")
    assert page.status_code == 200
    html = page.text
    assert re.search(r'id="label-counts">28 decided,\s+2 reported<', html)
    assert re.search(r'id="correction-live">no', html) and "Not fitted yet." in html
    table = re.search(r'<table id="backtest-table">(.*?)</table>', html, re.S).group(1)
    assert [row[:2] for row in re.findall(r'<th scope="row">([^<]+)</th><td>([^<]*)</td>', table)] == [
        ("Current review", str(REVIEW)), ("Current block", str(BLOCK)), ("Suggested review", re.search(
            r'review at <strong>([\d.]+)</strong>', html).group(1)), ("Suggested block", re.search(
            r'block at\s+<strong>([\d.]+)</strong>', html).group(1))]  # fmt: skip
    assert "Target: at most 10.0% of fine texts flagged" in table
    points = re.search(r'<polyline id="chart-curve" points="([^"]+)"', html).group(1).split()
    assert len(points) > 10 and all(re.fullmatch(r"[\d.]+,[\d.]+", p) for p in points)
    assert re.search(r'<g class="mark-current">.*?current review 0\.5<', html, re.S)
    assert re.search(r'<g class="mark-suggested">.*?suggested review [\d.]+<', html, re.S)
    assert 'id="apply-form"' in html and 'id="reset-form"' in html and 'id="refit-form"' in html
    # The CSP allows no inline style, so the chart is drawn with presentation attributes only; nothing external.
    csp = page.headers["content-security-policy"]
    assert "style-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'self'" in csp
    assert " style=" not in html and not re.search(r'(src|href)="https?:', html)


def test_the_accounts_page_and_the_nav_link_to_the_page(labelled, api, olga):
    api.new_key(account="site-a")
    assert 'href="/dashboard/accounts/site-a/adaptation"' in olga.get("/dashboard/accounts").text
    index = olga.get("/dashboard/adaptation").text
    assert 'href="/dashboard/adaptation"' in index and f'<a href="{PAGE}">site-a</a>' in index


def test_applying_the_suggested_thresholds_moves_the_profile_and_needs_the_csrf_token(labelled, api, olga):
    suggested = api.client.get("/admin/v1/accounts/site-a/profiles/default/backtest",
                               headers=ADMIN).json()["suggested_thresholds"]  # fmt: skip
    assert suggested["review"] != REVIEW
    refused = olga.post(f"{PAGE}/apply", data={"profile": "default"}, follow_redirects=False)
    assert refused.status_code == 403 and toxic_of(api)["review"] == REVIEW
    applied = post_form(olga, f"{PAGE}/apply", PAGE, profile="default")
    assert applied.status_code == 303 and applied.headers["location"] == f"{PAGE}?profile=default&done=applied"
    assert (toxic_of(api)["review"], toxic_of(api)["block"]) == (suggested["review"], suggested["block"])
    shown = olga.get(applied.headers["location"]).text
    assert "The suggested thresholds are applied" in shown
    assert re.search(rf'<th scope="row">toxic</th><td>{suggested["review"]}</td><td>{suggested["block"]}</td>', shown)
    entries = api.client.get("/admin/v1/audit", headers=ADMIN).json()["entries"]
    assert [(e["action"], e["target"], e["actor"], e["status"]) for e in entries if "apply" in e["action"]] == [
        ("POST /dashboard/accounts/{account}/adaptation/apply", "default", "user:olga", 303),
        ("POST /dashboard/accounts/{account}/adaptation/apply", "site-a", "user:olga", 403)]  # newest first


def test_the_page_says_why_nothing_can_be_suggested_and_apply_is_refused(redis_url, api, olga):
    keep_labels(redis_url, "site-a", [(0.6 + 0.02 * i, True, "flagged") for i in range(5)])
    html = olga.get(PAGE).text
    assert re.search(r"Nothing to suggest:\s+No fine labels", html) and 'id="apply-form"' not in html
    assert 'id="chart-curve"' not in html  # no fine label: no benign-flagged share to draw against
    refused = post_form(olga, f"{PAGE}/apply", PAGE, profile="default")
    assert refused.status_code == 409 and "No fine labels" in refused.text and toxic_of(api)["review"] == REVIEW


def test_refit_fits_now_and_reset_erases_only_when_confirmed(labelled, api, olga):
    refit = post_form(olga, f"{PAGE}/refit", PAGE, profile="default")
    assert refit.status_code == 303
    html = olga.get(refit.headers["location"]).text
    assert "Refitted on all of the account" in html and "Not fitted yet." not in html
    fitted = api.client.get("/admin/v1/accounts/site-a/text-adaptation", headers=ADMIN).json()
    shown = re.search(r'id="correction-reason">([^<]*)<', html).group(1)
    assert fitted["fitted_at"] and unescape(shown) == fitted["reason"]  # live or not, and why
    assert post_form(olga, f"{PAGE}/reset", PAGE, profile="default").status_code == 400
    assert re.search(r'id="label-counts">28 decided', olga.get(PAGE).text)
    reset = post_form(olga, f"{PAGE}/reset", PAGE, profile="default", confirm="yes")
    assert reset.status_code == 303
    html = olga.get(reset.headers["location"]).text
    assert re.search(r'id="label-counts">0 decided,\s+0 reported<', html) and "Not fitted yet." in html


def test_a_moderator_sees_only_their_accounts_status_and_may_not_act(labelled, api, client):
    mia = signed_in(client, "mia", accounts=["site-a"])
    own = mia.get(PAGE)
    assert own.status_code == 200 and re.search(r'id="label-counts">28 decided', own.text)
    assert 'id="backtest-table"' not in own.text and 'action="/dashboard/accounts' not in own.text
    other, unknown = mia.get("/dashboard/accounts/site-b/adaptation"), mia.get("/dashboard/accounts/nobody/adaptation")
    assert other.status_code == unknown.status_code == 404
    said = [re.search(r'class="error"[^>]*>([^<]*)<', page.text).group(1) for page in (other, unknown)]
    assert said[0].replace("site-b", "X") == said[1].replace("nobody", "X")
    token = csrf_of(own.text)
    for action in ("apply", "refit", "reset"):
        refused = mia.post(f"{PAGE}/{action}", data={"csrf_token": token, "profile": "default", "confirm": "yes"},
                           follow_redirects=False)  # fmt: skip
        assert refused.status_code == 403, action
    assert toxic_of(api)["review"] == REVIEW and re.search(r'id="label-counts">28 decided', mia.get(PAGE).text)
    assert re.findall(r'<a href="/dashboard/accounts/([^/]+)/adaptation">', mia.get("/dashboard/adaptation").text) == [
        "site-a"]


def test_the_profile_form_sets_the_audit_rate_and_target_and_keeps_them_when_left_out(api, olga):
    form = {"mode": "enforce", "report_threshold": "3", "keep_review_text": "on", "nsfw.enabled": "on",
            "nsfw.review": "0.4", "nsfw.block": "0.8", "toxic.enabled": "on", "toxic.review": "0.5",
            "toxic.block": "0.8"}  # fmt: skip
    path = "/dashboard/profiles/default"
    assert 'name="audit_rate"' in olga.get(path).text
    for bad in ({"audit_rate": "1.5"}, {"target_benign_flagged": "0"}, {"audit_rate": "x"}):
        assert post_form(olga, path, path, **form, **bad).status_code == 400, bad
    assert post_form(olga, path, path, **form, audit_rate="0.05", target_benign_flagged="0.2").status_code == 303
    assert post_form(olga, path, path, **form).status_code == 303  # a form without them keeps them
    saved = api.client.get("/admin/v1/profiles/default", headers=ADMIN).json()
    assert (saved["audit_rate"], saved["target_benign_flagged"]) == (0.05, 0.2)


def test_an_audit_item_says_so_and_the_queue_filters_audits(redis_url, api, olga):
    async def queue_audit() -> int:
        services = Services.connect(redis_url, None)
        try:
            item = await services.reviews.create(account="site-a", reason="audit", kind="text", reference="post-1",
                                                 image_url=None, scores={"toxic": 0.1}, model_version="stub")
        finally:
            await services.redis.aclose()
        return item.id

    item_id = asyncio.run(queue_audit())
    page = olga.get(f"/dashboard/items/{item_id}").text
    assert 'id="item-reason">audit (random sample of unreviewed content)<' in page
    queue = olga.get("/dashboard/?reason=audit")
    assert queue.status_code == 200 and f'href="/dashboard/items/{item_id}' in queue.text
