"""The dashboard in a real headless Chromium against the real graph: a moderator clears a queue of text and image
items with the keyboard alone, the client sees the decisions; an operator creates a key and changes a threshold in
forms and the public API follows; CSRF, sessions and roles are refused where they must be; a moderator scoped to one
account sees its items and gets a 404 for another account's.

Screenshots of the queue and an item page are taken on the way; with MODERATION_SCREENSHOTS_DIR set (docs/, by hand)
they are written there, as the README's.
"""

from __future__ import annotations

import io
import os
import shutil
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import numpy as np
import pytest
from support.browser import start_chromium
from PIL import Image

from runtime.cli import main

pytestmark = pytest.mark.e2e

PASSWORD = "browser-test-password"
ACCOUNT = "dash-e2e"
WAIT_S = 20
REVIEW_ALL = {"mode": "enforce", "report_threshold": 3, "categories": {
    "nsfw": {"review": 0.0, "block": 1.0}, "toxic": {"review": 0.0, "block": 1.0}}}  # fmt: skip


def _picture() -> bytes:
    """A landscape-like gradient: a stand-in for a client's thumbnail."""
    y, x = np.mgrid[0:240, 0:320]
    pixels = np.stack([x * 255 // 320, 120 + y * 100 // 240, 255 - x * 200 // 320], axis=-1).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def image_host(tmp_path_factory):
    """The client's own image host: a real HTTPS server (self-signed, for 127.0.0.1) the moderator's browser loads the
    preview from; the dashboard shows only https previews."""
    body = _picture()
    folder = tmp_path_factory.mktemp("image-host")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(folder / "key.pem"),
                    "-out", str(folder / "cert.pem")], check=True, capture_output=True)  # fmt: skip
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(folder / "cert.pem", folder / "key.pem")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{server.server_port}/thumbnail.png"
    server.shutdown()


@pytest.fixture(scope="module")
def people(serve_graph, admin_client, admin):
    """A moderator of ACCOUNT and an operator, made with the CLI as an install's first operator is."""
    env = {"MODERATION_ADMIN_TOKEN": admin["Authorization"].split()[1], "MODERATION_USER_PASSWORD": PASSWORD}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        for name, role in (("mia", "moderator"), ("olga", "operator")):
            if name not in admin_client.get("/admin/v1/users").text:
                assert main(["--url", serve_graph["admin_url"], "users", "create", name, "--role", role,
                             "--account", ACCOUNT]) == 0  # fmt: skip
    assert admin_client.put("/admin/v1/profiles/review-all", json=REVIEW_ALL).status_code == 200


@pytest.fixture
def browser():
    driver = start_chromium(trust_any_certificate=True)  # the image host's self-signed certificate
    yield driver
    driver.quit()


def wait_for(driver, css: str):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S).until(ready.presence_of_element_located((By.CSS_SELECTOR, css)))


def wait_url(driver, predicate) -> str:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, WAIT_S).until(lambda d: predicate(d.current_url))
    return driver.current_url


