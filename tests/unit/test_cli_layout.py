"""The `eragraph` command's package (eragraph.cli) keeps its shape: it reaches the
adapters only through bootstrap (build_engine and bootstrap.store_access), and each of its
modules stays small (one per command group, the parser, the progress display, store access and
the renderers apart). Run `pytest tests/unit/test_cli_layout.py -q`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[2] / "shared" / "eragraph" / "cli"
MODULES = sorted(CLI.glob("*.py"))
assert MODULES, CLI  # a moved package must not leave the checks with nothing to check
MAX_LINES = 300


def imported(source: str) -> set[str]:
    """The absolute names of what a CLI module's ``source`` imports (at module level or in a function)."""
    package = ["eragraph", "cli"]
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - (node.level - 1)] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            out.update(f"{name}.{a.name}" for a in node.names)
    return out


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_the_cli_reaches_adapters_only_through_bootstrap(path):
    assert not {m for m in imported(path.read_text(encoding="utf-8")) if m.startswith("eragraph.adapters")}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_each_cli_module_is_small(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


def test_the_checker_resolves_relative_imports():
    source = "import json\ndef f():\n    from ..adapters.local.files import writer_lock\n    from . import store\n"
    assert imported(source) == {"json", "eragraph.adapters.local.files.writer_lock", "eragraph.cli.store"}
