"""The API caller's tenant, from its identity only (never from the request body).

API Gateway (HTTP API, payload v2) puts what the authorizer established in
``requestContext.authorizer``:

- ``jwt.claims``: a JWT authorizer's verified claims; the tenant is the claim named by
  ``ERAGRAPH_TENANT_CLAIM`` (default ``tenant``; Cognito's custom attributes are
  ``custom:tenant``);
- ``lambda``: a Lambda authorizer's context; the same key;
- ``iam``: SigV4 (IAM) auth. The event carries the caller's ARN, not its principal tags, so the
  tenant is the tag ``ERAGRAPH_TENANT_TAG`` (default ``eragraph-tenant``) of the caller's IAM role
  or user, read with ``iam:ListRoleTags`` / ``iam:ListUserTags`` and kept for five minutes per
  principal (a tag changed in IAM takes effect within that time). The cache is keyed by the
  principal (account, kind, name: every session of a role shares one entry) and holds at most
  TAG_CACHE_SIZE entries. ``ERAGRAPH_TENANT_TAG=""`` turns this off (no IAM read per caller).

Fail closed: a caller without a tenant is refused (403) unless ``ERAGRAPH_TENANT_REQUIRED`` is
false (the default is true); then it gets the default tenant, and each such fallback is logged
(``tenant fallback``, with the caller). A principal of another account than the
API's has no tag here (its tags are never looked up by name in this account), so no tenant; nor
has one IAM does not know. A tenant value that is not a valid tenant id is refused (403), as is
an IAM principal whose tags cannot be read (access denied, throttling).

Behind the Lambda Web Adapter (the stream function: a function URL with AWS_IAM auth) the app
gets HTTP requests, not events: the adapter puts the event's ``requestContext`` (with
``authorizer.iam``) in the ``x-amzn-request-context`` header, replacing any header of that name
the client sent. ``tenant_from_headers`` reads the tenant from it exactly as ``tenant`` reads it
from an event, and only when ``ERAGRAPH_TRUST_REQUEST_CONTEXT`` is true (the template sets it on
that function alone): anywhere else (``eragraph serve``) the header is whatever the client wrote."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from ..adapters.aws.identity import IamPrincipalTags
from ..config import IdentitySettings
from ..ports.identity import LookupFailed, PrincipalTags
from .claim_guard import ClaimGuard
from ..domain.tenants import DEFAULT, TenantError, check_tenant

TAG_TTL_SECONDS = 300.0
TAG_CACHE_SIZE = 1024  # principals whose tag is kept; the least recently read is dropped first
REQUEST_CONTEXT_HEADER = "x-amzn-request-context"  # the Lambda Web Adapter's copy of the event's requestContext

LOG = logging.getLogger(__name__)


class TenantForbidden(PermissionError):
    """The caller's identity names no usable tenant (answered 403 with this message)."""


