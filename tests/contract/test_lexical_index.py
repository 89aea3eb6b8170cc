"""Contract of the LexicalIndex port (BM25 over leaf chunks) on every adapter: SQLite FTS5 (in
the graph store's node transactions), memory, and OpenSearch (the ``text`` field of the vector
documents, through the recording fake client whose request bodies are checked here)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from eragraph.domain.model import LexicalIndexMissing, Node

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "aws"))
from fake_opensearch import FakeOpenSearch  # noqa: E402

TEXTS = {
    "c1": "Marie Curie discovered radium and polonium in Paris.",
    "c2": "The Eiffel Tower stands in Paris, France; it was built for the 1889 fair.",
    "c3": "Albert Einstein developed the theory of relativity while working in Bern.",
    "c4": "Radium glows faintly in the dark; radium is radioactive.",
    "c5": "Pierre Curie and Marie Curie shared the Nobel Prize in Physics.",
}


def node(i: str, text: str, layer: int = 0) -> Node:
    return Node(node_id=i, layer=layer, text=text, tokens=len(text.split()), code=0, doc_id="d-" + i, source="s")


class SqliteBackend:
    def __init__(self, tmp: Path) -> None:
        from eragraph.adapters.local.graph_sqlite import SqliteGraphStore
        from eragraph.adapters.local.lexical_fts5 import Fts5LexicalIndex

        self.graph = SqliteGraphStore(tmp / "graph.sqlite")
        self.lexical = Fts5LexicalIndex(self.graph)

    def write(self, nodes):
        self.graph.put_nodes(nodes)

    def delete(self, ids):
        self.graph.delete_nodes(ids)


class MemoryBackend:
    def __init__(self, tmp: Path) -> None:
        from eragraph.adapters.memory import MemoryGraphStore, MemoryLexicalIndex

        self.graph = MemoryGraphStore()
        self.lexical = MemoryLexicalIndex(self.graph)

    def write(self, nodes):
        self.graph.put_nodes(nodes)

    def delete(self, ids):
        self.graph.delete_nodes(ids)


class OpenSearchBackend:
    def __init__(self, tmp: Path) -> None:
        from eragraph.adapters.aws.opensearch import OpenSearchLexicalIndex, OpenSearchVectorIndex

        self.client = FakeOpenSearch()
        self.vectors = OpenSearchVectorIndex(self.client, "nodes", 4, refresh=True)
        self.lexical = OpenSearchLexicalIndex(self.vectors)

    def write(self, nodes):
        rng = np.random.default_rng(0)
        vecs = rng.normal(size=(len(nodes), 4)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        self.vectors.upsert([n.node_id for n in nodes], vecs,
                            [{"layer": n.layer, "doc_id": n.doc_id, **({"text": n.text} if n.layer == 0 else {})}
                             for n in nodes])

    def delete(self, ids):
        self.vectors.delete(ids)


BACKENDS = {"sqlite": SqliteBackend, "memory": MemoryBackend, "opensearch": OpenSearchBackend}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request, tmp_path):
    return BACKENDS[request.param](tmp_path)


def test_ranks_by_bm25_best_first(backend):
    backend.write([node(i, t) for i, t in TEXTS.items()])
    assert backend.lexical.ready()
    hits = backend.lexical.search("Who discovered radium?", 5)
    assert [h.node_id for h in hits] == ["c1", "c4"]  # c1 matches two terms; "who" matches nothing
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))
    assert all(h.score > 0 for h in hits)
    assert backend.lexical.search("Who discovered radium?", 1) == hits[:1]


def test_every_adapter_orders_the_same(tmp_path):
    orders = {}
    for name, cls in BACKENDS.items():
        b = cls(tmp_path / name)
        b.write([node(i, t) for i, t in TEXTS.items()])
        orders[name] = [h.node_id for h in b.lexical.search("Curie Paris prize", 5)]
    assert orders["sqlite"] == orders["memory"] == orders["opensearch"]


def test_only_leaves_are_indexed_and_deletes_leave(backend):
    backend.write([node(i, t) for i, t in TEXTS.items()] + [node("s1", "radium radium radium summary", layer=1)])
    assert "s1" not in {h.node_id for h in backend.lexical.search("radium summary", 10)}
    backend.delete(["c4"])
    assert [h.node_id for h in backend.lexical.search("radium", 10)] == ["c1"]


def test_replaced_text_is_reindexed(backend):
    backend.write([node("c1", "an old text about tigers")])
    backend.write([node("c1", "a new text about lions")])
    assert backend.lexical.search("tigers", 5) == []
    assert [h.node_id for h in backend.lexical.search("lions", 5)] == ["c1"]


def test_empty_and_unmatched_questions(backend):
    backend.write([node(i, t) for i, t in TEXTS.items()])
    assert backend.lexical.search("?!", 5) == []
    assert backend.lexical.search("zyzzyva", 5) == []
    hits = backend.lexical.search('quote " OR NEAR( radium*', 5)  # no query syntax leaks through
    assert {h.node_id for h in hits} == {"c1", "c4"}


def test_rebuild_indexes_the_given_leaves(backend):
    backend.write([node(i, t) for i, t in TEXTS.items()])
    assert backend.lexical.rebuild([node("c2", "zebras of Paris"), node("c3", TEXTS["c3"])]) == 2
    assert backend.lexical.ready()
    assert [h.node_id for h in backend.lexical.search("zebras", 10)] == ["c2"]
    assert "c3" in {h.node_id for h in backend.lexical.search("Bern", 10)}


def test_opensearch_request_bodies():
    b = OpenSearchBackend(Path("."))
    b.write([node(i, t) for i, t in TEXTS.items()])
    bulk = [body for method, path, body in b.client.requests if path == "/_bulk"][0]
    assert '"text": "Marie Curie discovered radium and polonium in Paris."' in bulk
    b.lexical.search("Who discovered radium?", 3)
    method, path, body = b.client.requests[-1]
    assert (method, path) == ("POST", "/nodes/_search")
    assert body == {"size": 53, "_source": False,
                    "query": {"bool": {"must": [{"match": {"text": "who discovered radium"}}],
                                       "filter": [{"term": {"layer": 0}}]}}}


def test_opensearch_index_without_text_field_is_refused_until_rebuilt():
    from eragraph.adapters.aws import opensearch

    client = FakeOpenSearch()
    old = opensearch.index_body(4)
    del old["mappings"]["properties"]["text"]
    del old["mappings"]["_meta"]
    client.indices.create(index="nodes", body=old)
    vectors = opensearch.OpenSearchVectorIndex(client, "nodes", 4, refresh=True)
    vectors.upsert(["c1"], np.ones((1, 4), dtype=np.float32) / 2, [{"layer": 0, "doc_id": "d"}])
    lexical = opensearch.OpenSearchLexicalIndex(vectors)
    assert not lexical.ready()
    with pytest.raises(LexicalIndexMissing, match="eragraph reindex"):
        lexical.search("radium", 5)
    assert lexical.rebuild([node("c1", TEXTS["c1"])]) == 1
    assert ("PUT", "/nodes/_mapping", {"properties": {"text": {"type": "text"}}}) in client.requests
    assert ("PUT", "/nodes/_mapping", {"_meta": {"lexical": 1}}) in client.requests
    assert [h.node_id for h in lexical.search("radium", 5)] == ["c1"]


def test_sqlite_store_from_before_the_lexical_index(tmp_path):
    import sqlite3

    from eragraph.adapters.local.graph_sqlite import SqliteGraphStore
    from eragraph.adapters.local.lexical_fts5 import Fts5LexicalIndex

    store = SqliteGraphStore(tmp_path / "graph.sqlite")
    store.put_nodes([node(i, t) for i, t in TEXTS.items()])
    store.close()
    conn = sqlite3.connect(tmp_path / "graph.sqlite")  # what a store written by an older eragraph looks like
    conn.execute("DROP TABLE leaf_text")
    conn.execute("DELETE FROM store_info WHERE key = 'lexical'")
    conn.commit()
    conn.close()
    store = SqliteGraphStore(tmp_path / "graph.sqlite")
    lexical = Fts5LexicalIndex(store)
    assert not lexical.ready()
    with pytest.raises(LexicalIndexMissing, match="eragraph reindex"):
        lexical.search("radium", 5)
    assert lexical.rebuild(store.get_nodes(TEXTS).values()) == 5
    assert lexical.ready() and lexical.search("radium", 1)[0].node_id == "c4"


def test_sqlite_lexical_rows_share_the_node_transaction(tmp_path):
    from eragraph.adapters.local.graph_sqlite import SqliteGraphStore

    store = SqliteGraphStore(tmp_path / "graph.sqlite")
    bad = node("c9", "radium")
    with pytest.raises(Exception):
        store.put_nodes([node("c1", TEXTS["c1"]), Node("c2", 0, None, 1, 0, "d", "s")])  # NOT NULL fails
    assert store.lexical_search("radium", 5) == [] and store.get_nodes(["c1"]) == {}
    store.put_nodes([bad])
    assert [h.node_id for h in store.lexical_search("radium", 5)] == ["c9"]


def test_cross_check_against_rank_bm25():
    """FTS5's bm25() against the rank-bm25 baseline the benchmark used: the IDF differs (rank-bm25
    floors negative IDFs at an epsilon of the mean), so the orders agree on the top, not exactly."""
    rank_bm25 = pytest.importorskip("rank_bm25")
    import re

    from eragraph.adapters.local.graph_sqlite import SqliteGraphStore

    rng = np.random.default_rng(7)
    vocab = [f"w{i}" for i in range(60)]
    texts = {f"c{i:02d}": " ".join(rng.choice(vocab, size=int(rng.integers(5, 30)), p=None)) for i in range(80)}
    store = SqliteGraphStore(":memory:")
    store.put_nodes([node(i, t) for i, t in texts.items()])
    ids = sorted(texts)
    baseline = rank_bm25.BM25Okapi([re.findall(r"\w+", texts[i]) for i in ids])
    agree = 0
    for q in range(30):
        words = list(rng.choice(vocab, size=3, replace=False))
        scores = baseline.get_scores(words)
        top_base = ids[int(np.argmax(scores))]
        got = store.lexical_search(" ".join(words), 5)
        agree += top_base in {h.node_id for h in got[:2]}
        ours = {h.node_id: h.score for h in got}
        assert len(got) == 5
        assert np.corrcoef([ours[i] for i in ours], [scores[ids.index(i)] for i in ours])[0, 1] > 0.5
    assert agree >= 27
