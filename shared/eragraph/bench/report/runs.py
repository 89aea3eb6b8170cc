"""The run a results file records (date, commit, machine) and reading the files."""

from __future__ import annotations

import json
from pathlib import Path


NOT_RECORDED = "not recorded"


def run_info(data: dict) -> dict:
    """A result's run: date (UTC), commit and machine (CPU model, cores, Python), from its
    ``run`` key (common.run_record), else from the fields older results kept (``finished_at``,
    ``machine``; ``date``, ``commit``, ``cpu``, ``cores``, ``python`` at the top); what a file
    does not record is "not recorded", never filled in from this machine."""
    run = data.get("run") or {}
    m = run.get("machine") or data.get("machine") or {}
    if isinstance(m, str):  # a one-line description (mutation.json): "x86_64, 2 cores"
        m = {"cpu": m}
    date = run.get("date") or data.get("finished_at") or data.get("date")
    return {"date": str(date) if date else NOT_RECORDED,
            "commit": str(run.get("commit") or data.get("commit") or NOT_RECORDED),
            "cpu": str(m.get("cpu") or data.get("cpu") or NOT_RECORDED),
            "cores": m.get("cores") or data.get("cores") or data.get("cpus") or NOT_RECORDED,
            "python": str(m.get("python") or data.get("python") or NOT_RECORDED)}


def short_commit(commit: str) -> str:
    if commit == NOT_RECORDED:
        return commit
    head, _, dirty = commit.partition("+")
    head = head.split("-dirty")[0]
    return f"`{head[:12]}`" + (" (uncommitted changes)" if dirty or commit.endswith("-dirty") else "")


def run_line(data: dict) -> str:
    """One line naming the run: date, commit, machine."""
    r = run_info(data)
    cores = f"{r['cores']} cores" if r["cores"] != NOT_RECORDED else f"cores {NOT_RECORDED}"
    return (f"Run: {r['date']}; commit {short_commit(r['commit'])}; machine: {r['cpu']}, {cores}, "
            f"Python {r['python']}.")


def load(results: Path, prefix: str) -> list[tuple[str, dict]]:
    """Every results file of one benchmark (``PREFIX.json`` and ``PREFIX-*.json``), by name,
    as (its name without ``.json``, its JSON)."""
    out = []
    paths = [results / f"{prefix}.json"] if (results / f"{prefix}.json").exists() else []
    for path in paths + sorted(results.glob(f"{prefix}-*.json")):
        try:
            out.append((path.stem, json.loads(path.read_text(encoding="utf-8"))))
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}: not JSON ({exc})") from None
    return out


def command(data: dict) -> str:
    """The recorded command, with a doubled `bench NAME` (older results) collapsed."""
    text = str(data.get("command", ""))
    name = data.get("benchmark", "")
    doubled = f"eragraph bench {name} bench {name} "
    return text.replace(doubled, f"eragraph bench {name} ", 1) if name else text


def date_key(data: dict) -> str:
    """A run's date as a sortable string (UTC ISO dates compare as text; "" when not recorded)."""
    date = run_info(data)["date"]
    return "" if date == NOT_RECORDED else date[:19]


def machines_note(files: list[tuple[str, dict]]) -> str:
    """Which CPU models the results were measured on (they are not all the same)."""
    counts: dict[str, int] = {}
    for _name, data in files:
        cpu = run_info(data)["cpu"]
        counts[cpu] = counts.get(cpu, 0) + 1
    listed = "; ".join(f"{cpu}: {n} file{'s' if n != 1 else ''}" for cpu, n in sorted(counts.items()))
    return (f"Machines: the runs were not all made on one machine ({listed}); each section names its "
            "run's date, commit and machine, and the [runs page](runs.md) lists every file.")


def every_file(results: Path) -> list[tuple[str, dict]]:
    """Every JSON file of the results folder (name with ``.json``, its JSON), by name; a file
    that is not JSON is left out."""
    out = []
    for path in sorted(results.glob("*.json")):
        try:
            out.append((path.name, json.loads(path.read_text(encoding="utf-8"))))
        except json.JSONDecodeError:
            continue
    return out


def corpus_name(name: str, data: dict) -> str:
    """The data set a run measured: the folder of its ``corpus`` (``../shared/data/musique/corpus.jsonl``
    -> ``musique``; a dev subset of HotpotQA is HotpotQA), else the second word of its file name."""
    corpus = data.get("corpus")
    if corpus:
        return Path(str(corpus)).parent.name
    parts = name.split("-")
    return parts[1] if len(parts) > 1 else ""
