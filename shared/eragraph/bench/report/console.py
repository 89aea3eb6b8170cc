"""The console page: the browser console's first load and summary-graph render by store size, in
headless Chromium (`eragraph bench console`), and their targets."""

from __future__ import annotations

from pathlib import Path

from .markdown import fmt, table, verdict
from .runs import command, run_line

PAGE = PREFIX = "console"
SKIP_SMOKE = True  # a smoke run checks the benchmark runs; its figures are not reported
TITLE = "Console: first load and graph render"
INTRO = ["`eragraph bench console`: headless Chromium (Debian's package, driven by Playwright) opens the console "
         "of `eragraph serve` over a synthetic store of one-chunk documents (hashing embedder, so no model is "
         "timed). First load: from navigation start until the documents view has drawn its first page, in a "
         "fresh browser context. Graph render: from the click on the summary-graph tab until its layers are "
         "drawn. Server and browser share the machine's two cores."]
# the product's own targets (the issue names the measures, not their bounds): a person waits at most
# about two seconds for the first screen, and a view switch stays under a second at any size
FIRST_LOAD_MS = 2000
GRAPH_RENDER_MS = 1000
TARGET_CHUNKS = {"first_load_ms": 10_000, "graph_render_ms": 100_000}


def dataset(name: str, data: dict) -> str:
    return ""


def section(name: str, d: dict, plots: Path) -> list[str]:
    out = [f"### {name}", "", f"Command: `{command(d)}`", "", run_line(d), "",
           f"{d.get('browser')}, viewport {d.get('viewport', {}).get('width')}×{d.get('viewport', {}).get('height')}, "
           f"median and max of {d.get('repeats')} fresh browser contexts per size (after one warm-up).", ""]
    rows = []
    for s in d.get("sizes", []):
        fl, gr = s.get("first_load_ms", {}), s.get("graph_render_ms", {})
        nodes = s.get("graph_nodes_drawn", {})
        layers = s.get("layers", {})
        rows.append([fmt(s["chunks"]), fmt(fl.get("median"), 0), fmt(fl.get("max"), 0),
                     fmt((s.get("first_load_bytes") or {}).get("median"), 0), fmt(gr.get("median"), 0),
                     fmt(gr.get("max"), 0), fmt(nodes.get("median"), 0),
                     " / ".join(f"{k}:{v}" for k, v in layers.items())])
    out += table(["chunks", "first load ms (median)", "max", "first-load bytes", "graph render ms (median)", "max",
                  "nodes drawn", "nodes per layer"], rows)
    return out + [""]


def _at(d: dict, chunks: int) -> dict | None:
    return next((s for s in d.get("sizes", []) if s.get("chunks") == chunks), None)


def targets(name: str, d: dict) -> list[list[str]]:
    rows = []
    for key, limit, label in (("first_load_ms", FIRST_LOAD_MS, "Console first load"),
                              ("graph_render_ms", GRAPH_RENDER_MS, "Console summary-graph render")):
        chunks = TARGET_CHUNKS[key]
        s = _at(d, chunks)
        if s is None or not s.get(key):
            continue
        v = s[key]["median"]
        ok = v <= limit
        rows.append([f"{label} ≤ {limit} ms at {chunks // 1000}k chunks", f"`{name}` (median of {s[key]['n']})",
                     f"{v:.0f} ms", verdict(ok), f"{limit - v:.0f} ms to spare" if ok else f"{v - limit:.0f} ms over"])
    return rows
