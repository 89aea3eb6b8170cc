"""resummarize.finish_outbox, what completes a region write whose consumer died: it decides each
step from layer l+1's ref index, whether or not the write landed. A summary live above gets its
vector, one that is no longer live loses its node and vector, layer l+1 is announced with what
came and went, and the entry goes; entries of another shard, or younger than ``older_than``,
are left alone."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from support import RecordingQueue, make_engine, synthetic_docs

from eragraph.domain.model import Node
from eragraph.services import invariants, resummarize
from eragraph.services.ingest import ingest


class Dies:
    """Wraps a port: the first call of ``method`` that ``when`` accepts raises (the consumer died there)."""

    def __init__(self, inner, method: str, when=lambda *a: True, first=None) -> None:
        self._inner, self._method, self._when, self.died = inner, method, when, False
        self._first = first  # what the call does before it dies

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if name != self._method:
            return attr

        def call(*args, **kwargs):
            if not self.died and self._when(*args):
                self.died = True
                if self._first is not None:
                    self._first(self._inner, *args)
                raise RuntimeError("consumer died")
            return attr(*args, **kwargs)
        return call


class Seen:
    """Wraps an embedder: the texts it was asked to embed."""

    def __init__(self, inner) -> None:
        self._inner, self.texts = inner, []

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def embed(self, texts):
        self.texts.extend(texts)
        return self._inner.embed(texts)


def _died(port: str, method: str, when=lambda *a: True, first=None, entry_left: bool = True):
    """A built store, then a change of some documents whose layer-0 reconcile died at ``method``
    of ``port`` (having done ``first(port, *args)``); returns the engine, the message and the
    outbox entry left (None, None with ``entry_left`` False: there must be none)."""
    engine = replace(make_engine(), queue=RecordingQueue())
    docs = synthetic_docs(30)
    ingest(engine, docs)
    resummarize.drain(engine)
    ingest(engine, [replace(d, text=d.text + " Another closing sentence about rivers.") for d in docs[:12]])
    setattr(engine, port, Dies(getattr(engine, port), method, when, first))
    _, message = engine.queue.receive(1)[0]
    try:
        resummarize.reconcile(engine, message)
    except RuntimeError:
        pass
    assert getattr(engine, port).died
    setattr(engine, port, getattr(engine, port)._inner)
    if not entry_left:
        assert engine.graph.meta_keys(resummarize.OUTBOX) == []
        engine.queue.messages.clear()
        return engine, message, None, None
    (key,) = engine.graph.meta_keys(resummarize.OUTBOX)
    engine.queue.messages.clear()
    return engine, message, key, engine.graph.get_meta(key)


def _live_above(engine, ids) -> set:
    return {r.node_id for r in engine.graph.layer_refs(1)} & set(ids)  # layer_refs: the live ones


def test_after_a_landed_write_each_new_summary_gets_its_vector_and_each_replaced_one_goes():
    engine, message, key, entry = _died("vectors", "upsert", lambda ids, v, metas: metas and metas[0]["layer"] > 0)
    made = [i for i, _ in entry["made"]]
    gone = [i for i, _ in entry["gone"]]
    assert made and gone and _live_above(engine, made) == set(made)  # the write landed
    assert not set(engine.vectors.get_vectors(made))

    assert resummarize.finish_outbox(engine, 0, message.group) == 1
    nodes = engine.graph.get_nodes(made)
    vectors = engine.vectors.get_vectors(made)
    assert set(vectors) == set(made)
    assert np.allclose(np.stack([vectors[i] for i in made]), engine.embedder.embed([nodes[i].text for i in made]),
                       atol=1e-6)
    query = vectors[made[0]]
    assert made[0] in {h.node_id for h in engine.vectors.search(query, 5, layers=[1])}  # stored as layer 1
    assert not engine.graph.get_nodes(gone) and not set(engine.vectors.get_vectors(gone))
    sent = engine.queue.messages
    assert {m.layer for m in sent} == {1} and {m.reason for m in sent} == {"outbox:0"}
    assert {i for m in sent for i in m.added} == set(made) and {i for m in sent for i in m.removed} == set(gone)
    assert engine.graph.get_meta(key) is None
    assert resummarize.finish_outbox(engine, 0, message.group) == 0  # nothing left to finish
    resummarize.reconcile(engine, message)  # redelivered
    resummarize.drain(engine)
    assert invariants.check(engine).ok


def _marks_only(graph, change) -> None:
    """What an earlier version stored before a region's write: its outbox entry and markers."""
    for mark, value in change.marks:
        graph.put_meta(mark, value)


def test_a_write_that_never_landed_leaves_no_entry_and_its_redelivery_makes_it():
    # the outbox entry is stored with the region's write (RegionChange.marks): none without it
    engine, message, _, _ = _died("graph", "apply_region", entry_left=False)
    before = {r.node_id for r in engine.graph.layer_refs(1)}
    assert resummarize.finish_outbox(engine, 0, None) == 0
    assert {r.node_id for r in engine.graph.layer_refs(1)} == before and not engine.queue.messages
    resummarize.reconcile(engine, message)  # redelivered: the write is made
    assert {r.node_id for r in engine.graph.layer_refs(1)} != before
    resummarize.drain(engine)
    assert invariants.check(engine).ok and engine.graph.meta_keys(resummarize.OUTBOX) == []


