"""Synonymy edges (services.synonyms): made at insert from the entity name vectors (one search
per new entity, its top N above the threshold, written both ways), idempotent on redelivery,
gone with their entity, walked by tri_graph at ``synonym_weight`` alike in the exact and the
push execution, and backfilled by reindex for a store built before them.

The hashing embedder does not make "U.S." and "United States" similar, so the names' vectors
are set by hand (``NamedVectors``)."""

from __future__ import annotations

import numpy as np
import pytest
from support import make_engine, with_entity_graph, with_graph_settings

from eragraph.config import GraphSettings
from eragraph.domain import graph_math as gm
from eragraph.domain.model import Node
from eragraph.ports.entity import SentenceMentions, build_matrices, synonym_pairs
from eragraph.providers.hashing import HashingEmbedder
from eragraph.services import graph_query, reindex, synonyms
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.query import query
from eragraph.services.remove import remove
from eragraph.services.resummarize import drain

DIM = 128


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


class NamedVectors:
    """The hashing embedder, except for the names given a vector of their own."""

    def __init__(self, named: dict[str, np.ndarray]) -> None:
        self.base = HashingEmbedder(DIM)
        self.dim = DIM
        self.identity = self.base.identity
        self.named = named

    def embed(self, texts):
        out = self.base.embed(texts)
        for i, t in enumerate(texts):
            if t in self.named:
                out[i] = self.named[t]
        return out


class KnownNames:
    """Entities: the known surface forms found in a text (one sentence per text)."""

    FORMS = {"U.S.": "u.s.", "United States": "united states", "Zebra Act": "zebra act",
             "Senate": "senate", "Ohio": "ohio", "Oho": "oho"}

    def _names(self, text: str) -> list[str]:
        return [name for form, name in self.FORMS.items() if form in text]

    def extract(self, texts):
        return [[SentenceMentions(t, tuple(self._names(t)))] for t in texts]

    def query_entities(self, text):
        return self._names(text)


rng = np.random.default_rng(7)
US = unit(rng.normal(size=DIM))
NAMED = {"u.s.": US, "united states": unit(US + 0.05 * unit(rng.normal(size=DIM))),  # cosine ~0.999
         "ohio": unit(rng.normal(size=DIM))}
NAMED["oho"] = unit(NAMED["ohio"] + 0.6 * unit(rng.normal(size=DIM)))  # cosine ~0.86
CORPUS = {
    "senate": "The U.S. Senate met in Ohio.",
    "target": "The United States signed the Zebra Act in 1990.",
    "d1": "What did the council adopt? The council did adopt the budget.",
    "d2": "What did the town adopt? The town did adopt a new flag.",
    "d3": "What did the club adopt? The club did adopt new rules.",
}
QUESTION = "What did the U.S. adopt?"


def build(exact: bool | None = None, weight: float = 0.0, **graph):
    engine = make_engine()
    engine.embedder = NamedVectors(NAMED)
    index = with_entity_graph(engine, extractor=KnownNames())
    with_graph_settings(engine, exact=exact, synonym_weight=weight, lam=0.05, **graph)
    ingest(engine, [SourceDoc(source=f"mem://{k}", doc_id=k, text=v) for k, v in CORPUS.items()])
    drain(engine)
    return engine, index


def test_pairs_and_the_exported_matrix_are_symmetric():
    assert synonym_pairs([("b", "a", 0.8), ("a", "b", 0.9), ("a", "a", 1.0), ("c", "d", -0.2)]) == {("a", "b"): 0.9}
    m = build_matrices(1, [("a", "k", 1), ("b", "k", 1), ("c", "k", 1)], [], [],
                       [("a", "b", 0.9), ("a", "zed", 0.95)])  # zed: not an entity of the snapshot
    s = m.synonymy.toarray()
    assert s[0, 1] == s[1, 0] == pytest.approx(0.9) and s.sum() == pytest.approx(1.8)


