"""Debian's Chromium driven by Playwright (no browser download), for the tests of the page at `/api/ui`.

Importing this module skips the importing test module, loudly, where no Chromium is installed (`make
install-browser` installs it with apt; CI runs it). Use: `from ui_browser import chromium, chromium_page` (the
fixtures `browser` and `page`)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:  # pragma: no cover - CI installs it
    pytest.skip("NO CHROMIUM: the browser tests of /api/ui did not run (make install-browser)", allow_module_level=True)
from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

TIMEOUT_MS = 60_000
expect.set_options(timeout=TIMEOUT_MS)
# Chromium as root in a sandbox-less container, with no network beyond loopback (see the tool library's notes).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update"]


@pytest.fixture(scope="module", name="browser")
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(name="page")
def chromium_page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(TIMEOUT_MS)
    yield opened
    context.close()