def test_after_a_write_that_never_landed_the_old_summaries_stay_and_no_new_one_gets_a_vector():
    # an entry whose write never landed: one stored by an earlier version (the entry first, then
    # the write), or the first of a split write's transactions (DynamoDB) without the others
    engine, message, key, entry = _died("graph", "apply_region", first=_marks_only)
    made = [i for i, _ in entry["made"]]
    gone = [i for i, _ in entry["gone"]]
    assert made and gone and not _live_above(engine, made) and _live_above(engine, gone) == set(gone)
    assert resummarize.finish_outbox(engine, 0, None) == 1  # None: every shard of the layer
    assert not set(engine.vectors.get_vectors(made))
    assert set(engine.graph.get_nodes(gone)) == set(gone) and set(engine.vectors.get_vectors(gone)) == set(gone)
    assert engine.graph.get_meta(key) is None and engine.queue.messages
    resummarize.reconcile(engine, message)  # the redelivered message makes the write again
    resummarize.drain(engine)
    assert invariants.check(engine).ok


def test_entries_of_another_shard_or_younger_than_asked_are_left():
    engine, message, key, entry = _died("vectors", "upsert", lambda ids, v, metas: metas and metas[0]["layer"] > 0)
    assert message.group is not None
    assert resummarize.finish_outbox(engine, 0, message.group + 1) == 0
    assert resummarize.finish_outbox(engine, 1, None) == 0  # another layer's entries
    assert resummarize.finish_outbox(engine, 0, None, older_than=3600.0) == 0
    assert engine.graph.get_meta(key) == entry and engine.queue.messages == []
    assert resummarize.finish_outbox(engine, 0, None, older_than=0.0) == 1


def test_an_old_entry_is_finished_when_asked_for_entries_older_than_an_hour():
    engine, message, key, entry = _died("vectors", "upsert", lambda ids, v, metas: metas and metas[0]["layer"] > 0)
    engine.graph.put_meta(key, {**entry, "at": entry["at"] - 7200})
    assert resummarize.finish_outbox(engine, 0, None, older_than=3600.0) == 1
    assert engine.graph.get_meta(key) is None


def test_a_scoped_reconcile_finishes_its_own_shards_entries_only():
    from eragraph.domain.model import SegmentsAffected
    from eragraph.services.announce import shard_of
    engine, message, key, entry = _died("vectors", "upsert", lambda ids, v, metas: metas and metas[0]["layer"] > 0)
    bits = engine.settings.n_planes
    other = next(r for r in engine.graph.layer_refs(0) if shard_of(r.code, bits) != message.group)
    resummarize.reconcile(engine, SegmentsAffected(layer=0, codes=(other.code,), group=shard_of(other.code, bits)))
    assert engine.graph.get_meta(key) == entry
    resummarize.reconcile(engine, message)
    assert engine.graph.get_meta(key) is None


def test_a_whole_layer_reconcile_finishes_every_shards_entries():
    # a rerun after a kill drains whole layers (a bare layer number, or a message without codes):
    # the entry a scoped apply left must be finished there, its summaries given their vectors
    engine, message, key, entry = _died("vectors", "upsert", lambda ids, v, metas: metas and metas[0]["layer"] > 0)
    assert message.group is not None and key.startswith(resummarize.outbox_key(0, message.group))
    made = [i for i, _ in entry["made"]]
    resummarize.reconcile(engine, 0)
    assert engine.graph.get_meta(key) is None
    assert set(engine.vectors.get_vectors(made)) == set(made) & _live_above(engine, made)
    resummarize.drain(engine)
    assert invariants.check(engine).ok


def test_an_entry_stamped_ahead_of_this_clock_is_finished_when_no_age_is_asked():
    # another machine's clock ran ahead: with no minimum age every entry is finished
    engine, message, key, entry = _died("vectors", "upsert", lambda ids, v, metas: metas and metas[0]["layer"] > 0)
    engine.graph.put_meta(key, {**entry, "at": entry["at"] + 600})
    assert resummarize.finish_outbox(engine, 0, None) == 1
    assert engine.graph.get_meta(key) is None


