"""The resummarize service: coalescing, idempotent redelivery, crash healing, conflicts,
shrinking, and re-announcing dirty layers (EraRAG Alg. 3 as messages)."""

from __future__ import annotations

import copy
import time
from dataclasses import replace

import pytest

from eragraph.domain.text import split_sentences
from eragraph.domain.model import ConflictError, SegmentsAffected
from eragraph.services import invariants
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.remove import remove
from eragraph.services.resummarize import FOLDED_SUMMARIES, drain, reconcile, requeue_dirty
from support import make_engine, synthetic_docs


def built(n=40, **overrides):
    engine = make_engine(**overrides)
    ingest(engine, synthetic_docs(n))
    drain(engine)
    assert invariants.check(engine).ok
    return engine


def snapshot(engine):
    g = engine.graph
    nodes = {}
    for layer in g.layer_sizes():
        ids = [r.node_id for r in g.layer_refs(layer)]
        nodes.update(g.get_nodes(ids))
    segments = {layer: g.get_segments(layer) for layer in range(0, max(g.layer_sizes(), default=0) + 2)}
    return nodes, segments, engine.vectors.ids()


def summary_ids(engine):
    return {r.node_id for layer in engine.graph.layer_sizes() if layer > 0
            for r in engine.graph.layer_refs(layer)}


def test_build_makes_layers_and_ledger_matches_report():
    engine = make_engine()
    ingest(engine, synthetic_docs(40))
    report = drain(engine)
    sizes = engine.graph.layer_sizes()
    assert len(sizes) >= 3  # layer 0 and at least two summary layers for 40 chunks with S 3-5
    assert report.cost.summarize_calls == sum(report.segments_resummarized.values())
    assert report.segments_resummarized == {layer: n for layer, n in sizes.items() if layer > 0}
    assert engine.graph.ledger()["summarize|extractive-tfidf-v3"]["calls"] == report.cost.summarize_calls
    assert engine.graph.ledger()["summarize|extractive-tfidf-v3"]["tokens_in"] == report.cost.tokens_in
    assert engine.graph.meta_keys("dirty:") == []
    assert engine.queue.pending() == 0


def test_burst_into_one_segment_is_summarized_once():
    engine = built()
    before = summary_ids(engine)
    base = synthetic_docs(1, seed=5, prefix="burst")[0]
    # five documents of the same text hash to the same bucket; each ingest sends its own message
    for i in range(5):
        ingest(engine, [SourceDoc(source=f"mem://b{i}", doc_id=f"b{i}", text=base.text)])
    assert engine.queue.pending() == 1  # coalesced into one layer-0 message
    report = drain(engine)
    created = summary_ids(engine) - before
    # every new summary was written exactly once, and nothing else was summarized
    assert report.cost.summarize_calls == len(created) == sum(report.segments_resummarized.values())
    chunk_ids = {cid for i in range(5) for cid in engine.graph.get_document(f"b{i}").chunk_ids}
    holders = [s for s in engine.graph.get_segments(0) if chunk_ids & set(s.members)]
    assert len(holders) <= 2  # the burst landed together (a full bucket may split once)
    assert report.segments_resummarized[1] == len(holders) + sum(
        1 for s in engine.graph.get_segments(0) if s.summary_id in created and s not in holders)
    assert invariants.check(engine).ok

    # one at a time, the same burst costs more calls than coalesced
    other = built()
    calls = 0
    for i in range(5):
        ingest(other, [SourceDoc(source=f"mem://b{i}", doc_id=f"b{i}", text=base.text)])
        calls += drain(other).cost.summarize_calls
    assert calls > report.cost.summarize_calls
    assert snapshot(other)[0].keys() == snapshot(engine)[0].keys()  # same end state either way


def test_redelivered_messages_change_nothing():
    engine = built()
    state = snapshot(engine)
    ledger = engine.graph.ledger()
    for layer in range(0, 5):
        assert reconcile(engine, layer).cost.summarize_calls == 0
    engine.queue.send([SegmentsAffected(layer=0, added=("whatever",), reason="redelivered"),
                       SegmentsAffected(layer=1, reason="redelivered")])
    report = drain(engine)
    assert report.cost.summarize_calls == 0 and report.segments_resummarized == {}
    assert snapshot(engine) == state
    assert engine.graph.ledger() == ledger


