"""The API caller's principals (domain.access), from its identity only (never the request body).

Off unless ``ERAGRAPH_PRINCIPALS=identity`` (a deployment whose documents carry access lists
turns it on): then every request's caller is a Caller of

- a JWT authorizer's verified claims: ``user:<sub>`` and ``group:<g>`` for each group of the
  claim ``ERAGRAPH_GROUPS_CLAIM`` (default ``cognito:groups``; API Gateway passes an array
  claim as the text ``[a b]``, which is read as its items);
- a Lambda authorizer's context: the same keys (``sub``, and the groups key as a list or a
  comma-separated text of group names);
- IAM (SigV4) auth: the principals tag ``ERAGRAPH_PRINCIPALS_TAG`` (default
  ``eragraph-principals``) of the caller's IAM role or user, its value the principals separated
  by spaces (``group:finance user:alice``: an IAM tag value allows no comma; at most 256
  characters). The event carries the caller's ARN, not its tags: they are read with
  ``iam:ListRoleTags`` / ``iam:ListUserTags`` through the tenant's lookup
  (bootstrap.identity.TenantIdentity.iam_tags: one read and one five-minute cache entry per
  principal serve both the tenant tag and this one). A role's session tags are not in the event
  and not read (a role's own tags are what the deployer sets).

Behind the Lambda Web Adapter (the stream function) the identity is the adapter's
``x-amzn-request-context`` header (``caller_from_headers``), trusted only where
``ERAGRAPH_TRUST_REQUEST_CONTEXT`` is on, as the tenant's.

Fail closed: with principals on, a caller whose identity has no subject (a request without an
authorizer), an IAM principal without the principals tag (or whose tags cannot be read), or a
subject, group or tagged name that is not a valid principal is refused (PrincipalsForbidden,
403), never served the whole tenant. Off, the API's callers are the operator (everything), as
before access lists."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..config import IdentitySettings
from ..domain.access import AccessError, Caller, caller
from ..ports.identity import LookupFailed
from .identity import REQUEST_CONTEXT_HEADER  # the Lambda Web Adapter's copy of the event's requestContext

DEFAULT_GROUPS_CLAIM = "cognito:groups"
DEFAULT_TAG = "eragraph-principals"  # the IAM principal tag naming an IAM caller's principals
MAX_TAG_VALUE = 256  # IAM's limit on a tag's value


class PrincipalsForbidden(PermissionError):
    """The caller's identity names no valid principal (403)."""


