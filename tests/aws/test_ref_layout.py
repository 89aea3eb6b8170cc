"""The DynamoDB ref index's partitions grow with the layer (adapters.aws.ref_layout), under moto:

* a small layer is one partition: reading it whole is one Query;
* a move re-partitions a layer and every read after it returns the same refs in code order,
  with the source partitions cleaned;
* a write keyed with a layout that a move has since replaced is a conflict, re-read, and lands
  in the new layout; a move killed midway is finished by the next writer of the layer;
* a store written by the fixed layout of earlier versions (legacy) migrates online: killed
  midway, resumed, the store is digest-equal to before and answers the same queries; and a
  store created now starts on the current layout.
"""

from __future__ import annotations

import pytest
from chaos import digest, first_difference
from contract.aws_factories import REGION, create_graph_table, fake_credentials
from support import synthetic_docs

from eragraph.domain.model import Node

CODE_BITS = 12


class Killed(Exception):
    """The process dies (a Lambda timeout)."""


def node(node_id: str, layer: int = 0, code: int = 0) -> Node:
    return Node(node_id=node_id, layer=layer, text=f"text of {node_id}", tokens=3, code=code, doc_id="d")


@pytest.fixture
def stores():
    """Two handles on one moto table (two processes), with hyperplanes of the current layout."""
    fake_credentials()
    import boto3
    from moto import mock_aws

    from eragraph.adapters.aws.graph_dynamodb import DynamoGraphStore
    from eragraph.adapters.aws.ref_layout import REF_LAYOUT_VERSION

    with mock_aws():
        create_graph_table(boto3.client("dynamodb", region_name=REGION), "graph-layout")
        a = DynamoGraphStore("graph-layout", region=REGION, code_bits=CODE_BITS)
        a.Item(PK="META", SK="LSH", value="{}", version=REF_LAYOUT_VERSION).save()
        yield a, DynamoGraphStore("graph-layout", region=REGION, code_bits=CODE_BITS)


def count_queries(store) -> list[str]:
    seen: list[str] = []
    client = store.Item._get_connection().connection.client
    client.meta.events.register("before-call.dynamodb.Query", lambda params, **_: seen.append("Query"))
    return seen


def partitions(store, layer: int) -> dict[str, int]:
    found: dict[str, int] = {}
    for item in store.Item.scan():
        if item.PK.startswith(f"REF#{layer}#"):
            found[item.PK] = found.get(item.PK, 0) + 1
    return found


CODES = [(i * 2654435761) % (1 << CODE_BITS) for i in range(40)]


def test_a_small_layer_is_one_partition_and_a_move_spreads_it(stores):
    store, _ = stores
    store.put_nodes([node(f"n{i}", code=c) for i, c in enumerate(CODES)])
    assert store.layout(0).bits == 0 and list(partitions(store, 0)) == ["REF#0#b0#0"]
    queries = count_queries(store)
    refs = store.prefix_refs(0, 0, (1 << CODE_BITS) - 1)
    assert len(queries) == 1 and [r.code for r in refs] == sorted(CODES)

    assert store.move_layer(0, 4).bits == 4
    assert store.layer_sizes() == {0: 40}
    spread = partitions(store, 0)
    assert all(pk.startswith("REF#0#b4#") for pk in spread) and sum(spread.values()) == 40
    assert len(spread) > 8  # the refs now lie in many of the 16 partitions, the old one is gone
    queries.clear()
    refs = store.prefix_refs(0, 0, (1 << CODE_BITS) - 1)
    assert [r.code for r in refs] == sorted(CODES) and len(queries) == 16
    queries.clear()  # a narrow range stays on one partition
    assert [r.node_id for r in store.prefix_refs(0, CODES[3], CODES[3])] == ["n3"]
    assert len(queries) == 1
    page = store.refs_page(0, None, 7) + store.refs_page(0, (CODES[0], "n0"), 3)
    assert [r.code for r in page[:7]] == sorted(CODES)[:7]


def test_a_layer_grows_its_partitions_as_its_count_passes_each_step(stores, monkeypatch):
    from eragraph.adapters.aws import ref_layout

    store, _ = stores
    monkeypatch.setattr(ref_layout, "PART_ITEMS", 4)
    assert [ref_layout.target_bits(n) for n in (0, 15, 16, 63, 64, 256, 10 ** 6)] == [0, 0, 2, 2, 4, 6, 8]
    store.put_nodes([node(f"n{i}", code=c) for i, c in enumerate(CODES)])
    store.grow_if_due(0, 40)
    assert store.layout(0).bits == 2
    assert sorted(r.code for r in store.prefix_refs(0, 0, (1 << CODE_BITS) - 1)) == sorted(CODES)


def test_a_write_with_a_replaced_layout_is_re_read_and_lands_in_the_new_one(stores):
    store, other = stores
    store.put_nodes([node(f"n{i}", code=c) for i, c in enumerate(CODES[:10])])
    assert other.layout(0).bits == 0  # cached by the other process
    store.move_layer(0, 2)
    other.put_nodes([node("late", code=CODES[20])])
    other.delete_nodes(["n1"])
    got = {r.node_id: r.live for r in store.prefix_refs(0, 0, (1 << CODE_BITS) - 1)}
    assert got["late"] and not got.get("n1", False) and len(got) == 10
    assert store.layer_sizes() == {0: 10}
    assert all(pk.startswith("REF#0#b2#") for pk in partitions(store, 0))


