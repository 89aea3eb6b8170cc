"""One composition over a profile. A ``Profile`` is a backend set (memory, local, aws): the only
place that knows a backend. It makes the storage ports of one tenant's engine, and keeps the
tenants of a deployment (``exists``, ``tenants``, ``delete``, ``registry``: bootstrap.tenancy
asks it). ``compose`` builds every profile's engine the same way: the store's recorded settings
(services.engine.open_settings), the tokenizer, the embedder (its model calls metered into the
graph's ledger), the vector index at the embedder's dimension, the summarizer and generator,
then the query side (the entity graph, the router's parser and weights:
providers.attach_query_side).

The tenant is resolved once: ``bind(tenant)`` gives the profile of that tenant's namespace,
whose methods then take no tenant.

A new vector or graph backend is its adapter module, the line of the profile that builds it,
and its registration in the contract tests (tests/contract). A new profile is a subclass of
``Profile`` in a module of its own (its ports, its tenants, the packages it imports), and its
class in bootstrap.profiles.PROFILES."""

from __future__ import annotations

import copy
import dataclasses
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..config import Settings
from ..ports.blobs import BlobStore
from ..ports.graph import GraphStore
from ..ports.lexical import LexicalIndex
from ..ports.providers import Tokenizer
from ..ports.queue import MessageQueue
from ..ports.tenants import TenantRegistry
from ..ports.uploads import DocumentPipeline
from ..ports.vectors import VectorIndex
from ..services.engine import Engine, open_settings
from .providers import attach_query_side, make_embedder, make_generator, make_reranker, make_summarizer, make_tokenizer


class Engines(Protocol):
    """What a profile's tenant keeping asks of bootstrap.tenancy.Tenancy: its engines."""

    def engine(self, tenant: str = "", register: bool = True) -> Engine: ...

    def kept(self, tenant: str) -> Engine | None:
        """The engine built for ``tenant`` and kept, if any."""

    def forget(self, tenant: str) -> Engine | None:
        """Stop keeping ``tenant``'s engine; the engine it kept, if any."""

    def kept_tenants(self) -> list[str]: ...

    def build(self, tenant: str) -> Engine:
        """A new engine of ``tenant`` (not kept)."""


class UnknownTenant(LookupError):
    pass


class Profile(ABC):
    """The storage of one backend set, bound to one tenant ("" the default tenant)."""

    name = ""
    tenant = ""
    # another process may delete a tenant's storage under a kept engine (local: its directory),
    # so a read path checks a kept engine's tenant still exists
    recheck_kept = False

    packages: tuple[str, ...] = ()  # what its adapters import (bootstrap.preflight checks them)
    keeps_store = False  # whether the profile keeps its data in a store directory (local)

    @classmethod
    def opened(cls, store: str | Path | None = None) -> Profile:
        """The profile of a deployment by its name (bootstrap.profiles): ``store``, the store
        directory of a profile that keeps one."""
        return cls()  # type: ignore[call-arg]

    def bind(self, tenant: str) -> Profile:
        """This profile in ``tenant``'s namespace."""
        bound = copy.copy(self)
        bound.tenant = tenant
        return bound

    # ----- the storage ports of the bound tenant -----
    @abstractmethod
    def graph(self) -> GraphStore: ...

    def settled(self, graph: GraphStore, settings: Settings) -> GraphStore:
        """The graph store once the store's settings are known (aws: with its LSH code width)."""
        return graph

    def tokenizer(self, settings: Settings) -> Tokenizer:
        return make_tokenizer(settings)

    def embed_cache(self) -> Path | None:
        return None

    def ledger(self, graph: GraphStore) -> GraphStore | None:
        """The store whose cost ledger records each model call (None: not recorded)."""
        return graph

    @abstractmethod
    def vectors(self, dim: int) -> VectorIndex: ...

    @abstractmethod
    def queue(self) -> MessageQueue: ...

    @abstractmethod
    def blobs(self) -> BlobStore: ...

    def salt(self, settings: Settings) -> str:
        """The deployment's knowledge-base id salt (domain.knowledge_base): the setting's (on AWS
        the template's KnowledgeBaseIdSalt). A profile that keeps a store may keep its own."""
        return settings.kb_id_salt

    def source_bucket(self, settings: Settings, name: str) -> BlobStore:
        """The bucket ``name`` a Bedrock KB data source syncs from (services.kb_sources), read
        only; LookupError, in words, when this deployment may not read it."""
        raise LookupError(f"the {self.name} profile reads no data source buckets")

    @abstractmethod
    def lexical(self, graph: GraphStore, vectors: VectorIndex) -> LexicalIndex | None: ...

    @abstractmethod
    def entity_store(self, graph: GraphStore) -> Any: ...

    @abstractmethod
    def entity_vectors(self, dim: int) -> VectorIndex: ...

    # ----- the tenants of the deployment (bootstrap.tenancy) -----
    @abstractmethod
    def exists(self, engines: Engines, tenant: str) -> bool:
        """Whether ``tenant`` (not the default one) is registered."""

    @abstractmethod
    def tenants(self, engines: Engines) -> list[str]:
        """The tenants of this deployment, sorted (the default tenant is not listed)."""

    @abstractmethod
    def delete(self, engines: Engines, tenant: str) -> dict[str, Any]:
        """Remove everything ``tenant`` owns; a report of what there was and what is left."""

    def register(self, engines: Engines, tenant: str) -> None:
        """Record a new tenant (a write path's first use of it)."""

    # ----- the documents submitted through the API (services.uploads) -----
    def uploads(self, engines: Callable[[str], Engine], settings: Settings) -> DocumentPipeline:
        """Their pipeline: here, a worker thread of this process writing with ``engines(tenant)``
        (the served engines: the memory profile's store is the process itself)."""
        from ..services.upload_worker import UploadWorker

        return UploadWorker(engines)

    def registry(self, engines: Engines) -> TenantRegistry:
        """The tenants and their audit times (only a profile that keeps a registry)."""
        raise ValueError(f"the {self.name} profile keeps no tenant registry")


def compose(profile: Profile, settings: Settings, tenant: str = "",
            check: Callable[[Settings], None] | None = None) -> Engine:
    """The engine of ``tenant``: ``settings`` with the store's recorded ones over them (its graph
    settings and the providers it was built with); ``check`` (bootstrap.preflight) sees those
    before a provider is made."""
    scope = profile.bind(tenant)
    graph = scope.graph()
    settings = open_settings(graph, settings)
    salt = scope.salt(settings)
    if salt != settings.kb_id_salt:
        settings = dataclasses.replace(settings, kb_id_salt=salt)
    if check is not None:
        check(settings)
    graph = scope.settled(graph, settings)
    tokenizer = scope.tokenizer(settings)
    embedder = make_embedder(settings, scope.embed_cache(), scope.ledger(graph))
    vectors = scope.vectors(embedder.dim)
    engine = Engine(settings=settings, graph=graph, vectors=vectors, queue=scope.queue(),
                    embedder=embedder, tokenizer=tokenizer, summarizer=make_summarizer(settings, tokenizer),
                    blobs=scope.blobs(), generator=make_generator(settings), reranker=make_reranker(settings),
                    lexical=scope.lexical(graph, vectors), tenant=tenant,
                    buckets=functools.partial(scope.source_bucket, settings))
    return attach_query_side(engine, settings, scope.entity_store(graph), scope.entity_vectors(embedder.dim))
