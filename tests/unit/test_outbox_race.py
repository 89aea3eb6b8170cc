"""Two consumers interleaved at a chosen point: a summary id that comes back (the same members
make the same id) while an outbox entry that names it among the summaries gone is finished.

A reconcile removes a summary (its entry lists it as gone); the documents change back, and the
next reconcile re-makes the same summary id: it stores the node, then applies the region. A
consumer that finishes the first entry between those two steps sees the summary not live and
deletes its node. Unless the store refuses one of the two (the apply of a segment whose summary
node is missing, or the deletion of a node live meanwhile), the segment is left naming a summary
that does not exist (the race the concurrent-consumers fault test met under load). The two
store operations are held to it across adapters in tests/contract/test_graph_store.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import RecordingQueue, make_engine, synthetic_docs

from eragraph.adapters.local.graph_sqlite import SqliteGraphStore
from eragraph.services import invariants, resummarize
from eragraph.services.ingest import ingest


class FinishFirst:
    """Wraps the graph store: before its first apply_region of a region that makes one of
    ``entry``'s gone summaries live again, another consumer finishes ``entry``."""

    def __init__(self, inner, engine, key: str, entry: dict) -> None:
        self._inner, self._engine, self._key, self._entry = inner, engine, key, entry
        self.interleaved = False

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def apply_region(self, change):
        gone = {i for i, _ in self._entry["gone"]}
        if not self.interleaved and gone & {r.node_id for r in change.above_add}:
            self.interleaved = True
            self._inner.put_meta(self._key, self._entry)  # the first reconcile's entry, still there
            engine = replace(self._engine, graph=self._inner)
            resummarize.finish_outbox(engine, change.layer, None)
        return self._inner.apply_region(change)


def _engine(kind: str, tmp_path):
    engine = replace(make_engine(), queue=RecordingQueue())
    if kind == "sqlite":
        engine = replace(engine, graph=SqliteGraphStore(tmp_path / "graph.db"))
    return engine


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_an_entry_finished_while_its_gone_summary_is_made_again_leaves_no_segment_without_it(kind, tmp_path):
    engine = _engine(kind, tmp_path)
    docs = synthetic_docs(30)
    ingest(engine, docs)
    resummarize.drain(engine)
    before = {seg.summary_id for seg in engine.graph.get_segments(0)}
    # a change whose reconcile removes some summaries: its outbox entry is kept as written
    entries: list = []
    real = engine.graph.apply_region

    def keep(change):
        entries.extend(m for m in change.marks if m[0].startswith(resummarize.OUTBOX))
        return real(change)

    engine.graph.apply_region = keep
    ingest(engine, [replace(d, text=d.text + " Another closing sentence about rivers.") for d in docs[:12]])
    resummarize.drain(engine)
    del engine.graph.apply_region
    gone = {i for _, e in entries for i, _ in e["gone"]}
    assert gone & before, "the change removed none of the first summaries"
    key, entry = next((k, e) for k, e in entries if {i for i, _ in e["gone"]} & before)
    # the documents change back: the same segments, the same summary ids, made again; the
    # first entry is finished by another consumer between the node's write and the apply
    wrapped = FinishFirst(engine.graph, engine, key, entry)
    engine = replace(engine, graph=wrapped)
    ingest(engine, docs[:12])
    resummarize.drain(engine)
    assert wrapped.interleaved, "no summary id came back"
    report = invariants.check(replace(engine, graph=wrapped._inner))
    assert report.ok, report.violations[:5]
