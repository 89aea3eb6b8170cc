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


def test_the_tabs_are_reached_and_switched_by_keyboard_alone(page):
    page.goto("/")
    page.keyboard.press("Tab")  # the skip link
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
    page.goto(f"/#{view}")
    expect(page.locator(f"#view-{view} h2")).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert page.evaluate(UNLABELLED) == []


@pytest.mark.parametrize("view", VIEWS)
def test_a_narrow_window_needs_no_sideways_scrolling(browser, served, view):
    context = browser.new_context(viewport={"width": 400, "height": 800}, base_url=served)
    page = context.new_page()
    try:
        page.goto(f"/#{view}")
        expect(page.locator(f"#view-{view} h2")).to_be_visible()
        page.wait_for_load_state("networkidle")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 400, f"{view}: the page is {width} px wide in a 400 px window"
        expect(page.locator(f"#tab-{view}")).to_be_visible()
    finally:
        context.close()
