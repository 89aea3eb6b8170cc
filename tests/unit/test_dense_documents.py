"""``dense`` ranks documents by their best chunk: one place per document, other chunks of a
document only fill the places no other document takes (domain.ranking.best_per_document,
services.summary_search.dense_leaves)."""

from __future__ import annotations

import random

import pytest

from support import make_engine, synthetic_docs
from eragraph.domain.ranking import Candidate, best_per_document, fill_budget
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.query import query
from eragraph.services.resummarize import drain

Q = "telescope comet planet orbit galaxy"


def cand(node, score, tokens=10):
    return Candidate(node, 0, score, tokens)


DOC_OF = {"a1": "A", "a2": "A", "a3": "A", "b1": "B", "c1": "C"}
CANDS = [cand("a1", 0.9), cand("a2", 0.8), cand("a3", 0.7), cand("b1", 0.6), cand("c1", 0.5)]


def test_one_place_per_document_first():
    assert [c.node_id for c in best_per_document(CANDS, DOC_OF, 3, None)] == ["a1", "b1", "c1"]


def test_next_best_chunks_fill_when_documents_run_out():
    assert [c.node_id for c in best_per_document(CANDS, DOC_OF, 5, None)] == ["a1", "b1", "c1", "a2", "a3"]
    assert [c.node_id for c in best_per_document(CANDS, DOC_OF, 4, None)] == ["a1", "b1", "c1", "a2"]


def test_budget_covers_the_whole_result():
    cands = [cand("a1", 0.9, 50), cand("a2", 0.8, 10), cand("b1", 0.6, 60), cand("c1", 0.5, 30)]
    got = best_per_document(cands, DOC_OF, 4, 100)
    assert [c.node_id for c in got] == ["a1", "c1", "a2"]  # b1 no longer fits after a1
    assert sum(c.tokens for c in got) <= 100


def test_without_documents_it_is_fill_budget():
    assert best_per_document(CANDS, {}, 4, 25) == fill_budget(CANDS, 4, 25)


