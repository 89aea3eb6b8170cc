"""Local (embedded, no-cloud) adapters: filesystem blobs, SQLite graph, FAISS vectors,
in-process queue. Imported lazily, so using one does not load the others' libraries (faiss)."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "FsBlobStore": ".blob_fs",
    "SqliteGraphStore": ".graph_sqlite",
    "FaissVectorIndex": ".vector_faiss",
    "LocalQueue": ".queue_local",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name], __name__), name)