class FailingReplace:
    """A graph store whose apply_region fails once: the consumer dies after writing the
    new summaries but before swapping the segments."""

    def __init__(self, inner):
        self._inner = inner
        self.armed = True

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def apply_region(self, change):
        if self.armed:
            self.armed = False
            raise RuntimeError("consumer crashed")
        return self._inner.apply_region(change)


def test_crash_between_summaries_and_segment_swap_heals_on_redelivery():
    engine = built()
    reference = built()
    doc = synthetic_docs(1, seed=77, prefix="new")
    ingest(reference, doc)
    drain(reference)

    reference_ledger = reference.graph.ledger()["summarize|extractive-tfidf-v3"]["calls"]
    engine_ledger = engine.graph.ledger()["summarize|extractive-tfidf-v3"]["calls"]
    insert_calls = reference_ledger - engine_ledger  # what the insert costs without a crash

    engine.graph = FailingReplace(engine.graph)
    ingest(engine, doc)
    with pytest.raises(RuntimeError):
        drain(engine)
    before_crash = engine.graph.ledger()["summarize|extractive-tfidf-v3"]["calls"] - engine_ledger
    assert before_crash >= 1
    assert not invariants.check(engine).ok  # half-written: new summaries, old segments
    assert any(k.startswith("dirty:0:") for k in engine.graph.meta_keys("dirty:"))
    # the message was lost with the consumer; the dirty mark brings it back
    engine.queue = make_engine().queue
    assert requeue_dirty(engine, older_than=0.0)[0] == 0  # (layer 1 was marked before the write too)
    healed = drain(engine)
    assert invariants.check(engine).ok
    # the summaries written before the crash are reused, not paid for twice
    assert healed.cost.summarize_calls + before_crash == insert_calls
    assert snapshot(engine)[0].keys() == snapshot(reference)[0].keys()
    assert snapshot(engine)[1] == snapshot(reference)[1]


class BumpOnce:
    """A graph store where another writer deletes a node of the region just before our first
    write: ours then finds its refs changed (a conflict) and plans again from the new state."""

    def __init__(self, inner):
        self._inner = inner
        self.bumped = False

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def apply_region(self, change):
        if not self.bumped and change.layer == 0:
            self.bumped = True
            victim = next(r.node_id for r in change.expected if r.live)
            self._inner.delete_nodes([victim])
        return self._inner.apply_region(change)


def test_conflict_is_retried_from_the_new_state():
    engine = make_engine()
    engine.graph = BumpOnce(engine.graph)
    added = ingest(engine, synthetic_docs(40)).chunks_added
    report = drain(engine)
    assert engine.graph.bumped
    # the interloper deleted a bare chunk, so only its document's listing may disagree
    violations = invariants.check(engine, check_vectors=False).violations
    assert [v for v in violations if not v.startswith("document ")] == [] and len(violations) == 1
    sizes = engine.graph.layer_sizes()
    assert sizes[0] == added - 1  # the other writer's delete is in the result
    # every summary standing was paid once; the retry re-used what it could
    assert report.cost.summarize_calls >= sum(n for layer, n in sizes.items() if layer > 0)


def test_conflicts_forever_give_up_with_conflict_error():
    class AlwaysConflict(BumpOnce):
        def apply_region(self, change):
            raise ConflictError("busy")

    engine = make_engine()
    engine.graph = AlwaysConflict(engine.graph)
    ingest(engine, synthetic_docs(30))
    with pytest.raises(ConflictError, match="gave up"):
        drain(engine)


def test_deleting_below_s_max_removes_the_layers_above():
    engine = built(30)
    assert len(engine.graph.layer_sizes()) >= 3
    remove(engine, [f"d{i}" for i in range(26)])
    report = drain(engine)
    assert engine.graph.layer_sizes() == {0: 4}
    assert engine.graph.get_segments(0) == [] and engine.graph.get_segments(1) == []
    assert report.summaries_removed and report.cost.summarize_calls == 0
    assert invariants.check(engine).ok
    assert engine.vectors.count() == 4


