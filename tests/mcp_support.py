"""The MCP SDK's client against a Lambda handler: an httpx2 transport that turns each HTTP
request of the client into an API Gateway HTTP API (payload v2) event, built from the real
sample event with the caller's authorizer context, and the handler's answer back into an HTTP
response. Used by tests/aws/test_mcp_handler.py (the handler in process, moto) and
tests/deployed/test_deployed_handlers.py (the built function under Python 3.12)."""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable

import anyio
import httpx2
from lambda_support import event
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL = "https://abc123.execute-api.us-east-1.amazonaws.com/mcp"


def mcp_event(method: str, path: str, headers: dict, body: bytes, authorizer: dict | None) -> dict:
    """A payload v2 event of the route ``METHOD PATH`` (API Gateway's route key) from the sample;
    the body base64-encoded, as API Gateway may send it; ``authorizer`` None: the sample's."""
    ev = copy.deepcopy(event("api_query_valid.json"))
    ev["routeKey"] = ev["requestContext"]["routeKey"] = f"{method} {path}"
    ev["rawPath"] = ev["requestContext"]["http"]["path"] = path
    ev["requestContext"]["http"]["method"] = method
    ev["headers"] = {k.lower(): v for k, v in headers.items()}
    if authorizer is not None:
        ev["requestContext"]["authorizer"] = authorizer
    ev.pop("body", None)
    ev["isBase64Encoded"] = False
    if body:
        ev["body"], ev["isBase64Encoded"] = base64.b64encode(body).decode(), True
    return ev


class LambdaTransport(httpx2.AsyncBaseTransport):
    """Each HTTP request of the client becomes a payload v2 event for ``invoke(event) -> the
    handler's response``, run in a worker thread (the handler runs an event loop of its own)."""

    def __init__(self, invoke: Callable[[dict], dict], authorizer: dict | None = None) -> None:
        self.invoke, self.authorizer = invoke, authorizer
        self.events: list[dict] = []
        self.statuses: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        ev = mcp_event(request.method, request.url.path, dict(request.headers), body, self.authorizer)
        self.events.append(ev)
        out = await anyio.to_thread.run_sync(self.invoke, ev)
        self.statuses.append(out["statusCode"])
        raw = out.get("body") or ""
        content = base64.b64decode(raw) if out.get("isBase64Encoded") else raw.encode()
        return httpx2.Response(out["statusCode"], headers=out.get("headers") or {}, content=content)


def lambda_client(transport: LambdaTransport, **options) -> Client:
    """The SDK's Client over streamable HTTP through ``transport``."""
    return Client(streamable_http_client(URL, http_client=httpx2.AsyncClient(transport=transport)), **options)
