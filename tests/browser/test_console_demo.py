"""`eragraph demo` then `eragraph serve`, as the README's first screen says, in a fresh folder:
serve is given no --store (it serves the demo's), prints the console's URL, and the console
opened at that URL lists the demo's documents."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading

import pytest
from playwright.sync_api import expect
from serve_support import ROOT, environment

DEMO = ROOT / "shared" / "eragraph" / "samples" / "corpus.jsonl"


@pytest.fixture(scope="module")
def demo_console(tmp_path_factory, chromium_path):
    cwd = tmp_path_factory.mktemp("fresh")
    env = environment()
    made = subprocess.run([sys.executable, "-m", "eragraph", "demo"], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    assert "in the browser: eragraph serve  (then" in made.stdout  # the demo says what to run next: no --store
    proc = subprocess.Popen([sys.executable, "-m", "eragraph", "serve", "--port", "0"], cwd=cwd, env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        said = ""
        for _ in range(20):  # the lines before uvicorn's own
            line = proc.stderr.readline()
            if not line:
                break
            said += line
            found = re.search(r"console at (http://127\.0\.0\.1:\d+/)", line)
            if found:
                break
        assert found, f"serve printed no console URL: {said}"
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # drain
        yield found.group(1), said
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_demo_then_serve_without_a_store_shows_the_demo_s_documents(browser, demo_console):
    url, said = demo_console
    assert "eragraph-store" in said  # the demo's store, the default of every command that reads one
    titles = [json.loads(line)["id"] for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()]
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto(url)
        expect(page.locator("#view-documents")).to_have_attribute("data-state", "ready", timeout=30_000)
        expect(page.locator('#doc-counts [data-state="total"] dd')).to_have_text(str(len(titles)))
        expect(page.locator('#doc-counts [data-state="done"] dd')).to_have_text(str(len(titles)))
        listed = page.locator("#doc-rows td.source").all_inner_texts()
        assert len(listed) == min(25, len(titles))  # the first page
        assert all(any(t in s for t in titles) for s in listed), listed
        expect(page.locator("#store-line")).to_contain_text(f"{len(titles)} documents")
        assert not errors, errors
    finally:
        context.close()
