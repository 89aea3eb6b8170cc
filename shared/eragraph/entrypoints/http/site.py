"""The Starlette app in front of ``ApiApp`` (asgi.py): what ``eragraph serve``, ``eragraph
console`` and the stream function (functions/stream) run. Starlette does the routing, the
middleware and the responses; the work behind each route is ApiApp's (its pools, its request
pipeline, serve_stream's admission and slot rules).

- **Middleware** (pure ASGI, inside the ServerErrorMiddleware and ExceptionMiddleware Starlette
  always adds): ``Logged`` opens the request's log record and writes its line (request_log, 499
  when the client left before an answer), then ``Guarded`` applies ``eragraph serve``'s checks
  (guard.LocalGuard) before any route, the console's files included.
- **Routes**: the console's files (GET ``/``, ``/index.html``, ``/console/...``, HEAD too; not on
  the stream function), MCP (every method), the three streamed routes (POST only), and, on the
  stream function, its routes without a request (GET /health). A stream route matches its path
  with any trailing slashes, as before (``trailing_slashes``); Starlette never redirects a slash.
- **Everything else** (every API route, and a request no route takes: the pipeline's JSON 404)
  is the router's ``default``: ApiApp.serve_routed, through the request pipeline, which matches
  the route table as the Lambda resolver does (a trailing slash, HEAD as GET, the bodies of its
  404s). A method a stream route does not take is no partial match (``Exact``: no 405 of
  Starlette's own) and falls there too. On the stream function the default is its 404.
- **Bodies** are read through Starlette's request stream under the route's cap (``body_of``:
  413 above it, as before), for every route but the console's files and MCP (its transport
  reads its own)."""

from __future__ import annotations

import json
from functools import partial

from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Match
from starlette.routing import Route as Path

from .. import request_log
from ..console.assets import asset, is_console_path
from .errors import error_body
from .routes import ASGI_MCP, ROUTES, STREAM, route, route_of

MAX_BODY_BYTES = 1 << 20
UPLOAD_MAX_BODY_BYTES = 6 * (1 << 20)  # the routes that take documents: Lambda's request payload limit, as on AWS
CONSOLE_HEADERS = {  # no other page may frame the console (clickjacking) nor run a script in it
    "x-frame-options": "DENY", "x-content-type-options": "nosniff",
    "content-security-policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
}
STREAM_ROUTES = tuple(r for r in ROUTES if STREAM in r.on)  # the stream function's


class _Slashes(Convertor):
    """Any number of trailing slashes (``/mcp``, ``/mcp/``): the paths served as before."""

    regex = "/*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("trailing_slashes", _Slashes())


def takes_documents(path: str) -> bool:
    """POST /documents and IngestKnowledgeBaseDocuments (Bedrock's inline documents are up to
    5 MB each): their bodies are capped at UPLOAD_MAX_BODY_BYTES, every other route's at
    MAX_BODY_BYTES."""
    path = path.rstrip("/")
    return path == "/documents" or (path.startswith("/knowledgebases/") and path.endswith("/documents")
                                    and "/datasources/" in path)


