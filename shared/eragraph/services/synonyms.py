"""Synonymy edges of the entity graph (HippoRAG 2): two entities whose name vectors (the entity
vector index, layer -1) have cosine >= ``synonym_threshold`` are joined by an undirected edge
weighing that cosine, so that a walk crosses surface forms ("U.S." / "United States").

Kept incrementally, never recomputed whole:
- insert (``link_new``, called by EntityIndex.add_nodes once the new names' vectors are in the
  index): one batched ANN search (``search_many``) of the new entities over layer -1; each
  one's best ``synonym_top`` other names at or above the threshold become edges, written both
  ways (one batch of writes per insert). An old
  entity gains its edge to the new one through that symmetry, so no old entity is searched
  again. Writing an edge again only rewrites its weight: a redelivered insert doubles nothing.
- delete: an entity leaving the store takes its edges, both directions (the store's
  delete_chunks).
- an old store (built before the edges) is filled by ``backfill``, a paged step of reindex
  resumable from a meta mark.

Retrieval (services.graph_query, tri_graph) adds ``synonym_weight * cosine`` to the
entity-entity block of the walk: ``entity_block`` for the exact execution,
``synonym_neighbours`` for the push one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..config import GraphSettings
from .entity_ids import ENTITY_LAYER, entity_vector_id

BACKFILL_MARK = "entity_synonyms"  # graph meta: the backfill's settings and where it stopped
BACKFILL_PAGE = 256
MIN_COSINE = 1e-3  # with a threshold <= 0, an edge still needs a positive cosine (at least this)


def floor(gs: GraphSettings) -> float:
    """The least cosine of an edge: the threshold, and positive whatever the threshold."""
    return max(gs.synonym_threshold, MIN_COSINE)


def nearest(vectors, names: Sequence[str], vecs: np.ndarray, gs: GraphSettings) -> list[tuple[str, str, float]]:
    """Each name's best ``synonym_top`` other entity names with cosine >= the threshold, as
    edges (name, other, cosine): one batched search of the index (``search_many``) for all
    the names, floored at the threshold so that ties far below it cost nothing."""
    if not gs.synonyms_on or not len(names):
        return []
    least = floor(gs)
    found = vectors.search_many(vecs, gs.synonym_top + 1, layers=[ENTITY_LAYER], min_score=least)
    edges = []
    for name, hits in zip(names, found):
        own = entity_vector_id(name)
        kept = [h for h in hits if h.node_id != own and h.node_id.startswith("ent:") and h.score >= least]
        edges += [(name, h.node_id[4:], float(h.score)) for h in kept[:gs.synonym_top]]
    return edges


def link_new(store, vectors, names: Sequence[str], vecs: np.ndarray, gs: GraphSettings) -> int:
    """The synonymy edges of entities new to the store (their vectors written already);
    returns the number of edges written."""
    edges = nearest(vectors, names, vecs, gs)
    return store.add_synonyms(edges) if edges else 0


def entity_block(synonymy, weight: float):
    """The entity-entity edges the exact walk adds: ``weight`` times the synonymy matrix, None
    when the weight is 0 (the walk without them)."""
    if weight <= 0 or synonymy.nnz == 0:
        return None
    return synonymy * float(weight)


def synonym_neighbours(store, weight: float) -> Callable[[list[str]], dict[str, list[tuple[str, float]]]]:
    """The push execution's read of the same edges: one batched ``synonyms`` call per round."""

    def read(entities: list[str]) -> dict[str, list[tuple[str, float]]]:
        if weight <= 0 or not entities:
            return {}
        return {e: [(x, weight * w) for x, w in row.items() if w > 0] for e, row in store.synonyms(entities).items()}

    return read


def backfill(engine, report: dict, cursor: tuple[int, int, str] | None = None,
             out_of_time: Callable[[], bool] = lambda: False, page: int = BACKFILL_PAGE) -> tuple[int, int, str] | None:
    """Synonymy edges for every entity of a store built before them: a page of entities at a
    time (EntityStore.entity_page), each searched as an insert would search a new one. The
    mark ``entity_synonyms`` in the graph meta holds the settings it ran with and its cursor, so
    a re-run with the same settings after it finished does nothing, and one that stopped goes
    on from its cursor. Edges are only added: a higher threshold later does not remove those
    below it. ``report["synonym_edges_backfilled"]``: edges written by this run."""
    report["synonym_edges_backfilled"] = report.get("synonym_edges_backfilled", 0)
    index = engine.entities
    gs = engine.settings.graph_retrieval
    if index is None or not gs.synonyms_on:
        return None
    settings = {"threshold": gs.synonym_threshold, "top": gs.synonym_top}
    mark = engine.graph.get_meta(BACKFILL_MARK) or {}
    same = {k: mark.get(k) for k in settings} == settings
    if same and mark.get("done"):
        return None
    after = cursor[2] if cursor is not None and cursor[2] else (mark.get("after") if same else None)
    store, vectors = index.store, index.vectors
    while True:
        names, nxt = store.entity_page(after or None, page)
        have = vectors.get_vectors([entity_vector_id(e) for e in names]) if names else {}
        found = [e for e in names if entity_vector_id(e) in have]
        if found:
            vecs = np.stack([have[entity_vector_id(e)] for e in found])
            report["synonym_edges_backfilled"] += link_new(store, vectors, found, vecs, gs)
        after = nxt
        engine.graph.put_meta(BACKFILL_MARK, {**settings, "after": after, "done": after is None})
        if after is None:
            return None
        if out_of_time():
            return (0, 0, after)
