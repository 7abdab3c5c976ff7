"""A real JupyterLab server and a real headless Chromium (Debian's), driven by Playwright."""
import os
from pathlib import Path

import pytest

from tests.support.browser import ARTIFACTS, CHROMIUM, CHROMIUM_FLAGS

@pytest.fixture(scope="module")
def browser():
    """One Chromium per test module: Playwright's sync API keeps an event loop running in this thread
    while it is open, so it must be closed before other modules (tests/classroom) start their own."""
    if not Path(CHROMIUM).exists():
        message = f"{CHROMIUM} is missing: install Debian's chromium package (.ci/run does)"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