class Whole(Response):
    """A whole answer: Starlette's Response, with no body for HEAD (its length still told)."""

    def __init__(self, status: int, headers: dict[str, str], payload: bytes) -> None:
        super().__init__(payload, status, headers={k: v for k, v in headers.items()
                                                   if k.lower() not in ("content-length", "connection")})

    async def __call__(self, scope, receive, send) -> None:
        if scope["method"] != "HEAD":
            await super().__call__(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": b""})


class Exact(Path):
    """A route that takes its methods only: another method is no match (not Starlette's 405)."""

    def matches(self, scope):
        match, child = super().matches(scope)
        return (Match.NONE, {}) if match is Match.PARTIAL else (match, child)


def headers_of(scope: dict) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


async def body_of(app, request: Request) -> bytes | Response | None:
    """The request's whole body; an error answer (413) over the route's cap; None when the
    client left."""
    path = request.scope["path"]
    cap = UPLOAD_MAX_BODY_BYTES if takes_documents(path) else MAX_BODY_BYTES
    too_large = Whole(*app.error_answer(path, 413, f"request body too large (at most {cap} bytes)"))
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > cap:
        return too_large
    chunks, size = [], 0
    try:
        async for piece in request.stream():
            size += len(piece)
            if size > cap:
                return too_large
            chunks.append(piece)
    except ClientDisconnect:
        return None
    return b"".join(chunks)


class Asgi:
    """An ASGI endpoint (Starlette's Route calls an object as an ASGI app, a function as a
    request handler)."""

    def __init__(self, serve) -> None:
        self.serve = serve

    async def __call__(self, scope, receive, send) -> None:
        await self.serve(scope, receive, send)


def with_body(app, serve) -> Asgi:
    """An ASGI endpoint: the body read under its cap (body_of), then ``serve(scope, send, body)``."""

    async def endpoint(scope, receive, send) -> None:
        body = await body_of(app, Request(scope, receive))
        if isinstance(body, Response):
            await body(scope, receive, send)
        elif body is not None:
            await serve(scope, send, body)
    return Asgi(endpoint)


def site(app) -> Starlette:
    """The Starlette app over ``app`` (asgi.ApiApp, or the console's proxy.ProxyApp)."""

    async def console(request: Request) -> Response:
        """The browser console's static files (console.assets); a name that is no file is a 404."""
        path = request.scope["path"]
        found = asset(path)
        if found is None:
            return Whole(404, {"content-type": "application/json", **CONSOLE_HEADERS},
                         json.dumps(error_body(404, f"no console file {path}")).encode())
        return Whole(200, {"content-type": found.content_type, "cache-control": "no-cache", **CONSOLE_HEADERS},
                     found.body)

    # the streamed routes: each served by ApiApp.serve_streamed from its module (MCP reads its own body)
    routes: list[Path] = [Exact(r.path + "{_:trailing_slashes}", with_body(app, partial(app.serve_streamed, r)),
                                methods=[r.method]) for r in ROUTES
                          if r.asgi and r.asgi != ASGI_MCP and (STREAM in r.on or not app.stream_only)]
    if app.stream_only:
        routes += [Exact(r.path + "{_:trailing_slashes}", _fixed(r.handler), methods=[r.method])
                   for r in STREAM_ROUTES if r.handler is not None]
        default = with_body(app, app.serve_stream_404)
    else:
        routes += [Exact(p, console, methods=["GET"]) for p in ("/", "/index.html", "/console/{name:path}")]
        routes.append(Path(route(ASGI_MCP).path + "{_:trailing_slashes}", Asgi(app.serve_mcp)))
        default = with_body(app, app.serve_routed)
    built = Starlette(routes=routes, middleware=[Middleware(Logged, owner=app), Middleware(Guarded, owner=app)])
    built.router.redirect_slashes = False
    built.router.default = default
    return built


def _fixed(handler):
    async def endpoint(request: Request) -> Response:
        return Whole(200, {"content-type": "application/json"}, json.dumps(handler()).encode())
    return endpoint


class Logged:
    """The request log: one record a request (its id, method, route and caller), one line when
    it ends, unless quiet (``app.log``)."""

    def __init__(self, inner, owner) -> None:
        self.inner, self.app = inner, owner

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        app, headers = self.app, headers_of(scope)
        static = is_static(app, scope)
        found = route_of(scope["method"], scope["path"])
        record = request_log.begin(app.request_id_of(headers), scope["method"],
                                   "console" if static else found.key if found is not None else "(no route)")
        request_log.note(caller=app.caller_of(scope, headers))
        sent: list[int] = []

        async def send_logged(message: dict) -> None:
            if message["type"] == "http.response.start":
                sent.append(message["status"])
            await send(message)
        try:
            await self.inner(scope, receive, send_logged)
        finally:
            if app.log:
                request_log.finish(record, sent[0] if sent else 499)  # 499: the client left before an answer


class Guarded:
    """``eragraph serve``'s checks of every request (guard.LocalGuard, when ``app.guard`` is set)."""

    def __init__(self, inner, owner) -> None:
        self.inner, self.app = inner, owner

    async def __call__(self, scope, receive, send) -> None:
        guard = self.app.guard
        if scope["type"] == "http" and guard is not None:
            refused = guard.check(scope["method"], scope["path"], headers_of(scope), static=is_static(self.app, scope))
            if refused is not None:
                status, message, extra = refused
                await Whole(*self.app.error_answer(scope["path"], status, message, extra))(scope, receive, send)
                return
        await self.inner(scope, receive, send)


def is_static(app, scope: dict) -> bool:
    """Whether the request is for the console's files (never on the stream function)."""
    return scope["method"] in ("GET", "HEAD") and not app.stream_only and is_console_path(scope["path"])


