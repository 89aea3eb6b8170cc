"""One structured log line per request on every path (issue 46): the stream function's ASGI app
(a function URL keeps no access log) writes the request id and caller of the Lambda Web Adapter's
request context, the tenant, route and status; the query function's resolver writes one per API
Gateway event, MCP included."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("aws_lambda_powertools")

from support import make_engine  # noqa: E402

from eragraph.bootstrap.identity import TenantIdentity  # noqa: E402
from eragraph.entrypoints.http.api import make_app  # noqa: E402
from eragraph.entrypoints.http.server import ApiApp  # noqa: E402

ARN = "arn:aws:sts::123456789012:assumed-role/kb-reader-a/me"


def lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"event": "request"')]


def asgi(app, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> int:
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": [(k.encode(), v.encode()) for k, v in headers.items()], "client": ("10.0.0.1", 5)}
    asyncio.run(app(scope, receive, send))
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


def test_the_stream_function_logs_who_called_each_request(capfd):
    engine = make_engine()
    identity = TenantIdentity(tag="", required=False, trust_request_context=True)
    app = ApiApp(None, identity=identity, engines=lambda _t: engine, stream_only=True, log=True)
    context = json.dumps({"requestId": "lwa-req-1", "authorizer": {"iam": {"userArn": ARN}}})
    try:
        status = asgi(app, "POST", "/retrieveAndGenerateStream",
                      {"content-type": "application/json", "x-amzn-request-context": context}, b"{not json")
        assert status == 400
        assert asgi(app, "GET", "/nowhere", {}) == 404
    finally:
        app.close()
    [first, second] = lines(capfd.readouterr().out)
    assert first["request_id"] == "lwa-req-1" and first["caller"] == ARN and first["tenant"] == ""
    assert first["route"] == "POST /retrieveAndGenerateStream" and first["status"] == 400 and first["ms"] >= 0
    assert second["status"] == 404 and second["route"] == "(no route)"


def test_the_query_function_logs_each_event(capfd):
    engine = make_engine()

    class Logger:
        def append_keys(self, **_):
            pass

    app = make_app(lambda _t: engine, tenant_of=lambda _e: "acme", logger=Logger())
    event = {"version": "2.0", "routeKey": "$default", "rawPath": "/stats", "rawQueryString": "", "headers": {},
             "isBase64Encoded": False, "requestContext": {
                 "http": {"method": "GET", "path": "/stats"}, "requestId": "apigw-7", "stage": "$default",
                 "authorizer": {"jwt": {"claims": {"sub": "user-42"}}}}}
    assert app.resolve(event, None)["statusCode"] == 200
    [line] = lines(capfd.readouterr().out)
    assert (line["request_id"], line["caller"], line["tenant"], line["route"], line["status"]) == (
        "apigw-7", "user-42", "acme", "GET /stats", 200)
