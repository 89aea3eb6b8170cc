"""Registries of the adapters that run the port contract tests.

Each registry maps a backend name to an ``AdapterFactory``. The contract conftest parametrizes
every contract test over the names registered when the tests are collected, so another test
plugin can add a backend before collection::

    from tests.contract.factories import GRAPH_STORE_FACTORIES, AdapterFactory
    GRAPH_STORE_FACTORIES["dynamodb"] = AdapterFactory(
        make=lambda workdir: DynamoGraphStore(table=f"t-{workdir.name}"),
        persistent=True, context=moto.mock_aws)

``make(workdir)`` builds an adapter; ``workdir`` is a fresh folder per test. A *persistent*
factory called again with the same ``workdir`` returns a second handle on the same data (what
the reopen and concurrent-writer tests need). ``context`` (optional) returns a context manager
kept open for the whole test (e.g. moto's ``mock_aws``). ``close`` releases a handle.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eragraph.adapters.memory.blob_memory import MemoryBlobStore
from eragraph.adapters.memory.graph_memory import MemoryGraphStore
from eragraph.adapters.memory.queue_memory import MemoryQueue
from eragraph.adapters.memory.vector_memory import MemoryVectorIndex

CONTRACT_DIM = 32  # vector dimension used by the vector index contract


def _close(adapter: Any) -> None:
    close = getattr(adapter, "close", None)
    if callable(close):
        close()


@dataclass(frozen=True)
class AdapterFactory:
    make: Callable[[Path], Any]
    persistent: bool = False
    close: Callable[[Any], None] = field(default=_close)
    context: Callable[[], AbstractContextManager] = field(default=nullcontext)


def _sqlite_graph(workdir: Path) -> Any:
    from eragraph.adapters.local.graph_sqlite import SqliteGraphStore

    return SqliteGraphStore(workdir / "graph.db")


def _faiss_vectors(workdir: Path) -> Any:
    from eragraph.adapters.local.vector_faiss import FaissVectorIndex

    return FaissVectorIndex(workdir / "vectors", CONTRACT_DIM)


def _faiss_ivf_vectors(workdir: Path) -> Any:
    """The IVF shape from the first vector on (it retrains as the test's data grows), scanning
    every bucket: exact, so the same brute-force reference holds. Proves the IVF index keeps
    every guarantee of the port; its approximation is measured in the bench, not here."""
    from eragraph.adapters.local.vector_faiss import FaissVectorIndex

    return FaissVectorIndex(workdir / "vectors", CONTRACT_DIM, ivf_min=1, nprobe_fraction=1.0)


def _fs_blobs(workdir: Path) -> Any:
    from eragraph.adapters.local.blob_fs import FsBlobStore

    return FsBlobStore(workdir / "blobs")


def _local_queue(workdir: Path) -> Any:
    from eragraph.adapters.local.queue_local import LocalQueue

    return LocalQueue()


def _memory_entities(workdir: Path) -> Any:
    from eragraph.adapters.memory.entity_memory import MemoryEntityStore

    return MemoryEntityStore()


def _sqlite_entities(workdir: Path) -> Any:
    from eragraph.adapters.local.entity_sqlite import SqliteEntityStore

    return SqliteEntityStore(workdir / "entities.sqlite")


GRAPH_STORE_FACTORIES: dict[str, AdapterFactory] = {
    "memory": AdapterFactory(lambda workdir: MemoryGraphStore()),
    "sqlite": AdapterFactory(_sqlite_graph, persistent=True),
}
VECTOR_INDEX_FACTORIES: dict[str, AdapterFactory] = {
    "memory": AdapterFactory(lambda workdir: MemoryVectorIndex()),
    "faiss": AdapterFactory(_faiss_vectors, persistent=True),
    "faiss-ivf": AdapterFactory(_faiss_ivf_vectors, persistent=True),
}
BLOB_STORE_FACTORIES: dict[str, AdapterFactory] = {
    "memory": AdapterFactory(lambda workdir: MemoryBlobStore()),
    "fs": AdapterFactory(_fs_blobs, persistent=True),
}
QUEUE_FACTORIES: dict[str, AdapterFactory] = {
    "memory": AdapterFactory(lambda workdir: MemoryQueue()),
    "local": AdapterFactory(_local_queue),
}
ENTITY_STORE_FACTORIES: dict[str, AdapterFactory] = {
    "memory": AdapterFactory(_memory_entities),
    "sqlite": AdapterFactory(_sqlite_entities, persistent=True),
}

# fixture name -> registry (read by tests/contract/conftest.py at collection time)
REGISTRIES: dict[str, dict[str, AdapterFactory]] = {
    "graph_store": GRAPH_STORE_FACTORIES,
    "vector_index": VECTOR_INDEX_FACTORIES,
    "blob_store": BLOB_STORE_FACTORIES,
    "queue": QUEUE_FACTORIES,
    "entity_store": ENTITY_STORE_FACTORIES,
}

# pytest imports this folder as package "contract" (tests/ has no __init__.py) while plugins may
# import "tests.contract.factories": make both names one module, hence one set of registries.
for _alias in ("contract.factories", "tests.contract.factories"):
    sys.modules.setdefault(_alias, sys.modules[__name__])
