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
from ..services.engine import Engine, open_settings
from .providers import attach_query_side, make_embedder, make_generator, make_summarizer, make_tokenizer


def tenant_store(store: Path, tenant: str) -> Path:
    """The directory of ``tenant``'s store inside ``store`` (the default tenant: ``store``)."""
    return store / "tenants" / tenant if tenant else store


def build_local_engine(store: Path, settings: Settings, tenant: str = "") -> Engine:
    from ..adapters.local.blob_fs import FsBlobStore
    from ..adapters.local.entity_sqlite import SqliteEntityStore
    from ..adapters.local.graph_sqlite import SqliteGraphStore
    from ..adapters.local.lexical_fts5 import Fts5LexicalIndex
    from ..adapters.local.queue_local import LocalQueue
    from ..adapters.local.vector_faiss import FaissVectorIndex

    store = tenant_store(store, tenant)
    store.mkdir(parents=True, exist_ok=True)
    graph = SqliteGraphStore(store / "graph.sqlite", tenant=tenant)
    settings = open_settings(graph, settings)
    tokenizer = make_tokenizer(settings)
    embedder = make_embedder(settings, store / "embeddings.sqlite", graph)
    engine = Engine(
        settings=settings,
        graph=graph,
        vectors=FaissVectorIndex(store / "vectors", embedder.dim),
        queue=LocalQueue(),
        embedder=embedder,
        tokenizer=tokenizer,
        summarizer=make_summarizer(settings, tokenizer),
        blobs=FsBlobStore(store / "blobs"),
        generator=make_generator(settings),
        lexical=Fts5LexicalIndex(graph),
        tenant=tenant,
    )
    return attach_query_side(engine, settings, SqliteEntityStore(store / "entities.sqlite"),
                             FaissVectorIndex(store / "entity_vectors", embedder.dim))
