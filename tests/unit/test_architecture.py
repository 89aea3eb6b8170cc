"""The package's shape, drawn from its source with imports inside functions counted: no import
cycle and no import up a floor (type-only imports, under ``if TYPE_CHECKING:``, counted too), no
environment read outside config.py, no comparison with a profile's name outside the profiles, and
every Lambda handler at most 80 lines. Run `pytest tests/unit/test_architecture.py -q`; a failure
names the modules (and the edge) to move."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "shared"
HANDLER_MAX_LINES = 80

# domain < ports < adapters/providers < services < bootstrap < entrypoints < bench/training < cli:
# each floor is a package (the longest prefix names a module's floor), never a module list
FLOORS = (
    (0, ("eragraph", "eragraph.config", "eragraph.domain")),
    (1, ("eragraph.ports",)),
    (2, ("eragraph.adapters", "eragraph.providers")),
    (3, ("eragraph.services",)),
    (4, ("eragraph.bootstrap",)),
    (5, ("eragraph.entrypoints",)),
    (6, ("eragraph.bench", "eragraph.training")),
    (7, ("eragraph.entrypoints.cli", "eragraph.__main__")),
)
ENV_READERS = ("eragraph.config",)


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / "eragraph").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


def _known(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _typing_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes under ``if TYPE_CHECKING:`` (annotations only: never imported at run time)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def imports_of(module: str, typing_too: bool = False) -> set[str]:
    """Every eragraph module ``module`` imports, at module level or inside a function (not the
    ones under ``if TYPE_CHECKING:``, which only annotations read, unless ``typing_too``)."""
    is_package = MODULES[module].name == "__init__.py"
    found: set[str] = set()
    skip = set() if typing_too else _typing_only(TREES[module])
    for node in ast.walk(TREES[module]):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[:len(package) - (node.level - 1)]
                base = ".".join(package + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        found.update(m for m in map(_known, names) if m and m.startswith("eragraph") and m != module)
    return found


# a type-only import is still an edge a reader has to follow: the cycle and floor tests count it
GRAPH = {m: imports_of(m, typing_too=True) for m in MODULES}


def floor(module: str) -> int:
    best = None
    for level, prefixes in FLOORS:
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[1]):
                best = (level, len(p))
    assert best is not None, f"{module} is on no floor: add it to FLOORS"
    return best[0]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_checker_sees_imports_inside_functions():
    tree = ast.parse("def f():\n    from .modes import MODES\n    import eragraph.entrypoints.cli\n"
                     "if TYPE_CHECKING:\n    from .engine import Engine\n")
    TREES["eragraph.services.__probe__"] = tree
    MODULES["eragraph.services.__probe__"] = SRC / "eragraph/services/__probe__.py"
    try:
        assert imports_of("eragraph.services.__probe__") == {"eragraph.services.modes", "eragraph.entrypoints.cli"}
        assert imports_of("eragraph.services.__probe__", typing_too=True) == {
            "eragraph.services.modes", "eragraph.entrypoints.cli", "eragraph.services.engine"}
    finally:
        del TREES["eragraph.services.__probe__"], MODULES["eragraph.services.__probe__"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle():
    assert cycles(GRAPH) == []


def test_no_import_up_a_floor():
    up = sorted(f"{m} ({floor(m)}) -> {t} ({floor(t)})" for m, ts in GRAPH.items() for t in ts if floor(t) > floor(m))
    assert up == []


def _reads_environment(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv", "unsetenv"):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and \
                any(a.name in ("environ", "getenv") for a in node.names):
            lines.append(node.lineno)
    return lines


def test_the_environment_is_read_in_config_only():
    readers = {m: _reads_environment(TREES[m]) for m in MODULES
               if not any(m == p or m.startswith(p + ".") for p in ENV_READERS)}
    assert {m: lines for m, lines in readers.items() if lines} == {}
    assert _reads_environment(ast.parse("import os\nx = os.environ.get('A')\n")) == [2]


def test_handlers_read_no_environment_directly():
    for app in sorted((REPO / "functions").glob("*/app.py")):
        assert _reads_environment(ast.parse(app.read_text(encoding="utf-8"))) == [], app


@pytest.mark.parametrize("app", sorted((REPO / "functions").glob("*/app.py")), ids=lambda p: p.parent.name)
def test_each_handler_is_at_most_80_lines(app):
    lines = len(app.read_text(encoding="utf-8").splitlines())
    assert lines <= HANDLER_MAX_LINES, f"{app.parent.name}/app.py has {lines} lines"


PROFILE_NAMES = ("local", "memory", "aws", "moto")


def _profile_switches(tree: ast.AST) -> list[int]:
    """The lines that compare something with a profile's name (``x == "local"``,
    ``x in ("aws", "memory")``): a switch only the profile itself may hold."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                if any(isinstance(n, ast.Constant) and n.value in PROFILE_NAMES for n in items):
                    lines.append(node.lineno)
    return lines


def test_nothing_switches_on_a_profile_name():
    """The profile (bootstrap/profile.py and a subclass per backend) is the only place that
    knows a backend: callers ask it (``keeps_store``, ``exists``, ``delete``, ...)."""
    found = {m: _profile_switches(TREES[m]) for m in MODULES}
    assert {m: lines for m, lines in found.items() if lines} == {}
    assert _profile_switches(ast.parse("if profile == 'local':\n    pass\n")) == [1]


MODULE_MAX_LINES = 600
# a module that one reason to change keeps whole may pass the limit: its name, and the reason
LONG_MODULES: dict[str, str] = {}


def test_no_module_is_over_600_lines_without_a_stated_reason():
    long = {m: n for m, path in MODULES.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_MAX_LINES}
    assert {m: n for m, n in long.items() if m not in LONG_MODULES} == {}
    assert set(LONG_MODULES) <= set(long), "a module named in LONG_MODULES is no longer long: drop it"
