"""``eragraph console --api URL``: the browser console on this machine, over the deployed API.

No website is hosted for it: the console's static files are served here (the ASGI app of
``eragraph serve``, eragraph.entrypoints.http.server.ApiApp, with its console routes and its
loopback binding), and every other request goes through the app's request pipeline as under
``eragraph serve`` (the request read once, request.Request; its call prepared and run in a pool),
whose call here (``Forwarding``) forwards it to the deployed HTTP API, signed with this
machine's credentials (console.upstream: SigV4 for ``execute-api``, or a JWT bearer). The page
therefore calls its own origin, as under ``eragraph serve``: the API needs no CORS, and the
credentials never reach the browser.

What is forwarded: only a request of the route table (eragraph.entrypoints.http.routes: a method
and path the HTTP API serves; any other is a 404 here, never signed), the method, the path and
query as the browser sent them, the body, and only
the headers in FORWARDED (content negotiation). Never the browser's ``authorization`` (the local
token of ``eragraph serve``) nor ``x-eragraph-tenant``: on AWS the tenant is the caller's
identity's (its IAM principal tag or JWT claim), and the caller is whoever signed. What comes back
(status, body, the headers but hop-by-hop ones and cookies) reaches the page unchanged: the API's
403, 429 (with Retry-After) and 5xx with their bodies. An API that cannot be reached is a 502 whose
message says why.

``POST /query/stream``: the HTTP API answers whole responses (API Gateway does not stream), and
the stream function (a function URL) serves Bedrock's RetrieveAndGenerateStream only, so the
proxy asks ``POST /query`` with ``answer: true`` and writes the stream's NDJSON from the answer:
``results``, one ``piece`` (the whole answer), ``done``. The page reads one format everywhere;
the answer appears at once rather than word by word."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from ..http.errors import error_body
from ..http.guard import LocalGuard, is_loopback
from ..http.pipeline import Answer, Call
from ..http.request import Request
from ..http.routes import API, ROUTES, STREAM, Route
from ..http.server import DEFAULT_HOST, ApiApp, ApiServer
from ..http.site import with_body
from .upstream import Reply, Unreachable, Upstream

DEFAULT_PORT = 8766
WORKERS = 8  # requests in flight to the API at once (each waits on the network, not on this machine)
STREAM_PATH = "/query/stream"
FORWARDED = ("content-type", "accept", "accept-language")
NOT_RETURNED = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "set-cookie",
                          "proxy-authenticate", "upgrade", "trailer"})
NDJSON = "application/x-ndjson"
ANSWER_FIELDS = ("answer", "cited_ids", "usage")


def api_route(method: str, path: str) -> bool:
    """Whether ``method path`` is a route the HTTP API serves (the only requests signed and sent)."""
    return any(r.method == method and API in r.on and r.pattern.match(path) for r in ROUTES)


def forwarded_headers(headers: dict[str, str]) -> dict[str, str]:
    """The browser's headers the API gets (lower-case names in): FORWARDED only."""
    return {name: headers[name] for name in FORWARDED if headers.get(name)}


def returned_headers(headers: list[tuple[str, str]]) -> dict[str, str]:
    """The API's response headers the page gets: all but hop-by-hop ones and cookies."""
    out: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        if key in NOT_RETURNED:
            continue
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


def json_reply(status: int, body: dict, headers: dict[str, str] | None = None) -> Answer:
    return status, {"content-type": "application/json", **(headers or {})}, json.dumps(body).encode("utf-8")


def stream_lines(response: dict) -> bytes:
    """The NDJSON of ``POST /query/stream`` from a whole ``POST /query`` answer, in the lines of
    eragraph.entrypoints.http.query_stream: ``results`` (the response without its answer), one
    ``piece`` with the answer's text (none without one), ``done``."""
    head = {k: v for k, v in response.items() if k not in ANSWER_FIELDS}
    lines: list[dict[str, Any]] = [{"type": "results", **head}]
    answer = response.get("answer")
    if answer:
        lines.append({"type": "piece", "text": answer})
    note = response.get("note") or ("" if answer is not None else "no answer: the deployed API has no generator")
    lines.append({"type": "done", "answer": answer, "cited_ids": response.get("cited_ids") or [],
                  "usage": response.get("usage") or {}, "stages": response.get("stages") or {}, "note": note,
                  "seconds": response.get("seconds")})
    return b"".join(json.dumps(line).encode("utf-8") + b"\n" for line in lines)


