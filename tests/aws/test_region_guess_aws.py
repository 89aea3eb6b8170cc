"""A region's write on DynamoDB tried first on the likely state of the summaries' refs one layer
up (adapters.aws.region_dynamodb.apply_region): when the guess holds, the write is one
TransactWriteItems and no read; when it does not (a replaced summary never placed in a segment
above, a new summary whose ref is a tombstone), its strict conditions refuse it, the refs are
read and the write goes as it always did, to the same state."""

from __future__ import annotations

import pytest

from aws_helpers import dynamodb_calls
from eragraph.domain.model import Node, NodeRef, RefState, RegionChange, Segment


@pytest.fixture
def store(small_graph_store):
    return small_graph_store


def node(node_id: str, layer: int, code: int, children: tuple = ()) -> Node:
    return Node(node_id=node_id, layer=layer, text=f"text of {node_id}", tokens=3, code=code, children=children)


def built(store, old_in_segment: bool) -> None:
    """Layer 0: a0, a1 in segment g0 summarized by s-old (layer 1), which is (when
    ``old_in_segment``) a member of segment g1 summarized by t (layer 2)."""
    store.put_nodes([node("a0", 0, 1), node("a1", 0, 2), node("s-old", 1, 5, ("a0", "a1")), node("t", 2, 5)])
    store.apply_region(RegionChange(layer=0, expected=(RefState("a0", 1), RefState("a1", 2)),
                                    assign=(("a0", "g0"), ("a1", "g0")), add=(Segment("g0", 0, ("a0", "a1"), "s-old"),)))
    if old_in_segment:
        store.apply_region(RegionChange(layer=1, expected=(RefState("s-old", 5),), assign=(("s-old", "g1"),),
                                        add=(Segment("g1", 1, ("s-old",), "t"),)))


def recut(store, new_id: str = "s-new") -> RegionChange:
    """a2 joins: g0 is replaced by g0' summarized by ``new_id``."""
    store.put_nodes([node("a2", 0, 3)])
    store.put_nodes([node(new_id, 1, 6, ("a0", "a1", "a2"))], index=False)
    refs = {r.node_id: r for r in store.prefix_refs(0, 0, 255)}
    return RegionChange(layer=0, expected=tuple(refs[i] for i in ("a0", "a1", "a2")),
                        assign=tuple((i, "g0b") for i in ("a0", "a1", "a2")),
                        add=(Segment("g0b", 0, ("a0", "a1", "a2"), new_id),), remove=("g0",),
                        removed=(Segment("g0", 0, ("a0", "a1"), "s-old"),),
                        above_add=(NodeRef(new_id, 6),), above_remove=(NodeRef("s-old", 5),),
                        delete_removed=True, keep_texts=(("s-old", "retired:1:s-old", "text of s-old"),))


def layer_one(store) -> dict[str, RefState]:
    return {r.node_id: r for r in store.prefix_refs(1, 0, 255)}


def test_a_right_guess_is_one_transaction_and_no_read(store):
    built(store, old_in_segment=True)
    change = recut(store)
    store.sizes_and_metas([], [])  # as a reconcile begins: the layer sizes (layer 2 holds t)
    calls = dynamodb_calls(store)
    applied = store.apply_region(change)
    assert calls == ["TransactWriteItems"]
    refs = layer_one(store)
    assert refs["s-new"].live and refs["s-old"] == RefState("s-old", 5, "g1", False)  # a tombstone in g1
    assert applied.tombstoned == ("s-old",) and applied.deleted == ("s-old",)
    assert store.get_meta("retired:1:s-old") == "text of s-old" and not store.get_nodes(["s-old"])
    assert store.layer_sizes()[1] == 1


def test_a_replaced_summary_outside_any_segment_is_read_and_deleted_as_before(store):
    built(store, old_in_segment=False)  # layer 2 holds t, but s-old was never placed in a segment
    change = recut(store)
    store.sizes_and_metas([], [])
    calls = dynamodb_calls(store)
    applied = store.apply_region(change)
    assert calls == ["TransactWriteItems", "BatchGetItem", "TransactWriteItems"]  # refused, read, written
    refs = layer_one(store)
    assert "s-old" not in refs and refs["s-new"].live  # no segment names it: its ref goes
    assert applied.tombstoned == () and store.get_meta("retired:1:s-old") is None
    assert store.layer_sizes()[1] == 1


def test_a_new_summary_whose_ref_is_a_tombstone_is_counted_once(store):
    built(store, old_in_segment=True)
    change = recut(store, new_id="s-back")
    # s-back was a summary once: its ref is a tombstone a segment above still names
    store.put_nodes([node("s-back", 1, 6)])
    store.apply_region(RegionChange(layer=1, expected=(RefState("s-back", 6),), assign=(("s-back", "g1"),)))
    store.delete_nodes(["s-back"])
    store.put_nodes([node("s-back", 1, 6, ("a0", "a1", "a2"))], index=False)
    assert layer_one(store)["s-back"] == RefState("s-back", 6, "g1", False)
    before = store.layer_sizes()[1]
    store.sizes_and_metas([], [])
    calls = dynamodb_calls(store)
    store.apply_region(change)
    assert calls == ["TransactWriteItems", "BatchGetItem", "TransactWriteItems"]
    refs = layer_one(store)
    assert refs["s-back"] == RefState("s-back", 6, "g1", True) and not refs["s-old"].live
    assert store.layer_sizes()[1] == before  # s-back live again (+1), s-old a tombstone (-1)


def test_without_the_sizes_read_the_refs_are_read_first(store):
    built(store, old_in_segment=True)
    change = recut(store)
    store._last_counts = {}  # this reconcile read no sizes: nothing to guess from
    calls = dynamodb_calls(store)
    store.apply_region(change)
    assert calls == ["BatchGetItem", "TransactWriteItems"]
    assert layer_one(store)["s-old"] == RefState("s-old", 5, "g1", False)
