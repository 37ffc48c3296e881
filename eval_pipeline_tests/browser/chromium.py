"""The system's headless Chromium, driven by Playwright (which never downloads a browser here)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

LAUNCH_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium_path() -> str | None:
    return next(
        (p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None
    )


needs_chromium = pytest.mark.skipif(
    chromium_path() is None, reason="headless Chromium is not installed (apt-get install chromium)"
)


@contextmanager
def browser_page(width: int = 1400, height: int = 1000) -> Iterator[object]:
    """A Playwright page in the system Chromium (typed loosely: playwright is a test-only extra)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=list(LAUNCH_FLAGS))
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()
