"""`eragraph serve`'s operator asks as other principals (the console's "ask as" field): the
``x-eragraph-as`` header makes every route of the request answer inside those principals' view
(the graph's layers, a node, the document list, a query and its stream); none is the operator's everything; a
malformed one is a 400 in words. The deployed API (make_app without the switch) and the console's
AWS proxy ignore the header: there the caller is its identity's."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from dataclasses import replace

import pytest
from support import make_engine, synthetic_docs

pytest.importorskip("uvicorn")

from eragraph.entrypoints.http.server import make_server  # noqa: E402
from eragraph.services.ingest import ingest  # noqa: E402
from eragraph.services.resummarize import drain  # noqa: E402

SECRET = {"d0", "d2", "d4", "d6", "d8", "d10"}


@pytest.fixture(scope="module")
def served():
    engine = make_engine(s_min=2, s_max=3)
    docs = synthetic_docs(12)
    ingest(engine, [replace(d, metadata={"access": ["group:board"]}) if d.doc_id in SECRET else d for d in docs])
    drain(engine)
    server = make_server(engine, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield engine, server.url
    finally:
        server.shutdown()
        server.server_close()


def call(url, method, path, body=None, as_=None):
    headers = {"content-type": "application/json"} if body is not None else {}
    if as_ is not None:
        headers["x-eragraph-as"] = as_
    request = urllib.request.Request(url + path, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def stream(url, body, as_):
    """POST /query/stream's NDJSON lines."""
    headers = {"content-type": "application/json"}
    if as_ is not None:
        headers["x-eragraph-as"] = as_
    request = urllib.request.Request(url + "/query/stream", method="POST", headers=headers, data=json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=60) as response:
        return [json.loads(line) for line in response.read().decode().splitlines() if line.strip()]


def test_the_operator_asks_as_other_principals(served):
    engine, url = served
    assert call(url, "GET", "/tenants")[1]["ask_as"] is True
    hidden = engine.graph.get_document("d0").chunk_ids[0]
    for as_, shown in ((None, True), ("", True), ("user:alice", False), ("group:board", True)):
        status, page = call(url, "GET", "/graph/layers/0?limit=1000", as_=as_)
        assert status == 200 and (hidden in {n["id"] for n in page["nodes"]}) is shown, as_
        assert call(url, "GET", f"/nodes/{hidden}", as_=as_)[0] == (200 if shown else 404)
        status, listing = call(url, "GET", "/documents?limit=100", as_=as_)
        assert status == 200 and ("d0" in {d["doc_id"] for d in listing["documents"]}) is shown
        status, body = call(url, "POST", "/query", {"query": "Markerd0 item number d0", "k": 8, "mode": "collapsed"},
                            as_=as_)
        assert status == 200 and body["results"]
        assert bool({r["doc_id"] for r in body["results"]} & SECRET) is shown
        lines = stream(url, {"query": "Markerd0 item number d0", "k": 8, "mode": "collapsed"}, as_)
        ids = {r["doc_id"] for line in lines for r in line.get("results") or ()}
        assert ids and bool(ids & SECRET) is shown, (as_, lines[:1])
    status, node = call(url, "GET", f"/nodes/{hidden}")
    assert node["readers"] == ["group:board"]
    status, body = call(url, "GET", "/graph/layers/0", as_="finance")
    assert status == 400 and "is not a principal" in body["message"]


def test_the_deployed_api_ignores_the_header():
    from eragraph.entrypoints.http.api import make_app

    engine = make_engine()
    docs = synthetic_docs(6)
    ingest(engine, [replace(d, metadata={"access": ["group:board"]}) for d in docs])
    drain(engine)
    app = make_app(lambda _t: engine, tenant_of=lambda _e: "")
    from pathlib import Path

    event = json.loads((Path(__file__).parents[1] / "events" / "api_query_valid.json").read_text())
    event["headers"]["x-eragraph-as"] = "user:nobody"
    event["body"] = json.dumps({"query": "Markerd1", "k": 3, "mode": "collapsed"})
    out = app.resolve(event, None)
    assert out["statusCode"] == 200 and json.loads(out["body"])["results"]  # the operator's, as before
    from eragraph.entrypoints.console.proxy import forwarded_headers

    assert "x-eragraph-as" not in forwarded_headers({"x-eragraph-as": "group:board", "authorization": "x"})
