"""The API fuzz over every route of the route table (issue 46), against `eragraph serve` in process
(with the document pipeline, so the routes that ingest are served, and a data source bucket):
each route is found in eragraph.entrypoints.http.routes, so a route added later is fuzzed without
an edit here; its path parameters name a real data source and job. Seeded: a fixed seed in CI,
ERAGRAPH_FUZZ_SEED (e.g. random in the nightly benchmarks) to explore. Every answer must be below
500, and no error body may carry an ARN, an account id, a Python class name, a traceback or a
file path. Then the corpus of bad input on the doors of issue 45 (api_corpus.DOOR_CASES: the chat,
document and bedrock-agent routes): each case its status, modelled error type and words."""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import threading

import pytest

pytest.importorskip("aws_lambda_powertools")
pytest.importorskip("uvicorn")

from api_corpus import DOOR_CASES, _chat, door_setup, inline_doc  # noqa: E402
from support import make_engine  # noqa: E402

from eragraph.domain.knowledge_base import knowledge_base_id  # noqa: E402
from eragraph.entrypoints.http.routes import ROUTES  # noqa: E402
from eragraph.entrypoints.http.server import make_server  # noqa: E402
from eragraph.services import ingest  # noqa: E402

SEED = int(os.environ.get("ERAGRAPH_FUZZ_SEED", "4601"))  # noqa: env read by a test, not the package
PER_ROUTE = 40
INTERNAL = re.compile(r"arn:aws|\b\d{12}\b|<class |Traceback|File \"|\.py\b|/site-packages/|pydantic|errors\.pydantic")

# what an error may quote that is not internal: the service model's own pattern, the caller's own value
QUOTED = re.compile(r"the pattern \S+|\(got '.*?'\)|\(got \\\"[^)]*\)")

VALUES = [None, True, 0, -1, 101, 2.5, 1e308, "", "x", "BOGUS", "\ud800", "a\r\nb", "\x00", [], [1], {}, {"a": 1},
          "comet " * 500, {"text": "q"}, {"type": "IMAGE"}]

SEEDS: dict[str, dict] = {  # a valid body per POST path, mutated by the fuzz
    "/query": {"query": "ferry log", "k": 3, "mode": "dense"},
    "/knowledgebases/{knowledgeBaseId}/retrieve": {"retrievalQuery": {"text": "ferry"}, "retrievalConfiguration": {
        "vectorSearchConfiguration": {"numberOfResults": 2, "overrideSearchType": "SEMANTIC"}}},
    "/retrieveAndGenerate": {"input": {"text": "ferry"}, "sessionId": "s-1", "retrieveAndGenerateConfiguration": {
        "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
            "knowledgeBaseId": knowledge_base_id(""), "modelArn": "arn:aws:bedrock:us-east-1::foundation-model/x"}}},
    "/mcp": {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "retrieve",
                                                                          "arguments": {"query": "ferry", "k": 2}}},
}
SEEDS["/retrieveAndGenerateStream"] = SEEDS["/retrieveAndGenerate"]
_DS = "/knowledgebases/{knowledgeBaseId}/datasources/{dataSourceId}"
SEEDS.update({  # the doors of issue 45
    "/v1/chat/completions": _chat(k=2),
    "/documents": {"documents": [{"source": "fuzz/a.txt", "text": "The ferry log.", "metadata": {"year": 2020}}]},
    "/knowledgebases/{knowledgeBaseId}/datasources/": {"name": "fuzzed", "dataSourceConfiguration": {"type": "CUSTOM"}},
    _DS + "/documents": {"documents": [inline_doc("fuzz-1", "The ferry log.", {"type": "IN_LINE_ATTRIBUTE",
                         "inlineAttributes": [{"key": "year", "value": {"type": "NUMBER", "numberValue": 2020}}]})]},
    _DS + "/documents/getDocuments": {"documentIdentifiers": [{"dataSourceType": "CUSTOM", "custom": {"id": "fuzz-1"}}]},
    _DS + "/documents/deleteDocuments": {"documentIdentifiers": [{"dataSourceType": "CUSTOM",
                                                                   "custom": {"id": "fuzz-2"}}]},
    _DS + "/ingestionjobs/": {"maxResults": 5, "sortBy": {"attribute": "STATUS", "order": "ASCENDING"}},
})
BUCKET = "notes"
IDS: dict[str, str] = {}  # the data source and job the fuzzed paths name (the server fixture makes them)
MCP_EXTRA = [  # JSON-RPC shapes the mutations would rarely reach
    [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}],
    {"jsonrpc": "2.0", "id": 3, "method": "no/such/method"},
    {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "retrieve", "arguments": {"k": "x"}}},
    {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "nope", "arguments": {}}},
    {"jsonrpc": "1.0", "method": "ping"},
    [],
]


def concrete(path: str) -> str:
    out = path.replace("{knowledgeBaseId}", knowledge_base_id("")).replace("{doc_id}", "notes%2Fa.txt")
    if "/ingestionjobs/" in path:  # the S3 data source, whose stopped job there is
        out = out.replace("{dataSourceId}", IDS["s3ds"]).replace("{ingestionJobId}", IDS["job"])
    return out.replace("{dataSourceId}", IDS["ds"])


def mutate(rng: random.Random, body):
    body = json.loads(json.dumps(body))
    node = body
    while isinstance(node, dict) and node and rng.random() < 0.6:
        key = rng.choice(list(node))
        if isinstance(node[key], dict) and rng.random() < 0.7:
            node = node[key]
            continue
        node[key] = rng.choice(VALUES)
        return body
    if isinstance(node, dict):
        node[rng.choice(["extra", "guardrailConfiguration", "nextToken", "filter"])] = rng.choice(VALUES)
    return body


