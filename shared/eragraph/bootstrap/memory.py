"""The memory profile: every port in memory (tests, demos, and the empty engine a read path gets
for a tenant that is not registered: bootstrap.tenancy)."""

from __future__ import annotations

from ..config import Settings
from ..services.engine import Engine, open_settings
from .providers import attach_query_side, make_embedder, make_generator, make_summarizer, make_tokenizer


def build_memory_engine(settings: Settings, tenant: str = "") -> Engine:
    from ..adapters.memory import MemoryBlobStore, MemoryGraphStore, MemoryLexicalIndex, MemoryQueue, MemoryVectorIndex
    from ..adapters.memory_entity import MemoryEntityStore

    graph = MemoryGraphStore(tenant)
    settings = open_settings(graph, settings)
    tokenizer = make_tokenizer(settings)
    embedder = make_embedder(settings, None, graph)
    engine = Engine(settings=settings, graph=graph, vectors=MemoryVectorIndex(), queue=MemoryQueue(),
                    embedder=embedder, tokenizer=tokenizer,
                    summarizer=make_summarizer(settings, tokenizer), blobs=MemoryBlobStore(),
                    generator=make_generator(settings), lexical=MemoryLexicalIndex(graph), tenant=tenant)
    return attach_query_side(engine, settings, MemoryEntityStore(), MemoryVectorIndex())
