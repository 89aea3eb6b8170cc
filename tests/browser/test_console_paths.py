"""The console in a real browser (headless Chromium driven by Playwright): the paths a person
takes through it, over a served store with two tenants."""

from __future__ import annotations

import re

from console_support import SECRET
from playwright.sync_api import expect

DONE = re.compile(r"^Done$")


def upload(page, tmp_path, name: str, data: bytes | str):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    page.set_input_files("#file-input", str(path))


def test_the_documents_view_lists_counts_per_state_and_each_failure_s_reason(page):
    # the store as built holds 7 documents, 6 done and photo.txt refused; the tests of this file
    # that upload add to it, in whatever order they run: the counts shown are the server's own
    page.goto("/#documents")
    expect(page.locator("#view-documents")).to_have_attribute("data-state", "ready")
    listed = page.request.get("/documents").json()
    assert listed["total"] >= 7 and listed["done"] >= 6 and listed["failed"] >= 1, listed
    for state in ("total", "done", "failed"):
        expect(page.locator(f'#doc-counts [data-state="{state}"] dd')).to_have_text(str(listed[state]))
    failed = page.locator('#doc-rows tr[data-state="failed"]').filter(has_text="photo.txt")
    expect(failed).to_have_count(1)
    expect(failed.locator(".reason")).to_contain_text("binary")
    page.fill("#doc-prefix", "no/such/prefix")
    page.click("#doc-filter button[type=submit]")
    expect(page.locator('#doc-counts [data-state="total"] dd')).to_have_text("0")


def documents_in_the_header(page) -> int:
    expect(page.locator("#store-line")).to_contain_text("documents")
    return int(re.match(r"(\d+) documents", page.locator("#store-line").inner_text()).group(1))


def test_upload_two_files_and_watch_each_reach_done(page, tmp_path):
    page.goto("/#documents")
    before = documents_in_the_header(page)
    page.fill("#upload-folder", "walk/")
    first, second = tmp_path / "ferries.md", tmp_path / "lighthouses.txt"
    first.write_text("# Ferries\n\nThe ferry from Gdynia to Karlskrona sails every night across the Baltic. " * 3)
    second.write_text("The lighthouse of Rozewie guides ships past the cliffs to Gdynia harbour. " * 3)
    page.set_input_files("#file-input", [str(first), str(second)])
    items = page.locator("#upload-list li")
    expect(items).to_have_count(2)
    for name in ("walk/ferries.md", "walk/lighthouses.txt"):
        expect(items.filter(has_text=name).locator(".state")).to_have_text(DONE, timeout=60_000)
    page.fill("#doc-prefix", "walk/")
    page.click("#doc-filter button[type=submit]")
    expect(page.locator('#doc-counts [data-state="done"] dd')).to_have_text("2", timeout=30_000)
    # the header's count follows the store (its /stats read again once the uploads settled)
    expect(page.locator("#store-line")).to_contain_text(f"{before + 2} documents")


def test_a_failed_upload_shows_its_reason(page, tmp_path):
    page.goto("/#documents")
    upload(page, tmp_path, "camera.bin", bytes(range(256)) * 8)
    item = page.locator("#upload-list li", has_text="camera.bin")
    expect(item.locator(".state")).to_have_text(re.compile("Failed|Upload failed"), timeout=60_000)
    expect(item.locator(".reason")).not_to_be_empty()
    expect(item.locator(".reason")).to_contain_text(re.compile("binary|read|kind|support", re.I))


def test_ask_shows_results_with_source_score_layer_and_route(page):
    page.goto("/#ask")
    page.fill("#ask-query", "Which harbour logged the tall ship Dar Pomorza?")
    page.uncheck("#ask-answer")
    page.click("#ask-submit")
    cards = page.locator("#results .result")
    expect(cards.first).to_be_visible()
    expect(cards.first).to_contain_text("Gdynia")
    expect(cards.first.locator(".badge").first).to_contain_text("layer")
    expect(page.locator("#ask-route")).to_contain_text("Route: collapsed")
    expect(page.locator("#ask-status")).to_have_text("Done.")


