"""A layer's refs a page at a time, in (code, node id) order, from a cursor on: the one walk of
the paged audits (reindex's vector and orphan-chunk steps, the titles migration), so each reads
one range of the ref index per page (GraphStore.prefix_refs), never a whole layer."""

from __future__ import annotations

from collections.abc import Iterator

from ..domain.model import RefState
from ..ports.graph import GraphStore

Cursor = tuple[int, str]  # (code, node id) of the last ref handled; (0, "") before the first


def ref_pages(graph: GraphStore, layer: int, hi: int, after: Cursor = (0, ""),
              page: int = 1000) -> Iterator[tuple[list[RefState], Cursor, bool]]:
    """Yields (the page's refs after the cursor, the cursor after them, whether it is the last
    page). More than a page of refs sharing the cursor's code widens the read until it passes
    them."""
    code, last = after
    limit = page
    while True:
        refs = graph.prefix_refs(layer, code, hi, limit)
        fresh = [r for r in refs if (r.code, r.node_id) > (code, last)]
        full = len(refs) >= limit
        if not fresh and full:
            limit *= 2
            continue
        limit = page
        if fresh:
            code, last = fresh[-1].code, fresh[-1].node_id
        yield fresh, (code, last), not full
        if not full:
            return