def test_requeue_dirty_respects_age():
    engine = make_engine()
    ingest(engine, synthetic_docs(20))
    stamp = max(engine.graph.get_meta(k) for k in engine.graph.meta_keys("dirty:0:"))
    engine.queue = make_engine().queue  # message lost
    assert requeue_dirty(engine, older_than=60.0, now=stamp + 10) == []
    assert engine.queue.pending() == 0
    assert requeue_dirty(engine, older_than=60.0, now=stamp + 61) == [0]
    drain(engine)
    assert invariants.check(engine).ok and len(engine.graph.layer_sizes()) >= 2
    assert engine.graph.meta_keys("dirty:") == []
    assert requeue_dirty(engine) == []


def test_message_round_trip():
    msg = SegmentsAffected(layer=2, added=("a",), removed=("b", "c"), reason="x")
    assert SegmentsAffected.from_dict(copy.deepcopy(msg.to_dict())) == msg
    for bad in ({"type": "Other"}, {"type": "SegmentsAffected", "layer": -1},
                {"type": "SegmentsAffected", "layer": True}, "nope"):
        with pytest.raises(ValueError):
            SegmentsAffected.from_dict(bad)


# ---------------------------------------------------------------- revised summaries (delta)

def descendant_chunks(engine, node):
    if node.layer == 0:
        return [node]
    kids = engine.graph.get_nodes(node.children)
    return [c for kid in kids.values() for c in descendant_chunks(engine, kid)]


def all_summaries(engine):
    return [n for layer in engine.graph.layer_sizes() if layer > 0
            for n in engine.graph.get_nodes([r.node_id for r in engine.graph.layer_refs(layer)]).values()]


