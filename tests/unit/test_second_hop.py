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