def _groups(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    text = str(value).strip()
    if text.startswith("[") and text.endswith("]"):  # API Gateway's text of an array claim
        return [g for g in text[1:-1].replace(",", " ").split() if g]
    return [g.strip() for g in text.split(",") if g.strip()]


class PrincipalIdentity:
    """``caller(event)``: the Caller of an API Gateway event (None: principals are off);
    ``caller_from_headers(headers)``: the same from the Lambda Web Adapter's request context.
    ``iam_tags(arn, account)``: an IAM principal's tags (bootstrap.identity.TenantIdentity.iam_tags;
    None: IAM callers are refused when principals are on)."""

    def __init__(self, enabled: bool = False, groups_claim: str = DEFAULT_GROUPS_CLAIM,
                 default: str = "tenant", tag: str = DEFAULT_TAG,
                 iam_tags: Callable[[Any, Any], Mapping[str, str] | None] | None = None,
                 trust_request_context: bool = False) -> None:
        self.enabled = enabled
        self.groups_claim = groups_claim
        self.default = default
        self.tag = tag
        self.iam_tags = iam_tags
        self.trust_request_context = trust_request_context

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None,
                 iam_tags: Callable[[Any, Any], Mapping[str, str] | None] | None = None) -> PrincipalIdentity:
        """ERAGRAPH_PRINCIPALS, ERAGRAPH_GROUPS_CLAIM, ERAGRAPH_ACCESS_DEFAULT (tenant | deny),
        ERAGRAPH_PRINCIPALS_TAG and ERAGRAPH_TRUST_REQUEST_CONTEXT; ``iam_tags``: where IAM
        callers' tags are read (the tenant identity's, sharing its cache)."""
        given = IdentitySettings.from_env(environ)
        if given.principals not in ("", "off", "identity"):
            raise ValueError(f"ERAGRAPH_PRINCIPALS={given.principals!r}: choose identity or off")
        return cls(given.principals == "identity", given.groups_claim, given.access_default,
                   tag=given.principals_tag, iam_tags=iam_tags, trust_request_context=given.trust_request_context)

    def caller(self, event: Mapping[str, Any]) -> Caller | None:
        if not self.enabled:
            return None
        context = event.get("requestContext") if isinstance(event, Mapping) else None
        auth = (context or {}).get("authorizer") or {}
        if isinstance(auth.get("jwt"), Mapping):
            claims = auth["jwt"].get("claims") or {}
        elif isinstance(auth.get("lambda"), Mapping):
            claims = auth["lambda"]
        elif isinstance(auth.get("iam"), Mapping):
            return self._iam_caller(auth["iam"].get("userArn"), (context or {}).get("accountId"))
        else:
            raise PrincipalsForbidden("this API answers inside the caller's principals, and the caller's identity "
                                      "carries none (a JWT or a Lambda authorizer's subject and groups, or an IAM "
                                      f"principal's tag {self.tag!r})")
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise PrincipalsForbidden("the caller's identity has no subject ('sub'): no principal to answer for")
        names = [f"user:{subject}"] + [f"group:{g}" for g in _groups(claims.get(self.groups_claim))]
        return self._of(names)

    def caller_from_headers(self, headers: Mapping[str, str]) -> Caller | None:
        """The Caller of a request behind the Lambda Web Adapter, from its ``x-amzn-request-context``
        header (``headers``: lower-case names), as ``caller`` reads an event's requestContext; None
        when principals are off; PrincipalsForbidden when that header is not trusted here or is no
        JSON object."""
        if not self.enabled:
            return None
        if not self.trust_request_context:
            raise PrincipalsForbidden("this endpoint takes the caller's identity from the Lambda Web Adapter's request "
                                      "context, which is not trusted here (ERAGRAPH_TRUST_REQUEST_CONTEXT is off)")
        try:
            context = json.loads(headers.get(REQUEST_CONTEXT_HEADER) or "{}")
        except ValueError:
            context = None
        if not isinstance(context, dict):
            raise PrincipalsForbidden(f"the {REQUEST_CONTEXT_HEADER} header is not a JSON object")
        return self.caller({"requestContext": context})

    def _iam_caller(self, arn: Any, account: Any) -> Caller:
        if self.iam_tags is None or not self.tag:
            raise PrincipalsForbidden("this API does not read IAM callers' principal tags, so an IAM caller has no "
                                      "principals here (call with a JWT)")
        try:
            tags = self.iam_tags(arn, account)
        except LookupFailed as exc:  # refuse, never the whole tenant
            raise PrincipalsForbidden(f"the caller's principals tag could not be read ({exc.reason})") from None
        value = None if tags is None else tags.get(self.tag)
        if not isinstance(value, str) or not value.strip():
            raise PrincipalsForbidden(f"the caller's IAM role or user has no tag {self.tag!r} naming its principals "
                                      "(e.g. 'group:finance user:alice')")
        if len(value) > MAX_TAG_VALUE:  # IAM never stores one this long: refuse before parsing it
            raise PrincipalsForbidden(f"the caller's tag {self.tag!r} is longer than {MAX_TAG_VALUE} characters")
        return self._of(value.replace(",", " ").split())

    def _of(self, names: list[str]) -> Caller:
        try:
            return caller(names, self.default)
        except AccessError as exc:
            raise PrincipalsForbidden(f"the caller's identity names no valid principal: {exc}") from None
