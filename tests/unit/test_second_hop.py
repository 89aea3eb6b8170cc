"""The second hop of the leaf modes (services.second_hop, domain.second_hop), on a planted
2-hop chain: "Which team did the spouse of Anna Benson play for?" The first hop finds the
spouse passage ("The spouse of Anna Benson is Kris Benson."), the answer passage names only
the bridge ("Kris Benson pitched for the Mets."), and three distractors naming Anna Benson keep
it out of the top two; the second hop, through Kris Benson, brings it in. The distractors are
chosen per mode (each mode's first hop ranks differently); the hash embedder and the
capitalized-phrase NER keep it model-free."""

from __future__ import annotations

import dataclasses

import pytest

from eragraph.domain.second_hop import bridge_entities, expanded_query

QUESTION = "Which team did the spouse of Anna Benson play for?"
CHAIN = {"spouse": "The spouse of Anna Benson is Kris Benson.", "team": "Kris Benson pitched for the Mets."}
DISTRACTORS = {
    "dense": ("Anna Benson played for Denver.", "Anna Benson did play golf.", "Anna Benson is a spouse."),
    "hybrid": ("Anna Benson did play for a team of spouses.", "Did Anna Benson play for the team?",
               "The spouse did play for a team."),
    "tri_graph": ("Anna Benson did play for a team of spouses.", "Anna Benson played for Denver.",
                  "The spouse did play for a team."),
}


# ---------------------------------------------------------------- domain


def test_the_bridge_is_a_new_entity_sharing_a_sentence_with_the_question():
    sentences = [["anna benson", "kris benson"], ["usa", "mets"]]
    freq = {"kris benson": 3, "usa": 900, "mets": 40}
    assert bridge_entities(sentences, {"anna benson"}, freq, 1) == ["kris benson"]
    # the linked sentence's entities first, then the others, the rarer first
    assert bridge_entities(sentences, {"anna benson"}, freq, 3) == ["kris benson", "mets", "usa"]
    assert bridge_entities(sentences, {"anna benson"}, freq, 0) == []
    # nothing new: no bridge
    assert bridge_entities([["anna benson"]], {"anna benson"}, {}, 2) == []


def test_rarity_orders_a_sentence_s_entities():
    assert bridge_entities([["q", "common", "rare"]], {"q"}, {"common": 50, "rare": 2}, 2) == ["rare", "common"]


def test_the_expanded_query_appends_the_names():
    assert expanded_query("Who? ", ["kris benson", "mets"]) == "Who? kris benson mets"
    assert expanded_query("Who?", []) == "Who?"


# ---------------------------------------------------------------- the modes


def build(mode: str, exact: bool | None = None, **graph):
    from eragraph.bootstrap import build_engine
    from eragraph.config import GraphSettings, settings_from_env
    from eragraph.services.ingest import SourceDoc, ingest
    from eragraph.services.resummarize import drain

    settings = dataclasses.replace(settings_from_env({}), embedder="hash",
                                   graph_retrieval=GraphSettings(threshold=0.05, exact=exact, **graph))
    engine = build_engine("memory", settings=settings)
    corpus = {**CHAIN, **{f"d{i}": t for i, t in enumerate(DISTRACTORS[mode])}}
    ingest(engine, [SourceDoc(source=f"mem://{k}", doc_id=k, text=v) for k, v in corpus.items()])
    drain(engine)
    return engine


def top(engine, mode: str, k: int = 2):
    from eragraph.services.query import query

    return query(engine, QUESTION, mode=mode, k=k)


@pytest.mark.parametrize("mode,exact", [("dense", None), ("hybrid", None), ("tri_graph", None), ("tri_graph", False)])
def test_only_the_second_hop_finds_the_answer_passage(mode, exact):
    first = [r.doc_id for r in top(build(mode, exact), mode).results]
    assert first[0] == "spouse" and "team" not in first
    hopped = top(build(mode, exact, hop_entities=2, hop_weight=2.0), mode)
    assert [r.doc_id for r in hopped.results] == ["spouse", "team"]
    assert "second hop through kris benson" in hopped.note


