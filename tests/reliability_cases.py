"""The reliability suite's record of cases tried and held. Each fault-injection test calls
``record``; with ERAGRAPH_RELIABILITY_OUT set, tests/conftest.py writes them as JSON at the
end of the session and ``scripts/reliability_report.py`` renders docs/reliability.md from it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from eragraph.bench.common import run_record

CASES: list[dict] = []


def record(case: str, profile: str, held: bool, **stats) -> None:
    CASES.append({"case": case, "profile": profile, "held": bool(held), **stats})


def write(path: str | None = None) -> None:
    target = path or os.environ.get("ERAGRAPH_RELIABILITY_OUT")
    if not target or not CASES:
        return
    Path(target).write_text(json.dumps({
        "run": run_record(), "cases": CASES}, indent=1) + "\n")
