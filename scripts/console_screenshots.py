"""Screenshots of the browser console for the docs (docs/console/*.png): builds the demo store
(`eragraph demo`, hashing embedder, extractive summaries, spaCy's small English NER for the
entity graph: no download, no API), serves it (`eragraph serve`, with the stand-in answer
generator the browser tests use), drives each view in headless Chromium (Debian's chromium,
through Playwright for Python) as a person would (two uploads, one of them refused; a streamed
answer; a summary opened; a question explained; the ledger) and writes one PNG per view at
1280x800, and the Ask view in a 400-pixel window.

    python scripts/console_screenshots.py [--out docs/console] [--chromium /usr/bin/chromium]"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "browser"), str(ROOT / "shared")]

from console_support import Generator  # noqa: E402 (the tests' stand-in generator)
from serve_support import environment, serving  # noqa: E402

QUESTION = "Where does the river fed by Lake Tana begin, and in which country is that lake?"
ENTITY_QUESTION = "Which river flows through Warsaw, and where does the Vistula reach the sea?"
NER = {"ERAGRAPH_NER": "spacy"}  # the entity graph of spaCy's named entities (the hash embedder's default is capitalized words)
SETTLED = ("(n) => { const items = [...document.querySelectorAll('#upload-list li')]; return items.length >= n && "
           "items.every((li) => ['done', 'failed', 'refused'].includes(li.dataset.state)); }")


def shoot(page, name: str, out: Path, full: bool = False) -> None:
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(400)  # the graph's first frame
    page.screenshot(path=str(out / f"{name}.png"), full_page=full)
    print(f"console_screenshots: {out / name}.png", file=sys.stderr)


def walk(page, out: Path, work: Path, generator: Generator) -> None:
    page.goto("/#documents")
    page.wait_for_selector("#view-documents[data-state=ready]")
    bad = work / "scan.pdf"
    bad.write_bytes(b"%PDF-1.4 not really a pdf \x00\x01\x02" * 20)
    good = work / "tana.md"
    good.write_text("# Lake Tana\n\nLake Tana in Ethiopia is the source of the Blue Nile, which meets the White Nile "
                    "at Khartoum. " * 3, encoding="utf-8")
    page.fill("#upload-folder", "notes/")
    page.set_input_files("#file-input", [str(good), str(bad)])
    page.wait_for_function(SETTLED, arg=2, timeout=60_000)
    page.fill("#doc-prefix", "notes/")  # the two uploads: one done, one failed with its reason
    page.click("#doc-filter button[type=submit]")
    page.wait_for_selector('#doc-rows tr[data-state="failed"]')
    shoot(page, "documents", out)

    generator.release.set()
    page.click("#tab-ask")
    page.fill("#ask-query", QUESTION)
    page.click("#ask-submit")
    page.wait_for_selector("#ask-status:text('Done.'), #ask-status.error", timeout=60_000)
    cite = page.locator("#answer a.cite").first
    if cite.count():
        cite.click()
    shoot(page, "ask", out)

    page.click("#tab-graph")
    page.wait_for_selector("#view-graph[data-state=ready]", timeout=60_000)
    page.wait_for_selector("#change-versus")  # the upload's re-summarized summaries, highlighted
    page.locator("#graph-bands li button", has_text="Open").first.click()
    page.wait_for_selector("#node-members")
    page.locator("#node-members button").first.click()  # one step down
    page.wait_for_function("document.querySelectorAll('#node-trail li').length === 2")
    page.evaluate("window.scrollTo(0, 0)")
    shoot(page, "summary-graph", out)

    page.click("#tab-entities")
    page.fill("#ent-query", ENTITY_QUESTION)
    page.select_option("#ent-mode", "tri_graph")
    page.click("#ent-submit")
    page.wait_for_selector("#ent-passages tbody tr")
    page.locator("#ent-passages tbody tr summary").first.click()
    page.evaluate("window.scrollTo(0, 0)")
    shoot(page, "entity-graph", out, full=True)  # the passages and why, below the graph

    page.click("#tab-stats")
    page.wait_for_selector("#stats-layers tr")
    page.wait_for_selector("#ledger-plot canvas")
    shoot(page, "stats", out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "console")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        made = subprocess.run([sys.executable, "-m", "eragraph", "demo", "--store", str(work / "store"), "--embedder", "hash",
                               "--quiet"], env=environment(**NER), capture_output=True, text=True, timeout=600)
        if made.returncode != 0:
            print(made.stderr, file=sys.stderr)
            return 1
        generator = Generator(hold=0.3, pieces=("The Blue Nile ", "begins at Lake Tana, ", "in Ethiopia "))
        try:
            with serving(work / "store", env={**generator.env(), **NER}) as url, sync_playwright() as p:
                browser = p.chromium.launch(executable_path=args.chromium)
                context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=url)
                walk(context.new_page(), args.out, work, generator)
                narrow = browser.new_context(viewport={"width": 400, "height": 800}, base_url=url)
                page = narrow.new_page()
                page.goto("/#ask")
                page.fill("#ask-query", QUESTION)
                page.uncheck("#ask-answer")
                page.click("#ask-submit")
                page.wait_for_selector("#results .result")
                shoot(page, "ask-narrow", args.out)
                browser.close()
        finally:
            generator.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
