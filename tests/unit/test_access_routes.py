"""Every route of the API inside the caller's view (issue 59): random documents with random access
lists (some retagged, one removed), random callers given by the identity (the API's
``principals``), and a list of routes: GET /changes, GET /documents, GET /documents/{id}, GET /nodes/{id},
GET /graph/layers/{n} and POST /query with ``explain`` in the entity-graph modes. No answer holds
the text (its marker), the source, the id, a node id or an entity (the marker names one) of a
document the caller may not read; the caller still gets what it may read. The real API Gateway
event of POST /query (tests/events), turned into each route's request. On the memory and local
profiles."""

from __future__ import annotations

import json
import random
import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import make_engine, synthetic_docs, with_entity_graph

pytest.importorskip("aws_lambda_powertools")

from eragraph.domain.access import caller  # noqa: E402
from eragraph.entrypoints.http.api import make_app  # noqa: E402
from eragraph.services.ingest import ingest  # noqa: E402
from eragraph.services.remove import remove  # noqa: E402
from eragraph.services.resummarize import drain  # noqa: E402

PRINCIPALS = ("group:finance", "group:board", "user:alice", "user:bob", "user:carol")
LISTS = (None, ["group:finance"], ["group:board", "user:alice"], ["user:bob"], ["group:finance", "user:carol"])
EVENT = json.loads((Path(__file__).parents[1] / "events" / "api_query_valid.json").read_text())
GRAPH_MODES = ("tri_graph", "concept_ppr", "paths", "local_global")


@pytest.fixture(scope="module", params=["memory", "local"])
def store(request, tmp_path_factory):
    if request.param == "memory":
        engine = make_engine(ner="capitalized")
        with_entity_graph(engine)
    else:
        from eragraph.bootstrap.local import build_local_engine

        engine = build_local_engine(tmp_path_factory.mktemp("routes") / "store", make_engine(ner="capitalized").settings)
    rng = random.Random(5959)
    docs = [d if (a := rng.choice(LISTS)) is None else replace(d, metadata={"access": list(a)})
            for d in synthetic_docs(30)]
    ingest(engine, docs)
    drain(engine)
    # a retag that moves documents to another partition, and a removal: their records too
    moved = [replace(d, metadata={"access": list(rng.choice(LISTS[1:]))}) for d in docs[:4]]
    ingest(engine, moved)
    REMOVED[docs[-1].doc_id] = (docs[-1].metadata or {}).get("access")
    remove(engine, [docs[-1].doc_id])
    drain(engine)
    live = {d.doc_id: (d.metadata or {}).get("access") for d in moved + docs[4:-1]}
    who = {"caller": None}
    app = make_app(lambda _t: engine, tenant_of=lambda _e: "", principals=lambda _e: who["caller"])
    yield engine, live, docs[-1].doc_id, app, who
    if request.param == "local":
        from eragraph.bootstrap.local import close

        close(engine)


def _docs_under(engine, node_id, seen):
    if node_id not in seen:
        node = engine.graph.get_nodes([node_id])[node_id]
        seen[node_id] = {node.doc_id} if not node.is_summary else \
            set().union(*(_docs_under(engine, c, seen) for c in node.children))
    return seen[node_id]


def removed_access(engine, doc_id):
    """The access list the removed document had (its tombstone keeps no metadata: the test's)."""
    return REMOVED[doc_id]


REMOVED: dict = {}


def node_docs(engine) -> dict[str, set[str]]:
    seen: dict = {}
    return {r.node_id: _docs_under(engine, r.node_id, seen)
            for layer in engine.graph.layer_sizes() for r in engine.graph.layer_refs(layer)}


def call(app, method: str, path: str, body: dict | None = None, query: str = "") -> tuple[int, str]:
    event = dict(EVENT, rawPath=path, rawQueryString=query, routeKey="$default",
                 body=None if body is None else json.dumps(body),
                 requestContext={**EVENT["requestContext"],
                                 "http": {**EVENT["requestContext"]["http"], "method": method, "path": path}})
    if query:
        event["queryStringParameters"] = dict(p.split("=", 1) for p in query.split("&"))
    out = app.resolve(event, None)
    return out["statusCode"], out["body"]


TITLES = {d.doc_id: d.title for d in synthetic_docs(30)}


