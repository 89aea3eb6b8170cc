"""Contract of the LexicalIndex port (BM25 over leaf chunks) on every adapter: SQLite FTS5 (in
the graph store's node transactions), memory, and OpenSearch (the ``text`` field of the vector
documents, through the recording fake client whose request bodies are checked here). A ``where``
filter keeps the chunks whose document's attributes match: the unfiltered ranking restricted
to them, never a post-filtered top-k that comes back short."""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from random_filters import random_metadata, random_filters

from eragraph.domain import bm25
from eragraph.domain.filters import Cond, chunk_attrs, matches
from eragraph.domain.model import Document, LexicalIndexMissing, Node
from eragraph.domain.ranking import rank_key
from eragraph.ports.records import Hit

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


class GraphBackend:
    """A lexical index read from a graph store: the chunks' attributes come from their documents."""

    informative = True  # terms whose IDF FTS5's bm25() clamps are left out (domain.bm25.informative_terms)

    def write(self, nodes):
        self.graph.put_nodes(nodes)

    def write_documents(self, docs, nodes):
        for doc in docs:
            self.graph.put_document(doc)
        self.write(nodes)

    def delete(self, ids):
        self.graph.delete_nodes(ids)


class SqliteBackend(GraphBackend):
    def __init__(self, tmp: Path) -> None:
        from eragraph.adapters.local.graph_sqlite import SqliteGraphStore
        from eragraph.adapters.local.lexical_fts5 import Fts5LexicalIndex

        self.graph = SqliteGraphStore(tmp / "graph.sqlite")
        self.lexical = Fts5LexicalIndex(self.graph)


class MemoryBackend(GraphBackend):
    def __init__(self, tmp: Path) -> None:
        from eragraph.adapters.memory.graph_memory import MemoryGraphStore
        from eragraph.adapters.memory.lexical_memory import MemoryLexicalIndex

        self.graph = MemoryGraphStore()
        self.lexical = MemoryLexicalIndex(self.graph)


class OpenSearchBackend:
    informative = False  # OpenSearch's BM25 gives every term a positive IDF: every term is sent

    def __init__(self, tmp: Path) -> None:
        from eragraph.adapters.aws.lexical_opensearch import OpenSearchLexicalIndex
        from eragraph.adapters.aws.vector_opensearch import OpenSearchVectorIndex

        self.client = FakeOpenSearch()
        self.vectors = OpenSearchVectorIndex(self.client, "nodes", 4, refresh=True)
        self.lexical = OpenSearchLexicalIndex(self.vectors)

    def write(self, nodes, attrs=None):
        rng = np.random.default_rng(0)
        vecs = rng.normal(size=(len(nodes), 4)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        attrs = attrs or {}
        self.vectors.upsert([n.node_id for n in nodes], vecs,
                            [{"layer": n.layer, "doc_id": n.doc_id, **({"text": n.text} if n.layer == 0 else {}),
                              **({"attrs": attrs[n.doc_id]} if n.layer == 0 and n.doc_id in attrs else {})}
                             for n in nodes])

    def write_documents(self, docs, nodes):
        """The chunks' attributes travel with them (the vector documents' fields)."""
        self.write(nodes, {d.doc_id: doc_attrs(d) for d in docs})

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


def test_a_term_in_half_the_leaves_or_more_decides_nothing(backend):
    """"in" is in all 5 leaves: FTS5's bm25() clamps its IDF to 1e-6. The FTS5 and memory
    indexes leave it out of the match (domain.bm25.informative_terms), so c3 and c5, which only
    "in" matched, are not returned; OpenSearch scores every term and returns them last. The
    ranking of the rest is the same either way, and a question made only of such terms still
    finds its rows."""
    backend.write([node(i, t) for i, t in TEXTS.items()])
    ids = [h.node_id for h in backend.lexical.search("radium in France", 5)]
    assert ids[:3] == ["c2", "c4", "c1"]  # "france" is rarer than "radium": a higher IDF
    if backend.informative:
        assert ids == ["c2", "c4", "c1"]
    else:
        assert set(ids[3:]) == {"c3", "c5"}
    assert {h.node_id for h in backend.lexical.search("in", 5)} == set(TEXTS)


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


# --- metadata filters (where) ----------------------------------------------------------------

WORDS = ["radium", "paris", "curie", "tower", "physics", "prize", "glow", "bern", "light", "atom",
         "river", "stone", "field", "metal", "wave"]


def doc_attrs(doc: Document) -> dict:
    return chunk_attrs(doc.metadata, doc.source, doc.doc_id, doc.title)


def filtered_corpus(seed: int) -> tuple[list[Document], list[Node]]:
    """30 documents of 1-4 chunks each with random metadata; a few summaries (never returned)
    and a few chunks whose document is not stored (no attributes: matched by no filter)."""
    rng = random.Random(seed)
    docs, nodes = [], []
    for d in range(30):
        doc_id = f"doc{d}"
        docs.append(Document(doc_id=doc_id, source=f"s3://b/{rng.choice('xy')}/{doc_id}.txt", content_hash="h",
                             title=rng.choice(["", "Tale", f"Title {doc_id}"]), metadata=random_metadata(rng)))
        for c in range(rng.randint(1, 4)):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14)))
            nodes.append(Node(node_id=f"{doc_id}-c{c}", layer=0, text=text, tokens=3, code=0, doc_id=doc_id,
                              source=docs[-1].source))
    for n in range(4):
        text = " ".join(rng.choice(WORDS) for _ in range(8))
        nodes.append(Node(node_id=f"orphan{n}", layer=0, text=text, tokens=3, code=0, doc_id=f"gone{n}", source="s"))
        nodes.append(Node(node_id=f"sum{n}", layer=1, text=text, tokens=3, code=0, doc_id="", source=""))
    return docs, nodes