def long_doc(doc_id: str, words: str, n_words: int, seed: int = 1) -> SourceDoc:
    rng = random.Random(seed)
    vocab = words.split()
    sentences = [" ".join(rng.choice(vocab) for _ in range(10)).capitalize() + "." for _ in range(n_words // 10)]
    return SourceDoc(source=f"mem://{doc_id}.txt", doc_id=doc_id, title=doc_id, text=" ".join(sentences))


@pytest.fixture(scope="module")
def engine():
    e = make_engine()
    # one long document all about the query's words (many chunks that outrank everything else)
    ingest(e, [long_doc("long", Q, 2000)] + synthetic_docs(20))
    drain(e)
    return e


def brute_force_documents(e, k):
    refs = [r.node_id for r in e.graph.layer_refs(0)]
    nodes = e.graph.get_nodes(refs)
    vecs = e.vectors.get_vectors(refs)
    qv = e.embedder.embed([Q])[0]
    cands = [Candidate(i, 0, float(vecs[i] @ qv), nodes[i].tokens) for i in refs]
    best: dict[str, Candidate] = {}
    for c in fill_budget(cands, len(cands), None):
        best.setdefault(nodes[c.node_id].doc_id, c)
    return [c.node_id for c in fill_budget(list(best.values()), k, None)], nodes


def test_dense_returns_each_documents_best_chunk(engine):
    chunks_of_long = sum(1 for n in engine.graph.get_nodes(r.node_id for r in engine.graph.layer_refs(0)).values()
                         if n.doc_id == "long")
    assert chunks_of_long > 5 * 4  # more than the first leaf read holds: the read must widen
    for k in (3, 5, 8):
        res = query(engine, Q, mode="dense", k=k).results
        expected, _ = brute_force_documents(engine, k)
        assert [r.id for r in res] == expected
        assert len({r.doc_id for r in res}) == k and res[0].doc_id == "long"


def test_a_one_document_store_still_returns_k_chunks():
    e = make_engine()
    ingest(e, [long_doc("only", Q, 3000)])
    drain(e)
    res = query(e, Q, mode="dense", k=5).results
    assert len(res) == 5 and {r.doc_id for r in res} == {"only"}
    assert [r.score for r in res] == sorted((r.score for r in res), reverse=True)


@pytest.fixture(scope="module")
def full_engine():
    """The memory profile with the lexical index and the entity graph (every leaf-level mode)."""
    import dataclasses

    from eragraph.bootstrap import build_engine
    from eragraph.config import settings_from_env

    eng = build_engine("memory", settings=dataclasses.replace(settings_from_env({}), embedder="hash", ner="capitalized"))
    radium = "Marie Curie studied Radium in Paris with Pierre Curie at the Radium Institute."
    long_text = " ".join([radium] * 120)  # many chunks, each mentioning the query's words
    short = [f"Radium note {i}: Marie Curie and Radium in Paris, item {i}." for i in range(4)]
    docs = [SourceDoc(source="long", text=long_text, doc_id="long")]
    docs += [SourceDoc(source=f"s{i}", text=t, doc_id=f"s{i}") for i, t in enumerate(short)]
    docs += [SourceDoc(source="other", text="The Eiffel Tower is in Paris, France.", doc_id="other")]
    ingest(eng, docs)
    drain(eng)
    return eng


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid", "tri_graph", "concept_ppr", "fusion", "auto"])
def test_every_leaf_mode_gives_a_document_one_place_first(full_engine, mode):
    n_long = sum(1 for r in full_engine.graph.layer_refs(0)
                 if full_engine.graph.get_nodes([r.node_id])[r.node_id].doc_id == "long")
    assert n_long >= 8
    res = query(full_engine, "Who studied Radium with Marie Curie in Paris?", mode=mode, k=5).results
    docs = [r.doc_id for r in res]
    assert len(res) == 5 and len(set(docs)) == 5, docs
    # more places than documents: the best documents' other chunks fill the rest, none twice
    res = query(full_engine, "Who studied Radium with Marie Curie in Paris?", mode=mode, k=9).results
    ids = [r.id for r in res]
    assert len(ids) == 9 and len(set(ids)) == 9
    assert len({r.doc_id for r in res[:6]}) == 6  # every document once before any twice


def test_the_leaf_read_widens_a_bounded_number_of_times():
    """A document with more top chunks than the widest read (k * 4 * 4**WIDEN) still leaves k
    results; the read stops widening there instead of reading the whole store."""
    from eragraph.services import summary_search

    e = make_engine()
    ingest(e, [long_doc("huge", Q, 6000)] + synthetic_docs(5))
    drain(e)
    sizes = []
    search = e.vectors.search

    def counting(vector, k, **kw):
        sizes.append(k)
        return search(vector, k, **kw)

    e.vectors.search = counting
    res = query(e, Q, mode="dense", k=3).results
    assert len(res) == 3 and res[0].doc_id == "huge"
    assert sizes == [12 * 4 ** i for i in range(summary_search.WIDEN + 1)]


def test_each_widening_reads_the_nodes_of_its_new_hits_only():
    """The widened reads return the earlier hits again; their nodes are not read a second time."""
    from eragraph.services import summary_search

    e = make_engine()
    ingest(e, [long_doc("huge", Q, 6000)] + synthetic_docs(5))
    drain(e)
    read: list[str] = []
    get_nodes = e.graph.get_nodes

    def counting(ids):
        ids = list(ids)
        read.extend(ids)
        return get_nodes(ids)

    e.graph.get_nodes = counting
    res = summary_search.dense_leaves(e, e.embedder.embed([Q])[0], 3, None)
    assert len(res) == 3
    leaf_reads = [i for i in read if i.startswith("chk-")]
    assert len(leaf_reads) > 12  # the read widened past its first 12 hits
    assert len(leaf_reads) == len(set(leaf_reads))
