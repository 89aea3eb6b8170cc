"""resummarize rules a user (or the summarizer) would notice, on the memory engine: where each
member of a segment comes from (its document, whether it starts it, whether it is a summary);
the report counts, per layer, every summary made and removed across the regions of one
reconcile; the layer above is announced with what came and went; a new summary's vector is
found in its own layer; the summarize time is counted."""

from __future__ import annotations

from dataclasses import replace

from support import RecordingQueue, make_engine, synthetic_docs

from eragraph.domain.ids import chunk_id
from eragraph.domain.model import Node
from eragraph.ports.records import MemberSource
from eragraph.services import resummarize
from eragraph.services.ingest import ingest


def test_a_members_source_is_its_document_and_only_the_first_chunk_starts_it():
    first = Node(node_id=chunk_id("doc-1", 0, "Opening words."), layer=0, text="Opening words.", tokens=2,
                 code=0, doc_id="doc-1", source="a.txt")
    later = Node(node_id=chunk_id("doc-1", 1, "later words"), layer=0, text="later words", tokens=2, code=0,
                 doc_id="doc-1", source="a.txt")
    same_text_later = Node(node_id=chunk_id("doc-1", 3, "Opening words."), layer=0, text="Opening words.",
                           tokens=2, code=0, doc_id="doc-1", source="a.txt")
    orphan = Node(node_id="chk-x", layer=0, text="no document", tokens=2, code=0)
    summary = Node(node_id="sum-1", layer=1, text="A summary.", tokens=2, code=0, children=("a", "b"))
    assert resummarize.member_source(first) == MemberSource("doc-1", True, summary=False)
    assert resummarize.member_source(later) == MemberSource("doc-1", False, summary=False)
    assert resummarize.member_source(same_text_later) == MemberSource("doc-1", False, summary=False)
    assert resummarize.member_source(orphan) == MemberSource("chk-x", True, summary=False)
    assert resummarize.member_source(summary) == MemberSource("sum-1", True, summary=True)


def _layer(engine, layer: int) -> set:
    return {r.node_id for r in engine.graph.layer_refs(layer)}


def test_one_reconcile_reports_every_summary_it_made_and_removed_and_announces_them():
    engine = replace(make_engine(), queue=RecordingQueue())
    docs = synthetic_docs(60)
    ingest(engine, docs)
    resummarize.drain(engine)
    before = _layer(engine, 1)
    # changes spread over the layer: one message, several regions
    ingest(engine, [replace(d, text=d.text + " A closing line about harbours.") for d in docs[::3]])
    engine.queue.messages.clear()
    report = resummarize.ChangeReport()
    while engine.queue.pending():
        for receipt, message in engine.queue.receive(10):
            if message.layer == 0:
                report.merge(resummarize.reconcile(engine, message))
            engine.queue.ack([receipt])
        break
    after = _layer(engine, 1)
    made, gone = after - before, before - after
    assert made and gone
    assert report.segments_resummarized.get(1, 0) == len(made)
    assert report.summaries_removed.get(1, 0) == len(gone)
    assert set(report.summaries_removed) <= {1, 2} and set(report.segments_resummarized) <= {1, 2}
    above = [m for m in engine.queue.messages if m.layer == 1]
    assert above and {m.reason for m in above} == {"reconcile:0"}
    assert {i for m in above for i in m.added} == made and {i for m in above for i in m.removed} == gone
    assert report.cost.summarize_seconds > 0 and report.cost.summarize_calls >= len(made)
    for node_id in made:  # each new summary is found in its own layer
        vector = engine.vectors.get_vectors([node_id])[node_id]
        assert node_id in {h.node_id for h in engine.vectors.search(vector, 3, layers=[1])}