def brute_force_bm25(nodes, docs, question, where, informative: bool = True) -> list[Hit]:
    """BM25 (domain.bm25: FTS5's formula, the whole corpus's statistics) of the leaves whose
    document's attributes match ``where``, best first, ties by id (domain.ranking). The FTS5
    and memory indexes leave out the terms whose IDF bm25() clamps (``informative``, from the
    leaves' own counts); OpenSearch sends every term."""
    attrs = {d.doc_id: doc_attrs(d) for d in docs}
    leaves = {n.node_id: Counter(bm25.tokens(n.text)) for n in nodes if n.layer == 0}
    df = Counter(t for counts in leaves.values() for t in counts)
    terms = bm25.query_terms(question)
    if informative:
        terms = bm25.informative_terms(terms, df, len(leaves))
    scores = bm25.score(leaves, df, sum(sum(c.values()) for c in leaves.values()), terms)
    by_doc = {n.node_id: n.doc_id for n in nodes}
    return sorted((Hit(i, s) for i, s in scores.items()
                   if by_doc[i] in attrs and matches(where, attrs[by_doc[i]])), key=rank_key)


def assert_filtered_is_restricted_ranking(lexical, nodes, docs, question, where, ks=(1, 4, 500),
                                          informative: bool = True):
    """Every hit matches, and the hits are the unfiltered ranking (the whole corpus's BM25)
    restricted to the chunks the filter allows, cut at k: the brute-force BM25 of those."""
    want = brute_force_bm25(nodes, docs, question, where, informative)
    full = lexical.search(question, 10_000)
    allowed = {h.node_id for h in want}
    assert [h.node_id for h in full if h.node_id in allowed] == [h.node_id for h in want]
    for k in ks:
        hits = lexical.search(question, k, where=where)
        assert [h.node_id for h in hits] == [h.node_id for h in want[:k]], (question, where, k)
        assert [h.score for h in hits] == pytest.approx([h.score for h in want[:k]], rel=1e-5)
    return len(want)


def test_where_is_the_ranking_restricted_to_the_allowed_chunks(backend):
    docs, nodes = filtered_corpus(5)
    backend.write_documents(docs, nodes)
    rng = random.Random(6)
    nonempty = 0
    for where in random_filters(29, 50):
        question = " ".join(rng.sample(WORDS, rng.randint(1, 3)))
        nonempty += assert_filtered_is_restricted_ranking(backend.lexical, nodes, docs, question, where,
                                                          informative=backend.informative) > 0
    assert nonempty >= 15


def test_where_follows_a_metadata_change(backend):
    docs, nodes = filtered_corpus(7)
    backend.write_documents(docs, nodes)
    marked = Cond("equals", "lang", "zz-new")
    question = " ".join(WORDS)
    assert backend.lexical.search(question, 100, where=marked) == []
    changed = [Document(**{**d.__dict__, "metadata": {**d.metadata, "lang": "zz-new"}}) for d in docs[:3]]
    backend.write_documents(changed, [n for n in nodes if n.doc_id in {d.doc_id for d in changed}])
    docs = changed + docs[3:]
    hits = backend.lexical.search(question, 100, where=marked)
    assert {h.node_id.split("-")[0] for h in hits} == {d.doc_id for d in changed}
    assert_filtered_is_restricted_ranking(backend.lexical, nodes, docs, question, Cond("notEquals", "lang", "zz-new"),
                                          informative=backend.informative)


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
                                       "filter": [{"bool": {"must_not": [{"exists": {"field": "tenant"}}]}},  # the default tenant's scope
                                                  {"term": {"layer": 0}}]}}}


def test_opensearch_index_without_text_field_is_refused_until_rebuilt():
    from eragraph.adapters.aws import lexical_opensearch, vector_opensearch

    client = FakeOpenSearch()
    old = vector_opensearch.index_body(4)
    del old["mappings"]["properties"]["text"]
    del old["mappings"]["_meta"]
    client.indices.create(index="nodes", body=old)
    vectors = vector_opensearch.OpenSearchVectorIndex(client, "nodes", 4, refresh=True)
    vectors.upsert(["c1"], np.ones((1, 4), dtype=np.float32) / 2, [{"layer": 0, "doc_id": "d"}])
    lexical = lexical_opensearch.OpenSearchLexicalIndex(vectors)
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
