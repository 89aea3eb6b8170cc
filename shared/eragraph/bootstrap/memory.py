"""The memory profile: every port in memory (tests, demos, and the empty engine a read path gets
for a tenant that is not registered: bootstrap.tenancy). Its tenants are the engines
bootstrap.tenancy keeps."""

from __future__ import annotations

from typing import Any

from ..config import Settings
from ..services.engine import Engine
from .profile import Engines, Profile, compose


class MemoryProfile(Profile):
    """Every port in memory."""

    name = "memory"

    def graph(self):
        from ..adapters.memory.graph_memory import MemoryGraphStore

        return MemoryGraphStore(self.tenant)

    def vectors(self, dim):
        from ..adapters.memory.vector_memory import MemoryVectorIndex

        return MemoryVectorIndex()

    def queue(self):
        from ..adapters.memory.queue_memory import MemoryQueue

        return MemoryQueue()

    def blobs(self):
        from ..adapters.memory.blob_memory import MemoryBlobStore

        return MemoryBlobStore()

    # the data source buckets of the memory profile, by name: filled by whoever uses them
    BUCKETS: dict = {}

    def source_bucket(self, settings, name):
        if name not in self.BUCKETS:
            raise LookupError(f"no bucket {name!r}")
        return self.BUCKETS[name]

    def lexical(self, graph, vectors):
        from ..adapters.memory.lexical_memory import MemoryLexicalIndex

        return MemoryLexicalIndex(graph)

    def entity_store(self, graph):
        from ..adapters.memory.entity_memory import MemoryEntityStore

        return MemoryEntityStore()

    def entity_vectors(self, dim):
        from ..adapters.memory.vector_memory import MemoryVectorIndex

        return MemoryVectorIndex()

    # ----- tenants: the engines kept -----
    def exists(self, engines: Engines, tenant: str) -> bool:
        return engines.kept(tenant) is not None

    def tenants(self, engines: Engines) -> list[str]:
        return sorted(t for t in engines.kept_tenants() if t)

    def delete(self, engines: Engines, tenant: str) -> dict[str, Any]:
        before = counts(engines.forget(tenant))
        return {"tenant": tenant, "before": before, "after": counts(None)}


def counts(engine: Engine | None) -> dict[str, int]:
    if engine is None:
        return {"documents": 0, "vectors": 0}
    return {"documents": len(engine.graph.list_documents()), "vectors": engine.vectors.count()}


def build_memory_engine(settings: Settings, tenant: str = "") -> Engine:
    return compose(MemoryProfile(), settings, tenant)
