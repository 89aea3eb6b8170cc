"""The console on a server started with --token: the token read from the URL's #token= (kept
in the tab, removed from the address bar) and sent as authorization: Bearer; without it, a 401
asks for it."""

from __future__ import annotations

import pytest
from console_support import build_store
from playwright.sync_api import expect
from serve_support import serving

TOKEN = "s3cret-console-token"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory, chromium_path):
    store = build_store(tmp_path_factory.mktemp("guarded"))
    with serving(store, "--token", TOKEN) as url:
        yield url


def test_the_token_in_the_url_is_sent_and_leaves_the_address_bar(browser, guarded):
    context = browser.new_context(base_url=guarded)
    page = context.new_page()
    try:
        page.goto(f"/#token={TOKEN}")
        expect(page.locator("#store-line")).to_contain_text("documents")
        assert "token" not in page.url
        expect(page.locator("#token-dialog")).not_to_be_visible()
    finally:
        context.close()


def test_a_401_asks_for_the_token(browser, guarded):
    context = browser.new_context(base_url=guarded)
    page = context.new_page()
    try:
        page.goto("/#documents")
        expect(page.locator("#token-dialog")).to_be_visible()
        page.fill("#token-input", TOKEN)
        page.click("#token-form button[type=submit]")
        expect(page.locator("#store-line")).to_contain_text("documents")
        expect(page.locator('#doc-counts [data-state="total"] dd')).to_have_text("7")
    finally:
        context.close()
