"""The API caller's principals (domain.access), from its identity only (never the request body).

Off unless ``ERAGRAPH_PRINCIPALS=identity`` (a deployment whose documents carry access lists
turns it on): then every request's caller is a Caller of

- a JWT authorizer's verified claims: ``user:<sub>`` and ``group:<g>`` for each group of the
  claim ``ERAGRAPH_GROUPS_CLAIM`` (default ``cognito:groups``; API Gateway passes an array
  claim as the text ``[a b]``, which is read as its items);
- a Lambda authorizer's context: the same keys (``sub``, and the groups key as a list or a
  comma-separated text of group names).

Fail closed: with principals on, a caller whose identity has no subject (a request without an
authorizer, IAM auth: its principal tag is not read yet) or whose subject or a group is not a
valid principal name is refused (PrincipalsForbidden, 403), never served the whole tenant.
Off, the API's callers are the operator (everything), as before access lists."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import IdentitySettings
from ..domain.access import AccessError, Caller, caller

DEFAULT_GROUPS_CLAIM = "cognito:groups"


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
    """``caller(event)``: the Caller of an API Gateway event (None: principals are off)."""

    def __init__(self, enabled: bool = False, groups_claim: str = DEFAULT_GROUPS_CLAIM,
                 default: str = "tenant") -> None:
        self.enabled = enabled
        self.groups_claim = groups_claim
        self.default = default

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PrincipalIdentity:
        """ERAGRAPH_PRINCIPALS, ERAGRAPH_GROUPS_CLAIM and ERAGRAPH_ACCESS_DEFAULT (tenant | deny)."""
        given = IdentitySettings.from_env(environ)
        if given.principals not in ("", "off", "identity"):
            raise ValueError(f"ERAGRAPH_PRINCIPALS={given.principals!r}: choose identity or off")
        return cls(given.principals == "identity", given.groups_claim, given.access_default)

    def caller(self, event: Mapping[str, Any]) -> Caller | None:
        if not self.enabled:
            return None
        context = event.get("requestContext") if isinstance(event, Mapping) else None
        auth = (context or {}).get("authorizer") or {}
        if isinstance(auth.get("jwt"), Mapping):
            claims = auth["jwt"].get("claims") or {}
        elif isinstance(auth.get("lambda"), Mapping):
            claims = auth["lambda"]
        else:
            raise PrincipalsForbidden("this API answers inside the caller's principals, and the caller's identity "
                                      "carries none (a JWT or a Lambda authorizer's subject and groups)")
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise PrincipalsForbidden("the caller's identity has no subject ('sub'): no principal to answer for")
        names = [f"user:{subject}"] + [f"group:{g}" for g in _groups(claims.get(self.groups_claim))]
        try:
            return caller(names, self.default)
        except AccessError as exc:
            raise PrincipalsForbidden(f"the caller's identity names no valid principal: {exc}") from None