@pytest.mark.parametrize("mode", ["dense", "hybrid", "tri_graph"])
def test_a_second_hop_of_weight_zero_is_the_first_hop(mode):
    """The fusion keeps the first hop's order when the second weighs nothing: the lever is the
    second list, not a change of the first."""
    plain = [r.doc_id for r in top(build(mode), mode, k=5).results]
    hopped = top(build(mode, hop_entities=2, hop_weight=0.0), mode, k=5)
    assert "second hop through kris benson" in hopped.note
    assert [r.doc_id for r in hopped.results] == plain


def test_the_hop_reads_three_batched_calls():
    """The bridge read is a fixed number of store calls, whatever the store holds."""
    from eragraph.services import second_hop

    engine = build("tri_graph", hop_entities=2)
    chunk = top(engine, "tri_graph").results[0]
    assert chunk.doc_id == "spouse"
    store = engine.entities.store
    calls: list[str] = []
    for name in ("sentence_ids_of_chunks", "get_sentences", "frequencies"):
        real = getattr(store, name)

        def counted(*a, _real=real, _name=name, **kw):
            calls.append(_name)
            return _real(*a, **kw)
        setattr(store, name, counted)
    assert second_hop.bridges(engine, chunk.id, QUESTION, {"anna benson"}) == ["kris benson"]
    assert calls == ["sentence_ids_of_chunks", "get_sentences", "frequencies"]


def test_the_second_walk_reuses_the_question_s_entities():
    """The re-seeded walk matches the question's names once: NER runs once per query."""
    engine = build("tri_graph", hop_entities=2, hop_weight=2.0)
    extractor = engine.entities.extractor
    real, calls = extractor.query_entities, []

    def counted(text):
        calls.append(text)
        return real(text)

    extractor.query_entities = counted
    assert "second hop through kris benson" in top(engine, "tri_graph").note
    assert calls == [QUESTION]


@pytest.mark.parametrize("side", ["dense", "hybrid"])
def test_auto_s_dense_side_takes_the_hop(side):
    """``auto`` sends a question to its dense side through the same second hop (the setting on)."""
    from eragraph.services import routing
    from eragraph.services.query_context import QueryContext

    def side_docs(engine):
        ctx = QueryContext(engine, QUESTION, 2, None, 0.6)
        ids = [c for c, _ in routing._dense_side(ctx, side, 20)[1]][:2]
        return [n.doc_id for n in (engine.graph.get_nodes(ids)[c] for c in ids)], ctx.notes

    plain, _ = side_docs(build(side))
    hopped, notes = side_docs(build(side, hop_entities=2, hop_weight=2.0))
    assert plain[0] == "spouse" and "team" not in plain
    assert hopped == ["spouse", "team"] and "second hop through kris benson" in notes


# ---------------------------------------------------------------- the re-seeded walk's reuse

PEOPLE = ["Anna Benson", "Kris Benson", "Ole Rasmussen", "Mia Castell", "Ivo Brandt", "Lena Horvath",
          "Tomas Eller", "Rhea Quint", "Omar Vidal", "Sara Lind"]
PLACES = ["Denver", "Oslo", "Porto", "Lyon", "Graz", "Turku"]


def _web(exact: bool | None):
    """A small web of passages, each linking two people and a place (a fixed pattern, so the
    walk has many paths and the bridges change both the activation and the PageRank)."""
    from eragraph.bootstrap import build_engine
    from eragraph.config import GraphSettings, settings_from_env
    from eragraph.services.ingest import SourceDoc, ingest
    from eragraph.services.resummarize import drain

    settings = dataclasses.replace(settings_from_env({}), embedder="hash",
                                   graph_retrieval=GraphSettings(threshold=0.05, exact=exact, hop_entities=2))
    engine = build_engine("memory", settings=settings)
    docs = []
    for i in range(24):
        a, b, c = PEOPLE[i % 10], PEOPLE[(i * 3 + 1) % 10], PLACES[(i * 5) % 6]
        if a == b:
            b = PEOPLE[(i + 5) % 10]
        text = f"{a} met {b} in {c}. {b} later moved to {PLACES[(i + 2) % 6]}."
        docs.append(SourceDoc(source=f"mem://w{i}", doc_id=f"w{i}", text=text))
    ingest(engine, docs)
    drain(engine)
    return engine


