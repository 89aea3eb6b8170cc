"""The evaluation data beside the project (../shared/data): a test that needs it skips when it is
absent, except under CI (CI=true or ERAGRAPH_REQUIRE_BUILD=1, which scripts/test.sh sets), where a
missing data set is a failure: a gating run must not pass by skipping."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def required() -> bool:
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("ERAGRAPH_REQUIRE_BUILD") == "1"


def need(path: Path) -> Path:
    """``path`` if it exists; otherwise skip the calling test (fail it under CI)."""
    if path.exists():
        return path
    try:
        shown = "../shared/data/" + str(path.relative_to(SHARED_DATA))
    except ValueError:
        shown = path.name
    reason = f"{shown} not present (the evaluation data beside the project)"
    if required():
        pytest.fail(f"{reason}; under CI (CI=true or ERAGRAPH_REQUIRE_BUILD=1) it must be", pytrace=False)
    pytest.skip(reason)
