"""Caller admission, the one gate every request of the HTTP API and of the Bedrock KB stream
passes before any work: the caller's tenant from its identity (never from the request's body),
the request's log keys, then a token of that tenant's rate bucket.

- The API (eragraph.entrypoints.http.api) admits API Gateway events: ``tenant_of`` is
  bootstrap.identity.TenantIdentity.tenant (the JWT claim or the IAM principal's tag), or the
  served engine's tenant under ``eragraph serve``.
- The stream function (eragraph.entrypoints.http.stream) admits the request's headers:
  ``tenant_of`` is TenantIdentity.tenant_from_headers (the Lambda Web Adapter's copy of the
  request context).

A caller whose identity names no tenant it may use raises bootstrap.identity.TenantForbidden; a
request whose ``x-eragraph-tenant`` header names another tenant than the caller's raises
``ForeignTenant`` (403; ``eragraph serve`` on a root of tenants lets the header choose:
tenant_choice); a tenant out of tokens raises ``RateLimited``. eragraph.entrypoints.http.errors answers both, as
the API's JSON errors or as the Bedrock KB service's modelled ones."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...bootstrap.identity import caller_of
from ...domain.rate_limit import LimitStoreUnavailable
from .. import request_log


TENANT_HEADER = "x-eragraph-tenant"  # the tenant a caller asks for (eragraph serve on a root of tenants)


class ForeignTenant(PermissionError):
    """A request that names a tenant other than the caller's (answered 403)."""


def header_of(request: Mapping[str, Any], name: str) -> str | None:
    """Header ``name`` (lower case) of ``request``: an API Gateway event, or plain headers."""
    headers = request.get("headers") if "requestContext" in request else request
    if not isinstance(headers, Mapping):
        return None
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if isinstance(k, str) and k.lower() == name), None)
    return value


class RateLimited(Exception):
    """The caller's tenant is out of tokens (answered 429 with Retry-After)."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many requests for this tenant: retry after {retry_after} s")
        self.retry_after = retry_after


class LimitUnavailable(RateLimited):
    """The per-tenant limits could not be checked (domain.rate_limit.LimitStoreUnavailable):
    answered 503 with Retry-After by the API, ThrottlingException on the KB routes."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(retry_after)
        self.args = (f"this tenant's request limits cannot be checked just now: retry after {retry_after} s",)


class TooManyStreams(RateLimited):
    """The caller's tenant has as many answers streaming as it may (ApiLimits.tenant_streams):
    answered as RateLimited, 429 with Retry-After."""

    def __init__(self, retry_after: int, limit: int) -> None:
        super().__init__(retry_after)
        self.args = (f"this tenant has {limit} answer(s) streaming already, the most it may have open at once: "
                     f"retry after {retry_after} s",)


class Admission:
    """``tenant_of(request)``: the caller's tenant from its identity (None: everyone is the default
    tenant); ``admit(tenant)`` takes a token of the tenant's bucket (a domain.rate_limit.Decision;
    None: no rate limit); ``logger`` (powertools, given with API Gateway events only) gets the
    request's tenant, caller (IAM ARN or JWT subject) and API request id as keys."""

    def __init__(self, tenant_of: Callable[[Any], str] | None = None, admit: Callable[[str], Any] | None = None,
                 logger: Any = None) -> None:
        self.tenant_of = tenant_of
        self.admit = admit
        self.logger = logger

    def caller(self, request: Mapping[str, Any]) -> str:
        """The tenant of the caller of ``request`` (an API Gateway event, or the stream's headers),
        once admitted."""
        request_log.note(caller=caller_of(request) or request_log.current_caller())
        tenant = self.tenant_of(request) if self.tenant_of is not None else ""
        named = header_of(request, TENANT_HEADER)
        if named is not None and named.strip() != tenant:
            raise ForeignTenant(f"the {TENANT_HEADER} header names another tenant ({named.strip()[:80]!r}) than the "
                                f"caller's ({tenant or 'the default tenant'!s}): this server does not switch tenants")
        request_log.note(tenant=tenant)
        if self.logger is not None:
            self.logger.append_keys(tenant=tenant or "(default)", caller=caller_of(request),
                                    api_request_id=(request.get("requestContext") or {}).get("requestId", ""))
        if self.admit is not None:
            try:
                decision = self.admit(tenant)
            except LimitStoreUnavailable as exc:
                raise LimitUnavailable(exc.retry_after) from None
            if not decision.allowed:
                raise RateLimited(decision.retry_after)
        return tenant
