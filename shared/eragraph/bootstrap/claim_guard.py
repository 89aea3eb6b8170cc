"""A JWT tenant claim users cannot write (checked against the user pool, not taken on trust).

With ``ApiAuthMode=JWT`` the tenant is a claim of the caller's token. When the issuer is a Cognito
user pool, a claim that is a user attribute (``custom:tenant``, or a standard one such as
``email``) is what the user wrote if any app client of the pool lets users write it: a user may
sign up, or call UpdateUserAttributes, through that client and then sign in through the API's
client with the tenant of its choice. Claims that are no attribute (``tenant`` added by a
pre-token-generation trigger, ``cognito:groups``) are written by the pool's owner only.

So before it trusts the claim, the API reads every app client of the pool (ListUserPoolClients,
DescribeUserPoolClient) and refuses the claim while one of them may write it: its
``WriteAttributes`` name the attribute, or are unset (Cognito then lets the client write every
attribute). The verdict is kept for CHECK_TTL_SECONDS; a pool that cannot be read refuses too (fail
closed). Issuers that are not Cognito user pools are not checked here: the deployer's issuer must
not let users choose the claim (the README's Security section)."""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

from ..adapters.aws.identity import CognitoPoolClients
from ..ports.identity import LookupFailed, PoolClients

CHECK_TTL_SECONDS = 300.0
_COGNITO_ISSUER = re.compile(r"^https://cognito-idp\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/([\w-]+_[0-9A-Za-z]+)/?$")
# Cognito's standard user attributes (the claim of the same name in an ID token)
STANDARD_ATTRIBUTES = frozenset({
    "address", "birthdate", "email", "family_name", "gender", "given_name", "locale", "middle_name", "name",
    "nickname", "phone_number", "picture", "preferred_username", "profile", "zoneinfo", "updated_at", "website"})

LOG = logging.getLogger(__name__)


def cognito_pool(issuer: str) -> tuple[str, str] | None:
    """(region, user pool id) of a Cognito user pool issuer URL; None for any other issuer."""
    found = _COGNITO_ISSUER.match((issuer or "").strip())
    return (found.group(1), found.group(2)) if found else None


def is_attribute(claim: str) -> bool:
    """Whether the claim is a Cognito user attribute (one an app client may let users write)."""
    return claim.startswith("custom:") or claim in STANDARD_ATTRIBUTES


def writing_clients(clients: list[dict[str, Any]], claim: str) -> list[str]:
    """The ids of the app clients (DescribeUserPoolClient's ``UserPoolClient``) whose users may
    write ``claim``: its WriteAttributes name it, or are unset (every attribute)."""
    if not is_attribute(claim):
        return []
    return [str(c.get("ClientId")) for c in clients
            if not c.get("WriteAttributes") or claim in c["WriteAttributes"]]


class ClaimGuard:
    """Whether the tenant claim of a Cognito issuer is safe from its users (``problem``)."""

    def __init__(self, claim: str, issuer: str, client: Any = None, endpoint: str | None = None,
                 clock=time.monotonic, clients: PoolClients | None = None) -> None:
        """``clients``: the pool's app clients (ports.identity.PoolClients; default Cognito's,
        through ``client``, a boto3 cognito-idp client, or one made for ``endpoint``)."""
        self.claim = claim
        self.pool = cognito_pool(issuer)
        self.endpoint = endpoint
        self._clients = clients if clients is not None else CognitoPoolClients(
            self.pool[0] if self.pool else None, client=client, endpoint=endpoint)
        self._clock = clock
        self._verdict: tuple[float, str | None] | None = None
        self._lock = threading.Lock()

    def problem(self) -> str | None:
        """None when the claim is safe (or the issuer is not a Cognito pool); otherwise why not,
        for the log. The pool is read at most once per CHECK_TTL_SECONDS."""
        if self.pool is None or not is_attribute(self.claim):
            return None
        now = self._clock()
        with self._lock:
            if self._verdict is not None and now - self._verdict[0] < CHECK_TTL_SECONDS:
                return self._verdict[1]
        verdict = self._read()
        with self._lock:
            self._verdict = (now, verdict)
        if verdict:
            LOG.error("tenant claim refused: %s", verdict)
        return verdict

    def _read(self) -> str | None:
        _region, pool = self.pool  # type: ignore[misc]
        try:
            clients = self._clients.clients(pool)
        except LookupFailed as exc:  # a pool that cannot be read is not known safe
            return f"the user pool {pool} could not be read to check the tenant claim {self.claim} ({exc.reason})"
        writers = writing_clients(clients, self.claim)
        if writers:
            return (f"the tenant claim {self.claim} is a user attribute that app client(s) {', '.join(writers)} of "
                    f"user pool {pool} let users write (their WriteAttributes name it, or are unset); leave it out "
                    "of every client's WriteAttributes, or set the claim in a pre-token-generation trigger")
        return None
