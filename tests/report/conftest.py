"""Fixtures for the HTML report tests: a real headless Chromium driven by Playwright.

Chromium comes from the system packages (``apt-get install chromium``; ``MSQ_CHROMIUM`` names
another binary); Playwright's own browser download is never used. Without Chromium or Playwright
the browser tests skip with the reason, and fail under ``CI=true``: CI must run them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.golden_util import GOLDEN

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI=true: the browser tests must run)")
    pytest.skip(reason)


def chromium_path() -> str | None:
    chosen = os.environ.get("MSQ_CHROMIUM")
    if chosen:
        return chosen if Path(chosen).is_file() else None
    for name in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if Path(name).is_file():
            return name
    return shutil.which("chromium")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium per test process."""
    exe = chromium_path()
    if exe is None:
        _missing("Chromium not found: apt-get install chromium (or set MSQ_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed: pip install -e '.[test]'")
    with sync_playwright() as play:
        chrome = play.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            yield chrome
        finally:
            chrome.close()


@dataclass
class OpenReport:
    """A report open in a page, with what the page said on its console."""

    page: Any
    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def state(self, expr: str) -> Any:
        """Evaluate ``expr`` with ``S`` bound to the page's state object."""
        return self.page.evaluate(
            f"(() => {{ const S = window.msqReport.state; return {expr}; }})()")


@pytest.fixture
def open_report(browser: Any) -> Iterator[Any]:
    """``open_report(path)`` opens an HTML report from its file:// URL and waits until drawn."""
    pages: list[Any] = []

    def opener(path: Path, width: int = 1440, height: int = 1000) -> OpenReport:
        page = browser.new_page(viewport={"width": width, "height": height})
        pages.append(page)
        report = OpenReport(page)
        page.on("console", lambda m: report.console.append(f"{m.type}: {m.text}"))
        page.on("console", lambda m: report.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: report.errors.append(f"uncaught: {e}"))

        def on_dialog(dialog: Any) -> None:
            report.dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.goto(path.resolve().as_uri())
        # a selector, not wait_for_function: polling a function evaluates a string in the page,
        # which the report's Content-Security-Policy (kept on here) forbids
        page.wait_for_selector("body[data-ready='true'], #fatal:not([hidden])", timeout=60_000)
        assert not page.is_visible("#fatal"), page.text_content("#fatal")
        return report

    yield opener
    for page in pages:
        page.close()


@pytest.fixture(scope="session")
def golden() -> Path:
    """The golden cases (``MSQ_GOLDEN``; where they are looked for: tests/conftest.py)."""
    if not GOLDEN.is_dir():
        _missing(f"golden cases not found at {GOLDEN} (set MSQ_GOLDEN)")
    return GOLDEN
