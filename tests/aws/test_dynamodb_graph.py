"""DynamoDB graph store specifics under moto: the layer counter repair racing a writer."""

from __future__ import annotations

import pytest

from contract.aws_factories import REGION, create_graph_table, fake_credentials
from eragraph.domain.model import Node


def node(node_id: str, layer: int = 0, code: int = 0) -> Node:
    return Node(node_id=node_id, layer=layer, text=f"text of {node_id}", tokens=3, code=code, doc_id="d")


@pytest.fixture
def stores():
    """Two handles on one moto table: the store under test and another writer."""
    fake_credentials()
    import boto3
    from moto import mock_aws

    from eragraph.adapters.aws.dynamodb import DynamoGraphStore

    with mock_aws():
        create_graph_table(boto3.client("dynamodb", region_name=REGION), "graph-counts")
        yield (DynamoGraphStore("graph-counts", region=REGION, code_bits=12),
               DynamoGraphStore("graph-counts", region=REGION, code_bits=12))


def drift(store, layer: int, delta: int) -> None:
    store.Item(PK="COUNT", SK=f"LAYER#{layer}").update(actions=[store.Item.version.add(delta)])


def writer_during_recount(store, other, every_time: bool = False) -> list[str]:
    """After the repair has counted layer 0 (and before it rewrites the counter), ``other``
    adds a node to layer 0: its ref and its ADD. Returns the ids added."""
    added: list[str] = []
    read = store.prefix_refs

    def prefix_refs(layer, lo, hi, limit=None):
        out = read(layer, lo, hi, limit)
        if layer == 0 and limit is None and (every_time or not added):
            added.append(f"late{len(added)}")
            other.put_nodes([node(added[-1], code=100 + len(added))])
        return out

    store.prefix_refs = prefix_refs
    return added


def test_repair_does_not_overwrite_an_add_made_meanwhile(stores):
    store, other = stores
    store.put_nodes([node(f"n{i}", code=i) for i in range(5)])
    drift(store, 0, 3)  # 8 counted, 5 live
    added = writer_during_recount(store, other)
    assert store.repair_layer_counts() == {0: -3}  # counted again after the lost condition: 6 live
    assert added == ["late0"]
    assert store.layer_sizes() == {0: 6}
    assert len(store.layer_refs(0)) == 6


def test_repair_leaves_a_counter_that_keeps_moving_to_the_next_run(stores):
    from eragraph.adapters.aws.dynamodb import COUNT_REPAIR_ATTEMPTS

    store, other = stores
    store.put_nodes([node(f"n{i}", code=i) for i in range(5)])
    drift(store, 0, 3)
    added = writer_during_recount(store, other, every_time=True)
    assert store.repair_layer_counts() == {}  # every attempt lost its condition: nothing written
    assert len(added) == COUNT_REPAIR_ATTEMPTS
    assert store.layer_sizes() == {0: 8 + len(added)}  # the writers' ADDs all stand
    store.prefix_refs = type(store).prefix_refs.__get__(store)
    assert store.repair_layer_counts() == {0: -3}
    assert store.layer_sizes() == {0: 5 + len(added)}
