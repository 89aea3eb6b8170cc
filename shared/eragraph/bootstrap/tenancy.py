"""The engines of one deployment, one per tenant (domain.tenants).

Every profile keeps a tenant's data in its own namespace, so an engine bound to a tenant reads
and writes nothing of another's, and the services run unchanged inside it:

- ``local``: the tenant's own store directory, ``STORE/tenants/<id>/`` (graph, vectors, entity
  graph, blobs, embedding cache); the registry is that directory's listing;
- ``memory``: an engine per tenant, kept here;
- ``aws``: the same table, indexes and queue, with every key under ``T#<id>#`` (DynamoDB), every
  document tagged and every query scoped by the adapter (OpenSearch), every message carrying the
  tenant and grouped under it (SQS FIFO); the registry is ``TENANTS`` / ``T#<id>`` items of the
  default namespace.

Heavy providers are shared by every engine of the process (the MiniLM model and the spaCy
pipeline are loaded once per process).

``delete`` removes everything a tenant owns and says how much there was, counted before and
after: graph items (or store files), vectors, entity vectors, and on AWS its objects under
``tenants/<id>/`` in the documents bucket."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..config import Settings, settings_from_env
from ..domain.tenants import DEFAULT, KEY_PREFIX, check_tenant
from ..ports.tenants import Namespaced, TenantRegistry
from ..services.engine import Engine
from .preflight import USES, preflight

class UnknownTenant(LookupError):
    pass


class Tenancy:
    """``engine(tenant)``: the tenant's engine, built on first use and kept (the default tenant
    is ""); ``tenants()``: the registered tenants; ``delete(tenant)``: remove all it owns."""

    def __init__(self, profile: str, store: str | Path | None = None, settings: Settings | None = None,
                 uses: Iterable[str] = USES, build: Callable[[str], Engine] | None = None) -> None:
        self.profile = profile
        self.store = Path(store) if store is not None else None
        self.settings = settings
        self.uses = tuple(uses)
        self._build = build
        self._engines: dict[str, Engine] = {}
        self._lock = threading.RLock()  # engine("t") registers t through engine(""): re-entered

    # ----- engines -----
    def _make(self, tenant: str) -> Engine:
        if self._build is not None:
            return self._build(tenant)
        # the local and memory profiles' own builders (the aws profile's engines come from
        # bootstrap.aws, whose LazyEngine passes ``build``: tenancy never imports it back)
        settings = self.settings or settings_from_env()
        preflight(settings, self.profile, self.uses)
        if self.profile == "local":
            from .local import build_local_engine

            return build_local_engine(self.store or Path("."), settings, tenant)
        if self.profile == "memory":
            from .memory import build_memory_engine

            return build_memory_engine(settings, tenant)
        raise ValueError(f"Tenancy({self.profile!r}) needs build= (bootstrap.aws.LazyEngine passes its own)")

    def engine(self, tenant: str = DEFAULT, register: bool = True) -> Engine:
        """``register``: record a new tenant (a write path); a read path passes False, and an
        unknown tenant then gets an empty engine that writes nothing (``_empty``)."""
        if tenant:
            check_tenant(tenant)
        engine = self._engines.get(tenant)
        # local: a kept engine is checked too (one stat), since another process may have deleted
        # the tenant's directory; its engine would answer from the unlinked files
        if (engine is None or self.profile == "local") and tenant and not register and not self.exists(tenant):
            self._engines.pop(tenant, None)
            return self._empty(tenant)
        if engine is None:
            with self._lock:
                engine = self._engines.get(tenant)
                if engine is None:
                    if tenant and register:
                        self._register(tenant)
                    engine = self._engines[tenant] = self._make(tenant)
        return engine

    def _empty(self, tenant: str) -> Engine:
        """What a read path gets for a tenant that is not registered (never one, or deleted): an
        empty in-memory engine with the deployment's settings, kept nowhere, so the answer is
        "nothing" and no storage of the tenant is created (nor re-created after its deletion)."""
        from .memory import build_memory_engine

        return build_memory_engine(self.engine(DEFAULT).settings, tenant)

    def set(self, tenant: str, engine: Engine) -> None:
        self._engines[tenant] = engine

    def exists(self, tenant: str) -> bool:
        """Whether ``tenant`` is registered (the default tenant always is): a message or a delete
        event of a tenant deleted since is dropped rather than bringing its namespace back."""
        if not tenant:
            return True
        if self.profile == "local":
            from .local import tenant_store

            return tenant_store(self.store or Path("."), tenant).is_dir()
        if self.profile == "aws":
            return self._registered(tenant)  # the registry, not this process's engines: a
            # deletion elsewhere, or a read path that opened an unregistered tenant, is seen
        return tenant in self._engines

    # ----- the registry -----
    def _registry(self) -> TenantRegistry:
        """The aws profile's registry port, over the default namespace's table."""
        from ..adapters.aws.tenants_dynamodb import DynamoTenantRegistry

        return DynamoTenantRegistry(self.engine(DEFAULT).graph.Item)

    def registry(self) -> TenantRegistry:
        """The tenants and their audit times (the aws profile: local and memory tenants are
        their directories or engines, audited whole by `eragraph reindex`)."""
        if self.profile != "aws":
            raise ValueError(f"the {self.profile} profile keeps no tenant registry")
        return self._registry()

    def _register(self, tenant: str) -> None:
        if self.profile == "aws" and not self._registered(tenant):  # one read per tenant and process
            self._registry().register_tenant(tenant)

    def _registered(self, tenant: str) -> bool:
        return self._registry().has_tenant(tenant)

    def tenants(self) -> list[str]:
        """The tenants of this deployment, sorted (the default tenant is not listed)."""
        if self.profile == "local":
            root = (self.store or Path(".")) / "tenants"
            return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        if self.profile == "aws":
            return self._registry().tenants()
        return sorted(t for t in self._engines if t)

    # ----- deletion -----
    def delete(self, tenant: str) -> dict[str, Any]:
        """Remove everything ``tenant`` owns; a report of what there was and what is left."""
        check_tenant(tenant)
        if self.profile == "local":
            return self._delete_local(tenant)
        if self.profile == "aws":
            return self._delete_aws(tenant)
        engine = self._engines.pop(tenant, None)
        before = _memory_counts(engine)
        return {"tenant": tenant, "before": before, "after": _memory_counts(None)}

    def _delete_local(self, tenant: str) -> dict[str, Any]:
        from .local import tenant_store

        path = tenant_store(self.store or Path("."), tenant)
        if not path.is_dir():
            raise UnknownTenant(f"no tenant {tenant!r} in {self.store}")
        engine = self.engine(tenant, register=False)
        before = {"documents": len(engine.graph.list_documents()), "vectors": engine.vectors.count(),
                  "files": sum(1 for p in path.rglob("*") if p.is_file())}
        self._engines.pop(tenant, None)
        _close(engine)
        shutil.rmtree(path)
        after = {"documents": 0, "vectors": 0, "files": 0 if not path.exists() else
                 sum(1 for p in path.rglob("*") if p.is_file())}
        return {"tenant": tenant, "before": before, "after": after}

    def _delete_aws(self, tenant: str) -> dict[str, Any]:
        # the tenant's own adapters even when it is no longer registered (a rerun finishes a
        # deletion cut short: whatever it left is found by the scans below)
        engine = self._engines.get(tenant) or self._make(tenant)
        entity_vectors = getattr(engine.entities, "vectors", None) if engine.entities is not None else None
        before = {"items": engine.graph.namespace_size(), "vectors": engine.vectors.count(),
                  "entity_vectors": entity_vectors.count() if entity_vectors is not None else 0}
        objects = 0
        if engine.blobs is not None:  # the tenant's files first: their delete events find no store
            for key in engine.blobs.list(f"{KEY_PREFIX}{tenant}/"):
                engine.blobs.delete(key)
                objects += 1
        versions = 0
        purge = getattr(engine.blobs, "purge_versions", None)  # S3: the old versions and delete markers too
        if purge is not None:
            versions = purge(f"{KEY_PREFIX}{tenant}/")
        namespaces: list[Namespaced] = [engine.vectors, *([entity_vectors] if entity_vectors is not None else []),
                                        engine.graph]
        for store in namespaces:
            store.drop_namespace()
        self._registry().delete_tenant(tenant)
        self._engines.pop(tenant, None)
        after = {"items": engine.graph.namespace_size(), "vectors": engine.vectors.count(),
                 "entity_vectors": entity_vectors.count() if entity_vectors is not None else 0}
        return {"tenant": tenant, "before": before, "after": after, "objects_deleted": objects,
                "versions_deleted": versions}


def _memory_counts(engine: Engine | None) -> dict[str, int]:
    if engine is None:
        return {"documents": 0, "vectors": 0}
    return {"documents": len(engine.graph.list_documents()), "vectors": engine.vectors.count()}


def _close(engine: Engine) -> None:
    """Release what an engine holds open (SQLite connections, FAISS files) before its files go."""
    for part in (engine.graph, engine.vectors, engine.entities and getattr(engine.entities, "store", None),
                 engine.entities and getattr(engine.entities, "vectors", None)):
        close = getattr(part, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # noqa: BLE001 (a close that fails leaves files rmtree removes anyway)
                pass

