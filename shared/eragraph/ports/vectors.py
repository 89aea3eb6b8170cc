"""The vector index: nodes' embeddings, searched by inner product with filters."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..domain.filters import Filter
from .records import Hit


@runtime_checkable
class VectorIndex(Protocol):
    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metas: Sequence[Mapping[str, Any]]) -> None:
        """metas carry at least ``layer`` (int) and ``doc_id`` (str); a leaf chunk's also carry
        ``attrs`` (domain.filters.chunk_attrs: its document's metadata and the built-in
        attributes), what ``where`` filters on. An upsert of a present id replaces its meta."""
        ...
    def delete(self, ids: Iterable[str]) -> None: ...
    def search(
        self,
        vector: np.ndarray,
        k: int,
        layers: Sequence[int] | None = None,
        doc_ids: Sequence[str] | None = None,
        where: Filter | None = None,
    ) -> list[Hit]:
        """Top-k by inner product (vectors are normalized), best first, optionally filtered:
        the true top-k of the allowed set, never a short post-filtered list. ``where`` keeps the
        vectors whose ``attrs`` match (domain.filters.matches); a vector without ``attrs`` (a
        summary, an entity) never matches a filter."""
        ...
    def search_many(
        self,
        vectors: np.ndarray,
        k: int,
        layers: Sequence[int] | None = None,
        min_score: float | None = None,
    ) -> list[list[Hit]]:
        """``[search(v, k, layers) for v in vectors]`` in one pass of the index (one matrix
        product, one FAISS call, one ``_msearch`` request), each row without its hits scoring
        below ``min_score`` when given. ``min_score`` is also what makes it cheap: the order
        of the ties at the k-th score (by id, as ``search`` gives it) is only worked out when
        that score reaches ``min_score``; below it the tied hits are dropped anyway."""
        ...
    def ids(self) -> set[str]: ...
    def get_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]: ...
    def count(self) -> int: ...
    def flush(self) -> None: ...
