"""`eragraph serve`: the query API of the API Gateway function over one warm local engine.

A stdlib HTTP server turns each request into an API Gateway HTTP API (payload v2) event and
hands it to the very resolver the Lambda function uses (eragraph.api.make_app), then writes the
resolver's status, headers and body back. Routes, request validation, JSON bodies and 4xx
errors are therefore those of the deployed API. The engine (SQLite graph store, FAISS index,
embedder) is opened and warmed once; requests are served one at a time (the engine is not
shared between threads). Bound to 127.0.0.1 unless told otherwise; there is no authentication,
so do not expose it."""

from __future__ import annotations

import base64
import json
import sys
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from .services.engine import Engine

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MAX_BODY_BYTES = 1 << 20


@dataclass
class LocalContext:
    """The parts of a Lambda context the resolver may read."""

    function_name: str = "eragraph-serve"
    memory_limit_in_mb: int = 0
    invoked_function_arn: str = "arn:aws:lambda:local:000000000000:function:eragraph-serve"
    aws_request_id: str = ""

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


def http_event(method: str, target: str, headers: dict[str, str], body: bytes, source_ip: str) -> dict:
    """An API Gateway HTTP API payload v2 event for one HTTP request."""
    parts = urlsplit(target)
    lowered = {k.lower(): v for k, v in headers.items()}
    event: dict[str, Any] = {
        "version": "2.0", "routeKey": "$default", "rawPath": parts.path or "/", "rawQueryString": parts.query,
        "headers": lowered,
        "requestContext": {
            "http": {"method": method, "path": parts.path or "/", "protocol": "HTTP/1.1",
                     "sourceIp": source_ip, "userAgent": lowered.get("user-agent", "")},
            "requestId": uuid.uuid4().hex, "routeKey": "$default", "stage": "$default",
            "timeEpoch": int(time.time() * 1000),
        },
        "isBase64Encoded": False,
    }
    if parts.query:
        event["queryStringParameters"] = dict(parse_qsl(parts.query, keep_blank_values=True))
    if body:
        try:
            event["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            event["body"] = base64.b64encode(body).decode("ascii")
            event["isBase64Encoded"] = True
    return event


class ApiServer(HTTPServer):
    """An HTTPServer whose requests go to the query API's resolver over ``engine``."""

    def __init__(self, engine: Engine, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 log: bool = False) -> None:
        from .api import make_app

        self.engine = engine
        self.app = make_app(lambda _tenant: engine)
        self.log = log
        super().__init__((host, port), ApiRequestHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def resolve(self, event: dict) -> dict:
        return self.app.resolve(event, LocalContext(aws_request_id=event["requestContext"]["requestId"]))


class ApiRequestHandler(BaseHTTPRequestHandler):
    server: ApiServer
    protocol_version = "HTTP/1.1"

    def _dispatch(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY_BYTES:
            self._write(413, {"content-type": "application/json"},
                        json.dumps({"statusCode": 413, "message": "request body too large"}).encode())
            return
        body = self.rfile.read(length) if length else b""
        event = http_event(self.command, self.path, dict(self.headers.items()), body, self.client_address[0])
        out = self.server.resolve(event)
        data = out.get("body") or ""
        payload = base64.b64decode(data) if out.get("isBase64Encoded") else str(data).encode("utf-8")
        headers = {k: (", ".join(v) if isinstance(v, list) else str(v)) for k, v in (out.get("headers") or {}).items()}
        self._write(int(out.get("statusCode", 500)), headers, payload)

    def _write(self, status: int, headers: dict[str, str], payload: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() not in ("content-length", "connection"):
                self.send_header(key, value)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _dispatch

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
        if self.server.log:
            sys.stderr.write(f"{self.address_string()} - {format % args}\n")


def warm(engine: Engine) -> None:
    """Load what the first query would: the embedder's model and the vector index."""
    engine.embedder.embed(["warm up"])
    engine.vectors.count()
    engine.graph.layer_sizes()


def make_server(engine: Engine, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, log: bool = False) -> ApiServer:
    """A warm server bound to (host, port); port 0 picks a free one (see ``server.url``)."""
    warm(engine)
    return ApiServer(engine, host, port, log=log)
