"""invariants.check reports each kind of broken store (21 test files trust it to say "ok"): one
test per invariant of services/invariants.py, each starting from a healthy built graph, breaking
exactly one thing, and asserting the violation names it. A store is broken either through its
own write API (vectors, entity records, documents) or, where no write API can break it, by
serving check() a skewed view of one read (``Skewed``): the real store with one answer changed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support import make_engine, synthetic_docs, with_entity_graph

from eragraph.domain.model import NodeRef
from eragraph.services import invariants
from eragraph.services.ingest import ingest
from eragraph.services.resummarize import drain


class Skewed:
    """A graph store whose named reads are replaced; everything else is the real store."""

    def __init__(self, inner, **reads):
        self._inner, self._reads = inner, reads

    def __getattr__(self, name):
        if name in self._reads:
            real = getattr(self._inner, name)
            return lambda *a, **kw: self._reads[name](real, *a, **kw)
        return getattr(self._inner, name)


@pytest.fixture(scope="module")
def healthy():
    engine = make_engine()
    with_entity_graph(engine)
    ingest(engine, synthetic_docs(30))
    drain(engine)
    report = invariants.check(engine)
    assert report.ok, report.violations
    sizes = engine.graph.layer_sizes()
    assert len(sizes) >= 3 and engine.graph.get_segments(1), sizes  # two summarized layers
    return engine


def violations(engine, **reads) -> list[str]:
    if reads:
        engine = replace(engine, graph=Skewed(engine.graph, **reads))
    return invariants.check(engine).violations


def one_of(violations_: list[str], *words: str) -> str:
    hits = [v for v in violations_ if all(w in v for w in words)]
    assert hits, (words, violations_)
    return hits[0]


def _segments_of(layer: int, change):
    def read(real, at):
        segs = real(at)
        return change(segs) if at == layer else segs
    return read


# 1. every live node of a summarized layer is in exactly one segment; segments name live nodes

def test_a_node_in_no_segment(healthy):
    def drop_member(segs):
        first = segs[0]
        return [replace(first, members=first.members[1:]), *segs[1:]]
    v = violations(healthy, get_segments=_segments_of(0, drop_member))
    lost = healthy.graph.get_segments(0)[0].members[0]
    one_of(v, "layer 0", f"node {lost} is in no segment")


def test_a_segment_naming_a_missing_node(healthy):
    def ghost(segs):
        return [replace(segs[0], members=(*segs[0].members, "chk-ghost")), *segs[1:]]
    one_of(violations(healthy, get_segments=_segments_of(0, ghost)), "names missing node chk-ghost")


def test_a_node_in_two_segments(healthy):
    def twice(segs):
        a, b = segs[0], segs[1]
        return [a, replace(b, members=(*b.members, a.members[0])), *segs[2:]]
    one_of(violations(healthy, get_segments=_segments_of(0, twice)), "in segments")


def test_segments_on_a_layer_that_is_not_summarized(healthy):
    top = max(healthy.graph.layer_sizes())
    stray = [replace(healthy.graph.get_segments(0)[0], layer=top)]
    v = violations(healthy, get_segments=lambda real, at: stray if at == top else real(at))
    one_of(v, f"layer {top}: 1 segments but the layer is not summarized")


# 2. segment sizes within [S_min, S_max] unless the layer's count is not partitionable

def test_a_segment_above_s_max(healthy):
    def merge(segs):
        a, b = segs[0], segs[1]
        return [replace(a, members=a.members + b.members), *segs[2:]]
    one_of(violations(healthy, get_segments=_segments_of(0, merge)), "members, outside [3, 5]")


def test_a_segment_below_s_min_on_a_partitionable_layer(healthy):
    def split(segs):
        a = segs[0]
        return [replace(a, members=a.members[:2]), replace(a, segment_id="seg-x", members=a.members[2:]), *segs[1:]]
    one_of(violations(healthy, get_segments=_segments_of(0, split)), "has 2 members, outside [3, 5]")


# 3. each segment's summary exists one layer up with exactly its members; no orphans above

def test_a_missing_summary(healthy):
    gone = healthy.graph.get_segments(0)[0].summary_id
    v = violations(healthy, get_nodes=lambda real, ids: {k: n for k, n in real(ids).items() if k != gone})
    one_of(v, f"summary {gone}", "is missing")


def test_a_summary_of_other_children(healthy):
    seg = healthy.graph.get_segments(0)[0]

    def other_children(real, ids):
        nodes = real(ids)
        if seg.summary_id in nodes:
            nodes[seg.summary_id] = replace(nodes[seg.summary_id], children=seg.members[1:])
        return nodes
    one_of(violations(healthy, get_nodes=other_children), f"summary {seg.summary_id} does not summarize exactly")


def test_an_orphan_above(healthy):
    def orphan(real, at):
        refs = real(at)
        return [*refs, NodeRef("sum-orphan", 0)] if at == 1 else refs
    one_of(violations(healthy, layer_refs=orphan), "layer 1: node sum-orphan is the summary of no segment")


def test_nodes_above_an_unsummarized_layer(healthy):
    top = max(healthy.graph.layer_sizes())
    v = violations(healthy, get_segments=lambda real, at: [] if at == top - 1 else real(at))
    one_of(v, f"layer {top}:", "above an unsummarized layer")


# 4. the vector index holds exactly the live nodes

def test_the_vector_index_lacks_a_live_node():
    engine = _fresh()
    node = engine.graph.layer_refs(0)[0].node_id
    engine.vectors.delete([node])
    one_of(violations(engine), f"vector index lacks node {node}")


def test_the_vector_index_holds_a_dead_node():
    engine = _fresh()
    engine.vectors.upsert(["chk-dead"], np.ones((1, 128), np.float32), [{"layer": 0, "doc_id": "d"}])
    one_of(violations(engine), "vector for no live node: chk-dead")
    assert invariants.check(engine, check_vectors=False).ok


# 5. each layer's counter equals its live refs

def test_a_counter_that_drifted(healthy):
    v = violations(healthy, layer_sizes=lambda real: {k: n + (k == 1) for k, n in real().items()})
    n = len(healthy.graph.layer_refs(1))
    one_of(v, f"layer 1: its counter says {n + 1} nodes, the ref index holds {n}")


# 6. documents and chunks agree

def test_a_document_listing_a_missing_chunk(healthy):
    def extra(real):
        docs = real()
        return [replace(docs[0], chunk_ids=(*docs[0].chunk_ids, "chk-missing")), *docs[1:]]
    one_of(violations(healthy, list_documents=extra), f"document {healthy.graph.list_documents()[0].doc_id}",
           "lists 1 missing chunks, e.g. chk-missing")


def test_a_chunk_listed_by_no_document(healthy):
    first = healthy.graph.list_documents()[0]
    v = violations(healthy, list_documents=lambda real: real()[1:])
    one_of(v, f"chunk {sorted(first.chunk_ids)[0]} is listed by no document")


# 7. the entity graph covers exactly the live chunks; its vectors exactly its entities

def test_the_entity_graph_lacks_a_live_chunk():
    engine = _fresh()
    chunk = sorted(engine.entities.store.chunk_ids())[0]
    engine.entities.store.delete_chunks([chunk])
    one_of(violations(engine), f"entity graph lacks live chunk {chunk}")


def test_the_entity_graph_keeps_a_chunk_that_is_gone():
    engine = _fresh()
    chunk = engine.graph.layer_refs(0)[0].node_id
    engine.graph = Skewed(engine.graph, layer_refs=lambda real, at: [r for r in real(at) if r.node_id != chunk])
    one_of(invariants.check(engine, check_vectors=False).violations,
           f"entity graph has records of a chunk that is gone: {chunk}")


def test_the_entity_vector_index_lacks_or_holds_extra():
    engine = _fresh()
    vectors = engine.entities.vectors
    some = sorted(vectors.ids())[0]
    vectors.delete([some])
    vectors.upsert(["ent-nothing"], np.ones((1, 128), np.float32), [{"layer": 0, "doc_id": ""}])
    v = violations(engine)
    one_of(v, f"entity vector index lacks {some}")
    one_of(v, "entity vector index has a vector of nothing: ent-nothing")


def _fresh():
    engine = make_engine()
    with_entity_graph(engine)
    ingest(engine, synthetic_docs(12))
    drain(engine)
    assert invariants.check(engine).ok
    return engine