class Counting:
    """A summarizer that counts its calls by kind (summarize, revise) and passes them on."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, {"summarize": 0, "revise": 0}
        self.sources: list = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def summarize(self, texts, max_tokens, sources=None):
        self.calls["summarize"] += 1
        self.sources.append(sources)
        return self.inner.summarize(texts, max_tokens, sources)

    def revise(self, previous, added, removed, max_tokens, previous_share=0.5):
        self.calls["revise"] += 1
        return self.inner.revise(previous, added, removed, max_tokens, previous_share)


def test_growth_revises_summaries_and_reads_fewer_tokens():
    from eragraph.domain.text import split_sentences

    from eragraph.services import cost

    reports = {}
    for delta in (True, False):
        engine = built(delta_summaries=delta)
        ingest(engine, synthetic_docs(12, seed=3, prefix="grow"))
        counting = Counting(engine.summarizer)
        with cost.track() as calls:
            reports[delta] = drain(replace(engine, summarizer=counting))
        assert invariants.check(engine).ok
        # the report adds up every call the ledger saw, and counts each revision it asked for
        summarized = [c for c in calls if c.kind == "summarize"]
        report = reports[delta]
        assert report.cost.summarize_calls == len(summarized) == counting.calls["summarize"] + counting.calls["revise"]
        assert report.cost.tokens_in == sum(c.tokens_in for c in summarized)
        assert report.cost.tokens_out == sum(c.tokens_out for c in summarized) > 0
        assert report.cost.summarize_seconds == pytest.approx(sum(c.seconds for c in summarized))
        assert 0 < report.cost.summarize_seconds < 60
        assert sum(report.summaries_revised.values()) == counting.calls["revise"] + sum(report.summaries_carried.values())
        assert engine.graph.meta_keys("retired:") == []
        if delta:
            grown = engine
    assert sum(reports[True].summaries_revised.values()) > 0
    assert reports[False].summaries_revised == {}
    for report in reports.values():  # a carried summary (nothing changed) costs no call
        made = sum(report.segments_resummarized.values()) - sum(report.summaries_carried.values())
        assert report.cost.summarize_calls == made
    assert reports[True].cost.tokens_in < reports[False].cost.tokens_in
    # a revised summary still says only what its live descendants say
    for node in all_summaries(grown):
        said = {s for c in descendant_chunks(grown, node) for s in split_sentences(c.text)}
        assert set(split_sentences(node.text)) <= said, node.node_id


def test_deleted_document_leaves_no_trace_in_revised_summaries():
    engine = built(n=30, delta_summaries=True)
    ingest(engine, synthetic_docs(12, seed=3, prefix="grow"))
    drain(engine)
    gone = [f"grow{i}" for i in range(0, 12, 2)]
    assert remove(engine, gone).documents_removed == len(gone)
    drain(engine)
    assert invariants.check(engine).ok
    text = " ".join(n.text for n in all_summaries(engine))
    for doc_id in gone:
        assert f"Marker{doc_id}." not in text
    assert engine.graph.meta_keys("retired:") == []


def test_revision_needs_the_departed_childrens_text():
    """A chunk that left its segment by being deleted has left no text to revise with: that
    segment is summarized afresh; had the chunk only moved, the segment is revised."""
    from eragraph.domain.diff import segments_for
    from eragraph.services.resummarize import plan_revisions

    engine = built(n=30, delta_summaries=True)
    old = max(engine.graph.get_segments(0), key=lambda seg: len(seg.members))
    leaving, staying = old.members[0], old.members[1:]
    newcomer = next(r.node_id for r in engine.graph.layer_refs(0) if r.node_id not in old.members)
    [new] = segments_for(0, [tuple(staying) + (newcomer,)])
    children = engine.graph.get_nodes(new.members)
    moved = plan_revisions(engine, [new], (old,), children)
    assert set(moved) == {new.segment_id}
    plan = moved[new.segment_id]
    assert plan.previous == engine.graph.get_nodes([old.summary_id])[old.summary_id].text
    one_a_line = lambda text: "\n".join(split_sentences(text))  # noqa: E731 (sentence_delta's form)
    assert plan.added == (one_a_line(children[newcomer].text),)
    assert plan.removed == (one_a_line(engine.graph.get_nodes([leaving])[leaving].text),)
    assert plan.previous_share == len(staying) / len(new.members)
    engine.graph.delete_nodes([leaving])
    assert plan_revisions(engine, [new], (old,), children) == {}
    assert plan_revisions(make_engine(delta_summaries=False), [new], (old,), children) == {}


def test_unchanged_children_carry_the_summary_without_a_call():
    """A child summary replaced by one that says the same sentences (new id, same text) leaves
    nothing to revise: the summary above is carried over without calling the summarizer."""
    from eragraph.domain.diff import segments_for
    from eragraph.services.reports import ChangeReport
    from eragraph.services.resummarize import summarize_segments

    engine = built(n=40, delta_summaries=True)
    old = max(engine.graph.get_segments(1), key=lambda seg: len(seg.members))
    child = engine.graph.get_nodes([old.members[0]])[old.members[0]]
    twin = replace(child, node_id="sum-twin")  # same text and code, another id
    engine.graph.put_nodes([twin])
    [new] = segments_for(1, [tuple(m for m in old.members[1:]) + (twin.node_id,)])
    engine.graph.put_meta(f"retired:1:{child.node_id}", child.text)
    report = ChangeReport()
    [node], _vectors, _unstored = summarize_segments(engine, [new], report, (old,))
    previous = engine.graph.get_nodes([old.summary_id])[old.summary_id]
    assert node.text == previous.text
    assert report.cost.summarize_calls == 0
    assert report.summaries_carried == {2: 1} and report.summaries_revised == {2: 1}


def test_a_replaced_summary_gone_below_is_revised_from_its_retired_text():
    """A child summary replaced and deleted leaves its text under ``retired:<layer>:<id>`` only:
    the segment above is revised from that text (what it said is removed, what the new child
    says is added); without it, the segment is summarized afresh from its members, each a
    source of its own. A segment with no predecessor beside it changes neither."""
    from eragraph.domain.diff import segments_for
    from eragraph.ports.records import MemberSource
    from eragraph.services.reports import ChangeReport
    from eragraph.services.resummarize import retired_key, summarize_segments

    engine = built(n=40, delta_summaries=True)
    old, other = sorted(engine.graph.get_segments(1), key=lambda seg: -len(seg.members))[:2]
    child = engine.graph.get_nodes([old.members[0]])[old.members[0]]
    newer = replace(child, node_id="sum-newer", text="Another summary says this instead.", tokens=5)
    engine.graph.put_nodes([newer])
    engine.graph.delete_nodes([child.node_id])
    [new] = segments_for(1, [tuple(m for m in old.members[1:]) + (newer.node_id,)])
    [apart] = segments_for(1, [other.members[1:]])  # no member of ``old``: no predecessor
    one_a_line = lambda text: "\n".join(split_sentences(text))  # noqa: E731 (sentence_delta's form)

    fresh = Counting(engine.summarizer)
    report = ChangeReport()
    summarize_segments(replace(engine, summarizer=fresh), [new], report, (old,))
    assert report.summaries_revised == {} and fresh.calls == {"summarize": 1, "revise": 0}  # no text: afresh
    assert fresh.sources == [[MemberSource(m, True, summary=True) for m in new.members]]

    engine.graph.put_meta(retired_key(1, child.node_id), child.text)
    engine.graph.delete_nodes([new.summary_id])
    revised = []

    class Spy(Counting):
        def revise(self, previous, added, removed, max_tokens, previous_share=0.5):
            revised.append((previous, tuple(added), tuple(removed), previous_share))
            return super().revise(previous, added, removed, max_tokens, previous_share)

    spy = Spy(engine.summarizer)
    report = ChangeReport()
    summarize_segments(replace(engine, summarizer=spy), [apart, new], report, (old,))
    previous = engine.graph.get_nodes([old.summary_id])[old.summary_id]
    assert revised == [(previous.text, (one_a_line(newer.text),), (one_a_line(child.text),),
                        (len(new.members) - 1) / len(new.members))]
    assert spy.calls == {"summarize": 1, "revise": 1}  # ``apart`` afresh
    assert report.summaries_revised == {2: 1} and report.summaries_carried == {}
    assert report.cost.summarize_calls == 2


def test_a_bulk_build_sweeps_each_layer_once_not_once_per_shard(monkeypatch):
    """Every shard message of a bulk build names many codes and so re-cuts the whole layer;
    once one whole-layer pass has started after a shard's last announce, that shard's message
    is covered and costs no second pass. The result is the same partition."""
    from eragraph.services import resummarize
    from eragraph.services.resummarize import target_segments

    monkeypatch.setattr(resummarize, "WHOLE_LAYER_MIN", 4)  # every shard message falls back
    monkeypatch.setattr(resummarize, "WHOLE_LAYER_SHARE", 10**9)
    engine = make_engine()
    sweeps: list[int] = []
    reader, stream_regions, whole_layer = resummarize.reader, resummarize.stream_regions, resummarize.whole_layer

    def layer_reader(engine, layer, index=0):  # each reader knows its layer, so a pass over it is seen
        read = reader(engine, layer, index)
        read.layer = layer
        return read

    def streamed(read, *args):
        sweeps.append(read.layer)
        return stream_regions(read, *args)

    def whole(read):
        sweeps.append(read.layer)
        return whole_layer(read)

    monkeypatch.setattr(resummarize, "reader", layer_reader)
    monkeypatch.setattr(resummarize, "stream_regions", streamed)
    monkeypatch.setattr(resummarize, "whole_layer", whole)
    ingest(engine, synthetic_docs(150))
    pending = engine.queue.pending()
    drain(engine)
    assert pending > 4  # the build announced several shards of layer 0
    assert 0 in sweeps and sorted(sweeps) == sorted(set(sweeps))  # no layer swept twice
    assert invariants.check(engine).ok
    for layer in engine.graph.layer_sizes():
        assert {s.members for s in engine.graph.get_segments(layer)} == \
            {s.members for s in target_segments(engine, layer)}


def test_a_shard_announced_after_the_sweep_began_is_not_skipped():
    engine = make_engine()
    ingest(engine, synthetic_docs(40))
    drain(engine)
    engine.graph.put_meta("swept:0", 100.0)
    engine.graph.put_meta("dirty:0:3", 150.0)  # announced after that pass started
    from eragraph.services.resummarize import covered

    assert not covered(engine, 0, 3)
    assert engine.graph.get_meta("dirty:0:3") == 150.0
    engine.graph.put_meta("dirty:0:3", 50.0)  # announced before: covered, marker cleared
    assert covered(engine, 0, 3)
    assert engine.graph.get_meta("dirty:0:3") is None
    assert not covered(engine, 0, 4)  # no marker proves nothing


def test_a_shard_announced_at_the_instant_the_sweep_began_is_not_covered():
    """The boundary: a marker stamped at the very time the whole-layer pass started may belong
    to a message the pass did not see, so only a strictly older marker counts as covered."""
    from eragraph.services.resummarize import covered

    engine = make_engine()
    ingest(engine, synthetic_docs(12))
    drain(engine)
    engine.graph.put_meta("swept:0", 100.0)
    engine.graph.put_meta("dirty:0:3", 100.0)
    assert not covered(engine, 0, 3)
    assert engine.graph.get_meta("dirty:0:3") == 100.0  # kept: its message still runs
    engine.graph.put_meta("dirty:0:3", 99.999)
    assert covered(engine, 0, 3) and engine.graph.get_meta("dirty:0:3") is None
    engine.graph.put_meta("dirty:0:5", 1.0)
    engine.graph.delete_meta("swept:0")
    assert not covered(engine, 0, 5)  # no completed pass: nothing is covered
    assert engine.graph.get_meta("dirty:0:5") == 1.0
    engine.graph.put_meta("swept:1", 100.0)
    assert not covered(engine, 0, 5)  # another layer's pass covers nothing here


def test_a_message_that_says_when_it_was_sent_is_covered_only_by_a_pass_that_began_later():
    """A message carries the time it was sent, after its change was stored (a region's apply
    stores the markers of the layer above in its own write, stamped before it commits): a
    whole-layer pass covers it when it began after that time, whatever the marker's stamp."""
    from eragraph.services.resummarize import covered

    engine = make_engine()
    ingest(engine, synthetic_docs(12))
    drain(engine)
    engine.graph.put_meta("swept:0", 100.0)
    engine.graph.put_meta("dirty:0:3", 50.0)  # stamped before the pass began...
    assert not covered(engine, 0, 3, at=100.0)  # ...but the message was sent as it began: it runs
    assert not covered(engine, 0, 3, at=120.0)
    assert engine.graph.get_meta("dirty:0:3") == 50.0
    assert covered(engine, 0, 3, at=99.5)  # sent before the pass began: covered, marker cleared
    assert engine.graph.get_meta("dirty:0:3") is None
    assert covered(engine, 0, 4, at=99.5)  # no marker needed
    engine.graph.delete_meta("swept:0")
    assert not covered(engine, 0, 3, at=1.0)  # no completed pass: nothing is covered


