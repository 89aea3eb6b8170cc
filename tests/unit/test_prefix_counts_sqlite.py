"""The SQLite store's prefix counts (adapters/local/prefix_counts_sqlite): kept by triggers with
every ref write, made for a store written before them when it is opened, taken again by the
repair, and what the reconcile's walk reads the top of a layer from."""

from __future__ import annotations

import math
import sqlite3
from dataclasses import replace

from eragraph.adapters.local.graph_sqlite import SqliteGraphStore
from eragraph.domain.access import max_code
from eragraph.domain.prefix_counts import DEEP_BITS, PREFIX_BITS
from eragraph.domain.scoped import ref_count
from eragraph.services import invariants
from eragraph.services.ingest import ingest
from eragraph.services.remove import remove
from eragraph.services.resummarize import drain
from support import make_engine, synthetic_docs


def local_engine(path, **settings):
    engine = make_engine(**settings)
    return replace(engine, graph=SqliteGraphStore(path))


def drift(graph) -> list[str]:
    return [f"layer {layer}: {d}" for layer in range(6)
            for d in graph.prefix_counts_drift(layer, graph.prefix_refs(layer, 0, max_code()))]


def test_every_ref_write_keeps_the_counts_of_the_refs(tmp_path):
    engine = local_engine(tmp_path / "graph.db")
    docs = synthetic_docs(120)
    ingest(engine, docs)
    drain(engine)
    assert drift(engine.graph) == []
    held = engine.graph.held_prefix_counts(0)
    assert sum(held.new) == engine.graph.layer_sizes()[0] and sum(held.old) == sum(held.new)
    # removals leave tombstones a segment still names until their reconcile; replacements too
    remove(engine, [d.doc_id for d in docs[::7]])
    assert drift(engine.graph) == []
    drain(engine)
    ingest(engine, synthetic_docs(30, seed=3, prefix="more"))
    assert drift(engine.graph) == []
    drain(engine)
    report = invariants.check(engine)  # checks each layer's counts too
    assert report.ok, report.violations[:3]
    assert drift(engine.graph) == []


def test_a_store_written_before_the_counts_gets_them_when_opened(tmp_path):
    path = tmp_path / "graph.db"
    engine = local_engine(path)
    ingest(engine, synthetic_docs(80))
    drain(engine)
    engine.graph.close()
    conn = sqlite3.connect(path)  # as an older eragraph left it: no table, no triggers, no mark
    for name in ("refs_prefix_insert", "refs_prefix_delete", "refs_prefix_update"):
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("DROP TABLE prefix_counts")
    conn.execute("DROP TABLE prefix_counts_deep")
    conn.execute("DELETE FROM store_info WHERE key = 'prefix_counts_bits'")
    conn.commit()
    conn.close()
    engine = replace(engine, graph=SqliteGraphStore(path))
    assert drift(engine.graph) == [] and sum(engine.graph.held_prefix_counts(0).new) == 80
    ingest(engine, synthetic_docs(10, seed=4, prefix="late"))
    drain(engine)
    assert drift(engine.graph) == []


def test_the_repair_takes_the_counts_again(tmp_path):
    engine = local_engine(tmp_path / "graph.db")
    ingest(engine, synthetic_docs(60))
    drain(engine)
    with engine.graph._write() as conn:
        conn.execute("UPDATE prefix_counts SET live = live + 5 WHERE layer = 0")
    assert drift(engine.graph)
    engine.graph.repair_layer_counts()
    assert drift(engine.graph) == []
    with engine.graph._write() as conn:  # the deep level alone
        conn.execute("UPDATE prefix_counts_deep SET old = old + 1 WHERE layer = 0")
    assert drift(engine.graph) and all(d.startswith("layer 0: deep group") for d in drift(engine.graph))
    engine.graph.repair_layer_counts()
    assert drift(engine.graph) == []


class CountSpy:
    """A graph store whose count_refs calls are recorded as the depth of the group asked, and
    its held_prefix_counts reads counted."""

    def __init__(self, inner, n_bits: int):
        self._inner, self._bits, self.depths, self.held = inner, n_bits, [], 0
        if hasattr(inner, "held_prefix_counts"):
            self.held_prefix_counts = self._held

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def _held(self, layer, codes=()):
        self.held += 1
        return self._inner.held_prefix_counts(layer, codes)

    def count_refs(self, layer, lo, hi, cap=None):
        self.depths.append(self._bits - int(math.log2(hi - lo + 1)))
        return self._inner.count_refs(layer, lo, hi, cap)


def test_the_walk_takes_the_top_of_a_layer_from_the_counts(tmp_path):
    docs, one = synthetic_docs(400), synthetic_docs(1, seed=9, prefix="one")
    plans = {}
    for name, engine in (("memory", make_engine()), ("sqlite", local_engine(tmp_path / "graph.db"))):
        ingest(engine, docs)
        drain(engine)
        spy = CountSpy(engine.graph, engine.settings.n_planes)
        engine = replace(engine, graph=spy)
        ingest(engine, one)
        drain(engine)
        plans[name] = (spy.depths, spy.held, {layer: engine.graph.get_segments(layer) for layer in range(4)})
    memory_depths, sqlite_depths = plans["memory"][0], plans["sqlite"][0]
    assert [d for d in memory_depths if d <= PREFIX_BITS]  # the walk does ask the top of layer 0
    assert plans["sqlite"][1] > 0  # the counts were read ...
    assert [d for d in sqlite_depths if d <= PREFIX_BITS] == []  # ... and answered the top
    assert plans["memory"][2] == plans["sqlite"][2]  # the same plan either way


