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
  principal (a tag changed in IAM takes effect within that time). ``ERAGRAPH_TENANT_TAG=""``
  turns this off (a single-tenant deployment: no IAM read per caller).

A caller without a tenant gets the default tenant, unless ``ERAGRAPH_TENANT_REQUIRED`` is true:
then it is refused (403). A principal IAM does not know in this account (a role of another
account) has no tag, so no tenant. A tenant value that is not a valid tenant id is refused
(403), as is an IAM principal whose tags cannot be read (access denied, throttling)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from ..domain.tenants import DEFAULT, TenantError, check_tenant

TAG_TTL_SECONDS = 300.0


class TenantForbidden(PermissionError):
    """The caller's identity names no usable tenant (answered 403 with this message)."""


class TenantIdentity:
    def __init__(self, claim: str = "tenant", tag: str = "eragraph-tenant", required: bool = False,
                 iam_client: Any = None, clock=time.monotonic, endpoint: str | None = None) -> None:
        """``tag`` "": IAM callers' tags are not read (they have no tenant); ``endpoint``: the
        IAM endpoint (a local cloud)."""
        self.endpoint = endpoint
        self.claim = claim
        self.tag = tag
        self.required = required
        self._iam = iam_client
        self._clock = clock
        self._tags: dict[str, tuple[float, str | None]] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TenantIdentity:
        env = os.environ if environ is None else environ
        tag = env.get("ERAGRAPH_TENANT_TAG")
        return cls(claim=env.get("ERAGRAPH_TENANT_CLAIM") or "tenant",
                   tag="eragraph-tenant" if tag is None else tag.strip(),
                   endpoint=env.get("ERAGRAPH_AWS_ENDPOINT_URL") or None,
                   required=(env.get("ERAGRAPH_TENANT_REQUIRED") or "false").strip().lower() in ("1", "true", "yes"))

    def tenant(self, event: Mapping[str, Any]) -> str:
        """The caller's tenant ("" the default), or TenantForbidden."""
        context = event.get("requestContext") if isinstance(event, Mapping) else None
        auth = (context or {}).get("authorizer") or {}
        value: Any = None
        if isinstance(auth.get("jwt"), Mapping):
            value = (auth["jwt"].get("claims") or {}).get(self.claim)
        elif isinstance(auth.get("lambda"), Mapping):
            value = auth["lambda"].get(self.claim)
        elif isinstance(auth.get("iam"), Mapping) and self.tag:
            value = self._iam_tenant(auth["iam"].get("userArn"))
        if value is None or value == "":
            if self.required:
                raise TenantForbidden("the caller's identity names no tenant, and this API requires one")
            return DEFAULT
        try:
            return check_tenant(value)
        except TenantError as exc:
            raise TenantForbidden(f"the caller's identity names no valid tenant: {exc}") from None

    # ----- IAM principal tags -----
    def _iam_tenant(self, arn: Any) -> str | None:
        if not isinstance(arn, str) or not arn:
            return None
        now = self._clock()
        with self._lock:
            cached = self._tags.get(arn)
            if cached is not None and now - cached[0] < TAG_TTL_SECONDS:
                return cached[1]
        value = self._read_tag(arn)
        with self._lock:
            self._tags[arn] = (now, value)
        return value

    def _read_tag(self, arn: str) -> str | None:
        kind, name = principal_of(arn)
        if kind is None:
            return None
        if self._iam is None:
            import boto3

            self._iam = boto3.client("iam", endpoint_url=self.endpoint)
        try:
            if kind == "role":
                tags = self._iam.list_role_tags(RoleName=name)["Tags"]
            else:
                tags = self._iam.list_user_tags(UserName=name)["Tags"]
        except Exception as exc:  # noqa: BLE001 (any other failure: refuse, never the default tenant)
            if _no_such_entity(exc):  # a principal of another account: it has no tag here
                return None
            raise TenantForbidden(f"the caller's tenant tag could not be read ({type(exc).__name__})") from None
        return next((t["Value"] for t in tags if t.get("Key") == self.tag), None)


def _no_such_entity(exc: Exception) -> bool:
    return (getattr(exc, "response", None) or {}).get("Error", {}).get("Code") == "NoSuchEntity"


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