def forbidden_marks(doc_ids) -> list[re.Pattern]:
    """What of these documents may not appear: its id, title, source and marker (its text's and
    its entity's name), each as a whole word."""
    return [re.compile(rf"(?<![\w]){re.escape(mark)}(?!\d)", re.IGNORECASE)  # entities are lower-cased
            for d in doc_ids for mark in (f'"{d}"', f'"{TITLES[d]}"', f"mem://{d}.txt", f"Marker{d}")]


def routes(engine, live, gone, nodes, rng) -> list[tuple[str, str, dict | None, str]]:
    """The routes asked, each (method, path, body, query)."""
    asked = [("GET", "/changes", None, "limit=200"), ("GET", "/documents", None, "limit=1000")]
    asked += [("GET", f"/graph/layers/{layer}", None, "limit=1000") for layer in sorted(engine.graph.layer_sizes())]
    asked += [("GET", f"/documents/{d}", None, "") for d in rng.sample(sorted(live), 6) + [gone]]
    asked += [("GET", f"/nodes/{n}", None, "") for n in rng.sample(sorted(nodes), 12)]
    for d in rng.sample(sorted(live), 2):
        asked.append(("POST", "/query", {"query": f"Marker{d} item number {d}", "k": 8,
                                         "mode": rng.choice(GRAPH_MODES), "explain": True}, ""))
    return asked


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_route_answers_with_what_the_caller_may_not_read(store, data):
    engine, live, gone, app, who = store
    who["caller"] = caller(data.draw(st.lists(st.sampled_from(PRINCIPALS), min_size=1, max_size=3)),
                           default=data.draw(st.sampled_from(("tenant", "deny"))))
    allowed = {d for d, a in live.items() if who["caller"].may_read(a)}
    hidden = set(live) - allowed | {gone}
    nodes = node_docs(engine)
    hidden_nodes = {n for n, docs in nodes.items() if not docs <= allowed}
    marks = forbidden_marks(hidden)
    rng = random.Random(data.draw(st.integers(0, 10**6)))
    was_readable = who["caller"].may_read(removed_access(engine, gone))
    for method, path, body, query in routes(engine, live, gone, nodes, rng):
        status, text = call(app, method, path, body, query)
        assert status in (200, 404), (path, status, text[:300])
        target = path.rpartition("/")[2]
        if status == 404:  # its message names what was asked, nothing else
            text = text.replace(target, "")
        if body is not None:  # the answer repeats the question asked
            text = json.dumps({k: v for k, v in json.loads(text).items() if k != "query"})
        # the removal of a document is shown to those who could read it (GET /changes)
        for mark in forbidden_marks(hidden - {gone}) if path == "/changes" and was_readable else marks:
            assert not mark.search(text), (path, mark.pattern, text[:500])
        for n in hidden_nodes:
            assert n not in text, (path, n)
        if path.startswith("/documents/") or path.startswith("/nodes/"):
            readable = target in allowed if path.startswith("/documents/") else target not in hidden_nodes
            assert (status == 200) is readable, (path, status)


def test_the_operator_and_a_reader_see_the_changes_of_what_they_read(store):
    engine, live, gone, app, who = store
    who["caller"] = None
    status, text = call(app, "GET", "/changes", None, "limit=200")
    everything = json.loads(text)["changes"]
    assert status == 200 and any(f"mem://{gone}.txt" in r.get("documents", ()) for r in everything)
    assert any(r.get("summary_partitions") for r in everything)  # the operator's records as written
    reader = next(a for a in live.values() if a)  # a partition with a list: its first principal reads it
    who["caller"] = caller([reader[0]])
    status, text = call(app, "GET", "/changes", None, "limit=200")
    mine = json.loads(text)["changes"]
    readable = {f"mem://{d}.txt" for d, a in live.items() if who["caller"].may_read(a)}
    listed = {s for r in mine for s in r.get("documents", ())}
    assert status == 200 and listed and listed <= readable
    assert any(r["kind"] == "resummarize" and r["summaries"] for r in mine)  # its partitions' summaries
    assert not any(k in r for r in mine for k in ("partitions", "summary_partitions", "removed_partitions"))
    # a record of which part was left out keeps no count of the whole operation
    partial = [r for r in mine if r["kind"] == "ingest" and r["documents_total"] < 29]
    assert partial and all("chunks_added" not in r and "calls" not in r for r in partial)


