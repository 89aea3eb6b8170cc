"""Render the reliability suite's cases (the JSON written with ERAGRAPH_RELIABILITY_OUT set)
into the table of docs/reliability.md (the default target), between its ``<!-- cases -->`` and
``<!-- /cases -->`` lines.

    ERAGRAPH_RELIABILITY_OUT=bench-results/reliability.json python -m pytest -q -m "not live" \\
        tests/e2e/test_faults.py tests/aws/test_faults.py tests/e2e/test_concurrent_writers.py \\
        tests/aws/test_concurrent_counters.py tests/e2e/test_killed_ingest.py
    python scripts/reliability_report.py bench-results/reliability.json [docs/reliability.md]

The cases of another pytest run (one with a knob set, e.g. the full killed-process run) are
added to the results file first with

    python scripts/reliability_report.py --add killed.json bench-results/reliability.json
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "shared"))
from eragraph.bench.report import run_line  # noqa: E402

# the page the table is written into when no target is given
DEFAULT_TARGET = Path(__file__).resolve().parents[1] / "docs" / "reliability.md"
COLUMNS = ("operations", "s3_deliveries", "messages_sent", "message_deliveries", "failed_deliveries")


def table(data: dict) -> str:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for case in data["cases"]:
        groups[(case["case"], case["profile"])].append(case)
    lines = [run_line(data), "",
             "| case | profile | runs | held | sub-cases | S3 ops | S3 deliveries | messages sent "
             "| message deliveries | failed deliveries (redelivered) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (name, profile), cases in groups.items():
        total = {c: sum(int(x.get(c, 0)) for x in cases) for c in COLUMNS}
        sub = sum(int(x.get("cases", 1)) for x in cases)
        held = sum(bool(x["held"]) for x in cases)
        cells = [str(total[c]) if any(c in x for x in cases) else "" for c in COLUMNS]
        lines.append(f"| {name} | {profile} | {len(cases)} | {held}/{len(cases)} | {sub} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def add(source: Path, target: Path) -> None:
    """Append the cases of ``source`` (same machine and Python) to ``target``."""
    extra, data = json.loads(source.read_text()), json.loads(target.read_text())
    if (extra["python"], extra["cpus"]) != (data["python"], data["cpus"]):
        raise SystemExit(f"{source} was run on another machine or Python than {target}")
    data["cases"] += extra["cases"]
    target.write_text(json.dumps(data, indent=1) + "\n")


def main(argv: list[str]) -> int:
    if argv[1] == "--add":
        add(Path(argv[2]), Path(argv[3]))
        return 0
    source, target = Path(argv[1]), Path(argv[2]) if len(argv) > 2 else DEFAULT_TARGET
    data = json.loads(source.read_text())
    doc = target.read_text()
    start, end = doc.index("<!-- cases -->"), doc.index("<!-- /cases -->")
    target.write_text(doc[:start] + "<!-- cases -->\n" + table(data) + "\n" + doc[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