def test_a_regions_apply_stores_the_markers_above_once_and_its_messages_say_when_they_were_sent():
    """The markers of the layer above go with the region's write (RegionChange.marks), so the
    announce after it sends the messages only; each message is stamped after the write."""
    from support import RecordingQueue

    engine = make_engine()
    engine.queue = RecordingQueue()
    ingest(engine, synthetic_docs(30))
    drain(engine)
    puts: list[str] = []
    applied: list[float] = []
    graph = engine.graph
    put_meta, apply_region = graph.put_meta, graph.apply_region

    def recording_put(key, value):
        puts.append(key)
        return put_meta(key, value)

    def recording_apply(change):
        done = apply_region(change)
        if change.above_add or change.above_remove:
            applied.append(time.time())
        return done

    graph.put_meta, graph.apply_region = recording_put, recording_apply
    engine.queue.messages.clear()
    ingest(engine, synthetic_docs(1, seed=99, prefix="new"))
    drain(engine)
    above = [m for m in engine.queue.messages if m.layer > 0]
    assert applied and above  # an apply changed the layer above and announced it
    assert not [k for k in puts if k.startswith("dirty:") and not k.startswith("dirty:0")]
    assert all(m.at >= applied[0] for m in above)
    assert invariants.check(engine).ok


def test_the_calls_of_a_region_whose_write_conflicts_are_counted_once():
    """The summarize calls' ledger entries go with the region's write; a write that conflicts
    takes none, so they are added on their own, and the replanned write (which reuses the
    stored summaries, no call) adds nothing more: the ledger matches the report."""
    engine = make_engine()
    ingest(engine, synthetic_docs(30))
    drain(engine)
    graph = engine.graph
    apply_region, lost = graph.apply_region, []

    def once_lost(change):
        if change.ledger and not lost:
            lost.append(change.ledger)
            raise ConflictError("another writer got there first")
        return apply_region(change)

    graph.apply_region = once_lost
    before = graph.ledger()
    ingest(engine, synthetic_docs(2, seed=5, prefix="late"))
    report = drain(engine)
    after = graph.ledger()
    calls = sum(r["calls"] for k, r in after.items() if k.startswith("summarize")) - \
        sum(r["calls"] for k, r in before.items() if k.startswith("summarize"))
    assert lost and report.cost.summarize_calls == calls > 0
    assert invariants.check(engine).ok


