"""A reconcile's end (its change record, finished outbox entries, its shard's marker, the look
for the summaries whose vectors it wrote) rides with its announce to the layer above, whose
first region write carries it (services.resummarize.reconcile, RegionChange.finish): one
write fewer a layer, and nothing the end stood for is lost when it does not go that way."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import RecordingQueue, make_engine, synthetic_docs

from eragraph.domain.model import MetaWrite, SegmentsAffected
from eragraph.services import invariants, resummarize
from eragraph.services.changes import PREFIX
from eragraph.services.ingest import ingest


class Counted:
    """Wraps the graph store: how often each method was called."""

    def __init__(self, inner) -> None:
        self._inner, self.calls = inner, {}

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            self.calls[name] = self.calls.get(name, 0) + 1
            return attr(*args, **kwargs)
        return call


def _built(n: int = 40):
    engine = replace(make_engine(), queue=RecordingQueue())
    docs = synthetic_docs(n)
    ingest(engine, docs)
    resummarize.drain(engine)
    return engine, docs


def _one_insert(engine, docs):
    ingest(engine, [replace(docs[0], source="new.txt", text=docs[0].text + " A sentence about mountains.")])
    engine.queue.messages.clear()
    [(receipt, message)] = engine.queue.receive(1)
    engine.queue.ack([receipt])
    return message


def _changed_all_over():
    """A store, half its documents changed: the layer-0 messages received, and the one of the
    most codes (a reconcile of several regions)."""
    engine, docs = _built(60)
    ingest(engine, [replace(d, text=d.text + " Another closing sentence about rivers.") for d in docs[:30]])
    received = engine.queue.receive(100)
    return engine, received, max((m for _, m in received if m.layer == 0), key=lambda m: len(m.codes))


def test_a_single_region_reconcile_sends_its_end_with_its_announce_and_the_layer_above_writes_it():
    engine, docs = _built()
    message = _one_insert(engine, docs)
    counted = Counted(engine.graph)
    resummarize.reconcile(replace(engine, graph=counted), message)
    assert "write_meta" not in counted.calls  # no write of its own after the region's
    [up] = [m for m in engine.queue.messages if m.layer == 1]
    after = up.after
    assert after is not None
    [(record_key, record)] = after.puts
    assert record_key.startswith(PREFIX) and record["kind"] == "resummarize" and record["layer"] == 1
    [entry] = [k for k in after.deletes if k.startswith(resummarize.OUTBOX)]
    assert after.clear == ((f"dirty:0:{message.group}", after.clear[0][1]),)
    assert set(after.present) == set(record["summaries"])
    # until the layer above writes it, the entry and the marker stay (a redo covers a lost end)
    assert engine.graph.get_meta(entry) is not None and engine.graph.get_meta(record_key) is None
    resummarize.drain(engine)
    assert engine.graph.get_meta(entry) is None and engine.graph.get_meta(record_key) == record
    assert engine.graph.meta_keys("dirty:") == [] and engine.graph.meta_keys(resummarize.OUTBOX) == []
    invariants.check(engine)


def test_the_carried_end_is_written_by_the_first_region_write_above():
    engine, docs = _built()
    message = _one_insert(engine, docs)
    resummarize.reconcile(engine, message)
    [up] = [m for m in engine.queue.messages if m.layer == 1]
    engine.queue.messages.clear()  # it stays queued: delivered by hand first
    graph, applied = engine.graph, []

    class Tracks(Counted):
        def apply_region(self, change):
            applied.append(change)
            return graph.apply_region(change)

    counted = Tracks(graph)
    resummarize.reconcile(replace(engine, graph=counted), up)
    assert applied, "the insert's layer-1 reconcile wrote no region"
    assert applied[0].finish == up.after and all(c.finish is None for c in applied[1:])
    assert all(engine.graph.get_meta(k) is None for k in up.after.deletes)
    assert engine.graph.get_meta(up.after.puts[0][0]) == up.after.puts[0][1]
    # its own end went up with its announce, or (nothing above to announce) in one write
    assert counted.calls.get("write_meta", 0) == (0 if any(m.after for m in engine.queue.messages) else 1)


def test_a_reconcile_with_nothing_to_write_writes_the_end_it_was_given():
    engine, _ = _built()
    end = MetaWrite(puts=(("change:00000000000000000001:aa", {"kind": "resummarize"}),),
                    deletes=("outbox:0:1:gone",), clear=(("dirty:0:1", 5.0),))
    engine.graph.write_meta([("outbox:0:1:gone", {"made": []}), ("dirty:0:1", 5.0)], [])
    top = max(engine.graph.layer_sizes())
    resummarize.reconcile(engine, SegmentsAffected(layer=top, codes=(1,), group=0, after=end))
    assert engine.graph.get_meta("change:00000000000000000001:aa") == {"kind": "resummarize"}
    assert engine.graph.get_meta("outbox:0:1:gone") is None and engine.graph.get_meta("dirty:0:1") is None


def test_a_reconcile_that_fails_leaves_the_end_it_was_given_for_the_redelivery():
    engine, docs = _built()
    message = _one_insert(engine, docs)
    resummarize.reconcile(engine, message)
    [up] = [m for m in engine.queue.messages if m.layer == 1]  # it stays queued: delivered by hand first

    class Fails:
        def __init__(self, inner):
            self._inner = inner

        def __getattr__(self, name):
            if name == "apply_region":
                raise RuntimeError("consumer died")
            return getattr(self._inner, name)

    with pytest.raises(RuntimeError):
        resummarize.reconcile(replace(engine, graph=Fails(engine.graph)), up)
    entries = [k for k in up.after.deletes if k.startswith(resummarize.OUTBOX)]
    assert entries and all(engine.graph.get_meta(k) is not None for k in entries)  # the entry below stays
    resummarize.reconcile(engine, up)  # redelivered
    assert all(engine.graph.get_meta(k) is None for k in entries)
    resummarize.drain(engine)
    assert engine.graph.meta_keys("dirty:") == [] and engine.graph.meta_keys(resummarize.OUTBOX) == []
    invariants.check(engine)


def test_a_reconcile_of_several_regions_announces_as_it_writes_and_writes_its_own_end():
    engine, received, message = _changed_all_over()
    engine.queue.messages.clear()
    counted = Counted(engine.graph)
    resummarize.reconcile(replace(engine, graph=counted), message)  # changes all over the layer
    assert counted.calls["apply_region"] > 1
    assert all(m.after is None for m in engine.queue.messages)
    assert counted.calls.get("write_meta") == 1
    assert [k for k in engine.graph.meta_keys("outbox:0:") if k.startswith(f"outbox:0:{message.group}:")] == []


def test_coalesced_messages_keep_every_end():
    engine, _ = _built()
    first = MetaWrite(deletes=("outbox:0:1:a",))
    second = MetaWrite(deletes=("outbox:0:1:b",), clear=(("dirty:0:1", 5.0),))
    engine.graph.write_meta([("outbox:0:1:a", {}), ("outbox:0:1:b", {}), ("dirty:0:1", 5.0)], [])
    engine.queue.send([SegmentsAffected(layer=1, codes=(3,), group=0, after=first),
                       SegmentsAffected(layer=1, codes=(4,), group=0, after=second)])
    [(_, message)] = engine.queue.receive(10)
    assert set(message.after.deletes) == {"outbox:0:1:a", "outbox:0:1:b"}
    resummarize.reconcile(engine, message)
    assert engine.graph.meta_keys("outbox:0:1:") == [] and engine.graph.get_meta("dirty:0:1") is None


def test_a_carried_end_survives_the_message_format_and_a_bad_one_is_refused():
    end = MetaWrite(puts=(("change:1", {"kind": "resummarize", "summaries": ["s1"]}),), deletes=("outbox:0:1:x",),
                    clear=(("dirty:0:1", 12.5),), present=("s1",))
    message = SegmentsAffected(layer=1, codes=(3,), group=0, op="o", at=1.0, after=end)
    assert SegmentsAffected.from_dict(message.to_dict()) == message
    for bad in ({"puts": "x"}, {"clear": [["dirty:0:1", "soon"]]}, {"deletes": [1]},
                {"present": ["s"] * 200}, {"puts": [["k"]]}, []):
        with pytest.raises(ValueError):
            SegmentsAffected.from_dict({**message.to_dict(), "after": bad})


def test_two_ends_clearing_one_marker_merge_into_one_clear_and_every_store_takes_them():
    first = MetaWrite(deletes=("outbox:0:1:a",), clear=(("dirty:0:1", 5.0),))
    second = MetaWrite(deletes=("outbox:0:1:b",), clear=(("dirty:0:1", 7.0),))
    merged = first.merged(second)
    assert merged.clear == (("dirty:0:1", 7.0),)  # what either alone would delete, once
    assert second.merged(first).clear == (("dirty:0:1", 7.0),)


def test_an_announce_that_fails_to_send_is_sent_before_its_regions_entry_goes():
    engine, received, message = _changed_all_over()
    queue = engine.queue
    refused, sent = [], []

    class RefusesOnce:
        def __getattr__(self, name):
            return getattr(queue, name)

        def send(self, messages):
            if not refused:
                refused.append(list(messages))
                raise RuntimeError("the queue refused")
            sent.extend(messages)
            queue.send(messages)

    with pytest.raises(RuntimeError):
        resummarize.reconcile(replace(engine, queue=RefusesOnce()), message)
    # the first region's announce, refused when the second region was written, is sent by the
    # failed reconcile's end before it deletes that region's entry
    assert refused and all(any(m.codes == r.codes and m.layer == r.layer for m in sent) for r in refused[0])
    for _, each in received:  # redelivered, with the rest of the batch
        resummarize.reconcile(engine, each)
    resummarize.drain(engine)
    assert engine.graph.meta_keys(resummarize.OUTBOX) == [] and engine.graph.meta_keys("dirty:") == []
    invariants.check(engine)


def test_a_second_insert_in_the_shard_leaves_the_first_ones_entry_to_its_end_on_the_way_up():
    engine, docs = _built()
    message = _one_insert(engine, docs)
    resummarize.reconcile(engine, message)
    [entry] = [k for k in engine.graph.meta_keys(f"outbox:0:{message.group}:")]
    # another message of the same shard, before layer 1 has run: the entry is left (no redo)
    again = replace(message, op="another", after=None)
    engine.queue.messages.clear()
    resummarize.reconcile(engine, again)
    assert engine.graph.get_meta(entry) is not None
    assert not any(m.reason.startswith("outbox:") for m in engine.queue.messages)
    resummarize.drain(engine)
    assert engine.graph.meta_keys(resummarize.OUTBOX) == [] and engine.graph.meta_keys("dirty:") == []
    invariants.check(engine)


def test_an_entry_of_another_message_is_finished_once_the_grace_is_over_and_its_own_message_at_once():
    engine, docs = _built()
    message = _one_insert(engine, docs)
    resummarize.reconcile(engine, message)
    [entry] = [k for k in engine.graph.meta_keys(f"outbox:0:{message.group}:")]
    stored = engine.graph.get_meta(entry)
    assert stored["op"] == message.op
    finished = resummarize.finish_outbox
    held = {entry: stored}
    assert finished(engine, 0, message.group, entries=held, spare=("another", resummarize.OUTBOX_GRACE)) == 0
    assert finished(engine, 0, message.group, entries=held, spare=(message.op, resummarize.OUTBOX_GRACE)) == 1
    engine.graph.put_meta(entry, {**stored, "at": stored["at"] - resummarize.OUTBOX_GRACE - 1})
    held = {entry: engine.graph.get_meta(entry)}
    assert finished(engine, 0, message.group, entries=held, spare=("another", resummarize.OUTBOX_GRACE)) == 1


def test_a_continuation_carries_only_what_no_write_of_the_stopped_reconcile_took():
    from eragraph.services.summarizing import DeadlineReached

    engine, received, message = _changed_all_over()
    end = MetaWrite(puts=(("change:00000000000000000002:bb", {"kind": "resummarize"}),))
    message = replace(message, after=end)
    graph, summarizer = engine.graph, engine.summarizer
    applied = []

    class Tracks:
        def __getattr__(self, name):
            return getattr(graph, name)

        def apply_region(self, change):
            applied.append(change)
            return graph.apply_region(change)

    class Stops:
        def __getattr__(self, name):
            return getattr(summarizer, name)

        def summarize(self, *args, **kwargs):
            if applied:  # a region is written: the next summary stops the reconcile
                raise DeadlineReached("out of time")
            return summarizer.summarize(*args, **kwargs)

    with pytest.raises(DeadlineReached) as stopped:
        resummarize.reconcile(replace(engine, graph=Tracks(), summarizer=Stops()), message)
    assert applied[0].finish == end and graph.get_meta(end.puts[0][0]) == {"kind": "resummarize"}
    assert resummarize.continuation(message, stopped.value).after is None  # written: not again
    assert resummarize.continuation(message).after == end
    # stopped before any write: the continuation carries it on
    with pytest.raises(DeadlineReached) as early:
        resummarize.reconcile(engine, message, deadline=lambda: 0.0)
    assert resummarize.continuation(message, early.value).after == end


def test_a_message_may_carry_only_what_a_reconcile_end_writes():
    base = SegmentsAffected(layer=1, codes=(3,), group=0, op="o").to_dict()
    for bad in ({"puts": [["tenant:x", {}]]}, {"deletes": ["lsh"]}, {"clear": [["swept:0", 1.0]]}):
        with pytest.raises(ValueError):
            SegmentsAffected.from_dict({**base, "after": bad})
    ok = {"puts": [["change:1", {}]], "deletes": ["outbox:0:1:x", "retired:0:n"], "clear": [["dirty:0:1", 1.0]]}
    assert SegmentsAffected.from_dict({**base, "after": ok}).after.items == 4


def test_a_carried_look_takes_back_the_vector_of_a_summary_not_live_any_more():
    # a summary made below had its vector written; removed since by another reconcile and kept
    # again by a refused write (a node, not live): the end carried up deletes that vector
    import numpy as np

    from eragraph.domain.model import Node

    engine, docs = _built()
    message = _one_insert(engine, docs)
    resummarize.reconcile(engine, message)
    [up] = [m for m in engine.queue.messages if m.layer == 1]
    kept = Node(node_id="sum-kept", layer=1, text="a summary removed since", tokens=4, code=up.codes[0])
    engine.graph.keep_nodes([kept])
    engine.vectors.upsert([kept.node_id], np.ones((1, engine.embedder.dim), dtype=np.float32),
                          [{"layer": 1, "doc_id": ""}])
    engine.vectors.flush()
    look = replace(up, after=up.after.merged(MetaWrite(present=(kept.node_id,))))
    resummarize.reconcile(engine, look)
    assert kept.node_id not in engine.vectors.get_vectors([kept.node_id])
    live = [i for i in up.after.present]
    assert set(engine.vectors.get_vectors(live)) == set(live)  # the live ones keep theirs