class TenantIdentity:
    def __init__(self, claim: str = "tenant", tag: str = "eragraph-tenant", required: bool = True,
                 iam_client: Any = None, clock=time.monotonic, endpoint: str | None = None,
                 trust_request_context: bool = False, claim_guard: ClaimGuard | None = None,
                 principal_tags: PrincipalTags | None = None) -> None:
        """``tag`` "": IAM callers' tags are not read (they have no tenant); ``principal_tags``:
        where they are read (ports.identity.PrincipalTags; default IAM's, through ``iam_client``
        or a client made for ``endpoint``, the IAM endpoint of a local cloud); ``trust_request_context``: this process runs behind the
        Lambda Web Adapter, whose ``x-amzn-request-context`` header carries the caller's identity;
        ``claim_guard``: refuses a JWT tenant claim the issuer's users may write (claim_guard)."""
        self.claim_guard = claim_guard
        self.endpoint = endpoint
        self.trust_request_context = trust_request_context
        self.claim = claim
        self.tag = tag
        self.required = required
        self._principals = principal_tags if principal_tags is not None else IamPrincipalTags(iam_client, endpoint)
        self._clock = clock
        self._tags: OrderedDict[tuple[str, str, str], tuple[float, dict[str, str] | None]] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TenantIdentity:
        given = IdentitySettings.from_env(environ)
        guard = ClaimGuard(given.claim, given.issuer, endpoint=given.endpoint) if given.issuer else None
        return cls(claim=given.claim, tag=given.tag, endpoint=given.endpoint, required=given.required,
                   trust_request_context=given.trust_request_context, claim_guard=guard)

    def tenant_from_headers(self, headers: Mapping[str, str]) -> str:
        """The caller's tenant from the Lambda Web Adapter's ``x-amzn-request-context`` header
        (``headers``: lower-case names), as ``tenant`` takes it from an event's requestContext;
        TenantForbidden when this process does not trust that header, or it is no JSON object."""
        if not self.trust_request_context:
            raise TenantForbidden("this endpoint takes the caller's identity from the Lambda Web Adapter's request "
                                  "context, which is not trusted here (ERAGRAPH_TRUST_REQUEST_CONTEXT is off)")
        raw = headers.get(REQUEST_CONTEXT_HEADER)
        context: Any = {}
        if raw:
            try:
                context = json.loads(raw)
            except ValueError:
                context = None
            if not isinstance(context, dict):
                raise TenantForbidden(f"the {REQUEST_CONTEXT_HEADER} header is not a JSON object") from None
        return self.tenant({"requestContext": context})

    def tenant(self, event: Mapping[str, Any]) -> str:
        """The caller's tenant ("" the default), or TenantForbidden."""
        context = event.get("requestContext") if isinstance(event, Mapping) else None
        auth = (context or {}).get("authorizer") or {}
        value: Any = None
        if isinstance(auth.get("jwt"), Mapping):
            if self.claim_guard is not None and self.claim_guard.problem():
                raise TenantForbidden("this API's tenant claim can be written by its users, so no token's tenant is "
                                      "trusted; the deployer must keep it out of the app clients' write attributes")
            value = (auth["jwt"].get("claims") or {}).get(self.claim)
        elif isinstance(auth.get("lambda"), Mapping):
            value = auth["lambda"].get(self.claim)
        elif isinstance(auth.get("iam"), Mapping) and self.tag:
            value = self._iam_tenant(auth["iam"].get("userArn"), (context or {}).get("accountId"))
        if value is None or value == "":
            if self.required:
                raise TenantForbidden("the caller's identity names no tenant, and this API requires one")
            LOG.warning("tenant fallback: the caller's identity names no tenant; serving the default tenant "
                        "(ERAGRAPH_TENANT_REQUIRED=false)", extra={"caller": caller_of(event)})
            return DEFAULT
        try:
            return check_tenant(value)
        except TenantError as exc:
            raise TenantForbidden(f"the caller's identity names no valid tenant: {exc}") from None

    # ----- IAM principal tags -----
    def _iam_tenant(self, arn: Any, api_account: Any = None) -> str | None:
        """The tenant tag of the principal ``arn`` (iam_tags); TenantForbidden when its tags
        cannot be read."""
        try:
            tags = self.iam_tags(arn, api_account)
        except LookupFailed as exc:  # refuse, never the default tenant
            raise TenantForbidden(f"the caller's tenant tag could not be read ({exc.reason})") from None
        return None if tags is None else tags.get(self.tag)

    def iam_tags(self, arn: Any, api_account: Any = None) -> dict[str, str] | None:
        """The tags of the IAM principal ``arn`` (its role's or user's), kept TAG_TTL_SECONDS per
        principal: the tenant tag and the principals tag (bootstrap.principals) share one read.
        None for a principal of another account than ``api_account`` (the API's, from the
        event: a name is looked up in this account only) or one without tags to read (root, a
        federated user, one IAM does not know); LookupFailed when they cannot be read."""
        if not isinstance(arn, str) or not arn:
            return None
        kind, name = principal_of(arn)
        account = arn.split(":")[4] if arn.count(":") >= 5 else ""
        if kind is None or (api_account and account != api_account):
            return None
        key = (account, kind, name)
        now = self._clock()
        with self._lock:
            cached = self._tags.get(key)
            if cached is not None and now - cached[0] < TAG_TTL_SECONDS:
                self._tags.move_to_end(key)
                return cached[1]
        value = self._read_tags(kind, name)
        with self._lock:
            self._tags[key] = (now, value)
            self._tags.move_to_end(key)
            while len(self._tags) > TAG_CACHE_SIZE:
                self._tags.popitem(last=False)
        return value

    @property
    def _iam(self) -> Any:
        """The IAM client of the default lookup (None until its first read, or another port)."""
        return getattr(self._principals, "client", None)

    @_iam.setter
    def _iam(self, client: Any) -> None:
        self._principals = IamPrincipalTags(client, self.endpoint)

    def _read_tags(self, kind: str, name: str) -> dict[str, str] | None:
        principals = self._principals
        if isinstance(principals, IamPrincipalTags) and principals.client is None:
            principals.endpoint = self.endpoint  # the client is made for the endpoint in force at the first read
        return principals.tags(kind, name)


def caller_of(event: Mapping[str, Any]) -> str:
    """Who called, for logs: the IAM principal's ARN or the JWT subject ("" if neither)."""
    context = event.get("requestContext") if isinstance(event, Mapping) else None
    auth = (context or {}).get("authorizer") or {}
    if isinstance(auth.get("iam"), Mapping):
        return str(auth["iam"].get("userArn") or "")
    if isinstance(auth.get("jwt"), Mapping):
        return str((auth["jwt"].get("claims") or {}).get("sub") or "")
    return ""


def principal_of(arn: str) -> tuple[str | None, str]:
    """("role", role name) of an assumed-role or role ARN, ("user", user name) of a user ARN,
    (None, "") otherwise (root, federated users: no tags to read)."""
    parts = arn.split(":", 5)
    if len(parts) != 6:
        return None, ""
    resource = parts[5]
    if resource.startswith("assumed-role/"):  # sts: assumed-role/<role name>/<session>
        pieces = resource.split("/")
        return ("role", pieces[1]) if len(pieces) >= 3 else (None, "")
    if resource.startswith("role/"):
        return "role", resource.rsplit("/", 1)[-1]
    if resource.startswith("user/"):
        return "user", resource.rsplit("/", 1)[-1]
    return None, ""
