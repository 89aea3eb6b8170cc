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
    (7, ("eragraph.cli", "eragraph.__main__")),
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
    tree = ast.parse("def f():\n    from .modes import MODES\n    import eragraph.cli\n"
                     "if TYPE_CHECKING:\n    from .engine import Engine\n")
    TREES["eragraph.services.__probe__"] = tree
    MODULES["eragraph.services.__probe__"] = SRC / "eragraph/services/__probe__.py"
    try:
        assert imports_of("eragraph.services.__probe__") == {"eragraph.services.modes", "eragraph.cli"}
        assert imports_of("eragraph.services.__probe__", typing_too=True) == {
            "eragraph.services.modes", "eragraph.cli", "eragraph.services.engine"}
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


# ----- the ports: who may reach an adapter or a provider directly -----
# the composition root builds adapters; an adapter may use another; the benchmarks compare adapters
ADAPTER_IMPORTERS = ("eragraph.bootstrap", "eragraph.adapters", "eragraph.bench")
# the providers services and entrypoints import directly (each with its reason); any other goes
# through a port (ports.providers) or the composition root
PROVIDER_IMPORTS: dict[str, str] = {
    "eragraph.entrypoints.bedrock_kb.runtime -> eragraph.providers.prompts": "ModelCallError, answered as the service's DependencyFailedException",
    "eragraph.entrypoints.http.errors -> eragraph.providers.prompts": "ModelCallError, answered 502",
    "eragraph.cli.ingest -> eragraph.providers.extractors": "the file readers' kinds and limits (pure: bytes in, text out)",
    "eragraph.services.kb_jobs -> eragraph.providers.extractors": "the file readers' limits (pure: bytes in, text out)",
    "eragraph.services.object_events -> eragraph.providers.extractors": "the file readers (pure: bytes in, text out)",
    "eragraph.services.place_migration -> eragraph.providers.extractors": "the file readers' limits, to read a source again (pure)",
    "eragraph.services.sources -> eragraph.providers.extractors": "the file readers (pure: bytes in, text out)",
}


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_only_the_composition_root_reaches_an_adapter():
    """Services, entrypoints and every other floor but bootstrap use a port; the adapter behind
    it is chosen in bootstrap (a service importing adapters.aws.* fails here, whatever its floor)."""
    found = sorted(f"{m} -> {t}" for m, ts in GRAPH.items() for t in ts
                   if _within(t, ("eragraph.adapters",)) and not _within(m, ADAPTER_IMPORTERS))
    assert found == []


def test_services_and_entrypoints_reach_providers_only_where_stated():
    found = {f"{m} -> {t}" for m, ts in GRAPH.items() for t in ts if _within(t, ("eragraph.providers",))
             and _within(m, ("eragraph.services", "eragraph.entrypoints", "eragraph.cli"))}
    assert found == set(PROVIDER_IMPORTS)


# ----- imports made at run time (importlib): found and judged as the static ones -----
LOADERS = ("import_module", "spec_from_file_location", "__import__")
# loads whose target is computed (a name given at run time), each with what it may load
COMPUTED_LOADS: dict[str, str] = {
    "eragraph.adapters.local": "its own adapters, lazily (``__getattr__`` over a fixed table of its modules)",
    "eragraph.bootstrap.preflight": "the third-party packages a profile's providers need (a check that they load)",
    "eragraph.entrypoints.http.asgi": "a streamed route's module under entrypoints.http, named by the route table (routes.Route.asgi)",
    "eragraph.providers.extractors": "the third-party readers of a file kind (pypdf, python-docx), when first met",
}
# files outside the package that package code loads by path, each with its reason: none may be added silently
FILE_LOADS: dict[tuple[str, str], str] = {
    ("eragraph.bench.deadline", "functions/summarize/app.py"): "the deadline bench drives the summarize Lambda handler as deployed",
    ("eragraph.bench.load", "functions/query/app.py"): "the load bench's Lambda target: the query handler as deployed",
    ("eragraph.bench.moto", "tests/aws/fake_opensearch.py"): "the moto bench's OpenSearch stand-in (moto has none); skipped when absent",
}


def _constants(tree: ast.AST) -> dict[str, str]:
    """The module's top-level NAME = "string" assignments (a path part named once)."""
    out = {}
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            out.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
    return out