def test_the_walk_takes_its_path_below_the_top_from_the_deep_counts(tmp_path):
    """A layer whose 8-bit groups hold more than S_max refs: the walk goes on below them. The
    SQLite store answers every count of the changed code's path down to DEEP_BITS from the deep
    counts read with the layer's (16 of the code's 20 bits), and the plan is the one the
    memory store's counts give."""
    settings = {"n_planes": 20, "s_min": 2, "s_max": 3}
    docs, one = synthetic_docs(1500), synthetic_docs(2, seed=9, prefix="one")
    plans = {}
    for name, engine in (("memory", make_engine(**settings)),
                         ("sqlite", local_engine(tmp_path / "graph.db", **settings))):
        ingest(engine, docs)
        drain(engine)
        spy = CountSpy(engine.graph, engine.settings.n_planes)
        engine = replace(engine, graph=spy)
        for doc in one:
            ingest(engine, [doc])
            drain(engine)
        plans[name] = (spy.depths, {layer: engine.graph.get_segments(layer) for layer in range(5)}, spy.held)
        assert invariants.check(engine).ok
    memory_depths, sqlite_depths = plans["memory"][0], plans["sqlite"][0]
    assert [d for d in memory_depths if d > PREFIX_BITS]  # the walk goes below the top ...
    assert plans["sqlite"][2] > 0 and [d for d in sqlite_depths if d <= DEEP_BITS] == []  # ... SQLite's counts answer it
    assert plans["memory"][1] == plans["sqlite"][1]
    # the deep counts read are the refs' own
    graph, n_bits = engine.graph, engine.settings.n_planes
    refs = graph.prefix_refs(0, 0, max_code())
    codes = [refs[0].code, refs[len(refs) // 2].code]
    held = graph.held_prefix_counts(0, codes)
    assert held.deep_depth == DEEP_BITS and len(held.deep) == len({c >> (n_bits - PREFIX_BITS) for c in codes})
    for code in codes:
        for depth in range(PREFIX_BITS + 1, DEEP_BITS + 1):
            prefix = code >> (n_bits - depth)
            inside = [r for r in refs if r.code >> (n_bits - depth) == prefix]
            assert held.count(prefix, depth, None) == ref_count(inside, None, False)


def test_deep_counts_are_not_taken_from_a_store_whose_triggers_do_not_keep_them(tmp_path):
    """An older eragraph that opens the file makes its own triggers, which keep only the top
    level: the deep rows are stale from then on, and a reader that has the store open takes
    the top level alone."""
    engine = local_engine(tmp_path / "graph.db", n_planes=20)
    ingest(engine, synthetic_docs(60))
    drain(engine)
    code = engine.graph.prefix_refs(0, 0, max_code())[0].code
    assert engine.graph.held_prefix_counts(0, [code]).deep
    with engine.graph._write() as conn:  # the mark an older eragraph's triggers leave
        conn.execute("UPDATE store_info SET value = '20/1' WHERE key = 'prefix_counts_bits'")
    held = engine.graph.held_prefix_counts(0, [code])
    assert not held.deep and sum(held.new) == 60


def test_the_counts_follow_random_ref_writes_in_every_partition_and_layer(tmp_path):
    """Port writes at random: chunks put (some in an access partition, index 1, whose codes the
    counts leave out), deleted (tombstones where a segment names them), assigned and taken
    out of segments, a node put again in another layer; the counts always equal the refs'."""
    import random

    from eragraph.domain.lsh import draw_hyperplanes
    from eragraph.domain.model import Node, RegionChange, Segment

    graph = SqliteGraphStore(tmp_path / "graph.db")
    n_bits = 10
    graph.put_lsh(draw_hyperplanes("t", 8, n_bits, seed=1))
    rnd = random.Random(5)
    alive: list[str] = []
    for step in range(300):
        kind = rnd.random()
        if kind < 0.45 or not alive:
            i = f"n{step}"
            code = rnd.getrandbits(n_bits) | ((1 << n_bits) if rnd.random() < 0.2 else 0)
            graph.put_nodes([Node(i, rnd.choice([0, 0, 1]), "t", 1, code)])
            alive.append(i)
        elif kind < 0.6:
            graph.delete_nodes([alive.pop(rnd.randrange(len(alive)))])
        elif kind < 0.7:  # put again in another layer, under another code
            i = rnd.choice(alive)
            graph.put_nodes([Node(i, 2, "t", 1, rnd.getrandbits(n_bits))])
        else:  # a region of layer 0: its refs into one segment (or out of theirs), tombstones dropped
            refs = graph.prefix_refs(0, 0, max_code())
            if not refs:
                continue
            live = [r.node_id for r in refs if r.live]
            sid = f"s{step}" if rnd.random() < 0.7 else None
            graph.apply_region(RegionChange(
                layer=0, expected=tuple(refs), assign=tuple((i, sid) for i in live),
                drop=tuple(r.node_id for r in refs if not r.live),
                add=(Segment(sid, 0, tuple(live), f"sum{step}"),) if sid and live else (),
                remove=tuple(sorted({r.seg for r in refs if r.seg}))))
        assert drift(graph) == [], step