def test_settings_from_the_environment_and_off_switches():
    gs = GraphSettings.from_env({"ERAGRAPH_GRAPH_SYNONYM_THRESHOLD": "0.7", "ERAGRAPH_GRAPH_SYNONYM_TOP": "3",
                                 "ERAGRAPH_GRAPH_SYNONYM_WEIGHT": "0.25"})
    assert (gs.synonym_threshold, gs.synonym_top, gs.synonym_weight, gs.synonyms_on) == (0.7, 3, 0.25, True)
    # kept at insert only while the walk weighs them: off as shipped (weight 0)
    assert not GraphSettings().synonyms_on and GraphSettings().synonym_weight == 0.0
    assert GraphSettings(synonym_weight=0.5).synonyms_on
    assert not GraphSettings(synonym_weight=0.5, synonym_threshold=1.0).synonyms_on
    assert not GraphSettings(synonym_weight=0.5, synonym_top=0).synonyms_on


def test_insert_links_new_entities_to_their_near_names_both_ways():
    engine, index = build(weight=0.5)
    store = index.store
    got = store.synonyms(["u.s.", "united states", "ohio", "oho", "senate"])
    assert set(got) == {"u.s.", "united states"}  # oho is not in the corpus yet
    assert got["u.s."]["united states"] == pytest.approx(float(NAMED["u.s."] @ NAMED["united states"]), abs=1e-5)
    # an old entity gains its edge to a new one without being searched again
    searched = []
    search_many = index.vectors.search_many
    index.vectors.search_many = lambda vs, k, **kw: searched.append(len(vs)) or search_many(vs, k, **kw)
    ingest(engine, [SourceDoc(source="mem://oho", doc_id="oho", text="Oho is a town.")])
    drain(engine)
    assert searched == [1]  # one batched search, of one row: the one new entity
    assert store.synonyms(["ohio"])["ohio"]["oho"] == pytest.approx(float(NAMED["ohio"] @ NAMED["oho"]), abs=1e-5)
    # a redelivered insert doubles nothing
    before = store.synonyms(["u.s.", "united states", "ohio", "oho"])
    nodes = [Node(node_id=f"again{i}", layer=0, text=t, tokens=8, code=0, doc_id="again") for i, t in enumerate(CORPUS.values())]
    index.add_nodes(nodes)
    index.add_nodes(nodes)
    assert store.synonyms(["u.s.", "united states", "ohio", "oho"]) == before
    # the entity leaves with its document: its edges go, both directions
    remove(engine, ["oho"])
    drain(engine)
    assert "oho" not in store.synonyms(["ohio"]).get("ohio", {}) and store.synonyms(["oho"]) == {}


def test_top_n_and_the_threshold_bound_a_new_entity_s_edges():
    engine, index = build(weight=0.5, synonym_threshold=0.9)
    assert "ohio" not in index.store.synonyms(["ohio"])  # nothing that close to ohio
    engine, index = build(weight=0.5, synonym_threshold=-1.0, synonym_top=1)
    rows = index.store.synonyms(["senate", "zebra act"])
    # each entity chose one; it may have more that others chose
    assert all(len(r) >= 1 for r in rows.values())
    engine, index = build(weight=0.5, synonym_top=0)
    assert index.store.synonyms(["u.s.", "united states"]) == {}
    engine, index = build()  # the shipped weight, 0: the walk would not use them, none are kept
    assert index.store.synonyms(["u.s.", "united states"]) == {}


@pytest.mark.parametrize("exact", [None, False])
def test_tri_graph_crosses_a_synonymy_edge_only_with_its_weight(exact):
    off, _ = build(exact)
    on, _ = build(exact, weight=1.0)
    docs_off = [r.doc_id for r in query(off, QUESTION, mode="tri_graph", k=2).results]
    docs_on = [r.doc_id for r in query(on, QUESTION, mode="tri_graph", k=2).results]
    assert "senate" in docs_off and "target" not in docs_off, docs_off
    assert "target" in docs_on, docs_on


