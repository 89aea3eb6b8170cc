"""The local profile: one store directory holds everything.

    STORE/graph.sqlite       graph store (SQLite, WAL)
    STORE/vectors/           FAISS index + id map
    STORE/blobs/             copies of ingested files (the local "bucket")
    STORE/embeddings.sqlite  embedding cache keyed by (embedder id, content hash)
    STORE/entities.sqlite    entity graph (postings, mentions, co-occurrences)
    STORE/entity_vectors/    FAISS index of entity-name (and sentence) vectors
    STORE/tenants/<id>/      a tenant's own store, laid out as above (bootstrap.tenancy)
"""

from __future__ import annotations

from pathlib import Path

from ..config import Settings
from ..services.engine import Engine
from .profile import Profile, compose


def tenant_store(store: Path, tenant: str) -> Path:
    """The directory of ``tenant``'s store inside ``store`` (the default tenant: ``store``)."""
    return store / "tenants" / tenant if tenant else store


class LocalProfile(Profile):
    """One store directory (per tenant) holds everything."""

    name = "local"

    def __init__(self, store: Path) -> None:
        self.store = Path(store)

    def root(self, tenant: str) -> Path:
        return tenant_store(self.store, tenant)

    def graph(self, tenant):
        from ..adapters.local.graph_sqlite import SqliteGraphStore

        root = self.root(tenant)
        root.mkdir(parents=True, exist_ok=True)
        return SqliteGraphStore(root / "graph.sqlite", tenant=tenant)

    def embed_cache(self, tenant):
        return self.root(tenant) / "embeddings.sqlite"

    def vectors(self, dim, tenant):
        from ..adapters.local.vector_faiss import FaissVectorIndex

        return FaissVectorIndex(self.root(tenant) / "vectors", dim)

    def queue(self, tenant):
        from ..adapters.local.queue_local import LocalQueue

        return LocalQueue()

    def blobs(self, tenant):
        from ..adapters.local.blob_fs import FsBlobStore

        return FsBlobStore(self.root(tenant) / "blobs")

    def lexical(self, graph, vectors):
        from ..adapters.local.lexical_fts5 import Fts5LexicalIndex

        return Fts5LexicalIndex(graph)

    def entity_store(self, graph, tenant):
        from ..adapters.local.entity_sqlite import SqliteEntityStore

        return SqliteEntityStore(self.root(tenant) / "entities.sqlite")

    def entity_vectors(self, dim, tenant):
        from ..adapters.local.vector_faiss import FaissVectorIndex

        return FaissVectorIndex(self.root(tenant) / "entity_vectors", dim)


def build_local_engine(store: Path, settings: Settings, tenant: str = "") -> Engine:
    return compose(LocalProfile(store), settings, tenant)