def _path_parts(node: ast.AST, names: dict[str, str], assigned: dict[str, ast.AST], seen=()) -> list[str]:
    """The literal parts of a path expression in source order (``root / "a" / NAME``), a local
    name followed to the expression assigned to it."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name):
        if node.id in names:
            return [names[node.id]]
        if node.id in assigned and node.id not in seen:
            return _path_parts(assigned[node.id], names, assigned, (*seen, node.id))
        return []
    if isinstance(node, ast.BinOp):
        return _path_parts(node.left, names, assigned, seen) + _path_parts(node.right, names, assigned, seen)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Path":
        return [p for arg in node.args for p in _path_parts(arg, names, assigned, seen)]
    return []


def dynamic_loads(module: str) -> list[tuple[str, str]]:
    """(kind, target) of each run-time load in ``module``: ("module", an eragraph module or the
    literal prefix of an f-string name), ("file", a repository path joined from the literal path
    parts), or ("computed", "") when the target is no literal."""
    tree = TREES[module]
    names = _constants(tree)
    assigned = {t.id: n.value for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name)}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if called not in LOADERS or not node.args:
            continue
        if called == "spec_from_file_location":
            parts = [p for arg in node.args[1:2] for p in _path_parts(arg, names, assigned)]
            out.append(("file", "/".join(parts)))
            continue
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            out.append(("module", first.value))
        elif isinstance(first, ast.JoinedStr) and first.values and isinstance(first.values[0], ast.Constant):
            out.append(("module", str(first.values[0].value).rstrip(".")))
        else:
            out.append(("computed", ""))
    return out


DYNAMIC = {m: dynamic_loads(m) for m in MODULES}


def test_run_time_imports_of_the_package_keep_to_the_floors():
    """importlib.import_module("eragraph.x") is an import like any other: no load up a floor."""
    edges = [(m, _known(t)) for m, loads in DYNAMIC.items() for kind, t in loads if kind == "module"
             and t.startswith("eragraph")]
    assert all(t is not None for _, t in edges)
    up = sorted(f"{m} ({floor(m)}) -> {t} ({floor(t)})" for m, t in edges if floor(t) > floor(m))
    assert up == []
    assert cycles({m: GRAPH[m] | {t for s, t in edges if s == m} for m in GRAPH}) == []


def test_run_time_loads_of_files_and_computed_names_are_stated():
    files = {(m, t) for m, loads in DYNAMIC.items() for kind, t in loads if kind == "file"}
    assert files == set(FILE_LOADS)
    computed = {m for m, loads in DYNAMIC.items() if any(kind == "computed" for kind, _ in loads)}
    assert computed == set(COMPUTED_LOADS)


def test_the_checker_finds_run_time_loads():
    TREES["eragraph.services.__probe__"] = ast.parse(
        'import importlib\nHERE = "tests"\nimportlib.import_module("eragraph.cli")\n'
        'importlib.util.spec_from_file_location("x", ROOT / HERE / "aws" / "fake.py")\n'
        'importlib.import_module(f"eragraph.bench.{name}")\nimportlib.import_module(name)\n')
    MODULES["eragraph.services.__probe__"] = SRC / "eragraph/services/__probe__.py"
    try:
        assert dynamic_loads("eragraph.services.__probe__") == [
            ("module", "eragraph.cli"), ("file", "tests/aws/fake.py"), ("module", "eragraph.bench"),
            ("computed", "")]
    finally:
        del TREES["eragraph.services.__probe__"], MODULES["eragraph.services.__probe__"]


# ----- lists kept by hand that mirror the mode registry -----
def test_the_lists_that_mirror_the_mode_registry_agree_with_it():
    """services.explain.GRAPH_ROUTES (the modes explain covers) and the console's GRAPH_MODES
    (entities.js: the modes of the entity view) are checked against services.modes."""
    import re

    from eragraph.services.explain import GRAPH_ROUTES
    from eragraph.services.modes import MODES

    assert set(GRAPH_ROUTES) == {m.name for m in MODES.values() if m.family in ("graph", "fusion")}
    script = (SRC / "eragraph/entrypoints/console/static/js/entities.js").read_text(encoding="utf-8")
    listed = re.search(r"GRAPH_MODES = new Set\(\[([^\]]*)\]\)", script)
    assert listed is not None, "entities.js no longer lists GRAPH_MODES: update this check"
    assert set(re.findall(r'"(\w+)"', listed.group(1))) == {m.name for m in MODES.values() if m.pool == "slow"}
