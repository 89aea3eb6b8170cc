"""The file counts docs/architecture.md gives for a new route and a new mode, computed from the
code: the places each existing route and mode is registered in. A new hand-kept list of routes or
modes that the registry does not generate shows up here as a count the page no longer tells."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from eragraph.entrypoints.http.routes import API, ROUTES
from eragraph.services.explain import GRAPH_ROUTES
from eragraph.services.modes import MODES

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
ENTITIES_JS = (ROOT / "shared/eragraph/entrypoints/console/static/js/entities.js").read_text(encoding="utf-8")


def stated(change: str) -> int:
    """The count of the page's row ``| <change> | <n> | ...``."""
    found = re.search(rf"^\| {re.escape(change)} \| (\d+) \|", PAGE, re.MULTILINE)
    assert found is not None, f"docs/architecture.md has no row for {change!r}"
    return int(found.group(1))


def route_files(route) -> set[str]:
    """The files an API route is written in: the route table, its handler's module, and on the
    HttpApi its template.yaml route (tests/aws/test_template.py checks that it agrees with the
    table). The OpenAPI schema is generated from the table, no stored copy
    (``python -m eragraph.entrypoints.http.api`` prints it)."""
    files = {"entrypoints/http/routes.py", Path(inspect.getsourcefile(route.handler)).name}
    if API in route.on:
        files.add("template.yaml")
    return files


def test_a_new_route_touches_the_files_the_page_counts():
    counts = {r.key: len(route_files(r)) for r in ROUTES if r.handler is not None and API in r.on}
    assert max(counts.values()) + 1 == stated("an HTTP route"), counts  # + its docs page


def test_a_new_streamed_route_is_its_line_and_its_module():
    """A streamed route is served from the table alone (asgi.ApiApp.serve_streamed): the module its
    ``asgi`` names holds what the route is made of, and no per-route method names it."""
    import importlib

    from eragraph.entrypoints.http.asgi import ApiApp
    from eragraph.entrypoints.http.routes import ASGI_MCP
    from eragraph.entrypoints.http.streaming import Encoder

    streamed = [r for r in ROUTES if r.asgi and r.asgi != ASGI_MCP]
    assert len(streamed) >= 3, streamed
    for r in streamed:
        module = importlib.import_module(r.asgi)
        assert callable(module.prepare) and isinstance(module.ENCODER, Encoder), r.key
        assert not hasattr(ApiApp, f"serve_{r.asgi.rpartition('.')[2]}"), r.key
    assert stated("a streamed route") == 3  # the route's line, its module, its docs page


def _defined_in(fn) -> set[str]:
    """The modules a mode's run function (or the function a registry wrapper closes over) is in."""
    out = {Path(inspect.getsourcefile(fn)).name}
    for cell in fn.__closure__ or ():
        if inspect.isfunction(cell.cell_contents):
            out |= _defined_in(cell.cell_contents)
    return out


def mode_files(mode) -> set[str]:
    files = {"modes.py"} | _defined_in(mode.run)
    if mode.name in GRAPH_ROUTES:
        files.add("services/explain.py")
    if f'"{mode.name}"' in ENTITIES_JS:
        files.add("console/static/js/entities.js")
    return files


def test_a_new_mode_touches_the_files_the_page_counts():
    counts = {m.name: len(mode_files(m)) for m in MODES.values()}
    plain = {n: c for n, c in counts.items() if MODES[n].pool == "fast" and c > 1}  # its own module, not a variant
    assert max(plain.values()) + 1 == stated("a retrieval mode"), plain  # + docs/retrieval.md
    graph = {n: c for n, c in counts.items() if MODES[n].family == "graph"}
    assert max(graph.values()) + 1 == stated("an entity-graph mode"), graph
