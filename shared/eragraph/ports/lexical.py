"""The lexical (BM25) index over the leaf chunks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from ..domain.filters import Filter
from ..domain.model import Node
from .records import Hit


@runtime_checkable
class LexicalIndex(Protocol):
    """BM25 over the leaf chunks (layer 0). The index is written by the store that holds the
    chunk text, in the same write as the chunk (SQLite FTS5 beside the nodes table; the
    OpenSearch document that carries the chunk's vector), so there is no write method here."""
    def search(self, text: str, k: int, where: Filter | None = None) -> list[Hit]:
        """Top-k leaf chunks by BM25 (higher is better), best first, ties by id; ``where``:
        only chunks whose attributes (domain.filters.chunk_attrs of their document) match, the
        true top-k of those. Raises LexicalIndexMissing when the store was built before it had
        a lexical index."""
        ...
    def ready(self) -> bool:
        """True when every leaf chunk of the store is indexed."""
        ...
    def rebuild(self, nodes: Iterable[Node]) -> int:
        """Index the text of ``nodes`` (the store's leaf chunks) and mark the index ready;
        returns how many (`eragraph reindex` passes every leaf)."""
        ...
