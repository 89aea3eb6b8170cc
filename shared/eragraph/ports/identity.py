"""Identity lookup ports: what the caller's identity says beyond the request, read from the
identity provider (AWS: IAM and Cognito, adapters.aws.identity). The policy over them (which
tag or claim names the tenant, fail closed, the caches) is bootstrap.identity's and
bootstrap.claim_guard's; who is admitted is entrypoints.http.admission's."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


class LookupFailed(Exception):
    """The provider could not be read (access denied, throttled, unreachable): ``reason`` names
    the failure's kind for the log, never its text."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@runtime_checkable
class PrincipalTags(Protocol):
    """The tags of an IAM principal of this account."""

    def tags(self, kind: str, name: str) -> dict[str, str] | None:
        """The tags of the role (``kind`` "role") or user (``"user"``) ``name``; None when this
        account has no such principal; LookupFailed when they cannot be read."""
        ...


@runtime_checkable
class PoolClients(Protocol):
    """The app clients of a user pool."""

    def clients(self, pool: str) -> list[dict[str, Any]]:
        """Every app client of ``pool`` as the provider describes it (``ClientId``,
        ``WriteAttributes``...); LookupFailed when the pool cannot be read."""
        ...