def test_a_continuation_is_a_new_operation_marked_once_as_continued():
    from eragraph.domain.model import SegmentsAffected
    message = SegmentsAffected(layer=0, codes=(3,), group=0, reason="ingest", op="op-1")
    once = resummarize.continuation(message)
    twice = resummarize.continuation(once)
    assert once.reason == "ingest+continue" and twice.reason == "ingest+continue"
    assert len({message.op, once.op, twice.op}) == 3 and all(m.op for m in (once, twice))
    assert (once.layer, once.codes, once.group) == (0, (3,), 0)


def test_drain_delivers_every_message_or_stops_after_the_batch_that_reaches_the_limit():
    from eragraph.domain.model import SegmentsAffected

    def queued(n):
        engine = make_engine()
        engine.queue.send([SegmentsAffected(layer=layer, reason="test") for layer in range(n)])
        return engine
    engine = queued(25)
    seen = []
    report = resummarize.drain(engine, on_message=seen.append)
    assert isinstance(report, resummarize.ChangeReport) and engine.queue.pending() == 0
    assert [m.layer for m in seen] == list(range(25))
    for limit, left in ((10, 15), (11, 5), (15, 5), (20, 5)):  # batches of ten
        engine = queued(25)
        assert isinstance(resummarize.drain(engine, max_messages=limit), resummarize.ChangeReport)
        assert engine.queue.pending() == left, limit


def test_a_whole_layer_pass_records_when_it_started_unless_a_later_pass_did():
    import time
    engine = make_engine()
    ingest(engine, synthetic_docs(20))
    resummarize.drain(engine)
    before = time.time()
    resummarize.reconcile(engine, 0)
    swept = float(engine.graph.get_meta(resummarize.swept_key(0)))
    assert before - 1 <= swept <= time.time()
    engine.graph.put_meta(resummarize.swept_key(0), before + 3600)  # a later pass finished first
    resummarize.reconcile(engine, 0)
    assert float(engine.graph.get_meta(resummarize.swept_key(0))) == before + 3600


def test_a_split_apply_cut_short_is_repaired_and_the_layer_above_announced_whole():
    import time
    from eragraph.domain.model import applying_key
    engine = replace(make_engine(), queue=RecordingQueue())
    ingest(engine, synthetic_docs(20))
    resummarize.drain(engine)
    old = applying_key(0, "cut-short")
    engine.graph.put_meta(old, time.time() - 60)
    later = applying_key(0, "another-writer-now")
    engine.queue.messages.clear()
    resummarize.reconcile(engine, 0)
    assert engine.graph.get_meta(old) is None
    above = [m for m in engine.queue.messages if m.reason == "unfinished:0"]
    assert len(above) == 1 and above[0].layer == 1 and not above[0].codes  # the whole layer above
    engine.graph.put_meta(later, time.time() + 60)  # written after the pass started: not its to clear
    resummarize.reconcile(engine, 0)
    assert engine.graph.get_meta(later) is not None


def test_requeue_names_each_layer_marked_dirty_at_least_older_than_ago_as_a_requeue():
    from eragraph.services.announce import mark_dirty
    engine = replace(make_engine(), queue=RecordingQueue())
    mark_dirty(engine, 0, [5], now=1000.0)
    mark_dirty(engine, 2, [7], now=1050.0)
    assert resummarize.requeue_dirty(engine, older_than=50.0, now=1050.0) == [0]
    assert [(m.layer, m.reason, m.codes) for m in engine.queue.messages] == [(0, "requeue", ())]
    assert resummarize.requeue_dirty(engine, now=1050.0) == [0, 2]  # by default every marked layer


def test_the_summary_graph_stops_at_max_layers_at_a_build_and_as_it_grows():
    # layers 0..max_layers hold nodes, the top one unsummarized; no summary above it
    from eragraph.services import invariants

    natural = make_engine()
    ingest(natural, synthetic_docs(40))
    resummarize.drain(natural)
    assert max(natural.graph.layer_sizes()) >= 2
    for cap in (0, 1):
        engine = make_engine(max_layers=cap)
        ingest(engine, synthetic_docs(40))
        resummarize.drain(engine)
        assert sorted(engine.graph.layer_sizes()) == list(range(cap + 1)), cap
        assert engine.graph.get_segments(cap) == [], cap
        assert invariants.check(engine).ok
        ingest(engine, synthetic_docs(12, seed=3, prefix="grow"))
        resummarize.drain(engine)
        assert sorted(engine.graph.layer_sizes()) == list(range(cap + 1)), cap
        assert engine.graph.get_segments(cap) == [], cap
        assert invariants.check(engine).ok


