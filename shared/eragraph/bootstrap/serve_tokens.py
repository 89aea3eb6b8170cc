"""``eragraph serve --principals-file FILE``: who is asking, from the bearer token it sends.

The file is a JSON object mapping each token to the principals (domain.access) of whoever holds
it, as a list or a comma-separated text::

    {"7f3c...e1": ["group:finance", "user:alice"],
     "b91d...04": "group:board"}

It is read and validated once, when the server starts (``load``), each fault in words naming
the file and the token's position (never the token): the file at most MAX_FILE_BYTES, at most
MAX_TOKENS tokens, each MIN_TOKEN-MAX_TOKEN visible ASCII characters without spaces and given
once, each naming 1-100 valid principals, and none equal to the operator's ``--token``. Every
check is linear in the file's size.

With a file, every request but GET /health and the console's files carries one of its tokens
or the operator's ``--token`` (guard.LocalGuard refuses any other with a 401): a file token's
request is answered inside its principals' view on every door (the API routes, the streamed
routes, MCP), the operator's token reads everything. Tokens are compared by their SHA-256
digest, so a lookup reveals nothing of a token by its timing."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..domain.access import MAX_PRINCIPALS, AccessError, Caller, caller, check_principal
from .principals import PrincipalsForbidden

MAX_FILE_BYTES = 1 << 20
MAX_TOKENS = 10_000
MIN_TOKEN, MAX_TOKEN = 16, 512  # a shorter token is guessable


class TokenFileError(ValueError):
    """A principals file that cannot be served (its words name the file and the fault)."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def bearer(headers: Mapping[str, str]) -> str | None:
    """The token of an ``authorization: Bearer T`` header (lower-case names), else None."""
    scheme, _, value = (headers.get("authorization") or "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _check_token(token: str, where: str) -> None:
    if not MIN_TOKEN <= len(token) <= MAX_TOKEN:
        raise TokenFileError(f"{where}: a token is {MIN_TOKEN}-{MAX_TOKEN} characters (this one has {len(token)}); "
                             f"make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'")
    if not all("!" <= ch <= "~" for ch in token):
        raise TokenFileError(f"{where}: a token is visible ASCII characters without spaces")


class _Pairs(list):
    """A JSON object's (key, value) pairs, in order."""


def _caller(principals: Any, where: str, default: str) -> Caller:
    """The Caller of a token's principals: a list, or a comma-separated text, of 1-100."""
    names = [p.strip() for p in principals.split(",") if p.strip()] if isinstance(principals, str) else principals
    if not isinstance(names, list) or isinstance(names, _Pairs) or not names:  # an object is no list
        raise TokenFileError(f"{where}: its principals are a list (or a comma-separated text) naming at least one, "
                             "e.g. [\"group:finance\", \"user:alice\"]")
    if len(names) > MAX_PRINCIPALS:
        raise TokenFileError(f"{where}: {len(names)} principals; at most {MAX_PRINCIPALS}")
    try:
        return caller([check_principal(n, f"{where}[{i}]") for i, n in enumerate(names)], default)
    except AccessError as exc:
        raise TokenFileError(str(exc)) from None


class TokenPrincipals:
    """Each token's Caller (``callers``: token digest -> Caller); ``operator``: the operator's
    ``--token`` ("" none), whose requests read everything."""

    def __init__(self, callers: Mapping[bytes, Caller], operator: str = "") -> None:
        self.callers = dict(callers)
        self.operator = operator

    @classmethod
    def parse(cls, text: str, where: str = "the principals file", operator: str = "",
              default: str = "tenant") -> TokenPrincipals:
        """The tokens of a file's ``text``; TokenFileError saying what is wrong where."""
        if len(text.encode("utf-8")) > MAX_FILE_BYTES:
            raise TokenFileError(f"{where}: larger than {MAX_FILE_BYTES} bytes")

        try:  # an object kept as its pairs: a token given twice is refused below, not silently the last
            given = json.loads(text, object_pairs_hook=_Pairs)
        except ValueError as exc:
            raise TokenFileError(f"{where}: not JSON ({exc})") from None
        if not isinstance(given, _Pairs):
            raise TokenFileError(f"{where}: a JSON object mapping each token to its principals, e.g. "
                                 '{"<token>": ["group:finance", "user:alice"]}')
        if not given:
            raise TokenFileError(f"{where}: names no token")
        if len(given) > MAX_TOKENS:
            raise TokenFileError(f"{where}: {len(given)} tokens; at most {MAX_TOKENS}")
        callers: dict[bytes, Caller] = {}
        for i, (token, principals) in enumerate(given, 1):
            at = f"{where}, token {i}"
            _check_token(token, at)
            digest = _digest(token)
            if digest in callers:
                raise TokenFileError(f"{at}: the same token as an earlier one (each token is one caller's)")
            if operator and hmac.compare_digest(digest, _digest(operator)):
                raise TokenFileError(f"{at}: the operator's --token (which reads everything) cannot be a caller's too")
            callers[digest] = _caller(principals, at, default)
        return cls(callers, operator)

    @classmethod
    def load(cls, path: str | Path, operator: str = "", default: str = "tenant") -> TokenPrincipals:
        """The file at ``path``, validated (TokenFileError)."""
        file = Path(path)
        try:
            if file.stat().st_size > MAX_FILE_BYTES:
                raise TokenFileError(f"{file}: larger than {MAX_FILE_BYTES} bytes")
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise TokenFileError(f"{file}: cannot be read ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise TokenFileError(f"{file}: not UTF-8 text") from None
        return cls.parse(text, str(file), operator, default)

    def accepts(self, token: str) -> bool:
        """Whether ``token`` is one of the file's (the guard's check; the operator's is its own)."""
        return _digest(token) in self.callers

    def caller(self, headers: Mapping[str, str]) -> Caller | None:
        """Who is asking: the Caller of the request's bearer token (None: the operator's token);
        PrincipalsForbidden for a request whose token is neither (the guard refuses it first)."""
        token = bearer(headers)
        if token is not None and self.operator and hmac.compare_digest(_digest(token), _digest(self.operator)):
            return None
        found = self.callers.get(_digest(token)) if token is not None else None
        if found is None:
            raise PrincipalsForbidden("this server answers inside the principals of the caller's token, and the request "
                                      "carries no token of its principals file")
        return found
