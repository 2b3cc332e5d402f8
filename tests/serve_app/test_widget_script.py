"""widget.js in a real headless Chromium, where the service cannot answer: the form is never held. The script is the
real file, served as the service serves it; then that server stops (unreachable) or answers too late (a timeout).
The answered cases run against the real graph in tests/e2e/test_widget_browser.py."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest
from support.browser import start_chromium

from serve_app.routes_widget import WIDGET_JS

WAIT_S = 20
SLOW_S = 5
PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Comments</title></head><body>
<form method="post" action="/comments"><textarea id="comment" name="comment" data-moderation-check></textarea>
<button id="post">Post</button></form>
<script src="{service}/v1/widget.js" data-token="wt_test" data-timeout-ms="500" defer></script></body></html>"""


def serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Quiet(BaseHTTPRequestHandler):
    def answer(self, status: int, body: bytes, content_type: str, headers: dict | None = None):
        self.send_response(status)
        for name, value in {"Content-Type": content_type, "Content-Length": str(len(body)), **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def service():
    """The widget's script as the service serves it; a check is answered after SLOW_S (past the widget's timeout)."""

    class Service(Quiet):
        def do_GET(self):
            self.answer(200, WIDGET_JS.read_bytes(), "text/javascript")

        def do_OPTIONS(self):
            self.answer(204, b"", "text/plain", {"Access-Control-Allow-Origin": self.headers["Origin"],
                                                 "Access-Control-Allow-Headers": "authorization, content-type"})

        def do_POST(self):
            time.sleep(SLOW_S)
            self.answer(200, b'{"decision": "block"}', "application/json",
                        {"Access-Control-Allow-Origin": self.headers["Origin"]})  # fmt: skip

    server = serve(Service)
    yield server
    server.shutdown()


@pytest.fixture
def site(service):
    posts: list[dict] = []

    class Site(Quiet):
        def do_GET(self):
            self.answer(200, PAGE.format(service=f"http://127.0.0.1:{service.server_port}").encode(), "text/html")

        def do_POST(self):
            posts.append(parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode()))
            self.answer(200, b'<p id="posted">Posted</p>', "text/html")

    server = serve(Site)
    yield f"http://127.0.0.1:{server.server_port}", posts
    server.shutdown()


@pytest.fixture
def browser():
    driver = start_chromium()
    yield driver
    driver.quit()


def open_page(browser, url: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url)
    WebDriverWait(browser, WAIT_S).until(lambda d: d.execute_script("return document.readyState") == "complete")


def post_comment(browser) -> float:
    """Types and posts a comment; the seconds until the site answered the post."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.find_element(By.ID, "comment").send_keys("Hello there")
    started = time.monotonic()
    browser.find_element(By.ID, "post").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_elements(By.ID, "posted"))
    return time.monotonic() - started


def test_a_service_that_answers_too_late_never_holds_the_form(browser, site):
    url, posts = site
    open_page(browser, url)
    assert post_comment(browser) < SLOW_S  # posted at the widget's 0.5 s timeout, not at the late answer
    assert posts[-1]["comment"] == ["Hello there"]
    assert posts[-1].get("moderation_verdict_comment", [""]) == [""]  # no verdict: the backend decides


def test_an_unreachable_service_never_holds_the_form(browser, site, service):
    url, posts = site
    open_page(browser, url)
    service.shutdown()
    service.server_close()  # the script is loaded; the service's port now refuses connections
    post_comment(browser)
    assert posts[-1]["comment"] == ["Hello there"]
    assert posts[-1].get("moderation_verdict_comment", [""]) == [""]
