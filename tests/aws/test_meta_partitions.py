"""The DynamoDB store's metadata spread over partitions (adapters.aws.meta_dynamodb.meta_partition):
the keys the services really write land on the partitions of their kind and shard, every
listing the services make finds exactly the keys a scan of the whole table finds, and one
shard's reconcile reads one partition."""

from __future__ import annotations

import pytest

from aws_helpers import dynamodb_calls
from eragraph.adapters.aws.meta_dynamodb import META_SHARDS, meta_partition, meta_partitions
from eragraph.domain.model import applying_key
from eragraph.services import followup
from eragraph.services.announce import dirty_key
from eragraph.services.resummarize import outbox_key, retired_key, swept_key


def service_keys() -> list[str]:
    """Keys of every kind, made by the functions the services write them with."""
    keys = ["settings"]
    for layer in range(4):
        keys += [dirty_key(layer, None), swept_key(layer), applying_key(layer, f"t{layer}"),
                 outbox_key(layer, None, f"w{layer}")]
        keys += [dirty_key(layer, g) for g in range(0, 20, 3)]
        keys += [outbox_key(layer, g, f"tok{g}") for g in range(0, 20, 5)]
        keys += [retired_key(layer, f"node-{layer}-{i}") for i in range(5)]
    keys += [followup.PREFIX + f"op{i}" for i in range(6)]
    return keys


def test_each_kind_spreads_over_its_shards_and_layers_share_them():
    assert meta_partition("settings") == "META"
    assert meta_partition(dirty_key(0, 5)) == meta_partition(dirty_key(3, 5)) == "META#dirty#5"
    assert meta_partition(dirty_key(2, 21)) == f"META#dirty#{21 % META_SHARDS}"
    assert meta_partition(dirty_key(2, None)) == "META#dirty#all"
    assert meta_partition(outbox_key(1, 7, "x")) == "META#outbox#7"
    assert meta_partition(outbox_key(1, None, "x")) == "META#outbox#all"
    assert meta_partition(applying_key(3, "x")) == "META#applying"
    assert meta_partition(swept_key(3)) == "META#swept"
    # an insert's markers of 16 groups go to 16 partitions (they all went to META before)
    assert len({meta_partition(dirty_key(0, g)) for g in range(16)}) == 16
    retired = {meta_partition(retired_key(1, f"n{i}")) for i in range(400)}
    assert len(retired) == META_SHARDS  # node ids hash over all shards
    # the outbox of one shard's reconcile is one partition
    assert meta_partitions(outbox_key(2, 7)) == ["META#outbox#7"]
    assert len(meta_partitions("dirty:")) == META_SHARDS + 1


@pytest.fixture
def store(small_graph_store):
    return small_graph_store


def test_every_listing_the_services_make_finds_what_a_scan_finds(store):
    keys = service_keys()
    for i, key in enumerate(keys):
        store.put_meta(key, {"i": i})
    stored = {i.SK[len("KEY#"):]: i.PK for i in store.Item.scan() if i.SK.startswith("KEY#")}
    assert set(stored) == set(keys)
    assert all(pk == meta_partition(k) for k, pk in stored.items())
    assert len(set(stored.values())) >= 25  # spread, not one META partition
    prefixes = ["", "dirty:", "followup:", "outbox:", "retired:", "applying:", "swept:", "settings"]
    for layer in range(5):
        prefixes += [f"dirty:{layer}:", f"applying:{layer}:", f"outbox:{layer}:", f"retired:{layer}:"]
        prefixes += [outbox_key(layer, g) for g in (0, 5, 10, 15, 17)]
    for prefix in prefixes:
        assert store.meta_keys(prefix) == sorted(k for k in keys if k.startswith(prefix)), prefix
    for key in keys[::3]:
        assert store.get_meta(key) == {"i": keys.index(key)}
        store.delete_meta(key)
        assert store.get_meta(key) is None
    assert store.meta_keys("") == sorted(set(keys) - set(keys[::3]))


