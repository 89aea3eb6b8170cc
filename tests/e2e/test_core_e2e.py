"""End to end on the memory engine: build a corpus, check the invariants, insert one document
and see that only the affected segments changed, delete it again, re-ingest unchanged and
replaced documents (EraRAG §III-C and Alg. 3)."""

from __future__ import annotations

import statistics

import pytest

from support import make_engine, synthetic_docs
from eragraph.services import invariants
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.query import query
from eragraph.services.remove import remove
from eragraph.services.resummarize import drain

N_DOCS = 150


def snapshot(engine):
    """Every live node (id -> Node), every layer's segments, the vector index's ids."""
    g = engine.graph
    nodes = {}
    for layer in g.layer_sizes():
        nodes.update(g.get_nodes(r.node_id for r in g.layer_refs(layer)))
    top = max(g.layer_sizes(), default=0)
    segments = {layer: tuple(g.get_segments(layer)) for layer in range(top + 2)}
    return nodes, segments, frozenset(engine.vectors.ids())


@pytest.fixture(scope="module")
def corpus():
    return synthetic_docs(N_DOCS)


@pytest.fixture
def built(corpus):
    # summaries written afresh: then deleting what was inserted restores the graph byte for
    # byte. Revised summaries (the default) depend on the path; see the test below.
    engine = make_engine(delta_summaries=False)
    report = ingest(engine, corpus)
    report.merge(drain(engine))
    return engine, report


def test_build_has_layers_and_invariants(built):
    engine, report = built
    sizes = engine.graph.layer_sizes()
    assert report.documents_added == N_DOCS and report.chunks_added == sizes[0]
    assert len([layer for layer in sizes if layer > 0]) >= 2
    inv = invariants.check(engine)
    assert inv.ok, inv.violations[:5]
    s = engine.settings
    for layer, n in sizes.items():
        segs = engine.graph.get_segments(layer)
        if n > s.s_max:
            assert segs and all(s.s_min <= len(x.members) <= s.s_max for x in segs)
            assert sizes[layer + 1] == len(segs)
        else:
            assert segs == [] and layer + 1 not in sizes  # the stopping rule: top layer is small
    assert report.cost.summarize_calls == sum(n for layer, n in sizes.items() if layer > 0)


def test_insert_changes_only_the_affected_segments_and_delete_restores(built):
    engine, _ = built
    nodes0, segs0, vecs0 = snapshot(engine)
    new = synthetic_docs(1, seed=4242, prefix="new")
    added = ingest(engine, new)
    report = drain(engine)
    assert added.documents_added == 1 and added.chunks_added >= 1
    inv = invariants.check(engine)
    assert inv.ok, inv.violations[:5]
    nodes1, segs1, vecs1 = snapshot(engine)

    created = set(nodes1) - set(nodes0)
    gone = set(nodes0) - set(nodes1)
    new_chunks = set(engine.graph.get_document("new0").chunk_ids)
    new_summaries = created - new_chunks
    # every node not replaced is byte-identical (id, text, code, children)
    for node_id in set(nodes0) & set(nodes1):
        assert nodes0[node_id] == nodes1[node_id]
    # only summaries were replaced, one new summary per re-summarized segment, no more calls
    assert all(nodes0[i].layer > 0 for i in gone)
    assert len(new_summaries) == sum(report.segments_resummarized.values()) == report.cost.summarize_calls
    assert len(gone) == sum(report.summaries_removed.values())
    # each layer's segments: the unchanged ones are the same records
    for layer in segs0:
        kept = set(segs0[layer]) & set(segs1.get(layer, ()))
        changed_new = set(segs1.get(layer, ())) - kept
        assert {s.summary_id for s in changed_new} <= new_summaries
    # locality: a one-document insert touches a handful of segments, not the layer
    summary_layers = len([layer for layer in engine.graph.layer_sizes() if layer > 0])
    n_summaries = sum(1 for n in nodes0.values() if n.layer > 0)
    assert report.cost.summarize_calls <= 2 * len(new_chunks) * summary_layers + 1
    assert report.cost.summarize_calls < n_summaries / 5
    assert vecs1 == (vecs0 - gone) | created

    # delete it again: the graph returns to exactly the state before the insert
    removed = remove(engine, ["new0"])
    back = drain(engine)
    assert removed.documents_removed == 1 and removed.chunks_removed == len(new_chunks)
    assert invariants.check(engine).ok
    assert snapshot(engine) == (nodes0, segs0, vecs0)
    assert back.cost.summarize_calls == len(new_summaries)
    hits = query(engine, "The football item number new0 is called Markernew0.", k=20, mode="dense").results
    assert all(r.doc_id != "new0" for r in hits)


