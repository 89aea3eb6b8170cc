"""LexicalIndex over the SQLite graph store's FTS5 table ``leaf_text`` (see graph_sqlite): the
rows are written and deleted in the graph store's own node transactions, so this adapter only
reads and rebuilds. A ``where`` filter selects on the chunks' documents' attributes, in SQL."""

from __future__ import annotations

from collections.abc import Iterable

from ...domain.filters import Filter
from ...domain.model import Node
from ...ports.records import Hit
from .graph_sqlite import SqliteGraphStore


class Fts5LexicalIndex:
    def __init__(self, graph: SqliteGraphStore) -> None:
        self.graph = graph

    def search(self, text: str, k: int, where: Filter | None = None) -> list[Hit]:
        return self.graph.lexical_search(text, k, where)

    def ready(self) -> bool:
        return self.graph.lexical_ready()

    def rebuild(self, nodes: Iterable[Node]) -> int:
        return self.graph.lexical_rebuild(nodes)
