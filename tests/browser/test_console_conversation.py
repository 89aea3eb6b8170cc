"""The console's Ask view as a conversation, in Chromium: the second question goes with the first
turn and the view says how it was asked ("Asked as", the configured generator's rewrite), a
chunk of a PDF shows its page, a citation marks the sentence of its chunk, and "New
conversation" starts afresh. Its own store: a three-page PDF (the shared one has no paged
document)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: file_builders

from console_support import eragraph  # noqa: E402
from file_builders import pdf_bytes  # noqa: E402
from serve_support import serving  # noqa: E402

try:
    from playwright.sync_api import expect
except ImportError:
    pass

PAGES = ["The harbour of Gdynia logs every tall ship. " * 6,
         "The Dar Pomorza sailed from Gdynia in 1930 and wintered there. " * 6,
         "Szczecin keeps the river barges and their cargo lists. " * 6]


@pytest.fixture(scope="module")
def served(tmp_path_factory, generator, chromium_path):
    root = tmp_path_factory.mktemp("conversation")
    (root / "in").mkdir()
    (root / "in" / "harbours.pdf").write_bytes(pdf_bytes(PAGES, title="Harbour log"))
    out = eragraph("ingest", "--store", str(root / "store"), "--quiet", str(root / "in"))
    assert out.returncode == 0, out.stderr
    with serving(root / "store", env=generator.env()) as url:
        yield url


def test_the_ask_view_is_a_conversation_with_pages_spans_and_a_fresh_start(page, generator):
    page.goto("/#ask")  # the stand-in's answers come whole (its release starts set)
    expect(page.locator("#view-ask")).to_have_attribute("data-state", "ready")
    page.fill("#ask-query", "Which ship wintered in Gdynia?")
    page.check("#ask-answer")
    page.click("#ask-submit")
    expect(page.locator("#ask-status")).to_have_text("Done.")
    expect(page.locator("#conversation li")).to_have_count(1)
    expect(page.locator("#ask-rewrite")).to_have_text("")  # a first question is asked as it is
    first = page.locator("#results .result").first
    expect(first.locator(".badge.page")).to_have_text(re.compile(r"^pages? \d"))
    expect(first.locator(".hint")).to_contain_text("characters")
    cite = page.locator("#answer a.cite").first
    cite.click()
    target = cite.get_attribute("data-target")
    expect(page.locator(f"#{target} mark.span")).to_have_count(1)

    page.fill("#ask-query", "When did it sail?")
    page.click("#ask-submit")
    expect(page.locator("#conversation li")).to_have_count(2)
    expect(page.locator("#ask-rewrite")).to_contain_text(re.compile(r"Asked as: .+ \(model rewrite"))
    assert any("Which ship wintered in Gdynia?" in p and "When did it sail?" in p for p in generator.prompts)

    page.click("#ask-new")
    expect(page.locator("#conversation li")).to_have_count(0)
    page.fill("#ask-query", "When did it sail?")
    page.click("#ask-submit")
    expect(page.locator("#ask-status")).to_have_text("Done.")
    expect(page.locator("#ask-rewrite")).to_have_text("")  # no earlier turn: asked as it is
    assert not page.errors
