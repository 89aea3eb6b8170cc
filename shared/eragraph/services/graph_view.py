"""The summary graph as a browser draws it: one layer a page at a time (the band view), one node
with its parent and children, the registry's modes on this store, and the cost ledger over time.

Each read takes only what it returns: a layer page is one range read of the layer's code-ordered
ref index (GraphStore.refs_page, never the whole layer), the page's nodes and the segments they
are in; a node is its item, its ref (a one-code range), its segment and its children."""

from __future__ import annotations

import time
from typing import Any

from ..domain.access import index_of, readers_of
from ..domain.ledger import HOUR
from ..domain.model import Node
from . import cost
from .engine import Engine
from .modes import MODES, available_modes
from .placement import access_of
from .summary_search import BadQueryError

LABEL_CHARS = 80
MAX_PAGE = 1000
SERIES_DAYS = 7  # GET /ledger's default window
MAX_SERIES_DAYS = 92  # GET /ledger's earliest ``since``: an older one reads from this far back only
MAX_CODE = (1 << 63) - 1  # a cursor's code: SQLite's INTEGER (and any code an LSH of up to 63 planes gives)


def label(text: str, chars: int = LABEL_CHARS) -> str:
    """The first ``chars`` characters of ``text`` on one line (an ellipsis when cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[: chars - 1].rstrip() + "…"


def encode_cursor(code: int, node_id: str) -> str:
    return f"{code}:{node_id}"


def decode_cursor(cursor: str) -> tuple[int, str]:
    """A page's ``next_cursor`` back as (code, node id); anything else is a BadQueryError."""
    code, sep, node_id = cursor.partition(":")
    # ASCII digits only (str.isdigit() takes '²'), at most 19 of them and within SQLite's INTEGER
    if not sep or not node_id or not (code.isascii() and code.isdigit()) or len(code) > 19 or int(code) > MAX_CODE:
        raise BadQueryError(f"cursor {cursor[:80]!r} is not one this API gave (pass a page's next_cursor back)")
    return int(code), node_id


def _parents(engine: Engine, layer: int, segs: set[str]) -> dict[str, str]:
    """Segment id -> the summary node it owns (one batched read of those segments)."""
    if not segs:
        return {}
    return {sid: s.summary_id for sid, s in engine.graph.get_segments_by_id(layer, sorted(segs)).items()}


def layer_page(engine: Engine, layer: int, limit: int = 200, cursor: str | None = None,
               readable: set[int] | None = None) -> dict[str, Any]:
    """One page of ``layer``'s nodes in code order (neighbours in the code space sit together,
    as the segments cut them): each with its label, tokens, parent summary and child count.
    ``readable``: the access partitions a caller may read (services.placement.readable; None:
    all): the page holds only their nodes (a node's parent and children lie in its partition)."""
    if not 1 <= limit <= MAX_PAGE:
        raise BadQueryError(f"limit must be within 1..{MAX_PAGE} (got {limit})")
    after = decode_cursor(cursor) if cursor else None
    refs = engine.graph.refs_page(layer, after, limit + 1)  # one more: is there a next page?
    more = len(refs) > limit
    refs = refs[:limit]
    nodes = engine.graph.get_nodes(r.node_id for r in refs)
    parents = _parents(engine, layer, {r.seg for r in refs if r.seg})
    out = []
    for r in refs:
        n = nodes.get(r.node_id)
        if n is None:  # a ref whose node a concurrent delete just removed
            continue
        if readable is not None and index_of(n.code, engine.settings.n_planes) not in readable:
            continue
        out.append({"id": n.node_id, "layer": n.layer, "label": label(n.text), "tokens": n.tokens,
                    "parent": parents.get(r.seg) if r.seg else None, "members": len(n.children)})
    last = refs[-1] if refs and more else None
    return {"layer": layer, "total": engine.graph.layer_sizes().get(layer, 0), "nodes": out,
            "next_cursor": encode_cursor(last.code, last.node_id) if last else None, "sampled": False}


def parent_of(engine: Engine, node: Node) -> str | None:
    """The summary of the segment ``node`` is in (its ref's segment), or None (a top node, or
    one added since its layer was last cut)."""
    ref = next((r for r in engine.graph.prefix_refs(node.layer, node.code, node.code) if r.node_id == node.node_id),
               None)
    if ref is None or not ref.seg:
        return None
    return _parents(engine, node.layer, {ref.seg}).get(ref.seg)


def node_detail(engine: Engine, node_id: str) -> dict[str, Any] | None:
    """A node with its text, document, parent and children, and its ``readers`` (its access
    partition's principals, ``["*"]``: the whole tenant; domain.access) (None: no such node)."""
    node = engine.graph.get_nodes([node_id]).get(node_id)
    if node is None:
        return None
    doc = engine.graph.get_document(node.doc_id) if node.doc_id else None
    kids = engine.graph.get_nodes(node.children) if node.children else {}
    children = [{"id": c.node_id, "layer": c.layer, "label": label(c.text), "tokens": c.tokens}
                for c in (kids.get(k) for k in node.children) if c is not None]
    return {"id": node.node_id, "layer": node.layer, "text": node.text, "tokens": node.tokens,
            "doc_id": node.doc_id, "source": node.source, "title": doc.title if doc is not None else "",
            "parent": parent_of(engine, node), "children": children,
            "readers": readers_of(access_of(engine, index_of(node.code, engine.settings.n_planes)))}


def modes_listing(engine: Engine) -> dict[str, Any]:
    """The registry's modes, each with whether this store can run it."""
    available = set(available_modes(engine))
    return {"modes": [{"name": m.name, "family": m.family, "description": m.description,
                       "available": m.name in available} for m in MODES.values()]}


def ledger_series(engine: Engine, since: float | None = None, now: float | None = None) -> dict[str, Any]:
    """The ledger's hourly buckets from ``since`` (default: the last SERIES_DAYS days), one
    series per kind and model, each point priced (None: the model has no price), and the
    store's totals as GET /stats reports them."""
    prices = engine.settings.price_table()
    now = time.time() if now is None else now
    if since is None:
        since = now - SERIES_DAYS * 24 * HOUR
    # bounded both ways: never more than MAX_SERIES_DAYS of rows, never a number past the store's
    # INTEGER (a ``since`` in the future answers no points); the answer says the ``since`` applied
    since = min(max(since, now - MAX_SERIES_DAYS * 24 * HOUR), now + 24 * HOUR)
    series: dict[str, dict[str, Any]] = {}
    for key, start, row in engine.graph.ledger_series(since):
        kind, model = cost.split_key(key)
        entry = series.setdefault(key, {"kind": kind, "model": model, "points": []})
        t_in, t_out = int(row.get("tokens_in", 0)), int(row.get("tokens_out", 0))
        usd = cost.cost_usd(model, t_in, t_out, prices)
        entry["points"].append({"t": start, "calls": int(row.get("calls", 0)), "tokens_in": t_in, "tokens_out": t_out,
                                "usd": None if usd is None else round(usd, 8)})
    return {"bucket": "hour", "since": int(since), "series": list(series.values()),
            "totals": cost.ledger_report(engine.graph, prices)}


def in_partitions(engine: Engine, node_id: str, readable: set[int]) -> bool:
    """Whether ``node_id`` lies in one of the ``readable`` access partitions (its parent and
    children lie in its own: no segment spans two)."""
    node = engine.graph.get_nodes([node_id]).get(node_id)
    return node is not None and index_of(node.code, engine.settings.n_planes) in readable
