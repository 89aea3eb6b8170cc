"""The console's read routes through a served app (real HTTP to `eragraph serve`'s ASGI app on a
loopback port): GET /modes, /tenants, /graph/layers/{layer}, /nodes/{node_id}, /ledger, POST
/query's stages and explain, and POST /query/stream read line by line."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse

import pytest
from support import make_engine, with_entity_graph, with_graph_settings

pytest.importorskip("aws_lambda_powertools")

from eragraph.ports.records import Answer  # noqa: E402
from eragraph.services.ingest import SourceDoc, ingest  # noqa: E402
from eragraph.services.resummarize import drain  # noqa: E402

QUESTION = "Which waterway passes the town where Marie Curie was born?"
CORPUS = {
    "birth": "Marie Curie was born in Warsaw in 1867.",
    "river": "The Vistula runs north past Warsaw to the Baltic Sea.",
    "nobel": "Marie Curie received the Nobel Prize twice.",
    "d1": "Which waterway passes the town? Every waterway passes some town where people were born.",
    "d2": "The town where the Seine waterway passes was where many painters were born.",
    "d3": "A waterway passes the old town where the Danube was born as a small stream.",
    "d4": "Berlin lies on the Spree. Hamburg lies on the Elbe.",
    **{f"x{i}": f"Note {i} about Lisbon and Porto: the Douro meets the sea near Porto, item {i}." for i in range(12)},
}


def extractor():
    """spaCy's NER when its model is installed, else the capitalized-phrase extractor."""
    try:
        from eragraph.providers.spacy_ner import SpacyEntityExtractor

        x = SpacyEntityExtractor()
        x.query_entities("Marie Curie")
        return x
    except Exception:  # no spaCy model here
        from eragraph.providers.spacy_ner import CapitalizedPhraseExtractor

        return CapitalizedPhraseExtractor()


@pytest.fixture(scope="module")
def served():
    from eragraph.entrypoints.http.server import make_server

    engine = make_engine(s_min=2, s_max=3)
    with_entity_graph(engine, extractor())
    with_graph_settings(engine, threshold=0.05, hops=2, match_threshold=0.9)
    ingest(engine, [SourceDoc(source=f"mem://{k}", doc_id=k, title=f"title {k}", text=v) for k, v in CORPUS.items()])
    drain(engine)
    server = make_server(engine, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield engine, server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def call(server, method: str, path: str, body: dict | None = None, headers: dict | None = None):
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=30)
    data = None if body is None else json.dumps(body)
    conn.request(method, path, body=data, headers={"content-type": "application/json", **(headers or {})})
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    return response.status, json.loads(raw) if raw else None


def test_modes_lists_the_registry_with_what_this_store_can_run(served):
    from eragraph.services.modes import MODES

    engine, server = served
    status, body = call(server, "GET", "/modes")
    assert status == 200
    assert [m["name"] for m in body["modes"]] == list(MODES)
    by_name = {m["name"]: m for m in body["modes"]}
    assert by_name["tri_graph"] == {"name": "tri_graph", "family": "graph", "description": MODES["tri_graph"].description,
                                    "available": True}
    had = {m["name"] for m in body["modes"] if m["available"]}
    assert {"tri_graph", "concept_ppr", "local_global", "dense"} <= had
    engine.entities, kept = None, engine.entities  # a store without an entity graph cannot run the graph modes
    try:
        status, body = call(server, "GET", "/modes")
        assert had - {m["name"] for m in body["modes"] if m["available"]} == {"tri_graph", "paths", "concept_ppr", "local_global"}
    finally:
        engine.entities = kept


def test_tenants_of_a_server_of_one_store(served):
    _, server = served
    assert call(server, "GET", "/tenants") == (200, {"tenants": [""], "current": "", "switchable": False, "ask_as": True})
    status, body = call(server, "GET", "/tenants", headers={"x-eragraph-tenant": "acme"})
    assert status == 403 and "x-eragraph-tenant" in body["message"]


