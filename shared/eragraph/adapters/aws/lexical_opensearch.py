"""LexicalIndex over the leaf documents of the OpenSearch vector index (vector_opensearch): the
leaf's text is a field of the document that carries its vector, so this adapter only queries
it and, for an index made before the field, rebuilds it."""

from __future__ import annotations

from collections.abc import Iterable

from ...domain.filters import Filter
from ...domain.ranking import rank_key
from ...ports.records import Hit
from .filter_dsl import where_clauses
from .vector_opensearch import MAX_K, TIE_WINDOW, OpenSearchVectorIndex, _tie_at_cut


class OpenSearchLexicalIndex:
    """BM25 over the ``text`` field of the leaf documents of an OpenSearchVectorIndex (the
    index's default similarity is BM25, k1 = 1.2, b = 0.75), queried with ``match`` and a
    ``layer = 0`` filter, plus ``where`` (filter_dsl) in the same ``filter``: the statistics
    are the index's, the filter only selects. An index created before the field existed has no
    ``_meta.lexical`` in its mapping: search refuses with LexicalIndexMissing until ``rebuild``
    (eragraph reindex) adds the field, writes every leaf's text and sets the marker."""

    def __init__(self, vectors: OpenSearchVectorIndex) -> None:
        self.vectors = vectors
        self._ready = False

    def ready(self) -> bool:
        if self._ready:
            return True
        v = self.vectors
        v.ensure_index()
        mapping = v.client.indices.get_mapping(index=v.index)
        meta = next(iter(mapping.values()))["mappings"].get("_meta") or {}
        self._ready = bool(meta.get("lexical"))
        return self._ready

    def search(self, text: str, k: int, where: Filter | None = None) -> list[Hit]:
        from ...domain.bm25 import MAX_QUERY_TERMS, query_terms
        from ...domain.model import LexicalIndexMissing

        if not self.ready():
            raise LexicalIndexMissing(f"OpenSearch index {self.vectors.index}")
        terms = query_terms(text)
        if k <= 0 or not terms:
            return []
        fetch = min(int(k) + TIE_WINDOW, MAX_K)
        filters = [self.vectors.scope(), {"term": {"layer": 0}}, *where_clauses(where)]
        while True:
            body = {"size": fetch, "_source": False,
                    "query": {"bool": {"must": [{"match": {"text": " ".join(terms[:MAX_QUERY_TERMS])}}],
                                       "filter": filters}}}
            response = self.vectors.client.search(index=self.vectors.index, body=body)
            hits = [Hit(self.vectors._node_id(h["_id"]), float(h["_score"])) for h in response["hits"]["hits"]]
            if not _tie_at_cut([h.score for h in hits], k, fetch):
                break
            fetch = min(2 * fetch, MAX_K)
        hits.sort(key=rank_key)
        return hits[:k]

    def rebuild(self, nodes: Iterable) -> int:
        v = self.vectors
        v.ensure_index()
        v.client.indices.put_mapping(index=v.index, body={"properties": {"text": {"type": "text"}}})
        leaves = [n for n in nodes if n.layer == 0]
        v._bulk([({"update": {"_id": v._doc_id(n.node_id)}}, {"doc": {"text": n.text}})
                 for n in leaves])
        v.client.indices.put_mapping(index=v.index, body={"_meta": {"lexical": 1}})
        if v.refresh:
            v.client.indices.refresh(index=v.index)
        self._ready = True
        return len(leaves)