def test_finishing_keeps_the_text_of_replaced_summaries_still_held_above_and_forgets_the_dropped():
    # a revising summarizer (the default engine's) revises a segment above from the text of a
    # member that left it: a replaced summary still a tombstone in a layer-2 segment has its
    # text kept (retired under layer 1) by the write that deleted its node, and finishing
    # keeps it; a stale entry's summary no longer in the index keeps nothing when finishing
    # deletes its node; the retired texts of the layer-0 refs the region dropped are forgotten
    engine, message, key, entry = _died("vectors", "upsert", lambda ids, v, metas: metas and metas[0]["layer"] > 0)
    assert resummarize.can_revise(engine)
    # and a replaced summary whose ref the write deleted (it was in no segment above): its
    # node is still there, its ref is not
    loose = Node(node_id="sum-loose", layer=1, text="A summary no segment above holds.", tokens=6, code=3)
    engine.graph.put_nodes([loose], index=False)
    entry = {**entry, "gone": [*entry["gone"], [loose.node_id, loose.code]]}
    engine.graph.put_meta(key, entry)
    gone = [i for i, _ in entry["gone"]]
    tombstones = {r.node_id for i, c in entry["gone"] for r in engine.graph.prefix_refs(1, c, c)
                  if r.node_id == i and not r.live}
    assert tombstones and set(gone) - tombstones == {"sum-loose"}  # both kinds
    texts = {i: engine.graph.get_meta(resummarize.retired_key(1, i)) for i in gone}
    assert {i for i, t in texts.items() if t} == tombstones  # kept by the write, with the deletion
    assert set(engine.graph.get_nodes(gone)) == {"sum-loose"}
    assert entry["drop"]
    for node_id in entry["drop"]:
        engine.graph.put_meta(resummarize.retired_key(0, node_id), f"kept text of {node_id}")

    assert resummarize.finish_outbox(engine, 0, message.group) == 1
    assert not engine.graph.get_nodes(gone)
    for node_id in gone:
        held = engine.graph.get_meta(resummarize.retired_key(1, node_id))
        assert held == (texts[node_id] if node_id in tombstones else None), node_id
        assert engine.graph.get_meta(resummarize.retired_key(0, node_id)) is None
        assert engine.graph.get_meta(resummarize.retired_key(2, node_id)) is None
    assert all(engine.graph.get_meta(resummarize.retired_key(0, d)) is None for d in entry["drop"])


def test_a_write_deletes_the_replaced_summaries_and_keeps_the_text_of_each_a_segment_above_still_holds():
    # the reconcile dies right after its write, at the deletion of the replaced summaries'
    # vectors: their nodes went with the write, and each one that is a tombstone in a layer-2
    # segment has its text kept under layer 1 by the same write (the layer above revises from
    # it); none other does
    engine = replace(make_engine(), queue=RecordingQueue())
    docs = synthetic_docs(30)
    ingest(engine, docs)
    resummarize.drain(engine)
    before = {i: n.text for i, n in engine.graph.get_nodes([r.node_id for r in engine.graph.layer_refs(1)]).items()}
    ingest(engine, [replace(d, text=d.text + " Another closing sentence about rivers.") for d in docs[:12]])
    engine.vectors = Dies(engine.vectors, "delete", lambda ids: any(i.startswith("sum-") for i in ids))
    _, message = engine.queue.receive(1)[0]
    try:
        resummarize.reconcile(engine, message)
    except RuntimeError:
        pass
    assert engine.vectors.died
    (key,) = engine.graph.meta_keys(resummarize.OUTBOX)
    gone = [i for i, _ in engine.graph.get_meta(key)["gone"]]
    tombstones = {r.node_id for i, c in engine.graph.get_meta(key)["gone"] for r in engine.graph.prefix_refs(1, c, c)
                  if r.node_id == i and not r.live}
    assert tombstones and set(gone) <= set(before)
    assert engine.graph.get_nodes(gone) == {}  # deleted with the write
    for node_id in gone:
        held = engine.graph.get_meta(resummarize.retired_key(1, node_id))
        assert held == (before[node_id] if node_id in tombstones else None), node_id


def test_a_young_entry_is_passed_over_and_every_old_one_after_it_finished():
    # entries are read in key order; a young one is skipped, not an end: the old ones after it
    # are each finished and counted, and a summary whose vector is there already is not embedded
    engine, message, key, entry = _died("vectors", "upsert", lambda ids, v, metas: metas and metas[0]["layer"] > 0)
    young = resummarize.outbox_key(0, message.group, "")  # sorts before the entry's own key
    assert young < key
    engine.graph.put_meta(young, {**entry, "at": entry["at"] + 3600})
    second = resummarize.outbox_key(0, message.group, "f" * 32)
    engine.graph.put_meta(second, {**entry, "at": entry["at"] - 7200})
    engine.graph.put_meta(key, {**entry, "at": entry["at"] - 7200})
    made = [i for i, _ in entry["made"]]
    kept = engine.embedder.embed(["a vector already stored"])
    engine.vectors.upsert([made[0]], kept, [{"layer": 1, "doc_id": ""}])
    engine.embedder = Seen(engine.embedder)
    assert resummarize.finish_outbox(engine, 0, message.group, older_than=3600.0) == 2
    assert engine.graph.meta_keys(resummarize.OUTBOX) == [young]
    nodes = engine.graph.get_nodes(made)
    assert nodes[made[0]].text not in engine.embedder.texts  # it had its vector
    assert sorted(engine.embedder.texts) == sorted(nodes[i].text for i in made[1:])  # the others, once
    assert np.allclose(engine.vectors.get_vectors([made[0]])[made[0]], kept[0])
