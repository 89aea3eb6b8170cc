"""A body built to make the pre-parse scan quadratic (an unclosed string of escaped quotes, then
brackets) is refused in linear time on every entry point that parses a JSON body: the query
function's resolver (API Gateway events), the stream function's ASGI app, and `eragraph serve`.
Each 1 MB case is answered with its 4xx within a second (the old scan restarted at every quote:
1.9 s at 16 KB, hours at 1 MB). A case that runs past its bound fails without waiting it out."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time

import pytest

pytest.importorskip("aws_lambda_powertools")
pytest.importorskip("uvicorn")

from support import make_engine  # noqa: E402

from eragraph.bootstrap.identity import TenantIdentity  # noqa: E402
from eragraph.domain.knowledge_base import knowledge_base_id  # noqa: E402
from eragraph.entrypoints.http.api import make_app  # noqa: E402
from eragraph.entrypoints.http.body import MAX_BODY_BYTES, BadRequestBody, parse_body  # noqa: E402
from eragraph.entrypoints.http.server import ApiApp, make_server  # noqa: E402

BOUND = 1.0  # seconds, each case
SIZE = 1_000_000


def adversarial(key: str, size: int = SIZE) -> bytes:
    """``{"<key>": "`` then escaped quotes to ``size`` bytes, then 40 opening braces."""
    head = '{"' + key + '": "'
    return (head + '\\"' * ((size - len(head) - 40) // 2) + "{" * 40).encode()


CASES = [  # (method, path, the body's first key)
    ("POST", "/query", "query"),
    ("POST", "/query/stream", "query"),
    ("POST", "/v1/chat/completions", "messages"),
    ("POST", "/retrieveAndGenerate", "input"),
    ("POST", f"/knowledgebases/{knowledge_base_id('')}/retrieve", "retrievalQuery"),
    ("POST", "/documents", "documents"),
    ("PUT", f"/knowledgebases/{knowledge_base_id('')}/datasources/ds/documents", "documents"),
]


def within_bound(call, tries: int = 2):
    """``call()``'s result, asserting it came within BOUND (run in a thread, so that a case that
    hangs fails at 5 x BOUND instead of holding the run). One that answered, but late, is asked
    once more: a quadratic scan is slow every time, a busy machine is not."""
    out: list = []
    worker = threading.Thread(target=lambda: out.append(call()), daemon=True)
    started = time.perf_counter()
    worker.start()
    worker.join(timeout=5 * BOUND)
    elapsed = time.perf_counter() - started
    if out and elapsed >= BOUND and tries > 1:
        return within_bound(call, tries - 1)
    assert out and elapsed < BOUND, f"answered in {elapsed:.2f} s (bound {BOUND} s)"
    return out[0]


@pytest.mark.parametrize("body", [
    adversarial("query"),
    b'{"query": "' + b'\\' * SIZE,  # a trailing lone backslash
    b'"' * SIZE,
    b'{"a": "x", ' * (SIZE // 11),
    b"[" * 40 + b'"\\"' * (SIZE // 3),
], ids=["escaped-quotes", "backslashes", "quotes", "many-keys", "brackets-then-quotes"])
def test_parse_body_refuses_a_megabyte_adversarial_body_in_linear_time(body):
    def parse():
        try:
            parse_body(body.decode())
        except BadRequestBody as exc:
            return str(exc)
        return "accepted"

    assert within_bound(parse) != "accepted"


def test_a_body_over_the_cap_is_refused_before_any_scan():
    with pytest.raises(BadRequestBody, match="too large"):
        parse_body("[" * (MAX_BODY_BYTES + 1))
    assert parse_body(json.dumps({"text": "x" * (MAX_BODY_BYTES - 20)}))["text"].startswith("x")


@pytest.fixture(scope="module")
def engine():
    return make_engine()


def _event(method: str, path: str, body: bytes) -> dict:
    return {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
            "headers": {"content-type": "application/json"}, "body": body.decode(), "isBase64Encoded": False,
            "requestContext": {"http": {"method": method, "path": path}, "requestId": "r-1", "stage": "$default"}}


LAMBDA_CASES = [c for c in CASES if c[1] != "/query/stream"]  # the NDJSON stream is served by `eragraph serve` only


@pytest.mark.parametrize("method, path, key", LAMBDA_CASES, ids=[c[1] for c in LAMBDA_CASES])
def test_the_query_function_answers_an_adversarial_body_within_a_second(engine, method, path, key):
    class Uploads:  # the write routes are served (a refused body never reaches the pipeline)
        def __getattr__(self, name):
            raise AssertionError(f"the pipeline was reached ({name})")

    app = make_app(lambda _t: engine, tenant_of=lambda _e: "", uploads=Uploads())
    out = within_bound(lambda: app.resolve(_event(method, path, adversarial(key)), None))
    assert out["statusCode"] == 400, out
    assert "not valid JSON" in json.loads(out["body"])["message"]


def test_the_stream_function_answers_an_adversarial_body_within_a_second(engine):
    identity = TenantIdentity(tag="", required=False, trust_request_context=True)
    app = ApiApp(None, identity=identity, engines=lambda _t: engine, stream_only=True)
    sent: list[dict] = []
    body = adversarial("input")

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/retrieveAndGenerateStream",
             "raw_path": b"/retrieveAndGenerateStream", "query_string": b"",
             "headers": [(b"content-type", b"application/json")], "client": ("10.0.0.1", 5)}
    try:
        within_bound(lambda: asyncio.run(app(scope, receive, send)))
    finally:
        app.close()
    assert next(m["status"] for m in sent if m["type"] == "http.response.start") == 400


@pytest.fixture(scope="module")
def served(engine):
    from eragraph.bootstrap import document_pipeline

    pipeline = document_pipeline("memory", None, engine.settings, lambda tenant: engine)
    server = make_server(engine, port=0, uploads=pipeline)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()
    pipeline.close()


@pytest.mark.parametrize("method, path, key", CASES + [("POST", "/retrieveAndGenerateStream", "input")],
                         ids=[c[1] for c in CASES] + ["/retrieveAndGenerateStream"])
def test_serve_answers_an_adversarial_body_within_a_second(served, method, path, key):
    host, port = served.server_address[:2]
    body = adversarial(key)
    if key == "messages":  # a chat body that asks for a stream goes to the stream's own parser
        body = b'{"stream": true, ' + body[1:]

    def ask():
        conn = http.client.HTTPConnection(host, port, timeout=10)
        conn.request(method, path, body=body, headers={"content-type": "application/json"})
        response = conn.getresponse()
        out = response.status, response.read()
        conn.close()
        return out

    status, data = within_bound(ask)
    assert status == 400, data[:300]
