"""The reindex service repairs drift between the graph store and the vector index, requeues
stuck layers, re-partitions layers left out of date, and reports what it found."""

from __future__ import annotations

import time

import numpy as np

from support import make_engine, synthetic_docs
from eragraph.domain.model import RegionChange, Segment
from eragraph.services import ingest, invariants, reindex, remove, resummarize


def built(n=30):
    engine = make_engine()
    ingest.ingest(engine, synthetic_docs(n))
    resummarize.drain(engine)
    assert invariants.check(engine).ok
    return engine


def test_clean_store_reports_nothing_to_fix():
    engine = built()
    report = reindex.run(engine)
    assert report["invariants"]["ok"]
    assert all(v == 0 for v in report["metrics"].values()), report["metrics"]


def test_missing_and_orphan_vectors_are_repaired_both_ways():
    engine = built()
    refs = engine.graph.layer_refs(0)[:3] + engine.graph.layer_refs(1)[:2]
    lost = [r.node_id for r in refs]
    before = engine.vectors.get_vectors(lost)
    engine.vectors.delete(lost)
    engine.vectors.upsert(["ghost"], np.ones((1, 128), dtype=np.float32) / np.sqrt(128),
                          [{"layer": 0, "doc_id": "nope"}])
    report = reindex.run(engine)
    assert report["vectors_missing_reembedded"] == 5
    assert report["vectors_orphaned_deleted"] == 1
    assert "ghost" not in engine.vectors.ids()
    after = engine.vectors.get_vectors(lost)
    for i in lost:
        assert np.allclose(after[i], before[i], atol=1e-5)
    assert report["invariants"]["ok"]


def test_stuck_dirty_layer_is_requeued_and_reconciled():
    engine = built()
    # a consumer died after new chunks landed: nodes are stored, the message is lost
    ingest.ingest(engine, synthetic_docs(4, seed=9, prefix="late"))
    engine.queue.receive(10)  # the message vanished with the consumer
    assert not invariants.check(engine, check_vectors=False).ok
    stamp = max(engine.graph.get_meta(k) for k in engine.graph.meta_keys("dirty:0:"))
    report = reindex.run(engine, stuck_after=60.0, now=float(stamp) + 61.0)
    assert report["layers_requeued"] == [0]
    assert report["invariants"]["ok"], report["invariants"]


def test_young_dirty_layer_is_left_to_its_consumer_on_aws():
    engine = built()
    ingest.ingest(engine, synthetic_docs(4, seed=9, prefix="late"))
    pending = engine.queue.pending()
    report = reindex.run(engine, stuck_after=3600.0, drain=False, now=time.time())
    assert report["layers_requeued"] == []
    assert 0 in report["layers_in_progress"]
    assert engine.queue.pending() == pending  # the consumer's message is still there


def test_out_of_date_segments_are_repartitioned():
    engine = built()
    segs = engine.graph.get_segments(0)
    # simulate a partial write: two segments merged into one over-full segment
    a, b = segs[0], segs[1]
    merged = Segment(segment_id="merged", layer=0, members=a.members + b.members, summary_id=a.summary_id)
    refs = [r for r in engine.graph.prefix_refs(0, 0, 2 ** engine.settings.n_planes - 1) if r.node_id in merged.members]
    engine.graph.apply_region(RegionChange(layer=0, expected=tuple(refs), assign=tuple((m, "merged") for m in merged.members),
                                           add=(merged,), remove=(a.segment_id, b.segment_id)))
    report = reindex.run(engine)
    assert 0 in report["layers_with_out_of_bounds_segments"]
    assert any(r["layer"] == 0 for r in report["layers_repaired"])
    assert report["invariants"]["ok"], report["invariants"]


def test_orphan_chunks_and_incomplete_documents_are_removed():
    engine = built()
    doc = engine.graph.list_documents()[0]
    engine.graph.delete_document(doc.doc_id)  # ingest died before writing the document
    other = engine.graph.list_documents()[0]
    engine.graph.delete_nodes([other.chunk_ids[0]])  # a document lost a chunk
    report = reindex.run(engine)
    assert report["orphan_chunks_removed"] == len(doc.chunk_ids)
    assert report["incomplete_documents_removed"] == [other.doc_id]
    assert engine.graph.get_document(other.doc_id) is None
    assert report["invariants"]["ok"], report["invariants"]


def test_the_document_audit_pages_and_resumes_to_the_same_result():
    """A page of 3 documents (then of 3 refs) a piece, every piece cut short after its first
    page and resumed from its cursor: the same chunks and documents go as in one pass."""
    engines = [built(), built()]
    for engine in engines:
        docs = engine.graph.list_documents()
        engine.graph.delete_document(docs[0].doc_id)  # ingest died before writing the document
        engine.graph.delete_nodes([docs[5].chunk_ids[0]])  # a document lost a chunk
    whole: dict = {}
    assert reindex.audit_documents(engines[0], whole) is None
    paged: dict = {}
    cursor, pieces = None, 0
    while True:
        cursor = reindex.audit_documents(engines[1], paged, cursor, out_of_time=lambda: True, page=3)
        pieces += 1
        if cursor is None:
            break
        assert pieces < 200
    assert pieces > 10
    assert paged["orphan_chunks_removed"] == whole["orphan_chunks_removed"] > 0
    assert paged["incomplete_documents_removed"] == whole["incomplete_documents_removed"] != []
    assert [d.doc_id for d in engines[1].graph.list_documents()] == [d.doc_id for d in engines[0].graph.list_documents()]
    assert [r.node_id for r in engines[1].graph.layer_refs(0)] == [r.node_id for r in engines[0].graph.layer_refs(0)]
    assert engines[1].queue.pending() and engines[0].queue.pending()  # the removals announced


