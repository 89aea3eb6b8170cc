"""A layer's refs a page at a time, in (code, node id) order, from a cursor on: the one walk of
the paged audits (reindex's vector and orphan-chunk steps, the titles migration, the readers
backfill), so each reads one range of the ref index per page (GraphStore.prefix_refs), never a
whole layer."""

from __future__ import annotations

from collections.abc import Iterator

from ..domain.model import RefState
from ..ports.graph import GraphStore

Cursor = tuple[int, str]  # (code, node id) of the last ref handled; (0, "") before the first
LayerCursor = tuple[int, int, str]  # (layer, code, node id): where a walk of every layer resumes


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


def live_id_pages(graph: GraphStore, top: int, hi: int, cursor: LayerCursor | None = None,
                  page: int = 1000) -> Iterator[tuple[list[str], LayerCursor | None]]:
    """Every layer's live node ids, layer 0 up to ``top``, a page at a time from ``cursor`` on.
    Yields (the page's live ids, the cursor to resume after that page: None once the last
    layer's last page has been read), so a caller out of time after a page returns that cursor
    and the next run starts on the page after it."""
    layer, code, last = cursor or (0, 0, "")
    while layer <= top:
        for fresh, (code, last), done in ref_pages(graph, layer, hi, (code, last), page):
            if done:
                layer, code, last = layer + 1, 0, ""
            yield [r.node_id for r in fresh if r.live], ((layer, code, last) if layer <= top else None)
            if done:
                break