def test_ask_reads_the_answer_as_it_streams_with_citations_linking_to_their_chunks(page, generator):
    with generator.holding():
        page.goto("/#ask")
        expect(page.locator("#view-ask")).to_have_attribute("data-state", "ready")
        page.fill("#ask-query", "Which harbour logged the tall ship Dar Pomorza?")
        page.check("#ask-answer")
        page.click("#ask-submit")
        expect(page.locator("#results .result").first).to_be_visible()
        # the generator holds its last piece: the first pieces are on the page before the answer ends
        expect(page.locator("#answer")).to_contain_text("Gdynia harbour logs tall ships")
        expect(page.locator("#answer a.cite")).to_have_count(0)
        expect(page.locator("#ask-route")).not_to_contain_text("in all")  # not timed before the answer ends
        generator.release.set()
        cite = page.locator("#answer a.cite").first
        expect(cite).to_be_visible()
    # the stream's last line times the whole question, the answer's generation included
    expect(page.locator("#ask-route")).to_contain_text(re.compile(r"generate [\d.,]+ ms .* ms in all"))
    target = cite.get_attribute("data-target")
    cited_id = page.locator(f"#{target}").get_attribute("data-id")
    assert cited_id.startswith("chk-") or cited_id  # the evidence the generator cited
    cite.click()
    expect(page.locator(f"#{target}")).to_be_focused()
    expect(page.locator(f"#{target}")).to_have_class(re.compile("cited"))


def test_filter_by_metadata_and_switch_modes(page):
    page.goto("/#ask")
    page.uncheck("#ask-answer")
    mode = page.locator("#ask-mode")
    expect(mode.locator("option[value=dense]")).to_have_count(1)
    mode.select_option("dense")
    purpose = page.locator("#ask-mode-purpose").inner_text()
    mode.select_option("bm25")
    expect(page.locator("#ask-mode-purpose")).not_to_have_text(purpose)
    # terms in most leaves carry no BM25 weight here (lexical_fts5.informative_terms): ask with the
    # Polish notes' own words, which an English note shares ("Baltyk") so the filter has work to do
    page.fill("#ask-query", "statki Baltyk ships")
    page.fill("#ask-k", "10")
    page.click("#filter-add")
    page.fill("#filter-key-1", "lang")
    page.fill("#filter-value-1", "pl")
    expect(page.locator("#filter-json")).to_contain_text('"equals"')
    page.click("#ask-submit")
    cards = page.locator("#results .result")
    expect(cards.first).to_be_visible()
    sources = cards.locator(".source").all_inner_texts()
    assert sources and all(("szczecin" in s or "hel" in s) for s in sources), sources
    expect(page.locator("#ask-route")).to_contain_text("Route: bm25")


def test_a_bad_filter_is_said_in_words(page):
    page.goto("/#ask")
    page.fill("#ask-query", "ships")
    page.click("#filter-add")
    page.fill("#filter-key-1", "year")
    page.select_option("#filter-op-1", "greaterThan")
    page.fill("#filter-value-1", "recent")
    page.click("#ask-submit")
    expect(page.locator("#ask-status")).to_contain_text("not a number")


def graph_ready(page):
    """The summary graph's layers are drawn (the view's own data-state)."""
    page.goto("/#graph")
    expect(page.locator("#view-graph")).to_have_attribute("data-state", "ready")


def node_shown(page, node_id: str | None = None):
    """Waits on #node-detail's own state: "ready" with ``node_id`` (or any node) drawn."""
    detail = page.locator("#node-detail")
    expect(detail).to_have_attribute("data-state", "ready")
    expect(detail).to_have_attribute("data-node", node_id if node_id else re.compile(".+"))
    return detail.get_attribute("data-node")


def test_open_a_summary_and_drill_down_to_a_chunk(page):
    graph_ready(page)
    top = page.locator("#graph-bands li").first
    expect(top).to_contain_text("Layer")
    top.locator("button", has_text="Open").click()
    node_shown(page, top.locator("select").input_value())
    expect(page.locator("#node-detail .badge").first).to_contain_text("summary")
    for _ in range(6):  # down the members until a chunk
        if "chunk" in page.locator("#node-detail .badge").first.inner_text():
            break
        member = page.locator("#node-members button").first
        target = member.get_attribute("data-id")
        member.click()
        node_shown(page, target)
    expect(page.locator("#node-detail .badge").first).to_have_text("chunk")
    expect(page.locator("#node-text")).not_to_be_empty()
    assert page.locator("#node-trail li").count() >= 2
    count = page.evaluate("window.eragraphSummaryGraph.nodes('.summary, .chunk').length")
    assert count > 0