def test_after_deletes_reindex_finds_store_consistent():
    engine = built()
    remove.remove(engine, [d.doc_id for d in engine.graph.list_documents()[:10]])
    resummarize.drain(engine)
    report = reindex.run(engine)
    assert report["layers_repaired"] == []
    assert report["invariants"]["ok"]


class DiesAfterWrite:
    """A vector index whose first upsert of a summary raises: the consumer died right after
    its region write."""

    def __init__(self, inner):
        self._inner, self.died = inner, False

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def upsert(self, ids, vectors, metas):
        if not self.died and any(m.get("layer", 0) > 0 for m in metas):
            self.died = True
            raise RuntimeError("consumer died")
        return self._inner.upsert(ids, vectors, metas)


def died_after_its_write():
    """An engine whose first reconcile died after its region write; its message is in flight."""
    engine = make_engine()
    engine.vectors = DiesAfterWrite(engine.vectors)
    ingest.ingest(engine, synthetic_docs(30))
    receipt, message = engine.queue.receive(1)[0]
    try:
        resummarize.reconcile(engine, message)
    except RuntimeError:
        pass
    assert engine.vectors.died
    return engine, receipt, message


def test_reindex_finishes_what_a_dead_consumer_left_in_its_outbox():
    engine, _, _ = died_after_its_write()
    assert engine.graph.meta_keys("outbox:")  # the write landed, what follows it did not
    assert not invariants.check(engine).ok  # summaries without vectors, layer 1 unannounced
    report = reindex.run(engine, stuck_after=0.0)
    assert report["metrics"]["OutboxesFinished"] == 1
    assert not engine.graph.meta_keys("outbox:")
    assert invariants.check(engine).ok


def test_the_redelivered_message_finishes_the_outbox_itself():
    engine, receipt, message = died_after_its_write()
    resummarize.reconcile(engine, message)  # SQS delivers it again
    engine.queue.ack([receipt])
    resummarize.drain(engine)
    assert not engine.graph.meta_keys("outbox:")
    assert invariants.check(engine).ok


def test_reindex_drops_followup_records_of_writes_that_died_long_ago():
    from eragraph.services import followup

    engine = built()
    token = followup.begin(engine, {"d1": []}, engine.graph.list_documents()[:1])
    assert reindex.run(engine, stuck_after=3600.0)["metrics"]["FollowupsExpired"] == 0
    assert reindex.run(engine, stuck_after=3600.0, now=time.time() + 7200)["metrics"]["FollowupsExpired"] == 1
    assert engine.graph.get_meta(followup.PREFIX + token) is None


def test_drifted_layer_counters_are_recounted_first():
    engine = built()
    truth = engine.graph.layer_sizes()
    top = max(truth)
    engine.graph._sizes[0] += 2          # a node counted twice by two writers
    engine.graph._sizes.pop(top)         # the top layer's counter lost
    engine.graph._sizes[top + 3] = 4     # a counter of a layer with no nodes
    report = reindex.run(engine)
    assert report["layer_counts_repaired"] == [{"layer": 0, "correction": -2},
                                               {"layer": top, "correction": truth[top]},
                                               {"layer": top + 3, "correction": -4}]
    assert report["metrics"]["LayerCountsRepaired"] == 3
    assert engine.graph.layer_sizes() == truth
    assert report["layers_repaired"] == []  # the top layer was audited: nothing else to repair
    assert report["invariants"]["ok"], report["invariants"]
    assert reindex.run(engine)["layer_counts_repaired"] == []


def test_segment_records_no_node_names_are_removed():
    """A segment written without its members' refs (an apply that stopped after its first
    write) is deleted by the whole-layer repair, with the summary it may have entered above."""
    engine = built()
    real = engine.graph.get_segments(0)[0]
    stray = Segment(segment_id="stray", layer=0, members=real.members[:2], summary_id="stray-summary")
    engine.graph.apply_region(RegionChange(layer=0, expected=(), add=(stray,)))
    assert not invariants.check(engine, check_vectors=False).ok  # its members are in two segments
    report = reindex.run(engine)
    assert any(r["layer"] == 0 for r in report["layers_repaired"])
    assert "stray" not in {s.segment_id for s in engine.graph.get_segments(0)}
    assert report["invariants"]["ok"], report["invariants"]


def test_a_store_built_before_filters_gets_its_leaf_attributes_from_reindex_without_embedding():
    from eragraph.services.engine import LEAF_ATTRS
    from eragraph.services.query import query

    engine = built()
    # the store as an earlier version left it: leaf vectors without attrs, no mark
    leaves = [r.node_id for r in engine.graph.layer_refs(0)]
    nodes = engine.graph.get_nodes(leaves)
    vectors = engine.vectors.get_vectors(leaves)
    engine.vectors.upsert(leaves, np.stack([vectors[c] for c in leaves]),
                          [{"layer": 0, "doc_id": nodes[c].doc_id} for c in leaves])
    engine.graph.delete_meta(LEAF_ATTRS)
    where = {"equals": {"key": "doc_id", "value": "d3"}}
    before = query(engine, "astronomy item", mode="dense", k=3, where=where)
    assert before.results == [] and "eragraph reindex" in before.note

    calls = []
    embed = engine.embedder.embed
    engine.embedder.embed = lambda texts: calls.append(len(texts)) or embed(texts)
    report = reindex.run(engine)
    assert report["leaf_attributes_added"] == len(leaves) and calls == []
    assert engine.graph.get_meta(LEAF_ATTRS) == 1
    after = query(engine, "astronomy item", mode="dense", k=3, where=where)
    assert after.results and {r.doc_id for r in after.results} == {"d3"} and "eragraph reindex" not in after.note
    assert reindex.run(engine)["leaf_attributes_added"] == 0  # once