QUESTIONS = ["Where did the friend of Anna Benson move?", "Who did Ole Rasmussen meet in Porto?",
             "Which city did Mia Castell and Ivo Brandt share?"]


@pytest.mark.parametrize("exact", [None, False])
def test_the_reseeded_walk_ranks_as_a_fresh_walk_does(exact):
    """The second walk reuses the first's question-only inputs (matches, similarities, view;
    dense hits and sentence reads on the push execution) and ranks exactly as a walk computed
    from nothing with the same seeds: a reuse of the first walk's activation or PageRank (or of
    its restart) would rank differently here, where the bridges move both."""
    from eragraph.services import graph_query as gq
    from eragraph.services import second_hop

    engine = _web(exact)
    differs = 0
    for text in QUESTIONS:
        vector = engine.embedder.embed([text])[0]
        first = gq.tri_graph_walk(engine, text, vector, 40)
        assert first is not None and first.ranked
        extras = dict.fromkeys(second_hop.bridges(engine, first.ranked[0][0], text, set(first.seeds)), 1.0)
        assert extras
        again = gq.reseeded_walk(engine, first, vector, 40, None, extras)
        fresh = gq._tri_graph_walk(engine, vector, 40, None, first.names, extras)  # nothing reused
        assert [c for c, _ in again.ranked] == [c for c, _ in fresh.ranked]
        assert [s for _, s in again.ranked] == pytest.approx([s for _, s in fresh.ranked], rel=1e-9, abs=1e-12)
        assert again.seeds == fresh.seeds
        differs += [c for c, _ in again.ranked] != [c for c, _ in first.ranked]
    assert differs  # the bridges changed a ranking: the comparison above had something to catch


def test_the_reseeded_walk_under_a_filter_ranks_as_a_fresh_one_and_stays_inside():
    from eragraph.domain.filters import parse_filter
    from eragraph.services import graph_query as gq
    from eragraph.services import second_hop

    engine = _web(None)
    where = parse_filter({"in": {"key": "doc_id", "value": [f"w{i}" for i in range(0, 24, 2)]}})
    text = QUESTIONS[0]
    vector = engine.embedder.embed([text])[0]
    first = gq.tri_graph_walk(engine, text, vector, 40, where)
    extras = dict.fromkeys(second_hop.bridges(engine, first.ranked[0][0], text, set(first.seeds)), 1.0)
    again = gq.reseeded_walk(engine, first, vector, 40, where, extras)
    fresh = gq._tri_graph_walk(engine, vector, 40, where, first.names, extras)
    assert [c for c, _ in again.ranked] == [c for c, _ in fresh.ranked]
    docs = {n.doc_id for n in engine.graph.get_nodes([c for c, _ in again.ranked]).values()}
    assert docs and all(int(d[1:]) % 2 == 0 for d in docs)


@pytest.mark.parametrize("exact", [None, False])
def test_the_second_hop_matches_the_question_s_entities_and_searches_once(exact, monkeypatch):
    """The hop's cost is one more activation and PageRank: the question's names are matched to
    graph entities once per query (and, on the push execution, the dense hits that seed the
    passages are searched once); a second walk computed from nothing would do both twice."""
    from eragraph.services import graph_query as gq

    engine = _web(exact)
    calls: list[str] = []
    name = "nearest_positions" if exact is None else "nearest_names"
    real_match, real_search = getattr(gq, name), engine.vectors.search
    monkeypatch.setattr(gq, name, lambda *a, **kw: calls.append("match") or real_match(*a, **kw))
    monkeypatch.setattr(engine.vectors, "search", lambda *a, **kw: calls.append("search") or real_search(*a, **kw))
    out = top(engine, "tri_graph", k=3)
    assert "second hop through" in out.note
    assert calls.count("match") == 1
    if exact is False:
        assert calls.count("search") == 1
