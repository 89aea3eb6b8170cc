"""Graph retrieval modes on a tiny hand-made corpus whose 2-hop question needs a bridge entity:
"Which waterway passes the town where Marie Curie was born?" The answer passage (the Vistula)
shares no word with the question; it is reached only through Warsaw, named in the passage
about Marie Curie's birth. Dense retrieval (hashing bag of words) ranks lexical distractors
above it; the graph modes find it -- in the exact (matrix) and the local-push execution."""

from __future__ import annotations

import pytest
from support import make_engine, with_entity_graph, with_graph_settings

from eragraph.services.graph_query import GraphSettings
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.query import available_modes, query
from eragraph.services.remove import remove
from eragraph.services.resummarize import drain

QUESTION = "Which waterway passes the town where Marie Curie was born?"
CORPUS = {
    "birth": "Marie Curie was born in Warsaw in 1867.",
    "river": "The Vistula runs north past Warsaw to the Baltic Sea.",
    "nobel": "Marie Curie received the Nobel Prize twice.",
    "d1": "Which waterway passes the town? Every waterway passes some town where people were born.",
    "d2": "The town where the Seine waterway passes was where many painters were born.",
    "d3": "A waterway passes the old town where the Danube was born as a small stream.",
    "d4": "Berlin lies on the Spree. Hamburg lies on the Elbe.",
}
K = 3


def build(exact: bool | None = None):
    engine = make_engine()
    with_entity_graph(engine)
    with_graph_settings(engine, threshold=0.05, exact=exact, hops=2, match_threshold=0.9)
    ingest(engine, [SourceDoc(source=f"mem://{k}", doc_id=k, text=v) for k, v in CORPUS.items()])
    drain(engine)
    return engine


def top_docs(engine, mode, text=QUESTION, k=K):
    return [r.doc_id for r in query(engine, text, mode=mode, k=k).results]


def test_modes_are_registered():
    engine = build()
    assert {"tri_graph", "concept_ppr", "local_global"} <= set(available_modes(engine))


def test_dense_misses_the_bridged_passage():
    engine = build()
    docs = top_docs(engine, "dense")
    assert "river" not in docs


@pytest.mark.parametrize("exact", [None, False])
@pytest.mark.parametrize("mode", ["tri_graph", "concept_ppr"])
def test_graph_modes_find_the_second_hop(mode, exact):
    engine = build(exact)
    docs = top_docs(engine, mode)
    assert "birth" in docs and "river" in docs, docs


def test_local_global_maps_entity_pairs_to_shared_chunks():
    engine = build()
    # two related query entities: index mapping returns the chunk holding both, first
    docs = top_docs(engine, "local_global", "Is the Vistula near Warsaw or near the Baltic Sea?", k=2)
    assert docs[0] == "river"
    # one entity: global path, re-ranked by entity occurrence
    docs = top_docs(engine, "local_global", "Tell me about the waterway passes of Marie Curie", k=2)
    assert set(docs) & {"birth", "nobel"}


def test_no_entity_falls_back_to_dense():
    engine = build()
    text = "which waterway passes the town where people were born"
    for mode in ("tri_graph", "concept_ppr"):
        assert top_docs(engine, mode, text) == top_docs(engine, "dense", text)


def test_deleted_bridge_is_no_longer_found():
    engine = build()
    remove(engine, ["birth"])
    drain(engine)
    for mode in ("tri_graph", "concept_ppr"):
        docs = top_docs(engine, mode)
        assert "birth" not in docs
    assert "river" not in top_docs(engine, "concept_ppr", k=2)


def test_push_settings_from_env():
    gs = GraphSettings.from_env({"ERAGRAPH_GRAPH_EXACT": "0", "ERAGRAPH_GRAPH_PUSH_EPSILON": "1e-4",
                                 "ERAGRAPH_GRAPH_PUSH_HUB_CAP": "50"})
    assert gs.exact is False and gs.push_epsilon == 1e-4 and gs.push_hub_cap == 50
    assert GraphSettings.from_env({}).exact is None