def test_the_node_opened_holds_still_while_it_is_read_again(page):
    """Opening the node on screen again, or the view shown again, makes none of its elements again:
    a member button under the pointer stays attached (the same element), and so do the graph,
    the layer list and the trail."""
    graph_ready(page)
    band = page.locator("#graph-bands li").first
    band.locator("button", has_text="Open").click()
    first = node_shown(page)
    mark = """() => { for (const el of [document.querySelector('#node-members button'), document.querySelector('#graph-bands li'),
                   document.querySelector('#node-trail li')]) el.dataset.mark = 'kept'; window.eragraphDrawn = window.eragraphSummaryGraph; }"""
    page.evaluate(mark)
    band.locator("button", has_text="Open").click()  # the same node, asked again
    page.click("#tab-documents")
    page.click("#tab-graph")  # the view shown again: its layers read again
    expect(page.locator("#view-graph")).to_have_attribute("data-state", "ready")
    node_shown(page, first)
    for selector in ("#node-members button", "#graph-bands li", "#node-trail li"):
        expect(page.locator(selector).first).to_have_attribute("data-mark", "kept")
    assert page.evaluate("window.eragraphDrawn === window.eragraphSummaryGraph")
    # a member opened: a new node, drawn, with the trail's first entry kept
    member = page.locator("#node-members button").first
    target = member.get_attribute("data-id")
    member.click()
    node_shown(page, target)
    expect(page.locator("#node-members button[data-mark]")).to_have_count(0)
    expect(page.locator("#node-trail li").first).to_have_attribute("data-mark", "kept")


# what each view shows that a second read of unchanged data must leave as it is
KEPT = {"documents": ["#doc-counts div", "#doc-rows tr"], "ask": ["#ask-mode option"], "entities": ["#ent-mode option"],
        "stats": ["#stats-summary div", "#stats-layers tr", "#stats-ledger tr", "#ledger-plot .uplot"]}


def test_every_view_shown_again_keeps_the_elements_whose_content_is_unchanged(page):
    """Each view shown again reads the server again (its data-state goes to "loading" and back to
    "ready") and makes none of its unchanged elements again: the documents' counts and rows, the
    modes of Ask and of the entity graph (an open list stays open), the stats' tables and the
    ledger's plot are the same elements (marked before, still marked after)."""
    for view, selectors in KEPT.items():
        page.goto(f"/#{view}")
        panel = page.locator(f"#view-{view}")
        expect(panel).to_have_attribute("data-state", "ready")
        counts = {}
        for selector in selectors:
            expect(page.locator(selector).first).to_be_attached()
            counts[selector] = page.locator(selector).count()
            page.eval_on_selector_all(selector, "(els) => els.forEach((el) => { el.dataset.mark = 'kept'; })")
        page.click("#tab-ask" if view != "ask" else "#tab-documents")
        page.click(f"#tab-{view}")  # shown again: its show() marks it loading before it reads
        expect(panel).to_have_attribute("data-state", "ready")
        for selector in selectors:
            expect(page.locator(selector)).to_have_count(counts[selector])
            expect(page.locator(f"{selector}:not([data-mark])"), f"{view}: {selector} made again").to_have_count(0)


def test_a_third_upload_highlights_what_it_re_summarized_with_its_cost_against_a_rebuild(page, tmp_path):
    page.goto("/#documents")
    upload(page, tmp_path, "third.txt", "The third note: the Vistula lagoon ferry calls at Krynica Morska and Frombork. " * 4)
    expect(page.locator("#upload-list li", has_text="third.txt").locator(".state")).to_have_text(DONE, timeout=60_000)
    page.click("#tab-graph")
    expect(page.locator("#view-graph")).to_have_attribute("data-state", "ready")
    expect(page.locator("#change-select option").first).to_contain_text("third.txt")
    first_layer = page.locator("#change-layers tbody tr").first
    expect(first_layer.locator("th")).to_have_text("1")
    expect(first_layer.locator("td").nth(1)).to_have_text(re.compile(r"^\d+ of \d+$"))  # summaries written of the layer's
    expect(page.locator("#change-versus")).to_contain_text("rebuild")
    expect(page.locator("#change-versus")).to_contain_text("%")
    highlighted = page.evaluate("window.eragraphSummaryGraph.nodes('.changed').length")
    assert highlighted >= 1