@pytest.mark.parametrize("weight", [0.0, 0.5, 3.0])
def test_push_ppr_agrees_with_the_exact_walk_with_synonymy_edges(weight):
    engine, index = build(weight=0.5, synonym_threshold=0.3)  # a store that keeps its edges
    store = index.store
    snap = graph_query.snapshot(engine)
    assert snap.synonymy.nnz >= 2
    (chunk,) = store.postings(["zebra act"])["zebra act"]  # a passage with entities (no dangling node)
    restart = {("e", "u.s."): 1.0, ("c", chunk): 0.5}
    personal = np.zeros(len(snap.chunks) + len(snap.entities))
    personal[len(snap.chunks) + snap.entity_index["u.s."]] = 1.0
    personal[snap.chunks.index(chunk)] = 0.5
    exact = gm.ppr(snap.walk("tri_adjacency", weight), personal, 0.5, tol=1e-12, max_iter=500)
    gs = GraphSettings(push_epsilon=1e-10, push_max_rounds=5000, synonym_weight=weight)
    pushed = dict(graph_query._push(restart, store, False, 0.5, gs, None, weight))
    for i, c in enumerate(snap.chunks):
        assert pushed.get(c, 0.0) == pytest.approx(exact[i], abs=1e-6)
    # the cached walk per weight: the same object for the same weight
    assert snap.walk("tri_adjacency", weight) is snap.walk("tri_adjacency", weight)


def test_reindex_backfills_an_old_store_once_and_resumes():
    engine, index = build(synonym_top=0)  # a store built without the edges
    store = index.store
    engine.graph.put_meta(synonyms.BACKFILL_MARK, None)
    assert store.synonyms(["u.s."]) == {}
    with_graph_settings(engine, synonym_threshold=0.8, synonym_top=8, synonym_weight=0.5)
    report: dict = {}
    cursor = synonyms.backfill(engine, report, out_of_time=lambda: True, page=2)  # stops after a page
    assert cursor is not None
    while cursor is not None:
        cursor = synonyms.backfill(engine, report, cursor, out_of_time=lambda: True, page=2)
    assert store.synonyms(["u.s."])["u.s."].keys() == {"united states"}
    assert report["synonym_edges_backfilled"] >= 1
    # done: a full reindex searches nothing
    searched = []
    search_many = index.vectors.search_many
    index.vectors.search_many = lambda vs, k, **kw: searched.append(len(vs)) or search_many(vs, k, **kw)
    full = reindex.run(engine)
    assert full["complete"] and "synonyms" in full["steps_run"] and full["metrics"]["SynonymEdgesBackfilled"] == 0
    assert searched == []


def test_reindex_reports_the_edges_it_wrote():
    engine, index = build(synonym_top=0)
    engine.graph.put_meta(synonyms.BACKFILL_MARK, None)
    with_graph_settings(engine, synonym_weight=0.5)
    report = reindex.run(engine)
    assert report["metrics"]["SynonymEdgesBackfilled"] == 1  # u.s. ~ united states
    assert index.store.synonyms(["united states"]) == {"united states": {"u.s.": pytest.approx(0.9988, abs=1e-3)}}


def test_entities_inserted_while_the_weight_is_0_get_their_edges_once_it_is_set_again():
    """Edges are kept only while the walk weighs them; an insert without them takes back the
    backfill's "done", so setting a weight again has reindex link what came meanwhile."""
    engine, index = build(weight=0.5)
    assert engine.graph.get_meta(synonyms.BACKFILL_MARK)["done"]  # kept from the store's first insert
    with_graph_settings(engine, synonym_weight=0.0, lam=0.05)
    ingest(engine, [SourceDoc(source="mem://oho", doc_id="oho", text="Oho is a town.")])
    drain(engine)
    assert "oho" not in index.store.synonyms(["ohio"]).get("ohio", {})  # not kept: the walk ignores them
    assert engine.graph.get_meta(synonyms.BACKFILL_MARK) is None
    with_graph_settings(engine, synonym_weight=0.5, lam=0.05)
    report = reindex.run(engine)
    assert report["metrics"]["SynonymEdgesBackfilled"] >= 1
    assert index.store.synonyms(["ohio"])["ohio"]["oho"] == pytest.approx(float(NAMED["ohio"] @ NAMED["oho"]), abs=1e-5)
