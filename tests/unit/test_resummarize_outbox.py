"""resummarize.finish_outbox, what completes a region write whose consumer died: it decides each
step from layer l+1's ref index, whether or not the write landed. A summary live above gets its
vector, one that is no longer live loses its node and vector, layer l+1 is announced with what
came and went, and the entry goes; entries of another shard, or younger than ``older_than``,
are left alone."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from support import RecordingQueue, make_engine, synthetic_docs

from eragraph.services import invariants, resummarize
from eragraph.services.ingest import ingest


class Dies:
    """Wraps a port: the first call of ``method`` that ``when`` accepts raises (the consumer died there)."""

    def __init__(self, inner, method: str, when=lambda *a: True) -> None:
        self._inner, self._method, self._when, self.died = inner, method, when, False

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if name != self._method:
            return attr

        def call(*args, **kwargs):
            if not self.died and self._when(*args):
                self.died = True
                raise RuntimeError("consumer died")
            return attr(*args, **kwargs)
        return call


def _died(port: str, method: str, when=lambda *a: True):
    """A built store, then a change of some documents whose layer-0 reconcile died at ``method``
    of ``port``; returns the engine, the message and the outbox entry left."""
    engine = replace(make_engine(), queue=RecordingQueue())
    docs = synthetic_docs(30)
    ingest(engine, docs)
    resummarize.drain(engine)
    ingest(engine, [replace(d, text=d.text + " Another closing sentence about rivers.") for d in docs[:12]])
    setattr(engine, port, Dies(getattr(engine, port), method, when))
    _, message = engine.queue.receive(1)[0]
    try:
        resummarize.reconcile(engine, message)
    except RuntimeError:
        pass
    assert getattr(engine, port).died
    setattr(engine, port, getattr(engine, port)._inner)
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


def test_after_a_write_that_never_landed_the_old_summaries_stay_and_no_new_one_gets_a_vector():
    engine, message, key, entry = _died("graph", "apply_region")
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
