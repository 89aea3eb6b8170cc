"""The engines of one deployment, one per tenant (domain.tenants).

Every profile keeps a tenant's data in its own namespace, so an engine bound to a tenant reads
and writes nothing of another's, and the services run unchanged inside it. Where a profile keeps
its tenants, and how it removes one, is the profile's own (bootstrap.profile.Profile: ``exists``,
``tenants``, ``delete``, ``registry``): the local profile's are directories, the memory
profile's the engines kept here, the aws profile's a registry in its table.

Heavy providers are shared by every engine of the process (the MiniLM model and the spaCy
pipeline are loaded once per process).

``delete`` removes everything a tenant owns and says how much there was, counted before and
after: graph items (or store files), vectors, entity vectors, and on AWS its objects under
``tenants/<id>/`` in the documents bucket."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..config import Settings, settings_from_env
from ..domain.tenants import DEFAULT, check_tenant
from ..ports.tenants import TenantRegistry
from ..services.engine import Engine
from .preflight import USES, preflight
from .profile import Profile, UnknownTenant, compose
from .profiles import profile_named

__all__ = ["Tenancy", "UnknownTenant"]


class Tenancy:
    """``engine(tenant)``: the tenant's engine, built on first use and kept (the default tenant
    is ""); ``tenants()``: the registered tenants; ``delete(tenant)``: remove all it owns.
    ``profile``: a Profile, or its name (with ``store``, the local profile's directory)."""

    def __init__(self, profile: str | Profile, store: str | Path | None = None, settings: Settings | None = None,
                 uses: Iterable[str] = USES, build: Callable[[str], Engine] | None = None) -> None:
        self.backend = profile_named(profile, Path(".") if store is None else store) \
            if isinstance(profile, str) else profile
        self.profile = self.backend.name
        self.settings = settings
        self.uses = tuple(uses)
        self._build = build
        self._engines: dict[str, Engine] = {}
        self._lock = threading.RLock()  # engine("t") registers t through engine(""): re-entered

    # ----- engines -----
    def build(self, tenant: str) -> Engine:
        """A new engine of ``tenant``: ``build`` when given (bootstrap.aws.LazyEngine passes its
        own), else the profile's, with the settings' providers checked."""
        if self._build is not None:
            return self._build(tenant)
        settings = self.settings or settings_from_env()
        return compose(self.backend, settings, tenant,
                       check=lambda opened: preflight(opened, self.profile, self.uses))

    def engine(self, tenant: str = DEFAULT, register: bool = True) -> Engine:
        """``register``: record a new tenant (a write path); a read path passes False, and an
        unknown tenant then gets an empty engine that writes nothing (``_empty``)."""
        if tenant:
            check_tenant(tenant)
        engine = self._engines.get(tenant)
        # a kept engine is checked too where another process may delete its tenant (local: one
        # stat), since its engine would answer from the unlinked files
        if (engine is None or self.backend.recheck_kept) and tenant and not register and not self.exists(tenant):
            self._engines.pop(tenant, None)
            return self._empty(tenant)
        if engine is None:
            with self._lock:
                engine = self._engines.get(tenant)
                if engine is None:
                    if tenant and register:
                        self.backend.register(self, tenant)
                    engine = self._engines[tenant] = self.build(tenant)
        return engine

    def _empty(self, tenant: str) -> Engine:
        """What a read path gets for a tenant that is not registered (never one, or deleted): an
        empty in-memory engine with the deployment's settings, kept nowhere, so the answer is
        "nothing" and no storage of the tenant is created (nor re-created after its deletion)."""
        from .memory import build_memory_engine

        return build_memory_engine(self.engine(DEFAULT).settings, tenant)

    def set(self, tenant: str, engine: Engine) -> None:
        self._engines[tenant] = engine

    def kept(self, tenant: str) -> Engine | None:
        return self._engines.get(tenant)

    def forget(self, tenant: str) -> Engine | None:
        return self._engines.pop(tenant, None)

    def kept_tenants(self) -> list[str]:
        return list(self._engines)

    # ----- the tenants, as the profile keeps them -----
    def exists(self, tenant: str) -> bool:
        """Whether ``tenant`` is registered (the default tenant always is): a message or a delete
        event of a tenant deleted since is dropped rather than bringing its namespace back."""
        return not tenant or self.backend.exists(self, tenant)

    def registry(self) -> TenantRegistry:
        """The tenants and their audit times (the aws profile: local and memory tenants are
        their directories or engines, audited whole by `eragraph reindex`)."""
        return self.backend.registry(self)

    def tenants(self) -> list[str]:
        """The tenants of this deployment, sorted (the default tenant is not listed)."""
        return self.backend.tenants(self)

    def delete(self, tenant: str) -> dict[str, Any]:
        """Remove everything ``tenant`` owns; a report of what there was and what is left."""
        check_tenant(tenant)
        return self.backend.delete(self, tenant)
