"""One HTTP request as ``eragraph serve`` holds it: method, path, query, headers and body as they
came, the body read as text and parsed (body.parse_body) once, on first use.

It offers what the route handlers and the error answers read of a request (``http_method``,
``path``, ``headers``, ``json_body``, ``decoded_body``, ``raw_event``), so a handler runs the same
under the Lambda resolver (api.StrictHttpEvent, an API Gateway event) and under the request
pipeline (pipeline.Pipeline), which speaks no API Gateway."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.parse import parse_qsl

from .body import BadRequestBody, NotJsonBody, parse_body
from .guard import is_json_type


def check_json_type(content_type: str | None) -> None:
    """NotJsonBody when a body's ``content_type`` is given and is not JSON."""
    if content_type is not None and not is_json_type(content_type):
        raise NotJsonBody(f"the body must be JSON: content-type must be application/json (got {content_type[:60]!r})")


def text_of(data: bytes, content_type: str | None) -> str:
    """A body's text: NotJsonBody (check_json_type), or BadRequestBody for bytes that are not
    UTF-8 (the resolver and the pipeline check a body alike)."""
    check_json_type(content_type)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequestBody(f"the body is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


@dataclass
class Request:
    """``headers``: lower-case names (repeated ones joined with ", "); ``path``: as sent
    (percent-encoding kept, as API Gateway's rawPath); ``query``: the raw query string."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""
    query: str = ""
    client: str = ""
    request_id: str = ""
    params: dict[str, str] = field(default_factory=dict)  # the path parameters of the route it matched

    @property
    def http_method(self) -> str:
        return self.method

    @property
    def raw_event(self) -> dict[str, str]:
        """What admission.Admission reads of the request: its headers."""
        return self.headers

    @cached_property
    def decoded_body(self) -> str | None:
        return text_of(self.body, self.headers.get("content-type")) if self.body else None

    @cached_property
    def json_body(self) -> Any:
        """The body as a JSON object (None: no body), or BadRequestBody saying why not."""
        text = self.decoded_body
        return parse_body(text) if text else None

    @cached_property
    def query_values(self) -> dict[str, str]:
        """The query parameters (the last of a repeated one, as API Gateway's queryStringParameters)."""
        return dict(parse_qsl(self.query, keep_blank_values=True))


SCOPE_KEY = "eragraph.request"


def request_of(scope: dict, body: bytes) -> Request:
    """The request of an ASGI ``scope`` whose whole ``body`` was read, made once (kept in the
    scope: the dispatch, the pipeline and a stream read the same one, its body parsed once)."""
    found = scope.get(SCOPE_KEY)
    if found is None:
        from ..request_log import request_id

        found = scope[SCOPE_KEY] = from_scope(scope, body, request_id())
    return found


def from_scope(scope: dict, body: bytes, request_id: str = "") -> Request:
    """The request of an ASGI ``scope`` whose whole ``body`` was read."""
    headers: dict[str, str] = {}
    for key, value in scope["headers"]:
        name = key.decode("latin-1").lower()
        headers[name] = f"{headers[name]}, {value.decode('latin-1')}" if name in headers else value.decode("latin-1")
    client = scope.get("client") or ("127.0.0.1", 0)
    return Request(scope["method"], scope.get("raw_path", scope["path"].encode()).decode("latin-1"), headers, body,
                   scope.get("query_string", b"").decode("latin-1"), client[0], request_id)