def test_a_move_killed_midway_is_finished_by_the_next_writer(stores, monkeypatch):
    store, other = stores
    store.put_nodes([node(f"n{i}", code=c) for i, c in enumerate(CODES)])
    real = type(store)._update_counter
    calls = {"n": 0}

    def dies_after_two_partitions(self, layer, actions, condition):
        calls["n"] += 1
        if calls["n"] == 4:  # the claim, two partitions' progress, then the process dies
            raise Killed()
        return real(self, layer, actions, condition)

    monkeypatch.setattr(type(store), "_update_counter", dies_after_two_partitions)
    with pytest.raises(Killed):
        store.move_layer(0, 4)
    monkeypatch.setattr(type(store), "_update_counter", real)
    # the layer reads whole from its source meanwhile
    assert sorted(r.code for r in other.prefix_refs(0, 0, (1 << CODE_BITS) - 1)) == sorted(CODES)
    other.put_nodes([node("after", code=5)])  # blocked by the move: finishes it, then writes
    store.forget_layouts()  # a reader trusts its cached layout for LAYOUT_TTL seconds
    layout = store.layout(0)
    assert layout.bits == 4 and layout.moving is None
    got = store.prefix_refs(0, 0, (1 << CODE_BITS) - 1)
    assert sorted(r.node_id for r in got) == sorted([f"n{i}" for i in range(40)] + ["after"])
    assert all(pk.startswith("REF#0#b4#") for pk in partitions(store, 0))
    assert store.layer_sizes() == {0: 41}


# ---------------------------------------------------------------- a store of the earlier layout
@pytest.fixture
def legacy_engine(few_partitions, aws_engine):
    """An engine whose store is written by the fixed layout of earlier versions: hyperplanes
    without the layout version, so every layer is keyed REF#<layer>#<shard> with 2^(8 - 3 layer)
    partitions (of 4, few_partitions: the layout the suites' moto tests use)."""
    from eragraph.services.ingest import ingest
    from eragraph.services.resummarize import drain

    engine, env, fake = aws_engine
    engine.lsh()
    g = engine.graph
    g.Item(PK="META", SK="LSH").update(actions=[g.Item.version.remove()])
    g._store_current = False
    g.forget_layouts()
    ingest(engine, synthetic_docs(30))
    drain(engine)
    return engine


def test_a_legacy_store_migrates_online_killed_midway_and_resumed(legacy_engine, monkeypatch):
    from eragraph.services import invariants
    from eragraph.services.query import query

    engine = legacy_engine
    g = engine.graph
    legacy = [pk for pk in _ref_partitions(g) if "#b" not in pk]
    assert legacy and not [pk for pk in _ref_partitions(g) if "#b" in pk], "the store is not of the old layout"
    assert g.layout(0).legacy
    before = digest(engine)
    answers = [[r.id for r in query(engine, q, mode="collapsed", k=4).results] for q in ("comet telescope", "bread")]
    stats_before = g.segment_stats()

    real = type(g)._copy
    copies = {"n": 0}

    def dies_on_the_second_layer(self, layer, src):
        copies["n"] += 1
        if copies["n"] == 2:
            raise Killed()
        return real(self, layer, src)

    monkeypatch.setattr(type(g), "_copy", dies_on_the_second_layer)
    with pytest.raises(Killed):
        g.migrate_ref_layout()
    monkeypatch.setattr(type(g), "_copy", real)
    assert not g.store_current()
    # meanwhile the store reads as before: layer 0 moved, layer 1 claimed (read from its source)
    assert digest(engine) == before

    report = g.migrate_ref_layout()
    assert report["current"] and set(report["moved"]) >= {1}
    assert not [pk for pk in _ref_partitions(g) if "#b" not in pk], "legacy partitions left behind"
    after = digest(engine)
    assert after == before, first_difference(after, before)
    assert g.segment_stats() == stats_before
    assert answers == [[r.id for r in query(engine, q, mode="collapsed", k=4).results]
                       for q in ("comet telescope", "bread")]
    assert invariants.check(engine).ok
    assert g.migrate_ref_layout() == {"moved": {}, "current": True}  # idempotent


def _ref_partitions(g) -> set[str]:
    return {i.PK for i in g.Item.scan() if i.PK.startswith("REF#")}


def test_a_new_store_starts_on_the_current_layout_and_counts_its_segments(few_partitions, aws_engine):
    from eragraph.domain.segment_stats import SegmentStats
    from eragraph.services.ingest import ingest
    from eragraph.services.resummarize import drain

    engine, _, _ = aws_engine
    ingest(engine, synthetic_docs(30))
    drain(engine)
    g = engine.graph
    assert g.store_current()
    assert all("#b" in pk for pk in _ref_partitions(g))
    counted = {}
    for layer in g.layer_sizes():
        lens = [len(s.members) for s in g.get_segments(layer)]
        if lens:
            counted[layer] = SegmentStats.of(lens)
    assert counted and g.segment_stats() == counted


def test_the_reindex_migrates_a_legacy_store_as_its_first_step(legacy_engine):
    from eragraph.services import reindex

    engine = legacy_engine
    before = digest(engine)
    report = reindex.run(engine)
    assert report["layers_migrated"] and report["metrics"]["LayersMigrated"] == len(report["layers_migrated"])
    assert engine.graph.store_current()
    assert not [pk for pk in _ref_partitions(engine.graph) if "#b" not in pk]
    assert report["invariants"]["ok"], report["invariants"]
    after = digest(engine)
    assert after == before, first_difference(after, before)
    assert reindex.run(engine)["layers_migrated"] == []
