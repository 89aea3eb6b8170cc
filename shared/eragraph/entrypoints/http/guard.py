"""What ``eragraph serve`` checks of every request before any route runs, so that a web page open
in the user's browser cannot drive the server on 127.0.0.1 (eragraph.entrypoints.http.server sets
it; site.Guarded, a middleware of the Starlette app, applies it before any route: every route, the
console and the ones added later):

- bound to loopback, a request whose ``Host`` is not a loopback name (DNS rebinding: a page of
  evil.example whose name now points at 127.0.0.1), or whose ``Origin`` is present and not this
  server's own, is refused (403);
- with a token (``eragraph serve --token T`` or ERAGRAPH_SERVE_TOKEN), every route but
  ``GET /health`` and the console's static files asks ``authorization: Bearer T`` (401); with a
  principals file (``--principals-file``: bootstrap.serve_tokens), any of its tokens is taken
  too (its request is answered inside that token's principals);
- a POST's body (if it has one) must be declared JSON (``content-type: application/json``, or ``...+json``):
  a page can POST ``text/plain`` (or a typeless blob) cross-site without asking the server first,
  never JSON (415).

``check`` answers None (go on) or the refusal: (status, message, headers)."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
OPEN_PATHS = frozenset({"/health"})  # GET without a token: the readiness check


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or address, no port) names this machine."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_host(value: str) -> tuple[str, int | None]:
    """(host, port) of a Host header's value; ("", None) when it is malformed."""
    try:
        parts = urlsplit("//" + value.strip())
        return (parts.hostname or ""), parts.port
    except ValueError:
        return "", None


def is_json_type(value: str) -> bool:
    """Whether a content-type names JSON (parameters such as charset aside)."""
    kind = value.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


@dataclass(frozen=True)
class LocalGuard:
    """``loopback``: the server is bound to a loopback address; ``port``: the port it listens on
    (its own origin's); ``token``: the bearer token every request must carry ("" none);
    ``callers``: the principals file's tokens (bootstrap.serve_tokens.TokenPrincipals: ``accepts``),
    each taken as well as ``token``, and then a token is asked even without ``token``."""

    loopback: bool
    port: int
    token: str = ""
    callers: Any = None

    def check(self, method: str, path: str, headers: Mapping[str, str], static: bool = False
              ) -> tuple[int, str, dict[str, str]] | None:
        """None, or the refusal of a request (``headers``: lower-case names; ``static``: a file of
        the console)."""
        if self.loopback:
            host, _ = split_host(headers.get("host", ""))
            if not is_loopback(host):
                return 403, ("this server answers only requests addressed to this machine (Host must be "
                             "127.0.0.1, localhost or [::1]): a request through another name is refused, "
                             "so that a web page cannot reach it by DNS rebinding"), {}
            origin = headers.get("origin")
            if origin is not None and not self._own_origin(origin):
                return 403, ("a request from a web page of another origin is refused: only this server's own "
                             "pages may call it"), {}
        if (self.token or self.callers is not None) and not self._open(method, path, static):
            given = headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            value = value.strip()
            known = scheme.lower() == "bearer" and (
                (bool(self.token) and hmac.compare_digest(value.encode(), self.token.encode()))
                or (self.callers is not None and bool(value) and self.callers.accepts(value)))
            if not known:
                return 401, ("this server asks for its token: send authorization: Bearer <token> (the one given "
                             "to eragraph serve --token, or one of its --principals-file)"), \
                    {"www-authenticate": 'Bearer realm="eragraph"'}
        has_body = headers.get("content-length", "0").strip() not in ("", "0") or "transfer-encoding" in headers
        if method == "POST" and (has_body or "content-type" in headers):  # a POST without a body sends nothing to misread
            given = headers.get("content-type")
            if given is None or not is_json_type(given):
                return 415, (f"the body must be JSON: content-type must be application/json "
                             f"(got {given!r})" if given is not None else
                             "the body must be JSON: content-type must be application/json (none given)"), {}
        return None

    def _own_origin(self, origin: str) -> bool:
        try:
            parts = urlsplit(origin)
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return False
        return parts.scheme == "http" and is_loopback(parts.hostname or "") and port == self.port

    @staticmethod
    def _open(method: str, path: str, static: bool) -> bool:
        return method in ("GET", "HEAD") and (static or path.rstrip("/") in OPEN_PATHS)
