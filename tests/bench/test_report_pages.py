"""The benchmark pages: which run is current (the newest of the current code per benchmark and
data set), one table of current targets with each target once, the archive of superseded runs
with why, links that resolve, and a rerun that changes nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

from eragraph.bench.report import render

DOCS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
LINK = re.compile(r"\]\(([^)#\s]*)(#[^)\s]*)?\)")


def retrieval(date: str, recall: float, **extra) -> dict:
    return {"benchmark": "retrieval", "command": "eragraph bench retrieval", "questions": 3, "documents": 10,
            "embedder": "hash", "k": [5], "run": {"date": date, "commit": "c" * 40, "machine": {"cpu": "X"}},
            "modes": {m: {"recall@5": recall, "recall@5_with_summaries": recall, "latency_ms_p50": 1.0,
                          "latency_ms_p95": 2.0} for m in ("dense", "tri_graph")}, **extra}


def write(results: Path, name: str, data: dict) -> None:
    results.mkdir(exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")


def target_rows(index: str) -> list[list[str]]:
    table = index[index.index("## Current targets"):index.index("## Pages")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()
            if line.startswith("| ") and not line.startswith("| target |")]


def test_the_newest_run_of_current_code_is_current_and_the_rest_are_archived(tmp_path):
    results = tmp_path / "results"
    corpus = {"corpus": "../shared/data/musique/corpus.jsonl"}
    write(results, "retrieval-musique-minilm-old", retrieval("2026-11-20T00:00:00Z", 0.60, **corpus))
    write(results, "retrieval-musique-minilm-x-before", retrieval("2026-11-23T00:00:00Z", 0.61, **corpus))
    write(results, "retrieval-musique-minilm-x-after", retrieval("2026-11-22T00:00:00Z", 0.64, **corpus))
    pages, _ = render(results, tmp_path / "site")
    rows = target_rows(pages["index.md"])
    [row] = [r for r in rows if r[0] == "musique: best graph mode Recall@5 ≥ 0.63"]
    assert row[1].startswith("tri_graph 0.640") and row[2] == "**met**"
    assert "[`retrieval-musique-minilm-x-after.json`](retrieval.md)" in row[4] and row[5].startswith("`cccccccccccc`")
    assert "### retrieval-musique-minilm-x-after" in pages["retrieval.md"]
    assert "### retrieval-musique-minilm-old" not in pages["retrieval.md"]
    archive = pages["archive.md"]
    old = archive[archive.index("### retrieval-musique-minilm-old"):]
    assert "*Superseded*: replaced by `retrieval-musique-minilm-x-after.json`" in old
    before = archive[archive.index("### retrieval-musique-minilm-x-before"):]
    assert "*Superseded*: the before-run of a before / after comparison: older code." in before
    superseded = archive[archive.index("## Targets measured by superseded runs"):]
    assert "| musique: best graph mode Recall@5 ≥ 0.63 | tri_graph 0.600 (dense 0.600) | **missed** |" in superseded
    # the comparison whose after-run is current stays on the benchmark's page
    assert "### retrieval-musique-minilm-x: before / after" in pages["retrieval.md"]
    assert ": before / after" not in archive


def test_a_run_of_older_code_is_never_current(tmp_path):
    results = tmp_path / "results"
    growth = json.loads((DOCS.parents[1] / "bench-results" / "growth-multihop_rag-minilm.json").read_text())
    write(results, "growth-a", {**growth, "code_note": "older"})
    pages, _ = render(results, tmp_path / "site")
    assert "No current results." in pages["growth.md"] and "### growth-a" in pages["archive.md"]
    assert "*Superseded*: older code" in pages["archive.md"]
    assert not [r for r in target_rows(pages["index.md"]) if "growth-a" in r[4]]


def test_a_rerun_changes_nothing_and_every_link_resolves(tmp_path):
    results = tmp_path / "results"
    write(results, "retrieval-popqa-a", retrieval("2026-11-20T00:00:00Z", 0.5))
    write(results, "retrieval-popqa-b", retrieval("2026-11-21T00:00:00Z", 0.5))
    (results / "notes.md").write_text("## Notes\n\nsee [retrieval](retrieval.md)\n", encoding="utf-8")
    first, _ = render(results, tmp_path / "site")
    second, _ = render(results, tmp_path / "site")
    assert first == second
    for name, text in first.items():
        for target, anchor in LINK.findall(text):
            if not target:  # a heading of the same page: a run's section
                assert f"### {anchor[1:]}\n" in text, (name, anchor)
                continue
            assert target in first or (tmp_path / "site" / target).is_file(), (name, target)


def test_the_committed_pages_hold_each_target_once_and_their_links_resolve():
    """docs/benchmarks/ as committed (regenerated from bench-results/): one row per target, every
    relative link to a page or plot beside it."""
    rows = target_rows((DOCS / "index.md").read_text(encoding="utf-8"))
    assert rows and len({r[0] for r in rows}) == len(rows)
    assert all(r[2] in ("**met**", "**missed**", "not measured") for r in rows)
    for page in DOCS.glob("*.md"):
        text = page.read_text(encoding="utf-8")
        for target, anchor in LINK.findall(text):
            assert (DOCS / target).is_file() if target else f"### {anchor[1:]}\n" in text, (page.name, target, anchor)
