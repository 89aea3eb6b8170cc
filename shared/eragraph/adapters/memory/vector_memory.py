"""VectorIndex in a dict: exact inner-product search."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ...domain.filters import Filter, matches
from ...domain.ranking import rank_key, top_hits
from ...ports.records import Hit


class MemoryVectorIndex:
    """Exact inner-product search over a dict of vectors."""

    def __init__(self) -> None:
        self._vectors: dict[str, np.ndarray] = {}
        self._metas: dict[str, dict[str, Any]] = {}

    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metas: Sequence[Mapping[str, Any]]) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(ids) != len(vectors) or len(ids) != len(metas):
            raise ValueError("ids, vectors and metas must have the same length")
        for i, v, m in zip(ids, vectors, metas):
            self._vectors[i] = v.copy()
            self._metas[i] = copy.deepcopy(dict(m))  # a re-upsert replaces the meta, attrs included

    def delete(self, ids: Iterable[str]) -> None:
        for i in ids:
            self._vectors.pop(i, None)
            self._metas.pop(i, None)

    def search(self, vector: np.ndarray, k: int, layers: Sequence[int] | None = None,
               doc_ids: Sequence[str] | None = None, where: Filter | None = None) -> list[Hit]:
        layer_set = None if layers is None else set(layers)
        doc_set = None if doc_ids is None else set(doc_ids)
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        hits = []
        for i, v in self._vectors.items():
            m = self._metas[i]
            if layer_set is not None and m.get("layer") not in layer_set:
                continue
            if doc_set is not None and m.get("doc_id") not in doc_set:
                continue
            if where is not None and (m.get("attrs") is None or not matches(where, m["attrs"])):
                continue  # a vector without attributes (a summary) matches no filter
            hits.append(Hit(i, float(v @ q)))
        hits.sort(key=rank_key)
        return hits[: max(k, 0)]

    def search_many(self, vectors: np.ndarray, k: int, layers: Sequence[int] | None = None,
                    min_score: float | None = None) -> list[list[Hit]]:
        """One matrix product of the queries with the allowed vectors."""
        if not len(vectors):
            return []
        qs = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
        layer_set = None if layers is None else set(layers)
        ids = [i for i in self._vectors if layer_set is None or self._metas[i].get("layer") in layer_set]
        if not ids or k <= 0:
            return [[] for _ in range(len(qs))]
        scores = qs @ np.stack([self._vectors[i] for i in ids]).T
        out = []
        for row in scores:
            keep = range(len(ids)) if min_score is None else np.flatnonzero(row >= min_score)
            out.append(top_hits([Hit(ids[j], float(row[j])) for j in keep], k, min_score))
        return out

    def ids(self) -> set[str]:
        return set(self._vectors)

    def get_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return {i: self._vectors[i].copy() for i in ids if i in self._vectors}

    def count(self) -> int:
        return len(self._vectors)

    def flush(self) -> None:
        return None