def test_a_removed_documents_tombstones_leave_the_index_at_the_reconcile():
    # a deleted chunk's ref stays as a tombstone until its region is re-cut; then it is deleted,
    # not kept without a segment
    from eragraph.services.remove import remove

    engine = make_engine()
    docs = synthetic_docs(30)
    ingest(engine, docs)
    resummarize.drain(engine)
    every_ref = lambda: engine.graph.prefix_refs(0, 0, 2 ** engine.settings.n_planes - 1)  # noqa: E731
    remove(engine, [d.doc_id for d in docs[:6]])
    assert any(not r.live for r in every_ref())
    resummarize.drain(engine)
    assert all(r.live for r in every_ref())


# a layer-1 summary that no segment names (what a lost write or a cut-short apply can leave)
ORPHAN = Node(node_id="sum-orphan", layer=1, text="A summary of nothing stored.", tokens=5, code=7)


def test_a_whole_layer_repair_removes_a_summary_no_segment_names():
    from eragraph.services import invariants

    engine = make_engine()
    ingest(engine, synthetic_docs(30))
    resummarize.drain(engine)
    engine.graph.put_nodes([ORPHAN])
    assert "sum-orphan" in _layer(engine, 1)
    resummarize.reconcile(engine, 0)  # a bare layer: the whole layer, repaired
    assert "sum-orphan" not in _layer(engine, 1)
    assert engine.graph.get_nodes(["sum-orphan"]) == {}
    assert invariants.check(engine).ok


def test_a_scoped_message_after_a_split_apply_cut_short_repairs_the_whole_layer():
    # a split apply cut short may have left anything anywhere in its region (here: a summary no
    # segment names); the next message of the layer, scoped or not, repairs the layer whole
    import time

    from eragraph.domain.model import SegmentsAffected, applying_key
    from eragraph.services.announce import shard_of

    engine = replace(make_engine(), queue=RecordingQueue())
    ingest(engine, synthetic_docs(30))
    resummarize.drain(engine)
    engine.graph.put_meta(applying_key(0, "cut-short"), time.time() - 60)
    engine.graph.put_nodes([ORPHAN])
    ref = engine.graph.layer_refs(0)[0]
    message = SegmentsAffected(layer=0, codes=(ref.code,), group=shard_of(ref.code, engine.settings.n_planes))
    assert message.scoped
    resummarize.reconcile(engine, message)
    assert "sum-orphan" not in _layer(engine, 1)
    assert engine.graph.meta_keys("applying:0:") == []


def test_a_layer_held_whole_answers_every_group_like_the_store():
    """services.resummarize.held_reader (a small layer read once) gives every group's refs, in
    order and up to a limit, exactly as the store's own range reads do."""
    import random

    from eragraph.domain.model import RefState
    from eragraph.services.resummarize import held_reader

    rng = random.Random(5)
    n_bits = 8
    refs = sorted((RefState(f"n{i}", rng.randrange(1 << n_bits), rng.choice([None, "s1"]), rng.random() < .8)
                   for i in range(300)), key=lambda r: (r.code, r.node_id))
    held = held_reader(refs, n_bits)
    for depth in range(n_bits + 1):
        for prefix in rng.sample(range(1 << depth), min(1 << depth, 6)):
            span = n_bits - depth
            want = [r for r in refs if prefix << span <= r.code < (prefix + 1) << span]
            for limit in (None, 1, 7, 1000):
                assert held(prefix, depth, limit) == (want if limit is None else want[:limit])
