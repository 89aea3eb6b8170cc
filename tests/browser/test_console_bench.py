"""`eragraph bench console --smoke`: the console benchmark runs end to end in Chromium (a small
synthetic store, one repeat) and its figures are what it measured: positive times, the bytes of
the first load, no more graph nodes drawn than the store's layers hold, and a report page."""

from __future__ import annotations

import json

from serve_support import eragraph


def test_the_console_bench_measures_first_load_and_graph_render(tmp_path, chromium_path):
    out_file = tmp_path / "console.json"
    out = eragraph("bench", "console", "--smoke", "--store", str(tmp_path / "work"), "--no-progress",
                   "--chromium", chromium_path, "--out", str(out_file))
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out_file.read_text())
    [size] = data["sizes"]
    assert size["chunks"] == 300 and int(size["layers"]["0"]) == 300
    assert 0 < size["first_load_ms"]["median"] < 60_000 and 0 < size["graph_render_ms"]["median"] < 60_000
    assert size["first_load_bytes"]["median"] > 1000  # the page, its modules and the first API answers
    drawn = size["graph_nodes_drawn"]["median"]
    assert 0 < drawn <= sum(int(v) for v in size["layers"].values())
    assert data["command"].startswith("eragraph bench console") and data["run"]["commit"]

    from eragraph.bench.report import render

    results = tmp_path / "results"
    results.mkdir()
    (results / "console.json").write_text(json.dumps({**data, "smoke": False}))
    pages, _ = render(results, tmp_path / "pages")
    assert "console.md" in pages and "first load ms" in pages["console.md"]
