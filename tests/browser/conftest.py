"""Fixtures of the console's browser tests: one served store per test file (eragraph serve as
its own process, over the store of console_support.build_store, with the stand-in generator),
one headless Chromium per file, a fresh page (context) per test."""

from __future__ import annotations

import pytest
from console_support import Generator, build_store, chromium_or_skip
from serve_support import serving

# expect() waits for the page's state; on a loaded machine the served store's first query (spaCy
# loaded in the server) takes longer than Playwright's default 5 s: the same bound as the page's
# actions (15 s, below) and more, never a verdict read from a clock
try:
    from playwright.sync_api import expect
except ImportError:  # chromium_or_skip says why the tests skip
    pass
else:
    expect.set_options(timeout=20_000)


@pytest.fixture(scope="module")
def chromium_path():
    return chromium_or_skip()


@pytest.fixture(scope="module")
def generator():
    made = Generator()
    yield made
    made.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory, generator, chromium_path):
    store = build_store(tmp_path_factory.mktemp("console"))
    with serving(store, env=generator.env()) as url:
        yield url


@pytest.fixture(scope="module")
def browser(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium_path, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser, served):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=served)
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.errors = errors
    yield opened
    context.close()
    assert not errors, f"the page raised: {errors}"