@pytest.mark.parametrize("mode", ["concept_ppr", "local_global"])
def test_push_execution_ranks_like_the_exact_one(mode):
    questions = [QUESTION, "Is the Vistula near Warsaw or near the Baltic Sea?",
                 "Where did Marie Curie receive the Nobel Prize?"]
    exact, push = build(None), build(False)
    for q in questions:
        assert top_docs(push, mode, q) == top_docs(exact, mode, q), q


def test_push_execution_ranks_like_the_exact_one_over_synonymy_edges():
    """tri_graph walking synonymy edges (written by hand: the hashed names share no word, so
    none reach a threshold here): both executions rank alike, and the edges change a ranking."""
    questions = [QUESTION, "Is the Vistula near Warsaw or near the Baltic Sea?",
                 "Where did Marie Curie receive the Nobel Prize?", "What runs past Berlin?"]
    edges = [("marie curie", "seine", 0.9), ("warsaw", "danube", 0.85), ("berlin", "vistula", 0.8)]
    runs = []
    for exact in (None, False):
        engine = build(exact)
        with_graph_settings(engine, threshold=0.05, exact=exact, synonym_weight=3.0)
        assert engine.entities.store.add_synonyms(edges) == 3
        runs.append(engine)
    ranked = {q: top_docs(runs[0], "tri_graph", q) for q in questions}
    for q in questions:
        assert top_docs(runs[1], "tri_graph", q) == ranked[q], q
    plain = build(None)
    assert any(top_docs(plain, "tri_graph", q) != ranked[q] for q in questions)


def test_push_hub_cap_still_finds_the_second_hop():
    engine = build(False)
    with_graph_settings(engine, threshold=0.05, exact=False, push_hub_cap=1)
    docs = top_docs(engine, "concept_ppr")
    assert "birth" in docs


def filtered_docs(engine, mode, where, text=QUESTION, k=K):
    return [r.doc_id for r in query(engine, text, mode=mode, k=k, where=where).results]


@pytest.mark.parametrize("exact", [None, False])
@pytest.mark.parametrize("mode", ["tri_graph", "concept_ppr"])
def test_a_filter_cuts_the_graph_not_only_the_results(mode, exact):
    """The Vistula passage is reached only through the Marie Curie birth passage. A filter that
    leaves that passage out must cut the path (PageRank runs over the allowed chunks), not just
    drop the bridge from the results and keep what was found through it; a filter that keeps
    both still finds the second hop."""
    engine = build(exact)
    keep_all_but_bridge = {"notEquals": {"key": "doc_id", "value": "birth"}}
    docs = filtered_docs(engine, mode, keep_all_but_bridge)
    assert "birth" not in docs and "river" not in docs, docs
    keep_bridge = {"in": {"key": "doc_id", "value": ["birth", "river", "d1", "d2", "d3"]}}
    docs = filtered_docs(engine, mode, keep_bridge)
    assert "birth" in docs and "river" in docs and "nobel" not in docs, docs


@pytest.mark.parametrize("mode", ["tri_graph", "concept_ppr"])
def test_the_walk_is_made_once_per_snapshot_and_anew_for_a_filter(mode, monkeypatch):
    """The exact execution keeps its graph's random walk with the snapshot: unfiltered queries
    after the first do not rebuild it; a filtered query walks its own cut graph; a write (a new
    snapshot generation) makes a new one."""
    from eragraph.domain import graph_math as gm

    engine = build()
    made = []
    real = gm.walk
    monkeypatch.setattr(gm, "walk", lambda adjacency: made.append(adjacency.shape) or real(adjacency))
    first = top_docs(engine, mode)
    assert top_docs(engine, mode) == first and len(made) == 1
    filtered_docs(engine, mode, {"notEquals": {"key": "doc_id", "value": "birth"}})
    assert len(made) == 2
    top_docs(engine, mode)
    assert len(made) == 2
    ingest(engine, [SourceDoc(source="mem://more", doc_id="more", text="Pierre Curie was born in Paris.")])
    drain(engine)
    top_docs(engine, mode)
    assert len(made) == 3 and made[2][0] > made[0][0]
