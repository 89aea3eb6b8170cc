"""Which leaf chunks a metadata filter allows, for one query of a graph mode.

The vector and lexical indexes filter natively (``where``); the entity-graph modes walk chunks
that they reach through entities, so they ask here. ``allows`` reads the chunks' nodes and
their documents (one batched node read, one document read per document not yet seen in this
query) and evaluates ``domain.filters.matches`` on ``chunk_attrs``: the same attributes the
indexes were given. ``mask`` answers for every chunk of the exact path's snapshot at once, from
the vector index (the allowed leaves, exactly, in one filtered search)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ..domain.filters import Filter, chunk_attrs, matches
from .engine import Engine


class ChunkFilter:
    def __init__(self, engine: Engine, where: Filter) -> None:
        self.engine = engine
        self.where = where
        self._chunk: dict[str, bool] = {}
        self._doc: dict[str, bool] = {}

    def _doc_allowed(self, doc_id: str) -> bool:
        if doc_id not in self._doc:
            doc = self.engine.graph.get_document(doc_id) if doc_id else None
            self._doc[doc_id] = doc is not None and matches(
                self.where, chunk_attrs(doc.metadata, doc.source, doc.doc_id, doc.title, self.engine.tenant))
        return self._doc[doc_id]

    def allows(self, chunk_ids: Iterable[str]) -> set[str]:
        """The ones of ``chunk_ids`` that are live leaf chunks inside the filter."""
        ids = list(dict.fromkeys(chunk_ids))
        unknown = [c for c in ids if c not in self._chunk]
        if unknown:
            nodes = self.engine.graph.get_nodes(unknown)
            for c in unknown:
                n = nodes.get(c)
                self._chunk[c] = n is not None and n.layer == 0 and self._doc_allowed(n.doc_id)
        return {c for c in ids if self._chunk[c]}

    def mask(self, chunks: Sequence[str], vector: np.ndarray) -> np.ndarray:
        """A boolean per chunk of ``chunks`` (sorted ids): inside the filter."""
        hits = self.engine.vectors.search(vector, max(len(chunks), 1), layers=[0], where=self.where)
        allowed = {h.node_id for h in hits}
        return np.fromiter((c in allowed for c in chunks), dtype=bool, count=len(chunks))


def of(engine: Engine, where: Filter | None) -> ChunkFilter | None:
    return None if where is None else ChunkFilter(engine, where)
