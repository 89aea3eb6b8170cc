"""LexicalIndex over the memory graph store's leaves."""

from __future__ import annotations

from collections.abc import Iterable

from ...domain.bm25 import Bm25Corpus, informative_terms, query_terms, score
from ...domain.filters import Filter
from ...domain.model import Node
from ...domain.ranking import rank_key
from ...ports.records import Hit
from .graph_memory import MemoryGraphStore


class MemoryLexicalIndex:
    """BM25 (FTS5's formula, domain.bm25) over the memory graph store's leaves."""

    def __init__(self, graph: MemoryGraphStore) -> None:
        self.graph = graph

    def search(self, text: str, k: int, where: Filter | None = None) -> list[Hit]:
        """Best first, ties (domain.ranking) by id, like the FTS5 index; with ``where``, the
        top k of the chunks the filter allows, scored with the whole corpus's statistics (as
        FTS5 and OpenSearch score a filtered query)."""
        corpus = self.graph._leaf_text
        terms = informative_terms(query_terms(text), corpus.df, len(corpus))
        scores = score(corpus.tf, corpus.df, corpus.total_len, terms)
        hits = [Hit(i, s) for i, s in scores.items() if where is None or self.graph._leaf_matches(i, where)]
        hits.sort(key=rank_key)
        return hits[:max(int(k), 0)]

    def ready(self) -> bool:
        return True

    def rebuild(self, nodes: Iterable[Node]) -> int:
        corpus = Bm25Corpus()
        for n in nodes:
            if n.layer == 0:
                corpus.add(n.node_id, n.text)
        self.graph._leaf_text = corpus
        return len(corpus)
