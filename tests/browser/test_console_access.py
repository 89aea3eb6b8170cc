"""The console's accessible basics in a real browser: the tabs by keyboard alone, every control
labelled, and every view readable in a 400-pixel window without sideways scrolling."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

VIEWS = ["documents", "ask", "graph", "entities", "stats"]

UNLABELLED = """() => [...document.querySelectorAll('input, select, textarea, button')]
  .filter((el) => el.offsetParent !== null)
  .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                  && !(el.tagName === 'BUTTON' && el.textContent.trim()))
  .map((el) => el.outerHTML.slice(0, 120))"""


def view_ready(page, view: str) -> None:
    """The view opened and settled: its panel's own ``data-state`` is ``ready`` (each view sets it
    once what it reads is drawn), and the header is whole (the tenant switcher known)."""
    page.goto(f"/#{view}")
    expect(page.locator(f"#view-{view}")).to_have_attribute("data-state", "ready")
    expect(page.locator("body")).to_have_attribute("data-tenants", "known")
    expect(page.locator("#store-line")).not_to_be_empty()


def test_the_tabs_are_reached_and_switched_by_keyboard_alone(page):
    page.goto("/")
    # the header is whole: the tenant switcher (this store has two tenants) is in the tab order
    expect(page.locator("body")).to_have_attribute("data-tenants", "known")
    page.keyboard.press("Tab")
    expect(page.locator("a.skip")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.locator("#tenant-select")).to_be_focused()
    page.keyboard.press("Tab")  # a local store: the operator's "Ask as" field and its button
    expect(page.locator("#ask-as-input")).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(page.locator("#tab-documents")).to_be_focused()
    expect(page.locator("#view-documents")).to_be_visible()
    for name in VIEWS[1:]:
        page.keyboard.press("ArrowRight")
        expect(page.locator(f"#tab-{name}")).to_be_focused()
        expect(page.locator(f"#tab-{name}")).to_have_attribute("aria-selected", "true")
        expect(page.locator(f"#view-{name}")).to_be_visible()
        assert page.evaluate("location.hash") == f"#{name}"
    page.keyboard.press("ArrowRight")  # wraps round
    expect(page.locator("#tab-documents")).to_be_focused()
    page.keyboard.press("End")
    expect(page.locator("#view-stats")).to_be_visible()
    page.keyboard.press("Home")
    expect(page.locator("#view-documents")).to_be_visible()
    page.keyboard.press("Tab")  # from the tab list into the view
    focused = page.evaluate("document.activeElement.closest('[role=tabpanel], main') !== null")
    assert focused


def test_the_back_button_returns_to_the_previous_view(page):
    page.goto("/#ask")
    page.click("#tab-stats")
    expect(page.locator("#view-stats")).to_be_visible()
    page.go_back()
    expect(page.locator("#view-ask")).to_be_visible()


@pytest.mark.parametrize("view", VIEWS)
def test_every_control_is_labelled(page, view):
    view_ready(page, view)
    assert page.evaluate(UNLABELLED) == []


@pytest.mark.parametrize("width", [400, 1280])
@pytest.mark.parametrize("view", VIEWS)
def test_every_view_needs_no_sideways_scrolling_in_a_narrow_or_a_laptop_window(browser, served, view, width):
    context = browser.new_context(viewport={"width": width, "height": 800}, base_url=served)
    page = context.new_page()
    try:
        view_ready(page, view)
        scrolled = page.evaluate("document.documentElement.scrollWidth")
        assert scrolled <= width, f"{view}: the page is {scrolled} px wide in a {width} px window"
        for name in VIEWS:  # every tab on screen, none cut off
            box = page.locator(f"#tab-{name}").bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, (name, box)
        small = page.evaluate("""() => [...document.querySelectorAll('#view p, #view td, #view label, #view button')]
          .filter((el) => el.offsetParent !== null && el.textContent.trim())
          .filter((el) => parseFloat(getComputedStyle(el).fontSize) < 12).length""")
        assert small == 0, f"{view}: {small} texts smaller than 12 px"
    finally:
        context.close()


def tab_to(page, selector: str, presses: int = 60) -> None:
    """Press Tab until ``selector`` has the focus (it must be reachable by the keyboard alone)."""
    for _ in range(presses):
        if page.evaluate("(s) => document.activeElement && document.activeElement.matches(s)", selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"{selector} was not reached by {presses} presses of Tab")


def enter_view(page, view: str) -> None:
    view_ready(page, view)
    page.focus(f"#tab-{view}")


def test_the_documents_view_by_keyboard(page):
    enter_view(page, "documents")
    tab_to(page, "#doc-prefix")
    page.keyboard.type("harbours.jsonl#g")
    page.keyboard.press("Enter")
    expect(page.locator('#doc-counts [data-state="total"] dd')).to_have_text("2")
    tab_to(page, "#doc-rows tr:first-child button.danger")
    page.keyboard.press("Enter")
    expect(page.locator("#doc-rows tr:first-child button.danger")).to_have_text("Confirm delete")
    page.keyboard.press("Enter")
    expect(page.locator("#doc-message")).to_contain_text("Deleting harbours.jsonl#gdansk")
    expect(page.locator('#doc-counts [data-state="total"] dd')).to_have_text("1", timeout=30_000)


def test_ask_by_keyboard_and_follow_a_citation(page, generator):
    enter_view(page, "ask")
    tab_to(page, "#ask-query")
    page.keyboard.type("Which harbour logged the tall ship Dar Pomorza?")
    tab_to(page, "#ask-mode")
    page.keyboard.press("End")  # the last mode
    expect(page.locator("#ask-mode-purpose")).not_to_be_empty()
    page.keyboard.press("Home")
    tab_to(page, "#ask-submit")
    page.keyboard.press("Enter")
    expect(page.locator("#ask-status")).to_have_text("Done.", timeout=30_000)
    tab_to(page, "#answer a.cite")
    page.keyboard.press("Enter")
    target = page.locator("#answer a.cite").first.get_attribute("data-target")
    expect(page.locator(f"#{target}")).to_be_focused()


def test_the_summary_graph_drilled_down_by_keyboard(page):
    enter_view(page, "graph")
    expect(page.locator("#view-graph")).to_have_attribute("data-state", "ready")
    tab_to(page, "#graph-bands li:first-child select")
    tab_to(page, "#graph-bands li:first-child button")
    page.keyboard.press("Enter")
    expect(page.locator("#node-detail .badge").first).to_contain_text("summary")
    for _ in range(6):  # down the members, Tab and Enter only, until a chunk
        if page.locator("#node-detail .badge").first.inner_text() == "chunk":
            break
        tab_to(page, "#node-members li:first-child button")
        page.keyboard.press("Enter")
        expect(page.locator("#node-detail")).to_be_focused()  # the keyboard goes on from the node opened
    expect(page.locator("#node-detail .badge").first).to_have_text("chunk")
    tab_to(page, "#node-trail li:first-child button")  # back up the path
    page.keyboard.press("Enter")
    expect(page.locator("#node-detail .badge").first).to_contain_text("summary")


def test_the_entity_graph_by_keyboard(page):
    enter_view(page, "entities")
    tab_to(page, "#ent-query")
    page.keyboard.type("Which ships sail from Gdynia harbour?")
    page.keyboard.press("Enter")
    rows = page.locator("#ent-passages tbody tr")
    expect(rows.first).to_be_visible()
    tab_to(page, "#ent-passages tbody tr:first-child summary")
    page.keyboard.press("Enter")
    expect(rows.first.locator("details")).to_have_attribute("open", "")


def test_the_stats_view_by_keyboard(page):
    enter_view(page, "stats")
    expect(page.locator("#ledger-plot canvas")).to_have_count(1)
    tab_to(page, "#ledger-metric")
    page.keyboard.press("ArrowDown")  # tokens -> calls
    expect(page.locator("#ledger-plot .u-title")).to_contain_text("calls")
