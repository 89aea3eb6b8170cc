"""Regenerate the benchmark pages under docs/benchmarks/ and their plots from the JSON results
under bench-results/.

    python -m eragraph.bench.report [--results bench-results] [--out docs/benchmarks]

Reads every benchmark's results (each written by `eragraph bench NAME --out FILE`; one module of
this package per benchmark holds its section, plots and targets), draws the plots into
OUT/plots/ and writes index.md (one table of current targets: each target once, from the current
run of its benchmark and dataset, with its file and commit), a page per benchmark, archive.md
(the superseded runs, each with why) and runs.md (every results file with its run). Every
hand-written ``bench-results/*.md`` section (an analysis no generator makes) is kept verbatim on
its benchmark's page, or as a page of its own. A rerun on the same results writes the same
pages (pages.py says which run is current)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .growth import growth_target_rows
from .pages import render
from .paired import before_after_section
from .retrieval import GRAPH_MODES, SINGLE_MODES
from .runs import run_info, run_line
from .scale import size_label

__all__ = ["GRAPH_MODES", "SINGLE_MODES", "before_after_section", "growth_target_rows", "main", "render",
           "run_info", "run_line", "size_label"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m eragraph.bench.report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default="bench-results", help="directory with the JSON results")
    p.add_argument("--out", default="docs/benchmarks", help="directory of the pages to write (plots under OUT/plots)")
    args = p.parse_args(argv)
    out = Path(args.out)
    pages, images = render(Path(args.results), out)
    for name, text in pages.items():
        (out / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(pages)} pages and {len(images)} plots under {out}")
    return 0
