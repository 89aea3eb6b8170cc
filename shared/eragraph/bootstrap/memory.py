"""The memory profile: every port in memory (tests, demos, and the empty engine a read path gets
for a tenant that is not registered: bootstrap.tenancy)."""

from __future__ import annotations

from ..config import Settings
from ..services.engine import Engine
from .profile import Profile, compose


class MemoryProfile(Profile):
    """Every port in memory."""

    name = "memory"

    def graph(self, tenant):
        from ..adapters.memory.graph_memory import MemoryGraphStore

        return MemoryGraphStore(tenant)

    def vectors(self, dim, tenant):
        from ..adapters.memory.vector_memory import MemoryVectorIndex

        return MemoryVectorIndex()

    def queue(self, tenant):
        from ..adapters.memory.queue_memory import MemoryQueue

        return MemoryQueue()

    def blobs(self, tenant):
        from ..adapters.memory.blob_memory import MemoryBlobStore

        return MemoryBlobStore()

    def lexical(self, graph, vectors):
        from ..adapters.memory.lexical_memory import MemoryLexicalIndex

        return MemoryLexicalIndex(graph)

    def entity_store(self, graph, tenant):
        from ..adapters.memory.entity_memory import MemoryEntityStore

        return MemoryEntityStore()

    def entity_vectors(self, dim, tenant):
        from ..adapters.memory.vector_memory import MemoryVectorIndex

        return MemoryVectorIndex()


def build_memory_engine(settings: Settings, tenant: str = "") -> Engine:
    return compose(MemoryProfile(), settings, tenant)