def test_layer_pages_walk_each_layer_once_in_code_order_without_reading_whole_layers(served, monkeypatch):
    engine, server = served
    graph = engine.graph

    def whole_layer(*_a, **_k):
        raise AssertionError("a page must not read a whole layer")

    monkeypatch.setattr(graph, "layer_refs", whole_layer)
    monkeypatch.setattr(graph, "get_segments", whole_layer)
    sizes = graph.layer_sizes()
    assert sizes.get(1), "the corpus must have summaries"
    for layer, total in sizes.items():
        seen, cursor = [], ""
        while True:
            path = f"/graph/layers/{layer}?limit=4" + (f"&cursor={urllib.parse.quote(cursor)}" if cursor else "")
            status, page = call(server, "GET", path)
            assert status == 200 and page["layer"] == layer and page["total"] == total and not page["sampled"]
            assert len(page["nodes"]) <= 4
            seen += page["nodes"]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(seen) == total == len({n["id"] for n in seen})
        nodes = graph.get_nodes(n["id"] for n in seen)
        codes = [(nodes[n["id"]].code, n["id"]) for n in seen]
        assert codes == sorted(codes)
        for n in seen:
            full = nodes[n["id"]]
            assert n["tokens"] == full.tokens and n["members"] == len(full.children)
            assert n["label"].rstrip("…") in " ".join(full.text.split()) and len(n["label"]) <= 80
            if n["parent"] is not None:  # the summary above has this node among its children
                assert n["id"] in graph.get_nodes([n["parent"]])[n["parent"]].children
        if layer == 0:
            assert all(n["parent"] for n in seen)  # every chunk is in a cut segment after the drain
    assert call(server, "GET", "/graph/layers/9")[1] == {"layer": 9, "total": 0, "nodes": [], "next_cursor": None,
                                                       "sampled": False}


def test_layer_page_refuses_bad_parameters_in_words(served):
    _, server = served
    status, body = call(server, "GET", "/graph/layers/0?cursor=not-a-cursor")
    assert status == 400 and "cursor" in body["message"]
    assert call(server, "GET", "/graph/layers/0?limit=0")[0] == 422
    assert call(server, "GET", "/graph/layers/-1")[0] == 422
    assert call(server, "GET", "/graph/layers/zero")[0] == 422


def test_node_detail_has_its_document_parent_and_children(served):
    engine, server = served
    graph = engine.graph
    [summary_ref] = graph.refs_page(1, None, 1)
    summary = graph.get_nodes([summary_ref.node_id])[summary_ref.node_id]
    status, body = call(server, "GET", f"/nodes/{summary.node_id}")
    assert status == 200 and body["id"] == summary.node_id and body["layer"] == 1 and body["text"] == summary.text
    assert [c["id"] for c in body["children"]] == list(summary.children)
    child = body["children"][0]["id"]
    status, leaf = call(server, "GET", f"/nodes/{child}")
    node = graph.get_nodes([child])[child]
    assert status == 200 and leaf["parent"] == summary.node_id and leaf["children"] == []
    assert leaf["doc_id"] == node.doc_id and leaf["title"] == f"title {node.doc_id}" and leaf["source"] == node.source
    status, body = call(server, "GET", "/nodes/no-such-node")
    assert status == 404 and "no-such-node" in body["message"]


def test_ledger_series_adds_up_to_what_was_recorded_since(served):
    engine, server = served
    status, body = call(server, "GET", "/ledger?bucket=hour")
    assert status == 200 and body["bucket"] == "hour"
    totals = {(c["kind"], c["model"]): c for c in body["totals"]["calls"]}
    assert {(s["kind"], s["model"]) for s in body["series"]} == set(totals)  # every call of this store is recent
    for s in body["series"]:
        assert sum(p["calls"] for p in s["points"]) == totals[(s["kind"], s["model"])]["calls"]
        assert all(p["t"] % 3600 == 0 for p in s["points"])
    status, later = call(server, "GET", f"/ledger?since={max(p['t'] for s in body['series'] for p in s['points']) + 3600}")
    assert status == 200 and later["series"] == [] and later["totals"]["total"]["calls"] >= body["totals"]["total"]["calls"]
    assert call(server, "GET", "/ledger?bucket=day")[0] == 422


def test_every_query_says_its_stages_and_only_an_asked_explain(served):
    _, server = served
    status, body = call(server, "POST", "/query", {"query": QUESTION, "mode": "dense"})
    assert status == 200 and "explain" not in body
    assert set(body["stages"]) == {"embed_ms", "retrieve_ms"} and all(v >= 0 for v in body["stages"].values())
    status, body = call(server, "POST", "/query", {"query": QUESTION, "mode": "dense", "explain": True})
    assert status == 200 and body["explain"] is None and "explain covers the entity-graph modes" in body["note"]
    assert call(server, "POST", "/query", {"query": QUESTION, "explain": "yes"})[0] == 422


