"""The console and permissions inside a tenant (issue 59), in a real browser: a node's detail
names its document's readers, and on a local store the operator's "Ask as" field makes every
view answer as those principals would see the store (the summary graph's layers, the document
list, a question), and empty asks as the operator again; the document list names each document's
readers, as the caller asking sees the list. Its own store: harbour notes the whole tenant reads
and a board's ledger only ``group:board`` reads. ERAGRAPH_SCREENSHOT=PATH writes the node detail
with its readers there (docs/console/readers.png), ERAGRAPH_SCREENSHOT_DOCUMENTS=PATH the
document list with its readers column (docs/console/documents-readers.png)."""

from __future__ import annotations

import json
import os

import pytest
from console_support import HARBOURS
from serve_support import eragraph, serving

try:
    from playwright.sync_api import expect
except ImportError:  # chromium_or_skip (conftest) says why the tests skip
    pass

BOARD = [("ledger1", "Board ledger one", "Zanzibar clove ledger of the board: the merger price was agreed in March."),
         ("ledger2", "Board ledger two", "Zanzibar clove ledger of the board: the merger vote is set for May."),
         ("ledger3", "Board ledger three", "Zanzibar clove ledger of the board: the merger lawyers met in June.")]


@pytest.fixture(scope="module")
def served(tmp_path_factory, generator, chromium_path):
    root = tmp_path_factory.mktemp("readers")
    corpus = root / "in"
    corpus.mkdir()
    lines = [json.dumps({"id": key, "title": title, "text": f"{title}\n\n{text} " * 2})
             for key, title, _lang, _year, text in HARBOURS]
    lines += [json.dumps({"id": key, "title": title, "text": f"{title}\n\n{text} " * 3,
                          "metadata": {"access": ["group:board"]}}) for key, title, text in BOARD]
    (corpus / "notes.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = root / "store"
    out = eragraph("ingest", "--store", str(store), "--quiet", str(corpus))
    assert out.returncode == 0, out.stderr
    with serving(store, env=generator.env()) as url:
        yield url


def layer_zero_labels(page) -> list[str]:
    return page.locator("#layer-pick-0 option").all_inner_texts()


def test_a_node_names_its_readers_and_the_operator_asks_as_others(page):
    page.goto("/#graph")
    expect(page.locator("#view-graph")).to_have_attribute("data-state", "ready")
    expect(page.locator("#ask-as-box")).to_be_visible()  # a local store: the operator may switch
    labels = layer_zero_labels(page)
    assert any("Zanzibar" in label or "Board ledger" in label for label in labels)
    board = next(i for i, label in enumerate(labels) if "Zanzibar" in label or "Board ledger" in label)
    page.select_option("#layer-pick-0", index=board)
    page.get_by_role("button", name="Open the node picked in layer 0").click()
    expect(page.locator("#node-readers")).to_have_text("readers: group:board")
    harbour = next(i for i, label in enumerate(labels) if "harbour" in label.lower() or "port" in label.lower())
    page.select_option("#layer-pick-0", index=harbour)
    page.get_by_role("button", name="Open the node picked in layer 0").click()
    expect(page.locator("#node-readers")).to_have_text("readers: everyone in the tenant")
    page.select_option("#layer-pick-0", index=board)
    page.get_by_role("button", name="Open the node picked in layer 0").click()
    expect(page.locator("#node-readers")).to_have_text("readers: group:board")
    shot = os.environ.get("ERAGRAPH_SCREENSHOT")
    if shot:
        page.fill("#ask-as-input", "group:board")
        page.locator("#ask-as-input").blur()
        page.evaluate("window.scrollTo(0, 0)")
        page.wait_for_timeout(300)
        page.screenshot(path=shot)
        page.fill("#ask-as-input", "")

    # asking as a user outside the board: the board's ledger is in no view
    page.fill("#ask-as-input", "user:alice")
    page.get_by_role("button", name="Switch").click()
    expect(page.locator("#store-line")).to_contain_text("asking as user:alice")
    page.goto("/#graph")
    expect(page.locator("#view-graph")).to_have_attribute("data-state", "ready")
    expect(page.locator("#layer-pick-0 option").first).to_be_attached()
    labels = layer_zero_labels(page)
    assert labels and not any("Zanzibar" in label or "Board ledger" in label for label in labels)
    page.click("#tab-documents")
    expect(page.locator("#view-documents")).to_contain_text("notes.jsonl")
    expect(page.locator("#view-documents")).not_to_contain_text("ledger1")

    # as the board, and then as the operator again: the ledger is back
    page.fill("#ask-as-input", "group:board")
    page.get_by_role("button", name="Switch").click()
    expect(page.locator("#store-line")).to_contain_text("asking as group:board")
    page.fill("#ask-as-input", "")
    page.get_by_role("button", name="Switch").click()
    expect(page.locator("#store-line")).not_to_contain_text("asking as")
    page.click("#tab-graph")
    expect(page.locator("#view-graph")).to_have_attribute("data-state", "ready")
    expect(page.locator("#layer-pick-0 option", has_text="Board ledger")).not_to_have_count(0)


def readers_cell(page, source_part: str):
    return page.locator("#doc-rows tr", has_text=source_part).locator("td.readers")


def test_the_document_list_names_each_documents_readers(page):
    page.goto("/#documents")
    expect(page.locator("#view-documents")).to_have_attribute("data-state", "ready")
    expect(page.locator("#view-documents thead")).to_contain_text("Readers")
    for key, _title, _text in BOARD:  # the operator sees every document, each with its readers
        expect(readers_cell(page, key)).to_have_text("group:board")
    for key, *_ in HARBOURS:
        expect(readers_cell(page, key)).to_have_text("everyone in the tenant")
    shot = os.environ.get("ERAGRAPH_SCREENSHOT_DOCUMENTS")
    if shot:
        page.evaluate("document.getElementById('list-title').scrollIntoView()")
        page.wait_for_timeout(300)
        page.screenshot(path=shot)

    # as the board: its ledger and the open notes, each row still naming its readers
    page.fill("#ask-as-input", "group:board")
    page.get_by_role("button", name="Switch").click()
    expect(page.locator("#store-line")).to_contain_text("asking as group:board")
    page.click("#tab-documents")
    expect(readers_cell(page, BOARD[0][0])).to_have_text("group:board")
    expect(readers_cell(page, HARBOURS[0][0])).to_have_text("everyone in the tenant")
    # as alice: no row of the ledger, and every row she gets is one the whole tenant reads
    page.fill("#ask-as-input", "user:alice")
    page.get_by_role("button", name="Switch").click()
    expect(page.locator("#store-line")).to_contain_text("asking as user:alice")
    page.click("#tab-documents")
    expect(page.locator("#doc-rows")).not_to_contain_text("ledger")
    expect(readers_cell(page, HARBOURS[0][0])).to_have_text("everyone in the tenant")
    cells = page.locator("#doc-rows td.readers").all_inner_texts()
    assert cells and set(cells) == {"everyone in the tenant"}, cells
    page.fill("#ask-as-input", "")
    page.get_by_role("button", name="Switch").click()
    expect(page.locator("#store-line")).not_to_contain_text("asking as")
    assert not page.errors, page.errors


def test_a_malformed_principal_is_refused_in_words(page):
    page.goto("/#graph")
    expect(page.locator("#ask-as-box")).to_be_visible()
    page.fill("#ask-as-input", "finance")
    page.get_by_role("button", name="Switch").click()
    expect(page.locator("#view-graph")).to_contain_text("is not a principal")
    page.fill("#ask-as-input", "")
    page.get_by_role("button", name="Switch").click()