def test_a_reconciles_state_is_one_query_of_the_counters_and_one_of_its_shards_outbox_when_flagged(store):
    # the marker, the swept stamp and the applying marks have their copies in COUNT, beside
    # the layer counters, and each outbox entry a flag there: one Query reads them all; the
    # shard's outbox entries come whole from one Query of their partition (no read per entry),
    # made only when a flag says the shard holds one
    from eragraph.adapters.aws.meta_dynamodb import SHADOW

    calls = dynamodb_calls(store)
    store.put_meta(outbox_key(1, 6, "c"), {"made": []})  # another shard's
    calls.clear()
    assert store.sizes_and_metas([dirty_key(1, 5)], [outbox_key(1, 5), "applying:1:"])[1] == {}
    assert calls == ["Query"]  # no entry of shard 5 flagged: its partition is not read
    store.put_meta(dirty_key(1, 5), 10.0)
    store.put_meta(swept_key(1), 20.0)
    store.put_meta(applying_key(1, "t"), 30.0)
    store.put_meta(applying_key(2, "u"), 31.0)  # another layer's
    for token in ("a", "b"):
        store.put_meta(outbox_key(1, 5, token), {"made": [[token, 1]]})
    copies = {i.SK: i.value for i in store.Item.query("COUNT") if i.SK.startswith(SHADOW)}
    assert set(copies) == {SHADOW + k for k in (dirty_key(1, 5), swept_key(1), applying_key(1, "t"),
                                                applying_key(2, "u"), outbox_key(1, 5, "a"), outbox_key(1, 5, "b"),
                                                outbox_key(1, 6, "c"))}
    assert copies[SHADOW + outbox_key(1, 5, "a")] == "true"  # a flag: the entry's value stays in its partition
    calls.clear()
    sizes, held = store.sizes_and_metas([dirty_key(1, 5), swept_key(1)], [outbox_key(1, 5), "applying:1:"])
    assert calls == ["Query", "Query"]
    assert held == {dirty_key(1, 5): 10.0, swept_key(1): 20.0, applying_key(1, "t"): 30.0,
                    outbox_key(1, 5, "a"): {"made": [["a", 1]]}, outbox_key(1, 5, "b"): {"made": [["b", 1]]}}
    # a whole-layer pass reads every shard's entries of the layer
    assert set(store.sizes_and_metas([], ["outbox:1:"])[1]) == {outbox_key(1, s, t) for s, t in ((5, "a"), (5, "b"), (6, "c"))}
    # a copy goes with its key, whichever way the key is deleted
    store.delete_meta_if_older(dirty_key(1, 5), 15.0)
    store.delete_meta(applying_key(1, "t"))
    store.write_meta([], [swept_key(1), outbox_key(1, 5, "a")])
    store.delete_meta(outbox_key(1, 5, "b"))
    store.write_meta([], [outbox_key(1, 6, "c")], clear=[(dirty_key(1, 5), 15.0)])
    assert {i.SK for i in store.Item.query("COUNT") if i.SK.startswith(SHADOW)} == {SHADOW + applying_key(2, "u")}
    calls.clear()
    assert store.sizes_and_metas([dirty_key(1, 5), swept_key(1)], [outbox_key(1, 5), "applying:1:"])[1] == {}
    assert calls == ["Query"]


def test_a_regions_records_are_one_batch_get_whatever_their_kind(store):
    from eragraph.domain.model import Node, RefState, RegionChange, Segment

    store.put_nodes([Node(node_id=f"n{i}", layer=0, text=f"t{i}", tokens=1, code=i) for i in range(3)])
    read = tuple(RefState(f"n{i}", i, None, True) for i in range(3))
    store.apply_region(RegionChange(layer=0, expected=read, assign=(("n0", "sg"), ("n1", "sg")),
                                    add=(Segment("sg", 0, ("n0", "n1"), "sum-x"),)))
    store.put_meta(retired_key(0, "n9"), "kept")
    calls = dynamodb_calls(store)
    segs, nodes, metas = store.read_region(0, ["sg"], ["n0", "n1", "n2"], [retired_key(0, "n9"), retired_key(0, "n8")])
    assert calls == ["BatchGetItem"]
    assert segs["sg"].members == ("n0", "n1") and sorted(nodes) == ["n0", "n1", "n2"]
    assert metas == {retired_key(0, "n9"): "kept"}


def test_a_change_record_and_a_markers_clear_are_one_transaction_unless_the_marker_was_set_again(store):
    from eragraph.adapters.aws.meta_dynamodb import SHADOW

    calls = dynamodb_calls(store)
    store.put_meta(dirty_key(0, 3), 10.0)
    store.put_meta(outbox_key(0, 3, "t"), {"made": []})
    calls.clear()
    store.write_meta([("change:1:a", {"kind": "resummarize"})], [outbox_key(0, 3, "t")], clear=[(dirty_key(0, 3), 20.0)])
    assert calls == ["TransactWriteItems"]
    assert store.meta_keys("dirty:") == [] and store.meta_keys("outbox:") == []
    assert not [i for i in store.Item.query("COUNT") if i.SK.startswith(SHADOW)]  # its copy went with it
    store.put_meta(dirty_key(0, 3), 30.0)  # set again after the reconcile began: it stays
    calls.clear()
    store.write_meta([("change:1:b", {"kind": "resummarize"})], [], clear=[(dirty_key(0, 3), 20.0)])
    # refused, then apart: the batch, and delete_meta_if_older (refused again; the marker read: a
    # stamped one, set again since, stays)
    assert calls == ["TransactWriteItems", "BatchWriteItem", "TransactWriteItems", "GetItem"]
    assert store.get_meta("change:1:b") == {"kind": "resummarize"} and store.get_meta(dirty_key(0, 3)) == 30.0
