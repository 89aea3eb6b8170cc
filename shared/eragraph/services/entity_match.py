"""How a query's entity names meet the graph's entities: each query name's nearest entity
names by vector (LinearRAG eq. 3, TERAG's semantic matches, E2GraphRAG's mapping).

The exact execution (services.graph_query, over a snapshot) matches one of two ways, by the
``entity_match`` setting (config.GraphSettings; ``auto``, the default, is ``exact`` while the
snapshot holds fewer than ``ann_from`` entities and ``ann`` from there on: below that a product
with every entity vector is faster than the index, which is an exact flat index itself until
it reaches IVF's size -- on HotpotQA's 55,611 entities `tri_graph` p95 17-18 ms exact against
21-23 ms through the index -- and beyond it the product grows with the graph while the IVF
index does not):

- ``exact``: the query name vectors times every entity vector of the snapshot, one product
  (the snapshot's ``entity_vectors``, read from the index on first use and kept with it);
- ``ann``: one batched search of the entity vector index (layer -1, ids ``ent:<name>``;
  ``VectorIndex.search_many``) for all the query's names, the names found mapped back to the
  snapshot's entity positions; a hit whose entity the snapshot lacks (written after it was
  taken) is skipped. The snapshot then never reads the entity vectors.

The push execution (no snapshot) always asks the index (``nearest_names``).
"""

from __future__ import annotations

import numpy as np

from .entity_ids import ENTITY_LAYER

ENTITY_PREFIX = "ent:"


def nearest_names(engine, qvecs: np.ndarray, top: int) -> list[list[tuple[str, float]]]:
    """Each query vector's ``top`` nearest entity names (name, cosine), best first: one
    ``search_many`` of the entity vector index."""
    if not len(qvecs):
        return []
    rows = engine.entities.vectors.search_many(qvecs, top, layers=[ENTITY_LAYER])
    return [[(h.node_id[len(ENTITY_PREFIX):], h.score) for h in row if h.node_id.startswith(ENTITY_PREFIX)]
            for row in rows]


def nearest_positions(engine, snap, qvecs: np.ndarray, top: int) -> list[list[tuple[int, float]]]:
    """Each query vector's ``top`` nearest entities of the snapshot (position, cosine), best
    first, the way the ``entity_match`` setting says."""
    if uses_index(engine.settings.graph_retrieval, len(snap.entities)):
        where = snap.entity_index
        return [[(where[e], s) for e, s in row if e in where] for row in nearest_names(engine, qvecs, top)]
    return exact_top(snap.entity_vectors, qvecs, top)


def uses_index(gs, entities: int) -> bool:
    """Whether the exact execution asks the entity vector index (``ann``) for a snapshot of
    ``entities`` entities."""
    return gs.entity_match == "ann" or (gs.entity_match == "auto" and entities >= gs.ann_from)


def exact_top(entity_vectors: np.ndarray, qvecs: np.ndarray, top: int) -> list[list[tuple[int, float]]]:
    """The top ``top`` rows of ``entity_vectors`` by inner product with each query vector."""
    if len(entity_vectors) == 0 or len(qvecs) == 0:
        return [[] for _ in range(len(qvecs))]
    sims = qvecs @ entity_vectors.T
    out = []
    for row in sims:
        n = min(top, len(row))
        idx = np.argpartition(-row, n - 1)[:n]
        idx = idx[np.argsort(-row[idx], kind="stable")]
        out.append([(int(i), float(row[i])) for i in idx])
    return out
