"""`eragraph serve`: real HTTP requests to a warm local server on an ephemeral loopback port
answer exactly as the API Gateway function does on the same engine (tests/events), and
`eragraph query --server` uses it."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest
from api_corpus import CASES, LAMBDA_ONLY, lambda_event, mutations
from lambda_support import LambdaContext, event, load_handler

pytest.importorskip("aws_lambda_powertools")

from eragraph.bootstrap import build_engine  # noqa: E402
from eragraph.cli.app import main  # noqa: E402
from eragraph.config import Settings  # noqa: E402
from eragraph.services import resummarize  # noqa: E402
from eragraph.services.ingest import SourceDoc, ingest  # noqa: E402
from support import synthetic_docs  # noqa: E402

TEXT = ("Comet observers at the mountain observatory used the great telescope to follow the comet. "
        "The telescope is called Starglass and the comet is named Vellichor. ") * 3


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A local store with a few documents, served on 127.0.0.1:<free port> from a thread."""
    from eragraph.entrypoints.http.server import make_server

    store = tmp_path_factory.mktemp("served")
    engine = build_engine("local", store, Settings(embedder="hash", s_min=2, s_max=3, n_planes=8,
                                                   chunk_tokens=40, chunk_overlap=8, summary_tokens=30,
                                                   embed_cache=False))
    docs = [SourceDoc(source="notes/comet.txt", doc_id="comet", title="comet", text=TEXT),
            *synthetic_docs(12, seed=5)]
    ingest(engine, docs)
    resummarize.drain(engine)
    server = make_server(engine, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield engine, server, store
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        assert not thread.is_alive()


def http(url: str, method: str = "GET", body: str | bytes | None = None) -> tuple[int, dict | None]:
    data = body.encode("utf-8") if isinstance(body, str) else body
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"content-type": "application/json"} if data is not None else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, json.loads(raw) if raw else None


def without_seconds(body):
    """The body with every timing removed, at any depth (the usage ledger times each call; the
    stages keep their names, not their milliseconds)."""
    if isinstance(body, dict):
        return {k: sorted(v) if k == "stages" else without_seconds(v) for k, v in body.items() if k != "seconds"}
    if isinstance(body, list):
        return [without_seconds(v) for v in body]
    return body


def test_server_binds_loopback_on_the_port_it_was_given(served):
    _, server, _ = served
    host, port = server.server_address[:2]
    assert host == "127.0.0.1" and port > 0 and server.url == f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("name", ["api_query_valid.json", "api_query_invalid.json", "api_query_bad_mode.json",
                                  "api_query_malformed.json", "api_document_missing.json", "api_stats.json",
                                  "api_health.json"])
def test_server_answers_like_the_lambda_handler(served, name):
    engine, server, _ = served
    request = event(name)
    expected_status, expected_body = _lambda_answer(engine, request)
    method = request["requestContext"]["http"]["method"]
    status, body = http(server.url + request["rawPath"], method, request.get("body"))
    assert status == expected_status, (name, body)
    assert without_seconds(body) == without_seconds(expected_body)


def test_server_statuses(served):
    engine, server, _ = served
    status, body = http(server.url + "/query", "POST", json.dumps({"query": "Which telescope observed the comet?"}))
    assert status == 200 and "Starglass" in body["results"][0]["text"]
    status, body = http(server.url + "/query", "POST", json.dumps({"query": "comet", "k": 0}))
    assert status == 422 and body["detail"] and body["message"] == "k must be at least 1 (got 0)"
    status, body = http(server.url + "/query", "POST", json.dumps({"query": "comet", "colour": "red"}))
    assert status == 422 and "colour is not a known field" in body["message"]
    status, body = http(server.url + "/query", "POST", json.dumps({"query": "comet", "mode": "sideways"}))
    assert status == 400 and "unknown mode" in body["message"]
    status, body = http(server.url + "/documents/no-such-doc")
    assert status == 404
    status, body = http(server.url + "/documents/comet")
    assert status == 200 and body["doc_id"] == "comet" and body["chunks"] == len(engine.graph.get_document("comet").chunk_ids)
    status, body = http(server.url + "/stats")
    assert status == 200 and body["documents"] == 13
    status, _ = http(server.url + "/nowhere")
    assert status == 404