def raw(body) -> bytes:
    return json.dumps(body, ensure_ascii=True).encode()


def cases(rng: random.Random):
    for route in ROUTES:
        path = concrete(route.path)
        if route.method == "GET":
            for _ in range(PER_ROUTE // 4):
                query = rng.choice(["", "?limit=-1", "?limit=x", "?prefix=" + "a" * 2000, "?limit=100000", "?cursor=%00"])
                yield route, "GET", path + query, None
            continue
        seed = SEEDS.get(route.path, {})
        yield route, route.method, path, raw(seed)  # the seed itself first
        for _ in range(PER_ROUTE):
            kind = rng.randrange(5)
            if kind == 0:
                text = raw(seed)
                at = rng.randrange(len(text) + 1)
                yield route, route.method, path, text[:at] + rng.choice([b'"', b"{", b"]", b"\xff", b"\\u"]) + text[at:]
            elif kind == 1:
                yield route, route.method, path, b"[" * rng.choice([20, 33, 5000]) + b"]" * 10
            else:
                yield route, route.method, path, raw(mutate(rng, seed))
        if route.path == "/mcp":
            for body in MCP_EXTRA:
                yield route, "POST", path, raw(body)


def call(server, method: str, path: str, body) -> tuple[int, dict, bytes]:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=60)
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, data


@pytest.fixture(scope="module")
def server():
    from eragraph.adapters.memory.blob_memory import MemoryBlobStore
    from eragraph.bootstrap import document_pipeline

    engine = make_engine()
    ingest.ingest(engine, [ingest.SourceDoc(source="notes/a.txt", text="The harbour master keeps the ferry log. " * 4)])
    bucket = MemoryBlobStore()  # a data source bucket, as the memory profile's source_bucket gives
    bucket.put("docs/a.txt", b"The harbour master keeps the ferry log. " * 4)
    engine.buckets = lambda name: {BUCKET: bucket}[name] if name == BUCKET else (_ for _ in ()).throw(
        LookupError(f"no bucket {name!r}"))
    pipeline = document_pipeline("memory", None, engine.settings, lambda tenant: engine)
    served = make_server(engine, port=0, uploads=pipeline)
    threading.Thread(target=served.serve_forever, daemon=True).start()

    def json_call(method, path, body):
        status, _, data = call(served, method, path, json.dumps(body).encode())
        return status, json.loads(data)

    IDS.update(door_setup(json_call, knowledge_base_id(""), BUCKET))
    yield served
    served.shutdown()
    served.server_close()
    pipeline.close()


def test_every_route_answers_fuzz_below_500_without_internal_text(server):
    rng = random.Random(SEED)
    failures, seen, answered = [], set(), set()
    for route, method, path, body in cases(rng):
        seen.add(route.key)
        status, _, data = call(server, method, path, body)
        text = data.decode("utf-8", errors="replace")
        if status >= 500:
            failures.append((route.key, status, body[:120] if body else None, text[:200]))
        elif status >= 400 and INTERNAL.search(QUOTED.sub("", text)):
            failures.append((route.key, status, "internal text", text[:300]))
        if status < 400:
            answered.add(route.key)
    assert seen == {r.key for r in ROUTES}
    assert not failures, f"seed {SEED}: {failures[:5]}"
    # the routes that ingest are served (not 404 for want of a pipeline), a valid seed answered
    assert {"POST /documents", "POST /v1/chat/completions", f"PUT {_DS}/documents"} <= answered, answered


@pytest.mark.parametrize("name, method, path, body, status, error_type, words", DOOR_CASES,
                         ids=[case[0] for case in DOOR_CASES])
def test_bad_input_on_the_doors_gets_the_modelled_error_in_words(server, name, method, path, body, status,
                                                                 error_type, words):
    got, headers, data = call(server, method, path.format(**IDS), json.dumps(body).encode())
    assert got == status, (name, got, data[:300])
    message = json.loads(data)["message"]
    assert words in message, (name, message)
    assert headers.get("x-amzn-errortype") == error_type, (name, headers)
    if path.startswith("/v1/"):  # OpenAI's error body, its message the same words
        assert json.loads(data)["error"]["message"] == message


def test_an_inline_document_over_a_mebibyte_is_taken_as_on_bedrock(server):
    """IngestKnowledgeBaseDocuments takes Bedrock's inline documents of up to 5 MB (its body is
    capped at 6 MiB, as POST /documents', not the 1 MiB of the other routes); this one, 2 MiB of
    bytes that are no text, is accepted and then fails with its reason."""
    import base64
    import time

    data = base64.b64encode(bytes(range(256)) * (8 * 1024)).decode()  # 2 MiB
    doc = {"content": {"dataSourceType": "CUSTOM", "custom": {
        "customDocumentIdentifier": {"id": "big-binary"}, "sourceType": "IN_LINE",
        "inlineContent": {"type": "BYTE", "byteContent": {"mimeType": "application/octet-stream", "data": data}}}}}
    base = f"/knowledgebases/{IDS['kb']}/datasources/{IDS['ds']}/documents"
    status, _, out = call(server, "PUT", base, json.dumps({"documents": [doc]}).encode())
    assert status == 202, out[:300]
    ident = {"documentIdentifiers": [{"dataSourceType": "CUSTOM", "custom": {"id": "big-binary"}}]}
    deadline = time.monotonic() + 60
    while True:
        status, _, out = call(server, "POST", base + "/getDocuments", json.dumps(ident).encode())
        detail = json.loads(out)["documentDetails"][0]
        if detail["status"] not in ("STARTING", "IN_PROGRESS", "PENDING") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert detail["status"] == "FAILED" and "binary" in detail.get("statusReason", ""), detail
