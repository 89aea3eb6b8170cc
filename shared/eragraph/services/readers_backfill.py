"""The readers backfill: a store whose nodes were written before access lists (domain.access) has
vectors without the built-in ``readers`` attribute, which no caller's view matches (only the
operator sees them). The scheduled reindex and ``eragraph reindex`` run this step
(services.reindex, step ``readers``) until the store is marked (``MARK``); a store made by this
version is marked when it is created (Engine.lsh), and an import carries the mark.

It reads every layer's refs a page at a time in (code, node id) order (live_id_pages: never a whole
layer), the page's nodes and stored vectors (nothing is embedded), and upserts each vector again
with the meta ingest and reconcile write: a chunk's its document's attributes (services.ingest
.leaf_meta: ``readers`` from the document's access list, ``["*"]`` when it has none), a
summary's its partition's readers (services.placement.access_of, once per partition). A node
without a stored vector is left to the vector audit, a chunk whose document is gone to the
document audit. Upserting the same meta twice writes the same vector: a run cut short (its
``out_of_time``, a kill) is resumed from its cursor or redone, and a marked store is not read."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..domain.access import READERS, index_of, max_code, readers_of
from .engine import NODE_READERS, Engine
from .ingest import leaf_meta
from .placement import access_of
from .ref_pages import live_id_pages

MARK = NODE_READERS  # meta: every node's vector carries its readers
PAGE = 500

Cursor = tuple[int, int, str]


def _never() -> bool:
    return False


def backfill(engine: Engine, report: dict, cursor: Cursor | None = None,
             out_of_time: Callable[[], bool] = _never, page: int | None = None) -> Cursor | None:
    """Give every live node's vector its ``readers`` (see the module); the cursor to resume
    after when ``out_of_time()`` after a page, None when done (the store then marked)."""
    report["readers_added"] = report.get("readers_added", 0)
    graph = engine.graph
    lsh = engine.stored_lsh()
    if graph.get_meta(MARK) is not None or lsh is None:  # marked, or nothing was ever written
        return None
    sizes = graph.layer_sizes()
    top = max(sizes) if sizes else 0
    readers: dict[int, list[str]] = {}  # partition index -> its readers, read once
    for ids, resume in live_id_pages(graph, top, max_code(), cursor, page or PAGE):
        report["readers_added"] += _fill(engine, ids, lsh.n_planes, readers)
        if resume is not None and out_of_time():
            engine.vectors.flush()
            return resume
    engine.vectors.flush()
    graph.put_meta(MARK, 1)
    return None


def _fill(engine: Engine, ids: list[str], n_planes: int, readers: dict[int, list[str]]) -> int:
    """Upsert the stored vectors of ``ids`` with their readers; how many."""
    if not ids:
        return 0
    vectors = engine.vectors.get_vectors(ids)
    nodes = engine.graph.get_nodes([i for i in ids if i in vectors])
    docs = {d: engine.graph.get_document(d) for d in {n.doc_id for n in nodes.values() if n.layer == 0}}
    rows, metas = [], []
    for i in ids:
        node = nodes.get(i)
        if node is None:
            continue
        if node.layer == 0:
            doc = docs.get(node.doc_id)
            if doc is None or i not in doc.chunk_ids:  # the document audit's to remove
                continue
            metas.append(leaf_meta(node, doc, engine.tenant))
        else:
            index = index_of(node.code, n_planes)
            if index not in readers:
                readers[index] = readers_of(access_of(engine, index))
            metas.append({"layer": node.layer, "doc_id": "", "attrs": {READERS: readers[index]}})
        rows.append(i)
    if rows:
        engine.vectors.upsert(rows, np.stack([vectors[i] for i in rows]), metas)
    return len(rows)