def test_cli_query_uses_a_running_server(served, capsys, monkeypatch):
    _, server, store = served
    monkeypatch.delenv("ERAGRAPH_STORE", raising=False)
    monkeypatch.setenv("ERAGRAPH_EMBEDDER", "hash")
    assert main(["query", "Which telescope observed the comet?", "--k", "3", "--server", server.url, "--json"]) == 0
    via_server = json.loads(capsys.readouterr().out)
    assert main(["query", "Which telescope observed the comet?", "--k", "3", "--store", str(store), "--json"]) == 0
    direct = json.loads(capsys.readouterr().out)
    assert without_seconds(via_server) == without_seconds(direct)
    assert len(via_server["results"]) == 3
    assert main(["query", "comet", "--mode", "sideways", "--server", server.url]) == 2
    assert "unknown mode" in capsys.readouterr().err
    monkeypatch.setenv("ERAGRAPH_SERVER", server.url)
    assert main(["query", "Which telescope observed the comet?", "--k", "3"]) == 0
    assert "Starglass" in capsys.readouterr().out


def test_cli_query_needs_a_store_or_a_server(capsys, monkeypatch):
    monkeypatch.delenv("ERAGRAPH_STORE", raising=False)
    monkeypatch.delenv("ERAGRAPH_SERVER", raising=False)
    assert main(["query", "anything"]) == 2
    assert "--server" in capsys.readouterr().err


def _lambda_answer(engine, request: dict) -> tuple[int, dict | None]:
    from eragraph.bootstrap.aws import LAMBDA_ENGINE

    LAMBDA_ENGINE.set(engine)
    function = load_handler("query")
    # the server has no identity: everyone is the default tenant (whatever environment the cached
    # handler module was imported under: TenantRequired defaults to true)
    tag, function.IDENTITY.tag = function.IDENTITY.tag, ""
    required, function.IDENTITY.required = function.IDENTITY.required, False
    try:
        out = function.handler(request, LambdaContext())
    finally:
        LAMBDA_ENGINE.set(None)
        function.IDENTITY.tag, function.IDENTITY.required = tag, required
    return int(out["statusCode"]), json.loads(out["body"]) if out.get("body") else None


@pytest.mark.parametrize("name,body,status,words", CASES, ids=[c[0] for c in CASES])
def test_malformed_bodies_get_the_same_4xx_and_message_from_both(served, name, body, status, words):
    """The fuzz corpus (tests/api_corpus.py): each malformed body gets its 4xx with a message in
    words, never a 5xx, and the local server answers exactly as the Lambda function."""
    engine, server, _ = served
    expected = _lambda_answer(engine, lambda_event(event("api_query_valid.json"), body))
    got = http(server.url + "/query", "POST", body)
    assert got == expected, name
    assert got[0] == status and words in got[1]["message"], (name, got)


@pytest.mark.parametrize("name,fields,status,words", LAMBDA_ONLY, ids=[c[0] for c in LAMBDA_ONLY])
def test_lambda_only_bodies(served, name, fields, status, words):
    engine, _, _ = served
    request = {**event("api_query_valid.json"), **fields}
    got = _lambda_answer(engine, request)
    assert got[0] == status and words in got[1]["message"], (name, got)


def test_fuzzed_bodies_never_get_a_5xx(served):
    """300 seeded mutations of a valid body: never a 5xx, every 4xx says why, and the local
    server answers as the Lambda function."""
    engine, server, _ = served
    statuses: dict[int, int] = {}
    for n, body in enumerate(mutations(seed=17, count=300)):
        expected = _lambda_answer(engine, lambda_event(event("api_query_valid.json"), body))
        got = http(server.url + "/query", "POST", body)
        assert got[0] == expected[0] and without_seconds(got[1]) == without_seconds(expected[1]), (n, body[:200])
        assert got[0] < 500, (n, body[:200], got)
        if got[0] >= 400:
            assert got[1]["message"], (n, body[:200], got)
        statuses[got[0]] = statuses.get(got[0], 0) + 1
    print("fuzz statuses", sorted(statuses.items()))
    assert statuses.get(200) and statuses.get(400) and statuses.get(422), statuses
