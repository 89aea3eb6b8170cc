"""`eragraph bench console`: what the browser console costs a person on a large store: its first
load and the summary-graph view's render, in headless Chromium (Debian's ``chromium``, driven by
Playwright for Python), against `eragraph serve` over a synthetic store.

Per size (``--sizes``, chunks; the store is one-chunk documents of random words, built as
`eragraph bench scale` builds its stores: the hashing embedder and the capitalized NER, so no
model is timed):

* first load: a fresh browser context (no cache) opens ``/`` and the clock stops when the
  documents view has drawn its first page (its ``data-state`` is ``ready``): the page's own
  ``performance.now()``, i.e. from navigation start, HTML, scripts, vendored libraries and the
  first API calls included;
* graph view: from the click on the summary-graph tab until that view has drawn its layers
  (``data-state="ready"``), timed in the page; with the number of nodes it drew and how many the
  store's layers hold (the view samples past a few thousand);
* the bytes the browser received for each.

Each figure is the median (and max) of ``--repeats`` fresh contexts. The server runs in this
process (one warm engine, as `eragraph serve`); the browser in its own processes, on the same
two cores."""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from .common import add_common_options, finish, progress

DEFAULT_SIZES = "10000,100000"
SMOKE_SIZE = 300
CHROMIUM = "/usr/bin/chromium"
READY = "#view-{view}[data-state=ready]"
TAB = "#tab-{view}"
VIEWPORT = {"width": 1280, "height": 800}
TIMEOUT_MS = 120_000


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("console", help="the browser console's first load and graph render by store size",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default=DEFAULT_SIZES, help=f"store sizes in chunks (default {DEFAULT_SIZES})")
    p.add_argument("--store", required=True, help="working directory: the synthetic corpora and stores")
    p.add_argument("--repeats", type=int, default=5, help="fresh browser contexts per size (median reported)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--batch-docs", type=int, default=256)
    p.add_argument("--reuse", action="store_true", help="reuse a store of the same size already built under --store")
    p.add_argument("--chromium", default=CHROMIUM, help=f"the Chromium executable (default {CHROMIUM})")
    p.add_argument("--smoke", action="store_true", help=f"one store of {SMOKE_SIZE} chunks, one repeat")
    add_common_options(p)
    p.set_defaults(bench=run)
    return p


def build(n: int, work: Path, args: Any):
    """The synthetic store of ``n`` one-chunk documents (bench scale's corpus and build), opened."""
    from ..bootstrap import build_engine
    from .scale import build_store, model_settings, write_corpus

    settings = model_settings(args)
    store = work / f"store-{n}"
    figures: dict = {"reused": True}
    if not (args.reuse and (store / "graph.sqlite").is_file()):
        corpus = write_corpus(work / f"corpus-{n}.jsonl", n, args.seed)
        if store.exists():
            import shutil

            shutil.rmtree(store)
        figures = build_store(store, corpus, args.batch_docs, settings)
    return build_engine("local", store, settings), figures


def measure(browser: Any, url: str) -> dict:
    """One fresh context: the first load of ``/`` and the graph view's render."""
    context = browser.new_context(viewport=VIEWPORT)
    received = {"bytes": 0}

    def count(response: Any) -> None:
        try:
            received["bytes"] += len(response.body())
        except Exception:  # noqa: BLE001 (a redirect or an aborted response has no body)
            pass

    page = context.new_page()
    page.on("response", count)
    try:
        page.goto(url + "/", wait_until="commit")
        page.wait_for_selector(READY.format(view="documents"), state="attached", timeout=TIMEOUT_MS)
        first_load = page.evaluate("performance.now()")
        load_bytes = received["bytes"]
        page.evaluate("window.__benchT0 = performance.now()")
        page.click(TAB.format(view="graph"))
        page.wait_for_selector(READY.format(view="graph"), state="attached", timeout=TIMEOUT_MS)
        graph_ms = page.evaluate("performance.now() - window.__benchT0")
        drawn = page.evaluate("document.querySelector('#view-graph').dataset.nodes || null")
        return {"first_load_ms": round(first_load, 1), "first_load_bytes": load_bytes,
                "graph_render_ms": round(graph_ms, 1), "graph_bytes": received["bytes"] - load_bytes,
                "graph_nodes_drawn": int(drawn) if drawn else None}
    finally:
        context.close()


def summary(samples: list[dict], key: str) -> dict:
    values = [s[key] for s in samples if s.get(key) is not None]
    if not values:
        return {}
    return {"median": round(statistics.median(values), 1), "max": round(max(values), 1), "n": len(values)}


def size_run(n: int, work: Path, args: Any, browser: Any) -> dict:
    from ..entrypoints.http.server import make_server

    engine, figures = build(n, work, args)
    server = make_server(engine, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        layers = {str(k): v for k, v in sorted(engine.graph.layer_sizes().items())}
        measure(browser, server.url)  # warm: the server's first requests, the browser's disk cache off anyway
        samples = []
        with progress(args.repeats, f"console at {n} chunks", enabled=not args.no_progress) as bar:
            for _ in range(args.repeats):
                samples.append(measure(browser, server.url))
                bar.update(1)
    finally:
        server.shutdown()
        server.server_close()
    return {"chunks": n, "layers": layers, "build": figures, "samples": samples,
            "first_load_ms": summary(samples, "first_load_ms"), "graph_render_ms": summary(samples, "graph_render_ms"),
            "first_load_bytes": summary(samples, "first_load_bytes"), "graph_nodes_drawn": summary(samples, "graph_nodes_drawn")}


def run(args: Any) -> dict:
    from playwright.sync_api import sync_playwright

    sizes = [SMOKE_SIZE] if args.smoke else [int(x) for x in args.sizes.split(",") if x.strip()]
    if args.smoke:
        args.repeats = 1
    work = Path(args.store)
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium)
        try:
            runs = [size_run(n, work, args, browser) for n in sizes]
            version = browser.version
        finally:
            browser.close()
    result = {"sizes": runs, "repeats": args.repeats, "smoke": bool(args.smoke), "browser": f"Chromium {version}",
              "viewport": VIEWPORT, "seconds": round(time.perf_counter() - started, 1),
              "note": "synthetic one-chunk documents of random words; hashing embedder (no model); server and "
                      "browser on the same machine"}
    return finish(result, args, "console")
