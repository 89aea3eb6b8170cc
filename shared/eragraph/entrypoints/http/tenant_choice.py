"""Which tenant a request of ``eragraph serve`` is for: the served engine's (``pinned``), or, on a
local store root holding several tenants served without ``--tenant`` (``switchable``), the one
the request header ``x-eragraph-tenant`` names.

- switchable: the header names a tenant of the root (an unknown one is a 404 in words, an
  invalid id a 400); without the header, the root's default tenant when it has one, else a 400
  naming the choices. Each tenant's engine is opened on its first request and kept
  (bootstrap.tenancy.Tenancy).
- pinned (``--tenant T``, or a store without tenants): every request is the served engine's
  tenant; a header naming another is a 403 (admission.Admission refuses it, as on AWS, where the
  tenant is the caller's identity's).

``GET /tenants`` reads ``listing``: the tenants a caller may choose, the current one and whether
it may switch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...domain.tenants import DEFAULT, TenantError, check_tenant
from ...services.engine import Engine
from .admission import TENANT_HEADER, header_of


class UnknownTenant(LookupError):
    """The header names a tenant the served root does not hold (answered 404)."""


class TenantNotChosen(ValueError):
    """No header, on a root that has no default tenant, or an invalid tenant id (answered 400)."""


def _shown(tenant: str) -> str:
    return tenant or "(default: no header)"


class PinnedTenant:
    """One engine, one tenant: the header may only name that one."""

    switchable = False

    def __init__(self, engine: Engine) -> None:
        self.served = engine

    def tenant_of(self, request: Mapping[str, Any]) -> str:
        return self.served.tenant

    def engine(self, tenant: str) -> Engine:
        return self.served

    def tenants(self) -> list[str]:
        return [self.served.tenant]

    def default_engine(self) -> Engine | None:
        return self.served


class SwitchableTenants:
    """Every tenant of a local store root (``tenancy``: its bootstrap.tenancy.Tenancy); the header
    picks one. ``has_default``: whether the root holds a store of its own (the default tenant)."""

    switchable = True

    def __init__(self, tenancy: Any, has_default: bool) -> None:
        self.tenancy = tenancy
        self.has_default = has_default

    def tenants(self) -> list[str]:
        """The choices: the default tenant ("") when the root has one, then the named ones."""
        return ([DEFAULT] if self.has_default else []) + list(self.tenancy.tenants())

    def tenant_of(self, request: Mapping[str, Any]) -> str:
        named = header_of(request, TENANT_HEADER)
        if named is None:
            if self.has_default:
                return DEFAULT
            raise TenantNotChosen(f"this store holds several tenants and no default one: name one with the "
                                  f"{TENANT_HEADER} header (one of: {', '.join(self.tenancy.tenants()) or 'none'})")
        try:
            tenant = check_tenant(named.strip())
        except TenantError as exc:
            raise TenantNotChosen(f"{TENANT_HEADER}: {exc}") from None
        if not self.tenancy.exists(tenant):
            raise UnknownTenant(f"this store has no tenant {tenant!r} (its tenants: "
                                f"{', '.join(_shown(t) for t in self.tenants()) or 'none'})")
        return tenant

    def engine(self, tenant: str) -> Engine:
        return self.tenancy.engine(tenant, register=False)

    def default_engine(self) -> Engine | None:
        return self.engine(DEFAULT) if self.has_default else None


def listing(choice: Any, current: str) -> dict[str, Any]:
    """GET /tenants: the tenants the caller may name, the one it is served and whether it may
    switch (``choice`` None: a deployment whose tenant is the caller's identity's)."""
    if choice is None or not choice.switchable:
        return {"tenants": [current], "current": current, "switchable": False}
    return {"tenants": choice.tenants(), "current": current, "switchable": True}
