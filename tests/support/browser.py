"""A real headless Chromium for the dashboard's browser tests: Debian's `chromium`, driven by Selenium through
Debian's `/usr/bin/chromedriver` (no browser or driver download, so it works offline).

`make test` installs the two packages where apt-get can (Makefile: browser); where neither they nor apt-get are
there, the browser tests skip and say why.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("MODERATION_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("MODERATION_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
WINDOW = (1280, 860)


def missing() -> str | None:
    """Why no browser can run here, or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (Path(path).exists() and os.access(path, os.X_OK)):
            return f"{path} is not installed (apt-get install -y chromium chromium-driver; `make test` does)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (the `test` extra; `make install`)"
    return None


def start_chromium(*, trust_any_certificate: bool = False, performance_log: bool = False):
    """`trust_any_certificate`: for a test's own https server on loopback with a self-signed certificate.
    `performance_log`: keep the DevTools network events, for `driver.get_log("performance")`."""
    reason = missing()
    if reason:
        pytest.skip(f"no browser for the dashboard tests: {reason}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 f"--window-size={WINDOW[0]},{WINDOW[1]}", "--disable-extensions", "--no-first-run",
                 "--force-device-scale-factor=1"):  # fmt: skip
        options.add_argument(flag)
    if trust_any_certificate:
        options.add_argument("--ignore-certificate-errors")
    if performance_log:
        options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
