"""A real headless Chromium (the system's, e.g. Debian's ``chromium``) driven by Playwright's Python
package; no browser is downloaded. Outside CI a machine without either skips these tests with the
reason; in CI (``CI=true``) their absence fails, since ``.ci/run`` installs both."""

from __future__ import annotations

import os
from typing import Any, Iterator

import pytest

from tests.support.browser import chromium

TIMEOUT_MS = 180_000  # what a page may take to appear on a loaded machine before the test says it did not


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI must run the browser tests: .ci/run installs what they need)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    exe = chromium()
    if exe is None:
        _missing("no Chromium installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("Playwright's Python package is not installed (scripts/setup installs it)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield b
        finally:
            b.close()


class PageLog:
    """What a page did: its console errors, uncaught exceptions and every request it made."""

    def __init__(self, page: Any) -> None:
        self.errors: list[str] = []
        self.requests: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        page.on("request", lambda r: self.requests.append(r.url))


@pytest.fixture
def new_page(browser: Any) -> Iterator[Any]:
    """``new_page(width)`` → (page, PageLog); every context made is closed after the test."""
    contexts = []

    def make(width: int = 1400, height: int = 900) -> tuple[Any, PageLog]:
        context = browser.new_context(viewport={"width": width, "height": height})
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()
        return page, PageLog(page)

    yield make
    for c in contexts:
        c.close()
