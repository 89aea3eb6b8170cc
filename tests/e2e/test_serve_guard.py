"""`eragraph serve` safe on a laptop (issue 46): a web page open in the user's browser cannot drive
it. Bound to loopback, every route (the console, MCP, the KB routes and the ones added later)
refuses a foreign Host (DNS rebinding) or a foreign Origin; a POST body must be declared JSON; with
a token, every route but GET /health and the console's files asks for it; binding beyond loopback
needs a token. Each request writes one log line with its request id, caller, route and status."""

from __future__ import annotations

import http.client
import json
import threading
import time

import pytest

pytest.importorskip("aws_lambda_powertools")
pytest.importorskip("uvicorn")

from support import make_engine  # noqa: E402

from eragraph.domain.knowledge_base import knowledge_base_id  # noqa: E402
from eragraph.entrypoints.http.routes import ROUTES  # noqa: E402
from eragraph.entrypoints.http.server import make_server  # noqa: E402
from eragraph.services import ingest  # noqa: E402

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def engine():
    engine = make_engine()
    ingest.ingest(engine, [ingest.SourceDoc(source="notes/a.txt", text="The harbour master keeps the ferry log. " * 4)])
    return engine


def _serve(engine, **kwargs):
    server = make_server(engine, port=0, **kwargs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def open_server(engine):
    server = _serve(engine)
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def token_server(engine):
    server = _serve(engine, token=TOKEN, log=True)
    yield server
    server.shutdown()
    server.server_close()


def ask(server, method: str, path: str, body: bytes | None = None, **headers: str) -> tuple[int, dict, bytes]:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=30)
    given = {k.replace("_", "-"): v for k, v in headers.items()}
    conn.request(method, path, body=body, headers=given)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, data


def concrete(path: str) -> str:
    return path.replace("{knowledgeBaseId}", knowledge_base_id("")).replace("{doc_id}", "x")


PATHS = sorted({(r.method, concrete(r.path)) for r in ROUTES} | {("GET", "/"), ("GET", "/console/app.js")})


@pytest.mark.parametrize("method, path", PATHS)
def test_a_foreign_host_is_refused_on_every_route(open_server, method, path):
    status, _, body = ask(open_server, method, path, b"{}" if method == "POST" else None,
                          host="evil.example:8765", content_type="application/json")
    assert status == 403, body
    assert b"Host" in body or b"this machine" in body


@pytest.mark.parametrize("method, path", PATHS)
def test_a_foreign_origin_is_refused_on_every_route(open_server, method, path):
    port = open_server.server_address[1]
    status, _, body = ask(open_server, method, path, b"{}" if method == "POST" else None,
                          host=f"127.0.0.1:{port}", origin="https://evil.example", content_type="application/json")
    assert status == 403, body


def test_the_servers_own_origin_and_loopback_names_pass(open_server):
    port = open_server.server_address[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        status, _, body = ask(open_server, "POST", "/query", json.dumps({"query": "ferry log"}).encode(), host=host,
                              origin=f"http://{host}", content_type="application/json")
        assert status == 200, body


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                                          None])
@pytest.mark.parametrize("path", ["/query", "/retrieveAndGenerateStream", "/mcp"])
def test_a_post_body_that_is_not_declared_json_is_refused(open_server, path, content_type):
    headers = {"content_type": content_type} if content_type else {}
    status, response_headers, body = ask(open_server, "POST", path, json.dumps({"query": "ferry log"}).encode(),
                                         **headers)
    if path == "/retrieveAndGenerateStream":  # the modelled error of the Bedrock KB service
        assert (status, response_headers.get("x-amzn-errortype")) == (400, "ValidationException"), body
    else:
        assert status == 415, body
    assert b"application/json" in body


def test_a_token_is_asked_on_every_route_but_health_and_the_console(token_server, capfd):
    for method, path in PATHS:
        status, headers, body = ask(token_server, method, path, b"{}" if method == "POST" else None,
                                    content_type="application/json")
        if (method, path) in (("GET", "/health"), ("GET", "/"), ("GET", "/console/app.js")):
            assert status != 401, (method, path)
        else:
            assert status in (401, 403), (method, path, status)  # 403: a KB route's AccessDeniedException
            assert b"token" in body
    status, _, _ = ask(token_server, "POST", "/query", json.dumps({"query": "ferry log"}).encode(),
                       content_type="application/json", authorization="Bearer wrong")
    assert status == 401
    status, _, body = ask(token_server, "POST", "/query", json.dumps({"query": "ferry log"}).encode(),
                          content_type="application/json", authorization=f"Bearer {TOKEN}")
    assert status == 200, body
    # a request's log line is written once its answer has gone out: wait for the last one
    out, deadline = "", time.monotonic() + 10
    while True:
        out += capfd.readouterr().out
        lines = [json.loads(line) for line in out.splitlines() if line.startswith('{"event": "request"')]
        if (lines and lines[-1]["status"] == 200) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert lines, out
    last = lines[-1]
    assert last["route"] == "POST /query" and last["status"] == 200 and last["request_id"]
    assert last["caller"].startswith("address:127.0.0.1") and last["tenant"] == ""
    assert any(line["status"] == 401 for line in lines)


def test_binding_beyond_loopback_needs_a_token(engine):
    with pytest.raises(ValueError, match="needs a token"):
        make_server(engine, host="0.0.0.0", port=0)


def test_the_cli_refuses_a_public_host_without_a_token_and_says_why(tmp_path):
    from serve_support import eragraph

    out = eragraph("serve", "--store", str(tmp_path), "--host", "0.0.0.0", "--port", "0")
    assert out.returncode != 0
    assert "--token" in out.stderr