def _spied(engine, refuse_first: bool = False):
    """engine.graph with its writes of nodes outside the index (put_nodes(index=False),
    keep_nodes) and its applies' carried nodes recorded; ``refuse_first``: the first apply carrying nodes conflicts, writing nothing."""
    graph = engine.graph
    put_nodes, keep_nodes, apply_region = graph.put_nodes, graph.keep_nodes, graph.apply_region
    stored, carried = [], []

    def put(nodes, index=True):
        if not index:
            stored.append([n.node_id for n in nodes])
        return put_nodes(nodes, index=index)

    def keep(nodes):
        stored.append([n.node_id for n in nodes])
        return keep_nodes(nodes)

    def apply(change):
        if change.nodes and refuse_first and not carried:
            carried.append(("refused", [n.node_id for n in change.nodes]))
            raise ConflictError("another writer got there first")
        carried.append(("applied", [n.node_id for n in change.nodes]))
        return apply_region(change)

    graph.put_nodes, graph.keep_nodes, graph.apply_region = put, keep, apply
    return stored, carried


def test_an_inserts_summaries_are_written_by_its_regions_writes():
    engine = built()
    stored, carried = _spied(engine)
    ingest(engine, synthetic_docs(1, seed=5, prefix="one"))
    report = drain(engine)
    made = [i for ids in report.summary_ids.values() for i in ids]
    assert made and stored == []  # no write of their own
    assert sorted(i for _, ids in carried for i in ids) == sorted(made)
    assert all(0 < len(ids) <= FOLDED_SUMMARIES for _, ids in carried)
    assert invariants.check(engine).ok


def test_a_refused_regions_write_keeps_the_summaries_it_carried_and_none_is_paid_twice():
    reference = built()
    ingest(reference, synthetic_docs(1, seed=5, prefix="one"))
    calls = drain(reference).cost.summarize_calls
    engine = built()
    stored, carried = _spied(engine, refuse_first=True)
    ingest(engine, synthetic_docs(1, seed=5, prefix="one"))
    report = drain(engine)
    refused = carried[0]
    assert refused[0] == "refused" and stored[0] == refused[1]  # kept when the write was refused
    assert report.cost.summarize_calls == calls  # the replanned write reused them
    assert invariants.check(engine).ok
    assert snapshot(engine)[1] == snapshot(reference)[1]


def test_a_bulk_regions_summaries_are_each_stored_as_made():
    engine = make_engine()
    stored, carried = _spied(engine)
    ingest(engine, synthetic_docs(60))
    drain(engine)
    assert stored and all(len(ids) == 1 for ids in stored)  # one by one, as made
    assert len(stored) > FOLDED_SUMMARIES  # from regions making more than it, which carried none
    assert all(len(ids) <= FOLDED_SUMMARIES for _, ids in carried)
    assert invariants.check(engine).ok