@pytest.mark.parametrize("mode", ["tri_graph", "concept_ppr", "fusion"])
def test_explain_seeds_are_the_questions_entities_and_passages_follow_the_results(served, mode):
    engine, server = served
    status, body = call(server, "POST", "/query", {"query": QUESTION, "mode": mode, "k": 4, "explain": True})
    assert status == 200
    ex = body["explain"]
    assert ex["mode"] == mode
    asked = set(engine.entities.extractor.query_entities(QUESTION))
    assert "marie curie" in asked and {s["entity"] for s in ex["seeds"]} == asked & {s["entity"] for s in ex["seeds"]}
    assert "marie curie" in {s["entity"] for s in ex["seeds"]}
    assert [p["id"] for p in ex["passages"]] == [r["id"] for r in body["results"]]
    assert [p["score"] for p in ex["passages"]] == [r["score"] for r in body["results"]]
    assert [p["rank"] for p in ex["passages"]] == list(range(1, len(body["results"]) + 1))
    texts = {r["id"]: r["text"].lower() for r in body["results"]}
    for p in ex["passages"]:
        assert p["why"]
        for e in p["entities"]:
            assert e in texts[p["id"]] and {"entity": e, "passage": p["id"]} in ex["edges"]
    curie = [p for p in ex["passages"] if "marie curie" in p["entities"]]
    assert curie and "seeded by marie curie" in curie[0]["why"]
    assert len(ex["activated"]) <= 50 and len(ex["passages"]) <= 30


class SlowPieces:
    """A streaming generator that writes its second piece only once the test has read the first
    (so the lines can only arrive one by one, as they are written)."""

    identity = "slow-pieces"

    def __init__(self) -> None:
        self.read_first = threading.Event()

    def stream(self, question, evidence):
        yield "The Vistula "
        assert self.read_first.wait(20), "the client never read the first piece"
        yield "passes Warsaw."
        yield Answer(text="The Vistula passes Warsaw.", cited_ids=(evidence[0][0],), tokens_in=11, tokens_out=4,
                     model="slow-1")

    def answer(self, question, evidence):  # pragma: no cover - streamed
        raise AssertionError("streamed")


def test_query_stream_sends_results_then_pieces_as_written_then_done(served):
    engine, server = served
    generator = SlowPieces()
    engine.generator = generator
    try:
        host, port = server.server_address[:2]
        conn = http.client.HTTPConnection(host, port, timeout=30)
        conn.request("POST", "/query/stream", body=json.dumps({"query": QUESTION, "mode": "tri_graph", "k": 3}),
                     headers={"content-type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("content-type") == "application/x-ndjson"
        head = json.loads(response.readline())
        assert head["type"] == "results" and len(head["results"]) == 3 and "answer" not in head
        assert set(head["stages"]) >= {"embed_ms", "retrieve_ms"}
        first = json.loads(response.readline())
        assert first == {"type": "piece", "text": "The Vistula "}
        generator.read_first.set()
        rest = [json.loads(line) for line in response]
        conn.close()
        assert rest[0] == {"type": "piece", "text": "passes Warsaw."}
        done = rest[-1]
        assert done["type"] == "done" and done["answer"] == "The Vistula passes Warsaw."
        assert done["cited_ids"] == [head["results"][0]["id"]] and "generate_ms" in done["stages"]
        assert any(c["model"] == "slow-1" for c in done["usage"]["calls"])
    finally:
        engine.generator = None


def test_query_stream_without_a_generator_and_its_refusals(served):
    _, server = served
    host, port = server.server_address[:2]

    def post(body: bytes, ctype: str = "application/json"):
        conn = http.client.HTTPConnection(host, port, timeout=30)
        conn.request("POST", "/query/stream", body=body, headers={"content-type": ctype})
        response = conn.getresponse()
        out = response.status, response.getheader("content-type"), response.read()
        conn.close()
        return out

    status, ctype, raw = post(json.dumps({"query": QUESTION}).encode())
    lines = [json.loads(x) for x in raw.splitlines()]
    assert status == 200 and [x["type"] for x in lines] == ["results", "done"]
    assert lines[1]["answer"] is None and "no generator configured" in lines[1]["note"]
    for body, want, words in [(b"[1]", 400, "JSON object"), (b'{"query": ""}', 422, "query"),
                              (b'{"query": "x", "colour": 1}', 422, "colour is not a known field"),
                              (b'{"query": "x", "mode": "sideways"}', 400, "unknown mode"),
                              (b'{"query": "x", "tenant": "other"}', 403, "another tenant")]:
        status, ctype, raw = post(body)
        assert (status, ctype) == (want, "application/json") and words in json.loads(raw)["message"], raw
    status, _, raw = post(b'{"query": "x"}', "text/plain")
    assert status == 415 and "content-type" in json.loads(raw)["message"]


def test_the_cli_asks_a_server_to_explain_and_prints_why(served, capsys, monkeypatch):
    from eragraph.cli.app import main

    _, server = served
    monkeypatch.delenv("ERAGRAPH_STORE", raising=False)
    assert main(["query", QUESTION, "--mode", "tri_graph", "--k", "3", "--explain", "--server", server.url]) == 0
    out = capsys.readouterr().out
    assert "why (tri_graph): seeds marie curie" in out and "seeded by marie curie" in out