def test_insert_cost_stays_local_over_many_inserts(built):
    """The acceptance bound (re-summarized segments <= chunks x summary layers) holds for the
    typical insert; a flipped split decision or a summary moving bucket costs a few more."""
    engine, _ = built
    base = snapshot(engine)
    ratios = []
    for i in range(25):
        doc = synthetic_docs(1, seed=9000 + i, prefix=f"t{i}_")
        r = ingest(engine, doc)
        d = drain(engine)
        layers = len([layer for layer in engine.graph.layer_sizes() if layer > 0])
        ratios.append(d.cost.summarize_calls / (r.chunks_added * layers))
        remove(engine, [doc[0].doc_id])
        drain(engine)
    assert snapshot(engine) == base
    assert statistics.median(ratios) <= 1.0 + 1e-9
    assert max(ratios) <= 2.5


def test_reingest_unchanged_changes_nothing(built, corpus):
    engine, _ = built
    state = snapshot(engine)
    ledger = engine.graph.ledger()
    again = ingest(engine, corpus)
    drained = drain(engine)
    assert again.documents_unchanged == N_DOCS
    assert again.documents_added == again.chunks_added == again.documents_replaced == 0
    assert drained.cost.summarize_calls == 0 and engine.queue.pending() == 0
    assert snapshot(engine) == state and engine.graph.ledger() == ledger


def test_replacing_a_document_swaps_its_chunks(built, corpus):
    engine, _ = built
    old_doc = engine.graph.get_document("d5")
    old_chunks = set(old_doc.chunk_ids)
    replacement = SourceDoc(source=corpus[5].source, doc_id="d5", title="rewritten",
                            text="Entirely new words about volcano lava magma eruption crater ash.")
    report = ingest(engine, [replacement])
    drain(engine)
    assert report.documents_replaced == 1 and report.chunks_removed == len(old_chunks)
    assert invariants.check(engine).ok
    doc = engine.graph.get_document("d5")
    assert doc.title == "rewritten" and not (set(doc.chunk_ids) & old_chunks)
    assert engine.graph.get_nodes(old_chunks) == {}
    assert not (old_chunks & engine.vectors.ids())
    new_nodes = engine.graph.get_nodes(doc.chunk_ids)
    assert [n.text for n in new_nodes.values()] == [replacement.text]
    top = query(engine, "volcano lava magma eruption", mode="dense", k=1).results[0]
    assert top.doc_id == "d5" and top.title == "rewritten"
    assert all(r.id not in old_chunks for r in query(engine, corpus[5].text, mode="dense", k=50).results)


def test_incremental_equals_rebuild(corpus):
    """Growing the corpus in increments ends in the same graph as building it at once, byte for
    byte when summaries are written afresh; with revised summaries the chunks' segments and the
    summaries above them are the same nodes, only their wording may differ."""
    for delta in (False, True):
        at_once = make_engine(delta_summaries=delta)
        ingest(at_once, corpus)
        drain(at_once)
        grown = make_engine(delta_summaries=delta)
        revised = 0
        for start in range(0, N_DOCS, 37):
            ingest(grown, corpus[start:start + 37])
            revised += sum(drain(grown).summaries_revised.values())
        if not delta:
            assert snapshot(grown) == snapshot(at_once)
            continue
        assert revised > 0
        assert grown.graph.get_segments(0) == at_once.graph.get_segments(0)
        ids = [r.node_id for r in at_once.graph.layer_refs(1)]
        assert sorted(r.node_id for r in grown.graph.layer_refs(1)) == sorted(ids)


def test_with_revised_summaries_insert_then_delete_restores_the_structure(corpus):
    """Revised summaries depend on the path (a summary revised after an insert and then after
    the delete need not equal the one before), but the nodes, segments and vectors do not,
    and nothing of the deleted document stays in any summary."""
    engine = make_engine(delta_summaries=True)
    ingest(engine, corpus)
    drain(engine)
    nodes0, segs0, vecs0 = snapshot(engine)
    docs = synthetic_docs(3, seed=4242, prefix="rev")
    ingest(engine, docs)
    grew = drain(engine)
    assert sum(grew.summaries_revised.values()) > 0
    remove(engine, [d.doc_id for d in docs])
    drain(engine)
    assert invariants.check(engine).ok
    nodes1, segs1, vecs1 = snapshot(engine)
    assert set(nodes1) == set(nodes0) and segs1 == segs0 and vecs1 == vecs0
    summaries = " ".join(n.text for n in nodes1.values() if n.layer > 0)
    assert all(f"Marker{d.doc_id}." not in summaries for d in docs)
