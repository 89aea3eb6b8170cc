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
    counted = Counted(engine.graph)
    resummarize.reconcile(replace(engine, graph=counted), up)
    if counted.calls.get("apply_region"):
        # it wrote a region: the end below went with it; its own end goes up or is written once
        assert all(engine.graph.get_meta(k) is None for k in up.after.deletes)
        assert engine.graph.get_meta(up.after.puts[0][0]) == up.after.puts[0][1]
        assert counted.calls.get("write_meta", 0) <= 1
    else:
        pytest.fail("the insert's layer-1 reconcile wrote no region")


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
    engine, docs = _built(60)
    ingest(engine, [replace(d, text=d.text + " Another closing sentence about rivers.") for d in docs[:30]])
    engine.queue.messages.clear()
    received = engine.queue.receive(100)
    message = max((m for _, m in received if m.layer == 0), key=lambda m: len(m.codes))
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
