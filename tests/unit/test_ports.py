"""The graph store's ports by what callers use: GraphStore is exactly its parts (MetaStore,
DocumentStore, StatusStore, NodeStore), no method in two of them, and every graph adapter's
class implements each part (the DynamoDB and SQLite stores are combined from one module per
part)."""

from __future__ import annotations

import pytest

from eragraph.ports.documents import DocumentStore, StatusStore
from eragraph.ports.graph import GraphStore, MetaStore, NodeStore

PARTS = (MetaStore, DocumentStore, StatusStore, NodeStore)


def _methods(protocol: type) -> set[str]:
    return {n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")}


def test_the_graph_store_is_its_parts_and_no_method_is_in_two():
    names = [n for p in PARTS for n in _methods(p)]
    assert len(names) == len(set(names))
    assert set(names) == {n for n in dir(GraphStore) if not n.startswith("_") and callable(getattr(GraphStore, n))}


@pytest.mark.parametrize("adapter", ["memory", "sqlite", "dynamodb"])
def test_every_graph_adapter_implements_every_part(adapter):
    if adapter == "memory":
        from eragraph.adapters.memory.graph_memory import MemoryGraphStore as store
    elif adapter == "sqlite":
        from eragraph.adapters.local.graph_sqlite import SqliteGraphStore as store
    else:
        pytest.importorskip("pynamodb")
        from eragraph.adapters.aws.graph_dynamodb import DynamoGraphStore as store
    for part in PARTS:
        assert not [n for n in _methods(part) if not callable(getattr(store, n, None))], part.__name__
