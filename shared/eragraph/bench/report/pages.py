"""The pages of docs/benchmarks/: which run of each benchmark is current, the one table of
current targets (index.md), a page per benchmark, the archive of superseded runs and the list of
every results file.

A benchmark is a module of this package with ``PAGE`` (its page's file name), ``PREFIX`` (its
results files: ``PREFIX.json``, ``PREFIX-*.json``), ``TITLE``, ``INTRO``, ``dataset(name, data)``,
``section(name, data, plots)`` (one run, with its figures) and ``targets(name, data)`` (rows of
target, run, measured, verdict, gap); it may add ``older(name, data)`` (why a run measured older
code), ``notes(current, superseded)``, ``archive_notes(current, superseded)`` and ``SKIP_SMOKE``
(its smoke runs are not reported).

The current run of a benchmark and dataset is its newest results file whose code is current: not
the before-run of a before / after comparison (a ``before`` word in its name) and not marked as
older code by its benchmark. Every other run of that benchmark and dataset is superseded."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from . import (cold_start, console, deadline, filters, followup, growth, ingest, levers, load, query, retrieval, router,
               scale, vectors)
from .markdown import table
from .runs import date_key, every_file, machines_note, run_info, short_commit
from .runs import load as load_runs

BENCHMARKS: tuple[ModuleType, ...] = (growth, retrieval, levers, router, ingest, query, cold_start, scale, vectors,
                                      deadline, filters, load, console, followup)
COMMAND = "python -m eragraph.bench.report --results bench-results --out docs/benchmarks"
TIMING_NOTE = ("Timings are wall-clock and were taken while other processes shared the CPU, so seconds carry "
               "noise and compare only within a run; token and call counts are exact.")


@dataclass(frozen=True)
class Run:
    """One results file of a benchmark, with the data set it measured and, when it measured older
    code, why."""

    name: str
    data: dict
    bench: ModuleType
    dataset: str
    older: str | None

    @property
    def pair(self) -> tuple[str, dict]:
        return self.name, self.data


def older_code(bench: ModuleType, name: str, data: dict) -> str | None:
    if "before" in name.split("-"):
        return "the before-run of a before / after comparison: older code"
    return bench.older(name, data) if hasattr(bench, "older") else None


def runs_of(results: Path, bench: ModuleType) -> list[Run]:
    return [Run(name, data, bench, bench.dataset(name, data), older_code(bench, name, data))
            for name, data in load_runs(results, bench.PREFIX)
            if not (data.get("smoke") and getattr(bench, "SKIP_SMOKE", False))]


def choose(runs: list[Run]) -> tuple[list[Run], dict[str, str]]:
    """The current run of each dataset, and for every other run why it is superseded."""
    current, why = [], {}
    for dataset in sorted({run.dataset for run in runs}):
        group = [run for run in runs if run.dataset == dataset]
        fresh = [run for run in group if not run.older]
        newest = max(fresh, key=lambda run: (date_key(run.data), run.name)) if fresh else None
        for run in group:
            if run is newest:
                current.append(run)
            else:
                on = f" on {dataset}" if dataset and dataset != run.name else ""
                why[run.name] = run.older or (f"replaced by `{newest.name}.json`, the newest run of the current "
                                              f"code{on}")
    return sorted(current, key=lambda run: run.name), why


def linked(row: list[str], run: Run, page: str) -> str:
    """The run cell of a target row, its file name linking to the page that shows it."""
    return str(row[1]).replace(f"`{run.name}`", f"[`{run.name}.json`]({page})", 1)


def commit_cell(data: dict) -> str:
    info = run_info(data)
    return f"{short_commit(info['commit'])}, {info['date'][:10]}"


def target_rows(current: list[Run], superseded: list[Run], why: dict[str, str]) -> tuple[list, list]:
    """The current table (each target once: a target two current runs measure keeps the newer
    run's row) and the superseded runs' rows with why."""
    rows: dict[str, tuple[Run, list]] = {}
    old = [(run, row, why[run.name]) for run in superseded for row in run.bench.targets(run.name, run.data)]
    for run in current:
        for row in run.bench.targets(run.name, run.data):
            seen = rows.get(row[0])
            if seen and date_key(seen[0].data) >= date_key(run.data):
                old.append((run, row, f"the same target from a newer current run, `{seen[0].name}.json`"))
                continue
            if seen:
                old.append((*seen, f"the same target from a newer current run, `{run.name}.json`"))
            rows[row[0]] = (run, row)
    now = [[row[0], row[2], row[3], row[4], linked(row, run, f"{run.bench.PAGE}.md"), commit_cell(run.data)]
           for run, row in rows.values()]
    then = [[row[0], row[2], row[3], linked(row, run, "#" + run.name.lower()), reason]
            for run, row, reason in old]
    return now, then


def bench_page(bench: ModuleType, current: list[Run], superseded: list[Run], plots: Path,
               written: list[str]) -> str:
    lines = [f"# {bench.TITLE}", ""]
    for paragraph in bench.INTRO:
        lines += [paragraph, ""]
    if superseded:
        lines += [f"{len(superseded)} superseded run{'s are' if len(superseded) != 1 else ' is'} in the "
                  "[archive](archive.md).", ""]
    lines += ["## Current runs", ""]
    for run in current:
        lines += bench.section(run.name, run.data, plots)
    if not current:
        lines += ["No current results.", ""]
    if hasattr(bench, "notes"):
        lines += bench.notes([r.pair for r in current], [r.pair for r in superseded])
    lines += written
    return "\n".join(lines).rstrip() + "\n"


def archive_page(chosen: list[tuple[ModuleType, list[Run], list[Run]]], why: dict[str, str], old_rows: list,
                 plots: Path) -> str:
    lines = ["# Archive: superseded runs", "",
             "Runs that no longer give a current figure, each with why. The current run of a benchmark and "
             "dataset is its newest results file whose code is current: not the before-run of a before / after "
             "comparison and not marked as older code. Every other run of that benchmark and dataset is "
             "superseded and kept here, with its command, its run and its figures.", "",
             "## Targets measured by superseded runs", ""]
    lines += table(["target", "measured", "verdict", "run", "superseded"], old_rows) if old_rows else ["None."]
    lines += [""]
    for bench, current, superseded in chosen:
        if not superseded:
            continue
        lines += [f"## {bench.TITLE}", "", f"Current runs: [{bench.PAGE}.md]({bench.PAGE}.md).", ""]
        for run in superseded:
            section = bench.section(run.name, run.data, plots)
            lines += section[:2] + [f"*Superseded*: {why[run.name]}.", ""] + section[2:]
        if hasattr(bench, "archive_notes"):
            lines += bench.archive_notes([r.pair for r in current], [r.pair for r in superseded])
    return "\n".join(lines).rstrip() + "\n"


def written_pages(results: Path) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The hand-written sections: every ``*.md`` beside the results (an analysis no generator makes),
    verbatim, in file-name order. One whose name starts with a benchmark's prefix goes on that
    benchmark's page; any other is a page of its own, its headings raised one level."""
    on_pages: dict[str, list[str]] = {}
    own: dict[str, str] = {}
    for path in sorted(results.glob("*.md")):
        text = path.read_text(encoding="utf-8").strip()
        bench = next((b for b in BENCHMARKS if path.stem == b.PREFIX or path.stem.startswith(b.PREFIX + "-")), None)
        if bench:
            on_pages.setdefault(bench.PAGE, []).extend([text, ""])
        else:
            own[path.stem] = "\n".join(line[1:] if line.startswith("##") else line
                                       for line in text.splitlines()) + "\n"
    return on_pages, own


def title_of(text: str) -> str:
    return next((line[2:] for line in text.splitlines() if line.startswith("# ")), "")


def runs_page(results: Path, status: dict[str, tuple[str, str]], own: dict[str, str]) -> str:
    files = every_file(results)
    rows = []
    for name, data in files:
        page, state = status.get(name[:-len(".json")], ("", ""))
        if not page:
            page = next((f"[{p}]({p}.md)" for p in sorted(own) if name.startswith(p)), "–")
        r = run_info(data)
        rows.append([f"`{name}`", page, state or "–", r["date"], short_commit(r["commit"]), r["cpu"], r["cores"],
                     r["python"]])
    return "\n".join(["# Runs", "", "The date, code and machine of every file in `bench-results/`, as the file "
                      "records them (files written before runs recorded their commit say so), the page that shows "
                      "it and whether it is current or superseded.", "", machines_note(files), "",
                      *table(["file", "page", "status", "date", "commit", "CPU", "cores", "Python"], rows)]) + "\n"


def index_page(results: Path, now_rows: list, chosen: list, own: dict[str, str]) -> str:
    lines = ["# Benchmarks", "",
             "Generated by `python -m eragraph.bench.report` from the JSON results in `bench-results/`; do not "
             "edit by hand. Every figure comes from one of those files, and every file records the command that "
             "produced it.", "", machines_note(every_file(results)) + " " + TIMING_NOTE, "",
             "## Current targets", "",
             "Each target once, from the current run of its benchmark and dataset: the newest results file whose "
             "code is current (not the before-run of a before / after comparison, not marked as older code). "
             "Superseded runs and the verdicts they gave are in the [archive](archive.md).", ""]
    lines += table(["target", "measured", "verdict", "gap", "run", "commit, date"], now_rows) if now_rows \
        else ["No results yet."]
    lines += ["", "## Pages", ""]
    for bench, current, superseded in chosen:
        lines.append(f"- [{bench.TITLE}]({bench.PAGE}.md): {len(current)} current, {len(superseded)} superseded")
    lines += [f"- [{title_of(text) or name}]({name}.md): written by hand" for name, text in sorted(own.items())]
    lines += ["- [Archive: superseded runs](archive.md)", "- [Runs](runs.md): every results file", "",
              "## Regenerate", "", "From the repository's root:", "", "```sh", f"PYTHONPATH=shared {COMMAND}", "```"]
    return "\n".join(lines) + "\n"


def render(results: Path, out: Path) -> tuple[dict[str, str], list[Path]]:
    """Every page (file name under ``out`` -> text) from the results folder; the plots are drawn
    into ``out/plots`` (returned)."""
    plots = out / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    on_pages, own = written_pages(results)
    chosen, why, status = [], {}, {}
    now_rows, old_rows = [], []
    pages: dict[str, str] = {}
    for bench in BENCHMARKS:
        runs = runs_of(results, bench)
        current, reasons = choose(runs)
        superseded = [run for run in runs if run.name in reasons]
        why.update(reasons)
        chosen.append((bench, current, superseded))
        for run in runs:
            status[run.name] = (f"[{bench.PAGE}]({bench.PAGE}.md)", "superseded" if run.name in reasons else "current")
        now, then = target_rows(current, superseded, reasons)
        now_rows += now
        old_rows += then
        pages[f"{bench.PAGE}.md"] = bench_page(bench, current, superseded, plots, on_pages.get(bench.PAGE, []))
    pages.update({f"{name}.md": text for name, text in own.items()})
    pages["archive.md"] = archive_page(chosen, why, old_rows, plots)
    pages["runs.md"] = runs_page(results, status, own)
    pages["index.md"] = index_page(results, now_rows, chosen, own)
    return pages, sorted(plots.glob("*.png"))