def press(driver, keys: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(keys).perform()


def log_in(driver, admin_url: str, name: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(f"{admin_url}/dashboard/login")
    wait_for(driver, "#name").send_keys(name)
    driver.find_element(By.ID, "password").send_keys(PASSWORD)
    driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    wait_for(driver, "form.whoami")


def screenshot(driver, name: str, tmp_path: Path) -> Path:
    path = tmp_path / name
    assert driver.save_screenshot(str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("MODERATION_SCREENSHOTS_DIR"):
        shutil.copy(path, Path(os.environ["MODERATION_SCREENSHOTS_DIR"]) / name)
    return path


def item_id_of(url: str) -> int:
    return int(url.split("/dashboard/items/")[1].split("?")[0])


def test_a_moderator_clears_a_mixed_queue_with_the_keyboard_and_the_client_sees_each_decision(
    serve_graph, admin_client, client, people, image_host, browser, tmp_path
):
    key = admin_client.post("/admin/v1/keys", json={"account": ACCOUNT, "profile": "review-all", "plan": "default"})
    headers = {"Authorization": f"Bearer {key.json()['key']}"}
    texts = ["You are a complete idiot and everyone knows it.", "Thanks for the quick delivery, works great!"]
    ids = [client.post("/v1/moderate-text", headers=headers, json={"text": text, "reference": f"comment-{n}"})
           .json()["review_id"] for n, text in enumerate(texts)]  # fmt: skip
    files = {"image": ("photo.png", _picture(), "image/png")}
    image = client.post("/v1/moderate", headers=headers, files=files, data={"image_url": image_host,
                                                                             "reference": "upload-7"})  # fmt: skip
    ids.append(image.json()["review_id"])
    assert all(ids), ids

    admin = serve_graph["admin_url"]
    log_in(browser, admin, "mia")
    browser.get(f"{admin}/dashboard/?account={ACCOUNT}")
    wait_for(browser, "table.queue")
    screenshot(browser, "dashboard-queue.png", tmp_path)
    press(browser, "?")
    assert wait_for(browser, "#help[open]").is_displayed()
    press(browser, "\ue00c")  # Escape closes the help
    wait_for(browser, "#help:not([open])")
    press(browser, "j")
    press(browser, "\ue007")  # Enter opens the selected (oldest) item
    assert item_id_of(wait_url(browser, lambda url: "/items/" in url)) == ids[0]
    assert texts[0] in wait_for(browser, "#item-text").text
    screenshot(browser, "dashboard-item.png", tmp_path)
    press(browser, "j")  # next without deciding, and back
    assert item_id_of(wait_url(browser, lambda url: url.split("?")[0].endswith(f"/items/{ids[1]}"))) == ids[1]
    press(browser, "k")
    wait_url(browser, lambda url: url.split("?")[0].endswith(f"/items/{ids[0]}"))
    wait_for(browser, "#approve-form")

    for expected, verdict in zip(ids, "ara"):  # approve, reject, approve: each decision opens the next item
        assert item_id_of(browser.current_url) == expected
        wait_for(browser, "#approve-form")
        if expected == ids[2]:
            assert wait_for(browser, "#preview img").get_attribute("src") == image_host
            assert "blurred" in browser.find_element("id", "preview").get_attribute("class")
            browser.find_element("css selector", "#preview button.reveal").click()  # shown once clicked
            assert "blurred" not in browser.find_element("id", "preview").get_attribute("class")
        press(browser, verdict)
        wait_url(browser, lambda url, done=expected: f"/items/{done}" not in url)
    wait_for(browser, "p.empty")  # the queue of this account is empty

    statuses = [client.get(f"/v1/review/{item_id}", headers=headers).json()["status"] for item_id in ids]
    assert statuses == ["approved", "rejected", "approved"]
    decided = admin_client.get(f"/admin/v1/reviews/{ids[1]}").json()
    assert decided["decided_by"] == "mia" and decided["reason_code"]


def test_an_operator_creates_a_key_and_changes_a_threshold_and_the_public_api_follows(
    serve_graph, admin_client, client, people, browser
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    admin = serve_graph["admin_url"]
    log_in(browser, admin, "olga")
    browser.get(f"{admin}/dashboard/keys")
    wait_for(browser, "input[name=account]").send_keys("dash-op")
    Select(browser.find_element(By.NAME, "profile")).select_by_visible_text("review-all")
    browser.find_element(By.CSS_SELECTOR, "form.row button").click()
    secret = wait_for(browser, "#new-secret").get_attribute("value")
    headers = {"Authorization": f"Bearer {secret}"}
    first = client.post("/v1/moderate-text", headers=headers, json={"text": "have a nice day"})
    assert first.status_code == 200 and first.json()["decision"] == "review"

    browser.get(f"{admin}/dashboard/profiles/review-all")
    for field, value in (("toxic.review", "1"), ("toxic.block", "1")):
        box = wait_for(browser, f"input[name='{field}']")
        box.clear()
        box.send_keys(value)
    browser.find_element(By.CSS_SELECTOR, "form.stack button[type=submit]").click()
    wait_url(browser, lambda url: "saved=1" in url)
    assert client.post("/v1/moderate-text", headers=headers, json={"text": "have a nice day"}).json()["decision"] \
        == "allow"
    assert admin_client.put("/admin/v1/profiles/review-all", json=REVIEW_ALL).status_code == 200  # for a rerun


def test_csrf_sessions_and_roles_are_refused_in_the_browser_and_outside_it(serve_graph, people, browser):
    admin = serve_graph["admin_url"]
    log_in(browser, admin, "mia")
    browser.get(f"{admin}/dashboard/keys")
    assert "for operators" in wait_for(browser, "p.error").text  # a moderator typing an operator URL
    session = browser.get_cookie("moderation_session")
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    with httpx.Client(base_url=admin, cookies={"moderation_session": session["value"]}) as stolen_cookie:
        forged = stolen_cookie.post("/dashboard/settings", data={"blur_images": "on"})
        assert forged.status_code == 403  # the cookie alone, without the page's CSRF token
    with httpx.Client(base_url=admin) as nobody:
        assert nobody.get("/dashboard/").status_code == 303  # no session: to the login page
    with httpx.Client(base_url=admin, cookies={"moderation_session": "made-up"}) as made_up:
        assert made_up.get("/dashboard/").status_code == 303


def test_a_moderator_scoped_to_one_account_sees_its_items_and_gets_a_404_for_another_accounts(
    serve_graph, admin_client, client, people, browser
):
    admin = serve_graph["admin_url"]
    ids = {}
    for account in ("dash-site-a", "dash-site-b"):
        key = admin_client.post("/admin/v1/keys", json={"account": account, "profile": "review-all",
                                                        "plan": "default"}).json()["key"]  # fmt: skip
        ids[account] = client.post("/v1/moderate-text", headers={"Authorization": f"Bearer {key}"},
                                   json={"text": f"a comment on {account}"}).json()["review_id"]  # fmt: skip
    if "moe" not in admin_client.get("/admin/v1/users").text:
        created = admin_client.post("/admin/v1/users", json={"name": "moe", "role": "moderator", "password": PASSWORD,
                                                             "accounts": ["dash-site-a"]})  # fmt: skip
        assert created.status_code == 201, created.text

    log_in(browser, admin, "moe")
    browser.get(f"{admin}/dashboard/")
    wait_for(browser, "table.queue")
    links = [a.get_attribute("href") for a in browser.find_elements("css selector", "a.row-link")]
    assert any(link.endswith(f"/items/{ids['dash-site-a']}") for link in links)
    assert not any(link.endswith(f"/items/{ids['dash-site-b']}") for link in links)
    browser.get(f"{admin}/dashboard/?account=dash-site-b")
    wait_for(browser, "p.empty")

    browser.get(f"{admin}/dashboard/items/{ids['dash-site-b']}")
    assert "No review item" in wait_for(browser, "p.error").text  # the page of an item that does not exist
    session = {"moderation_session": browser.get_cookie("moderation_session")["value"]}
    with httpx.Client(base_url=admin, cookies=session) as moe:
        assert moe.get(f"/dashboard/items/{ids['dash-site-b']}").status_code == 404
        assert moe.get(f"/dashboard/items/{ids['dash-site-a']}").status_code == 200

    browser.get(f"{admin}/dashboard/items/{ids['dash-site-a']}")
    wait_for(browser, "#claim-form button").click()  # claiming is a form, never the page's GET
    wait_for(browser, "#claim-state")
    assert admin_client.get(f"/admin/v1/reviews/{ids['dash-site-b']}").json()["status"] == "pending"
