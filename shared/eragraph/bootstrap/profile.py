"""One composition over a profile. A ``Profile`` is a backend set (memory, local, aws): it makes
the storage ports of one tenant's engine and nothing else; ``compose`` builds every profile's
engine the same way: the store's recorded settings (services.engine.open_settings), the
tokenizer, the embedder (its model calls metered into the graph's ledger), the vector index at
the embedder's dimension, the summarizer and generator, then the query side (the entity graph,
the router's parser and weights: providers.attach_query_side).

A new vector or graph backend is its adapter module, the line of the profile that builds it,
and its registration in the contract tests (tests/contract)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import Settings
from ..ports.blobs import BlobStore
from ..ports.graph import GraphStore
from ..ports.lexical import LexicalIndex
from ..ports.providers import Tokenizer
from ..ports.queue import MessageQueue
from ..ports.vectors import VectorIndex
from ..services.engine import Engine, open_settings
from .providers import attach_query_side, make_embedder, make_generator, make_reranker, make_summarizer, make_tokenizer


class Profile:
    """The storage of one backend set, per tenant ("" the default tenant)."""

    name = ""

    def graph(self, tenant: str) -> GraphStore:
        raise NotImplementedError

    def settled(self, graph: GraphStore, settings: Settings) -> GraphStore:
        """The graph store once the store's settings are known (aws: with its LSH code width)."""
        return graph

    def tokenizer(self, settings: Settings) -> Tokenizer:
        return make_tokenizer(settings)

    def embed_cache(self, tenant: str) -> Path | None:
        return None

    def vectors(self, dim: int, tenant: str) -> VectorIndex:
        raise NotImplementedError

    def queue(self, tenant: str) -> MessageQueue:
        raise NotImplementedError

    def blobs(self, tenant: str) -> BlobStore:
        raise NotImplementedError

    def lexical(self, graph: GraphStore, vectors: VectorIndex) -> LexicalIndex:
        raise NotImplementedError

    def entity_store(self, graph: GraphStore, tenant: str) -> Any:
        raise NotImplementedError

    def entity_vectors(self, dim: int, tenant: str) -> VectorIndex:
        raise NotImplementedError


def compose(profile: Profile, settings: Settings, tenant: str = "") -> Engine:
    graph = profile.graph(tenant)
    settings = open_settings(graph, settings)
    graph = profile.settled(graph, settings)
    tokenizer = profile.tokenizer(settings)
    embedder = make_embedder(settings, profile.embed_cache(tenant), graph)
    vectors = profile.vectors(embedder.dim, tenant)
    engine = Engine(settings=settings, graph=graph, vectors=vectors, queue=profile.queue(tenant),
                    embedder=embedder, tokenizer=tokenizer, summarizer=make_summarizer(settings, tokenizer),
                    blobs=profile.blobs(tenant), generator=make_generator(settings), reranker=make_reranker(settings),
                    lexical=profile.lexical(graph, vectors), tenant=tenant)
    return attach_query_side(engine, settings, profile.entity_store(graph, tenant),
                             profile.entity_vectors(embedder.dim, tenant))