def test_explain_lists_only_entities_of_the_passages_a_caller_may_read(store):
    engine, live, gone, app, who = store
    secret = next(d for d, a in live.items() if a == ["user:bob"] or a == ("user:bob",))
    who["caller"] = None
    ask = {"query": f"Marker{secret} item number", "k": 5, "mode": "tri_graph", "explain": True}
    status, text = call(app, "POST", "/query", ask)
    assert status == 200 and f"marker{secret}" in json.dumps(json.loads(text)["explain"]["seeds"]).lower()
    who["caller"] = caller(["user:carol"])
    status, text = call(app, "POST", "/query", ask)
    body = json.loads(text)
    assert status == 200 and f"marker{secret}" not in text.lower().replace(ask["query"].lower(), "")
    held = {e for p in body["explain"]["passages"] for e in p["entities"]}
    assert {s["entity"] for s in body["explain"]["seeds"]} <= held
    assert {a["entity"] for a in body["explain"]["activated"]} <= held


def test_change_records_in_a_callers_view_fail_closed():
    from eragraph.domain.access import partition_of
    from eragraph.services import changes, placement

    engine = make_engine()
    index = placement.partition_index(engine, ["group:finance"])
    finance = partition_of(["group:finance"])
    records = [
        {"id": "4", "kind": "remove", "documents": ["b"], "documents_total": 1, "partitions": [finance],
         "chunks_removed": 2},
        {"id": "3", "kind": "resummarize", "layer": 1, "summaries": ["s1", "s2"], "summaries_total": 2,
         "summary_partitions": [index, 0], "removed": [], "removed_total": 0, "removed_partitions": [], "calls": 2},
        {"id": "2", "kind": "ingest", "documents": ["a", "b"], "documents_total": 300, "partitions": ["", ""],
         "chunks_added": 9, "calls": 1},
        {"id": "1", "kind": "ingest", "documents": ["old"], "documents_total": 1, "chunks_added": 1},  # before this version
    ]
    seen = changes.in_view(engine, records, caller(["user:zed"], "deny"))
    assert seen == []  # reads neither the finance partition nor the open one
    seen = {r["id"]: r for r in changes.in_view(engine, records, caller(["user:zed"]))}
    assert set(seen) == {"2", "3"}  # the open partition's; the record without partitions is left out
    assert seen["2"]["documents"] == ["a"] and seen["2"]["documents_total"] == 1  # b moved to finance since
    assert "chunks_added" not in seen["2"] and "calls" not in seen["2"]  # 300 documents: the rest unknown
    assert seen["3"]["summaries"] == ["s2"] and "calls" not in seen["3"] and "summary_partitions" not in seen["3"]
    seen = {r["id"]: r for r in changes.in_view(engine, records, caller(["group:finance"], "deny"))}
    assert set(seen) == {"2", "3", "4"} and seen["2"]["documents"] == ["b"] and seen["4"]["chunks_removed"] == 2
    assert changes.in_view(engine, records, None) == records


def test_the_document_list_names_each_documents_readers(store):
    """GET /documents: every row the caller gets names its document's readers (its canonical
    access list, or ``*``), for the operator too; a reader's page holds exactly its documents."""
    from eragraph.domain.access import readers_of

    engine, live, gone, app, who = store
    who["caller"] = None
    status, text = call(app, "GET", "/documents", None, "limit=1000")
    rows = {r["doc_id"]: r for r in json.loads(text)["documents"]}
    assert status == 200 and set(live) <= set(rows)
    for doc_id, access in live.items():
        assert rows[doc_id]["readers"] == readers_of(access), doc_id
    assert "readers" not in rows.get(gone, {})  # removed: no stored list to show
    who["caller"] = caller(["user:bob"])
    status, text = call(app, "GET", "/documents", None, "limit=1000")
    mine = {r["doc_id"]: r["readers"] for r in json.loads(text)["documents"]}
    assert mine == {d: readers_of(a) for d, a in live.items() if who["caller"].may_read(a)}
    assert any(r != ["*"] for r in mine.values()) and ["user:bob"] in mine.values()
