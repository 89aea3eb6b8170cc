"""The metadata filters page: query latency and recall by selectivity (`eragraph bench filters`)."""

from __future__ import annotations

from pathlib import Path

from .markdown import fmt, table
from .runs import command, run_line

PAGE = PREFIX = "filters"
SKIP_SMOKE = True  # a smoke run checks the benchmark runs; its figures are not reported
TITLE = "Metadata filters: query latency by selectivity"
INTRO = ["`eragraph bench filters`: one-chunk documents with the metadata `{\"bucket\": i % 100}` on the local "
         "profile; warm latency of the same questions unfiltered and under `bucket < s` (s % of the documents "
         "allowed), question vectors computed before the clock. Recall@5 compares the `dense` answer with the "
         "exact top 5 of the allowed leaves (unfiltered: of all leaves), so it shows what the approximate "
         "index gives up with and without a filter; leaks count results outside the filter."]


def dataset(name: str, data: dict) -> str:
    return ""


def targets(name: str, data: dict) -> list[list[str]]:
    return []


def section(name: str, d: dict, plots: Path) -> list[str]:
    out: list[str] = []
    rows = []
    for mode, by_filter in d["modes"].items():
        for label, r in by_filter.items():
            rows.append([mode, label, fmt(r["latency_ms_p50"]), fmt(r["latency_ms_p95"]),
                         fmt(r.get("p95_vs_unfiltered")), fmt(r.get("recall_at_k", "")),
                         r.get("leaks", "")])
    out += [f"### {name}", "", f"Command: `{command(d)}`", "", run_line(d), "",
            f"{fmt(d['chunks'])} chunks ({d['embedder']} embedder), vector index: "
            f"{(d.get('vector_index_shape') or {}).get('kind', 'n/a')}.", "",
            *table(["mode", "filter", "p50 ms", "p95 ms", "p95 / unfiltered", "recall@5", "leaks"], rows), ""]
    return out