class Forwarding:
    """The request pipeline of the console's server: what ApiApp's pipeline is under `eragraph
    serve` (``prepare(request)``: the call answering it, and its pool), but the answer is the
    deployed API's, reached through ``upstream``."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream

    def prepare(self, request: Request) -> Call:
        return Call(partial(self.forward, request))

    def forward(self, request: Request) -> Answer:
        """Forward ``request`` (request.Request, its whole body read) to the API."""
        method, path, query, body = request.method, request.path, request.query, request.body
        headers = forwarded_headers(request.headers)
        if method == "POST" and path.rstrip("/") == STREAM_PATH:
            return self.stream_answer(headers, body)
        if not api_route(method, path):  # never signed: the proxy reaches the API's routes only
            return json_reply(404, error_body(404, f"{method} {path[:200]} is not a route of the API"))
        try:
            reply = self.upstream.send(method, path + ("?" + query if query else ""), headers, body)
        except Unreachable as exc:
            return json_reply(502, error_body(502, str(exc)))
        return reply.status, returned_headers(reply.headers), reply.body

    def stream_answer(self, headers: dict[str, str], body: bytes) -> Answer:
        """POST /query/stream as POST /query with ``answer: true`` (see the module's docstring); a
        refusal of the API (4xx, 5xx) comes back as it is, before any line."""
        try:
            request = json.loads(body) if body else None
        except (ValueError, RecursionError):
            request = None
        if isinstance(request, dict):  # anything else: the API's own 4xx says what is wrong with it
            body = json.dumps({**request, "answer": True}).encode("utf-8")
        try:
            reply: Reply = self.upstream.send("POST", "/query", headers, body)
        except Unreachable as exc:
            return json_reply(502, error_body(502, str(exc)))
        if reply.status != 200:
            return reply.status, returned_headers(reply.headers), reply.body
        try:
            response = json.loads(reply.body)
        except ValueError:
            response = None
        if not isinstance(response, dict):
            return json_reply(502, error_body(502, f"the API at {self.upstream.url} answered POST /query with "
                                                   f"no JSON object"))
        return (200, {"content-type": NDJSON, "cache-control": "no-cache", "x-content-type-options": "nosniff"},
                stream_lines(response))


class ProxyApp(ApiApp):
    """ApiApp whose request pipeline forwards to the deployed API (``Forwarding``): every route
    it does not serve itself (the console's files) goes there, the streams and MCP included."""

    needs_engine = False

    def __init__(self, upstream: Upstream, log: bool = False, workers: int = WORKERS) -> None:
        super().__init__(None, workers, workers, log=log)
        self.upstream = upstream
        self._pipeline = Forwarding(upstream)

    async def serve_mcp(self, scope: dict, receive, send) -> None:
        """POST /mcp: the deployed API's MCP endpoint, forwarded as any other route."""
        await with_body(self, self.serve_routed)(scope, receive, send)

    async def serve_streamed(self, streamed: Route, scope: dict, send, body: bytes) -> None:
        """A streamed route, forwarded: the API answers it whole (POST /query/stream from POST
        /query: ``Forwarding.stream_answer``; the chat completions with ``stream: true``); one
        that only the stream function serves (a function URL, not the API's) is a 404."""
        if STREAM in streamed.on and API not in streamed.on:
            await self.send_whole(send, scope, 404, {"content-type": "application/json"}, json.dumps(error_body(
                404, f"{streamed.key} is served by the stack's stream function (its function URL), "
                     "not by the HTTP API this console forwards to")).encode("utf-8"))
            return
        await self.serve_routed(scope, send, body)

    def close(self) -> None:
        super().close()
        self.upstream.close()


def console_server(upstream: Upstream, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                   log: bool = False, token: str = "") -> ApiServer:
    """The console's server bound to (host, port) (port 0: a free one, see ``server.url``), with
    the checks of ``eragraph serve`` (guard.LocalGuard: on loopback, a request whose Host is not
    this machine or whose Origin is another site's is refused before anything is signed; a POST
    must be JSON) and ``token`` (`eragraph console` gives a new one each run): every request but
    the page's files must carry it as a bearer, so another local process that reaches the port
    cannot have requests signed with the operator's credentials. The browser's authorization
    (that token) is never forwarded."""
    server = ApiServer(None, host, port, log=log, app=ProxyApp(upstream, log=log))
    server.app.guard = LocalGuard(loopback=is_loopback(host), port=int(server.server_address[1]), token=token)
    return server
