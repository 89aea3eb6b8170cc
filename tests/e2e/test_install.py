"""The README's two commands install into one isolated environment, which they create and reuse.

scripts/test.sh (what CI runs) exports ERAGRAPH_REQUIRE_BUILD=1; under it this suite must be
running in the checkout's virtual environment (or the one ERAGRAPH_VENV names), never in the
interpreter first on PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# longer than the suite's per-test limit (pyproject.toml): reruns scripts/install.sh; alone: that
# reinstalls the package into the environment every other test runs in (scripts/test.sh runs
# these first, by themselves)
pytestmark = [pytest.mark.timeout(900), pytest.mark.alone]

ROOT = Path(__file__).resolve().parents[2]
VIA_TEST_SH = os.environ.get("ERAGRAPH_REQUIRE_BUILD") == "1"


def _venv() -> Path:
    return (ROOT / os.environ.get("ERAGRAPH_VENV", ".venv")).resolve()


@pytest.mark.skipif(not VIA_TEST_SH, reason="checks the environment scripts/test.sh made")
def test_suite_runs_in_the_isolated_environment():
    assert sys.prefix != sys.base_prefix, f"not a virtual environment: {sys.prefix}"
    assert Path(sys.prefix).resolve() == _venv()
    import eragraph

    # the editable install points at this checkout's package
    assert Path(eragraph.__file__).resolve().is_relative_to(ROOT / "shared")
    # and the command the README uses is the environment's own
    found = subprocess.run(["bash", "-c", "command -v eragraph"], capture_output=True, text=True).stdout.strip()
    assert Path(found).resolve().parent == (_venv() / "bin").resolve()


@pytest.mark.skipif(not VIA_TEST_SH, reason="reruns scripts/install.sh, which scripts/test.sh has just run")
def test_install_reuses_the_environment_it_made():
    before = (_venv() / "pyvenv.cfg").stat().st_mtime_ns
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    out = subprocess.run(["bash", str(ROOT / "scripts" / "install.sh")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "reusing the virtual environment" in out.stderr
    assert "creating" not in out.stderr
    assert (_venv() / "pyvenv.cfg").stat().st_mtime_ns == before
    # pip run as root outside a venv warns; inside the environment it must not
    assert "running pip as the 'root' user" not in out.stderr.lower()