def test_the_entity_graph_explains_why_each_passage_ranked_where_it_did(page):
    page.goto("/#entities")
    page.fill("#ent-query", "Which ships sail from Gdynia harbour?")
    page.select_option("#ent-mode", "tri_graph")
    page.click("#ent-submit")
    rows = page.locator("#ent-passages tbody tr")
    expect(rows.first).to_be_visible()
    expect(rows.first.locator(".why")).not_to_be_empty()
    expect(page.locator("#ent-seeds .badge").first).to_be_visible()
    assert page.evaluate("window.eragraphEntityGraph.nodes('.pas').length") == rows.count()


def test_the_stats_view_plots_the_ledger_per_kind_and_model(page):
    page.goto("/#stats")
    expect(page.locator("#stats-layers tr").first).to_be_visible()
    expect(page.locator("#stats-ledger")).to_contain_text("embed")
    expect(page.locator("#ledger-plot canvas")).to_have_count(1)
    expect(page.locator("#ledger-plot .u-legend")).to_contain_text("embed")
    # the store's calls fall in an hour or two: the time axis spans hours, not uPlot's years for one point
    spanned = page.evaluate("window.eragraphLedgerPlot.scales.x.max - window.eragraphLedgerPlot.scales.x.min")
    assert 3600 <= spanned <= 8 * 3600, spanned


def test_a_second_tenant_s_documents_never_appear(page):
    page.goto("/#documents")
    expect(page.locator('#doc-counts [data-state="total"] dd')).to_have_text(re.compile(r"^\d+$"))
    expect(page.locator("#doc-rows")).not_to_contain_text("cloves")
    page.click("#tab-ask")
    page.uncheck("#ask-answer")
    page.fill("#ask-query", SECRET)
    page.select_option("#ask-mode", "bm25")
    page.click("#ask-submit")
    expect(page.locator("#ask-status")).to_have_text("Done.")
    expect(page.locator("#results")).not_to_contain_text("Zanzibar")
    # nor its chunks and summaries in the summary graph, nor its entities around a question
    page.click("#tab-graph")
    expect(page.locator("#view-graph")).to_have_attribute("data-state", "ready")
    labels = page.evaluate("window.eragraphSummaryGraph.nodes().map((n) => n.data('label') || '').join(' ')")
    assert "Gdynia" in labels and "Zanzibar" not in labels and "cloves" not in labels
    page.locator("#graph-bands li").first.locator("button", has_text="Open").click()
    node_shown(page)
    page.click("#tab-entities")
    page.fill("#ent-query", "Where does Zanzibar grow cloves?")
    page.click("#ent-submit")
    expect(page.locator("#ent-status")).not_to_be_empty()
    expect(page.locator("#view-entities")).not_to_contain_text("zanzibar", ignore_case=True)
    # the switcher (the served root holds two tenants): picking the other shows its documents only
    expect(page.locator("#tenant-box")).to_be_visible()
    page.click("#tab-documents")
    page.select_option("#tenant-select", "other")
    expect(page.locator("#doc-rows")).to_contain_text("cloves")
    expect(page.locator("#doc-rows")).not_to_contain_text("harbours.jsonl")
    page.click("#tab-graph")  # the node opened in the tenant before is not on screen any more
    expect(page.locator("#view-graph")).to_have_attribute("data-state", "ready")
    expect(page.locator("#node-detail")).not_to_have_attribute("data-node", re.compile(".*"))
    expect(page.locator("#node-detail")).not_to_contain_text("Gdynia")
    page.click("#tab-entities")  # the same question now meets that tenant's entities (the check above could fail)
    page.fill("#ent-query", "Where does Zanzibar grow cloves?")
    page.click("#ent-submit")
    expect(page.locator("#ent-seeds")).to_contain_text("zanzibar", ignore_case=True)
