"""The query's entity match (services.entity_match): ``ann`` (one batched search of the entity
vector index) gives the top-1 entity ``exact`` (a product with every entity vector of the
snapshot) gives, skips a hit the snapshot lacks, and leaves the snapshot's entity vectors
unread; the graph modes rank alike either way."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from support import with_graph_settings
from test_graph_modes import QUESTION, build, top_docs

from eragraph.config import GraphSettings
from eragraph.services.entity_match import nearest_positions
from eragraph.services.graph_query import snapshot

NAMES = ["marie curie", "warsaw", "vistula", "marie", "baltic sea", "curie in warsaw", "the nobel prize", "elbe"]


def match(engine, how: str, names=NAMES, top: int = 1):
    engine.settings = engine.settings.with_overrides(
        graph_retrieval=dataclasses.replace(engine.settings.graph_retrieval, entity_match=how))
    return nearest_positions(engine, snapshot(engine), engine.embedder.embed(names), top)


def test_ann_and_exact_match_the_same_entity():
    engine = build()
    exact, ann = match(engine, "exact"), match(engine, "ann")
    assert [[i for i, _ in row] for row in ann] == [[i for i, _ in row] for row in exact]
    for a, e in zip(ann, exact):
        assert [s for _, s in a] == pytest.approx([s for _, s in e], abs=1e-5)
    snap = snapshot(engine)
    assert [snap.entities[row[0][0]] for row in exact[:3]] == ["marie curie", "warsaw", "vistula"]
    # top 3: the same scores (which of the entities tied at a score is taken may differ: the
    # hashing embedder puts most names at cosine 0 to one another)
    for a, e in zip(match(engine, "ann", top=3), match(engine, "exact", top=3)):
        assert [s for _, s in a] == pytest.approx([s for _, s in e], abs=1e-5)
        assert {i for i, s in a if s > 0.01} == {i for i, s in e if s > 0.01}


def test_an_ann_hit_the_snapshot_lacks_is_skipped():
    engine = build()
    snap = snapshot(engine)
    ghost = engine.embedder.embed(["zanzibar"])
    engine.entities.vectors.upsert(["ent:zanzibar"], ghost, [{"layer": -1, "doc_id": ""}])
    engine.entities.vectors.flush()
    assert "zanzibar" not in snap.entity_index
    assert match(engine, "ann", ["zanzibar"]) == [[]]
    assert snap.entities[match(engine, "exact", ["zanzibar"])[0][0][0]] != "zanzibar"


@pytest.mark.parametrize("mode", ["tri_graph", "concept_ppr", "local_global"])
def test_ann_match_ranks_like_exact_without_reading_the_entity_vectors(mode, monkeypatch):
    engine = build()
    with_graph_settings(engine, **{**dataclasses.asdict(engine.settings.graph_retrieval), "entity_match": "exact"})
    expected = top_docs(engine, mode)
    assert engine.graph_snapshot._entity_vectors is not None or mode != "tri_graph"
    ann = build()
    gs = ann.settings.graph_retrieval
    with_graph_settings(ann, **{**dataclasses.asdict(gs), "entity_match": "ann"})
    reads = []
    get_vectors = ann.entities.vectors.get_vectors
    monkeypatch.setattr(ann.entities.vectors, "get_vectors", lambda ids: reads.append(list(ids)) or get_vectors(ids))
    assert top_docs(ann, mode) == expected
    assert ann.graph_snapshot._entity_vectors is None
    assert not any(i.startswith("ent:") for batch in reads for i in batch)


def test_entity_match_setting_is_checked():
    assert GraphSettings.from_env({"ERAGRAPH_GRAPH_ENTITY_MATCH": "ann"}).entity_match == "ann"
    with pytest.raises(ValueError, match="entity_match"):
        GraphSettings(entity_match="fuzzy")
    assert np.isfinite(GraphSettings().threshold)


@pytest.mark.parametrize("ann_from, via_index", [(0, True), (10**9, False)])
def test_auto_asks_the_index_only_from_ann_from_entities(ann_from, via_index, monkeypatch):
    """``auto`` (the default) is the product below ``ann_from`` entities and the index from there
    on; either way the same entity is matched."""
    engine = build()
    assert engine.settings.graph_retrieval.entity_match == "auto"
    engine.settings = engine.settings.with_overrides(
        graph_retrieval=dataclasses.replace(engine.settings.graph_retrieval, ann_from=ann_from))
    searches = []
    search_many = engine.entities.vectors.search_many
    monkeypatch.setattr(engine.entities.vectors, "search_many",
                        lambda *a, **kw: searches.append(1) or search_many(*a, **kw))
    got = nearest_positions(engine, snapshot(engine), engine.embedder.embed(NAMES[:3]), 1)
    snap = snapshot(engine)
    assert [snap.entities[row[0][0]] for row in got] == ["marie curie", "warsaw", "vistula"]
    assert bool(searches) is via_index
    assert (snap._entity_vectors is None) is via_index
