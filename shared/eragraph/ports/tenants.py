"""Tenancy ports: a store holding several tenants' namespaces, and the registry of tenants."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Namespaced(Protocol):
    """A store that keeps several tenants side by side, each under its own namespace (DynamoDB
    key prefixes, an OpenSearch scope): a tenant's deletion drops its namespace through this
    port (bootstrap.tenancy), whichever adapter holds it. A store per tenant (local files,
    memory) is deleted whole instead."""

    def drop_namespace(self) -> int: ...


@runtime_checkable
class TenantRegistry(Protocol):
    """The tenants of one deployment where no directory listing says (AWS: items of the
    default namespace). The default tenant "" is never registered."""

    def register_tenant(self, tenant: str) -> None: ...

    def has_tenant(self, tenant: str) -> bool: ...  # one strongly consistent read

    def tenants(self) -> list[str]: ...  # sorted

    def delete_tenant(self, tenant: str) -> None: ...

    def record_audit(self, tenant: str, at: float) -> None:
        """``tenant`` ("" the default) was audited whole, its audit ending at ``at`` (epoch s)."""
        ...

    def watch_audits(self, tenant: str, at: float) -> None:
        """Start the audit clock of a tenant that has no time yet (the default tenant is never
        registered): from ``at`` it counts as due. No effect once it has one."""
        ...

    def audit_since(self) -> dict[str, float]:
        """Every tenant with a time -> its last completed audit or, never audited, when its
        clock started (registration, or watch_audits). One read of the registry."""
        ...
