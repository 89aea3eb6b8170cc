"""A scoped reconcile planned from counts that an ingest changes before the region is read.

The plan decides, from capped counts, which groups of the layer to re-cut (domain.scoped), then
reads each region and writes it on the condition that its refs are unchanged. An ingest that
lands between the counts and the read changes no old count, so the region passes, and its cut
is written from the stale counts: a partition the rule does not give, with a segment reaching
across a group the rule keeps apart. The next reconcile whose region meets that segment
re-cut the region and removed it, leaving the segment's other members in no segment (the race
the concurrent-consumers fault test met about once in fifty runs). Such a region is now
refused (domain.scoped.OutsideRegion); refused again from fresh counts, the reconcile re-cuts
the layer whole.

Each case runs the reconcile of one ingest's change with a second ingest landing just before
its k-th graph-store call, for every k; the second ingest's own messages are delivered after.
A control with the check taken out finds the orphans, so the cases do reach the race."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import RecordingQueue, make_engine, synthetic_docs

from eragraph.adapters.local.graph_sqlite import SqliteGraphStore
from eragraph.domain.scoped import OutsideRegion
from eragraph.services import invariants, resummarize
from eragraph.services.ingest import ingest

SEEDS = (1, 7, 14)  # layers of 6 documents where a carried half is turned by one more chunk


class Interleaved:
    """The graph store, running ``interloper()`` just before its ``at``-th call."""

    def __init__(self, inner, at: int, interloper) -> None:
        self._inner, self._at, self._interloper, self.calls = inner, at, interloper, 0

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            self.calls += 1
            if self.calls == self._at:
                self._interloper()
            return attr(*args, **kwargs)

        return call


def _engine(kind: str, path):
    engine = replace(make_engine(), queue=RecordingQueue())
    return engine if kind == "memory" else replace(engine, graph=SqliteGraphStore(path / "graph.db"))


def _deliver(engine) -> None:
    while got := engine.queue.receive(100):
        for _receipt, message in got:
            resummarize.reconcile(engine, message)
        engine.queue.ack([receipt for receipt, _ in got])


def _case(kind: str, path, seed: int, at: int):
    """The invariants after the interleaving at call ``at`` (None: the reconcile made fewer calls)."""
    engine = _engine(kind, path)
    ingest(engine, synthetic_docs(6, seed))
    resummarize.drain(engine)
    first, second = synthetic_docs(2, seed + 100, prefix="x")
    engine.queue.messages.clear()
    ingest(engine, [first])
    messages = [m for m in engine.queue.messages if m.layer == 0]
    while engine.queue.receive(100):  # taken: delivered below, one at a time
        pass
    inner = engine.graph
    graph = Interleaved(inner, at, lambda: ingest(replace(engine, graph=inner), [second]))
    for message in messages:
        resummarize.reconcile(replace(engine, graph=graph), message)
    if graph.calls < at:
        return None
    _deliver(engine)
    resummarize.drain(engine)
    return invariants.check(engine)


def _violations(kind: str, path) -> list[str]:
    found = []
    for seed in SEEDS:
        at = 1
        while (report := _case(kind, path / f"{seed}-{at}", seed, at)) is not None:
            found += [f"seed {seed}, call {at}: {v}" for v in report.violations]
            at += 1
    return found


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_an_ingest_between_the_plan_and_the_region_leaves_no_node_in_no_segment(kind, tmp_path, monkeypatch):
    refused, streamed = [], []
    check, stream = resummarize.check_inside, resummarize.stream_regions

    def counted_check(layer, region, removed):
        try:
            check(layer, region, removed)
        except OutsideRegion:
            refused.append(layer)
            raise

    def counted_stream(*args, **kwargs):
        streamed.append(1)
        return stream(*args, **kwargs)

    monkeypatch.setattr(resummarize, "check_inside", counted_check)
    monkeypatch.setattr(resummarize, "stream_regions", counted_stream)
    assert _violations(kind, tmp_path) == []
    assert refused and streamed  # the race was met, and healed by a whole pass


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_without_the_check_the_same_interleavings_leave_nodes_in_no_segment(kind, tmp_path, monkeypatch):
    monkeypatch.setattr(resummarize, "check_inside", lambda *args: None)
    found = _violations(kind, tmp_path)
    assert any("is in no segment" in v for v in found), found


def test_a_plan_refused_again_from_fresh_counts_falls_back_to_a_whole_pass(monkeypatch):
    """A stored partition the rule does not give (not a race) has a planned region's segment
    reach beyond it however often it is planned: after the second refusal the reconcile re-cuts
    the layer whole (a streamed pass, whose regions may reach beyond) instead of giving up."""
    engine = replace(make_engine(), queue=RecordingQueue())
    ingest(engine, synthetic_docs(12, 3))
    resummarize.drain(engine)
    refused: list[int] = []

    def always_outside(layer, region, removed):
        refused.append(layer)
        raise OutsideRegion(f"layer {layer}: planted")

    monkeypatch.setattr(resummarize, "check_inside", always_outside)
    engine.queue.messages.clear()
    ingest(engine, synthetic_docs(1, 99, prefix="y"))
    [message] = [m for m in engine.queue.messages if m.layer == 0]
    while engine.queue.receive(100):
        pass
    report = resummarize.reconcile(engine, message)
    assert refused == [0, 0]  # planned twice, then not planned
    assert report.segments_resummarized
    assert not engine.graph.meta_keys("applying:0:")  # the whole pass's streaming mark is cleared
    monkeypatch.undo()
    _deliver(engine)
    resummarize.drain(engine)
    assert invariants.check(engine).ok
