"""The deployed HTTP API as ``eragraph console --api URL`` calls it: one request at a time, signed
with the caller's own credentials, over a kept-alive connection per thread.

Who the caller is decides its tenant on AWS (bootstrap.identity: the IAM principal's tag, or the
JWT's claim), so every request carries exactly one identity, this machine's:

- ``SigV4``: the AWS credentials of botocore's chain (environment, profile, SSO, instance role),
  frozen afresh for every request (a role's session renews itself), signing for service
  ``execute-api`` in the API's region;
- ``Bearer``: ``Authorization: Bearer <jwt>``, the token read from a variable once or from a file
  on every request (so a token renewed in the file is used without a restart).

Nothing else of the request's identity is sent: ``Upstream.send`` takes the headers it is given,
and the proxy (console.proxy) gives only content negotiation headers, never the browser's
``authorization`` or ``x-eragraph-tenant``. A request that cannot reach the API (no route, refused,
reset, timed out, a TLS failure) raises ``Unreachable`` with the reason in words."""

from __future__ import annotations

import http.client
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

SERVICE = "execute-api"
TIMEOUT_SECONDS = 65.0  # API Gateway ends an integration at 30 s; a slow network gets the rest
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
# the region of an execute-api host: <api id>.execute-api.<region>.amazonaws.com(.cn)
REGION_IN_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")
STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class Unreachable(Exception):
    """The API could not be reached (the proxy answers 502 with this message)."""


@dataclass(frozen=True)
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def region_of(url: str) -> str | None:
    """The region an ``execute-api`` URL names, else None (a custom domain: say --region)."""
    found = REGION_IN_HOST.search((urlsplit(url).hostname or "").lower())
    return found.group(1) if found else None


def check_url(url: str) -> str:
    """``url`` without a trailing slash, or ValueError: https, or http to this machine only (a
    bearer token in clear over the network is anyone's)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--api {url!r}: not an http(s) URL (the stack's ApiUrl output, e.g. "
                         f"https://abc123.execute-api.us-east-1.amazonaws.com)")
    if parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS:
        raise ValueError(f"--api {url!r}: use https (plain http is allowed to this machine only)")
    if parts.query or parts.fragment:
        raise ValueError(f"--api {url!r}: the base URL takes no query or fragment")
    return url.strip().rstrip("/")


class SigV4:
    """Signs a request with the credentials ``credentials()`` gives (botocore's, refreshed)."""

    kind = "iam"

    def __init__(self, credentials: Any, region: str) -> None:
        self.credentials = credentials
        self.region = region

    def sign(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        frozen = self.credentials.get_frozen_credentials() if hasattr(self.credentials, "get_frozen_credentials") \
            else self.credentials
        request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
        SigV4Auth(frozen, SERVICE, self.region).add_auth(request)
        return dict(request.headers.items())


class Bearer:
    """Adds ``Authorization: Bearer <token>``; ``token()`` is asked on every request."""

    kind = "jwt"

    def __init__(self, token: Callable[[], str]) -> None:
        self.token = token

    @classmethod
    def from_file(cls, path: str) -> Bearer:
        file = Path(path).expanduser()

        def read() -> str:
            try:
                text = file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise Unreachable(f"the JWT file {file} cannot be read: {exc.strerror or exc}") from None
            if not text:
                raise Unreachable(f"the JWT file {file} is empty")
            return text

        read()  # a missing file is said at start, not at the first request
        return cls(read)

    def sign(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:  # noqa: ARG002
        return {**headers, "Authorization": f"Bearer {self.token()}"}


class Upstream:
    """The API at ``url`` (its stage path, if any, prefixes every request's path), called with
    ``auth`` (SigV4 or Bearer)."""

    def __init__(self, url: str, auth: SigV4 | Bearer, timeout: float = TIMEOUT_SECONDS) -> None:
        self.url = check_url(url)
        parts = urlsplit(self.url)
        self.scheme, self.base_path = parts.scheme, parts.path
        self.hostname, self.port = parts.hostname or "", parts.port
        default = 443 if self.scheme == "https" else 80
        self.host = parts.netloc.rsplit("@", 1)[-1] if self.port not in (None, default) else self.hostname
        self.auth = auth
        self.timeout = timeout
        self._local = threading.local()
        self._opened: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _connection(self, fresh: bool = False) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None or fresh:
            if conn is not None:
                conn.close()
                with self._lock:
                    self._opened = [c for c in self._opened if c is not conn]
            kind = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            conn = self._local.conn = kind(self.hostname, self.port, timeout=self.timeout)
            with self._lock:
                self._opened.append(conn)
        return conn

    def send(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Reply:
        """``target`` (path?query, as the browser sent it) on the API, signed; Unreachable when
        no answer came."""
        url = f"{self.scheme}://{self.host}{self.base_path}{target}"
        signed = self.auth.sign(method, url, {**headers, "host": self.host}, body)
        path = self.base_path + target
        for attempt in (0, 1):
            conn = self._connection(fresh=attempt > 0)
            reused = getattr(conn, "sock", None) is not None
            try:
                conn.request(method, path, body=body or None, headers=signed)
                response = conn.getresponse()
                data = response.read()
            except STALE as exc:
                conn.close()
                if attempt == 0 and reused:  # the API closed a kept-alive connection: once more, afresh
                    continue
                raise Unreachable(self._reason(exc)) from None
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise Unreachable(self._reason(exc)) from None
            if response.will_close:
                conn.close()
            return Reply(response.status, response.getheaders(), data)
        raise AssertionError("unreachable")  # pragma: no cover

    def _reason(self, exc: BaseException) -> str:
        text = str(exc) or type(exc).__name__
        if isinstance(exc, TimeoutError):
            text = f"no answer within {self.timeout:g} s"
        return f"the API at {self.url} could not be reached: {text}"

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()
