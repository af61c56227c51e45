"""The web view in a real browser: headless Chromium (Debian's, never a
downloaded one) driven by Playwright against a real ``serve --http`` process.

``browser`` is one Chromium per test module; ``page`` is a fresh browser
context (cookies, cache) per test, pointed at that test's own server on a
store filled through the library (:func:`webstore.build_store`). Without Chromium or
Playwright the tests skip, with the reason, on a developer's machine and
fail under ``CI``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from webstore import VIEWPORT, Site, Watch, build_store

from mcp_clients.harness import ServerProcess


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _unavailable(message: str) -> None:
    if _ci():
        pytest.fail(f"{message} (CI is set, so the browser tests must run)", pytrace=False)
    pytest.skip(message)


def chromium_path() -> str | None:
    """Debian's Chromium on PATH (``apt-get install chromium``), or None."""
    return shutil.which("chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module (Playwright, with the system browser)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable(
            "Playwright is not installed: pip install -e '.[dev]' (the browser tests use it)"
        )
    executable = chromium_path()
    if executable is None:
        _unavailable(
            "no `chromium` on PATH: install Debian's (apt-get install chromium) to run the "
            "browser tests; Playwright's own downloaded browsers are not used"
        )
    args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=args, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def site(store_address: str | Path) -> Iterator[Site]:
    """This test's server (``serve --http`` on 127.0.0.1) over :func:`build_store`."""
    addresses = build_store(store_address)
    with ServerProcess(store_address) as server:  # type: ignore[arg-type]
        yield Site(server=server, db=store_address, addresses=addresses)


@pytest.fixture
def watch() -> Watch:
    return Watch()


def _console(watch: Watch, message: Any) -> None:
    # (A failed load is logged here too, without its URL: _response names it.)
    if message.type == "error" and not message.text.startswith("Failed to load resource"):
        watch.errors.append(f"console: {message.text}")


def _response(watch: Watch, response: Any) -> None:
    if response.status >= 400 and not response.url.endswith("/favicon.ico"):
        watch.errors.append(f"HTTP {response.status}: {response.url}")


@pytest.fixture
def page(browser: Any, site: Site, watch: Watch) -> Iterator[Any]:
    """A tab in a fresh browser context on this test's server (relative URLs work).
    Every dialog (``alert``…) is recorded in ``watch.dialogs`` and dismissed;
    uncaught script errors, console errors and failed loads (but the
    browser's own ``/favicon.ico`` probe) go to ``watch.errors``."""
    context = browser.new_context(base_url=site.base, viewport=VIEWPORT)
    tab = context.new_page()

    def on_dialog(dialog: Any) -> None:
        watch.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    tab.on("dialog", on_dialog)
    tab.on("pageerror", lambda exc: watch.errors.append(f"script error: {exc}"))
    tab.on("console", lambda msg: _console(watch, msg))
    tab.on("response", lambda response: _response(watch, response))
    try:
        yield tab
    finally:
        context.close()
