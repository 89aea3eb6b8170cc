"""Who is asking, on every door (issue 59): one store whose even documents only ``group:board``
may read, and each door asked by a caller without that group (it must get none of their text,
titles, document ids or node ids, summaries included) and by one with it (it gets some).

- ``lambda_doors(app)``: the query function's routes through api.make_app, each request an API
  Gateway event of the real sample (tests/events/api_query_valid.json) with the caller's
  authorizer: POST /query, the Bedrock KB Retrieve and RetrieveAndGenerate, the chat
  completions (whole, and ``stream: true`` answered whole), the MCP tools retrieve, answer and
  get_document, GET /documents/{id};
- ``asgi_doors(url, headers_of)``: the same doors and the streamed ones over HTTP to a running
  ApiServer (eragraph serve's, or the stream function's app): POST /query/stream,
  POST /retrieveAndGenerateStream, the chat completions' server-sent events, MCP.

The generator quotes every evidence text it is given (tenant_cases.QuotingGenerator), so what
reached the generator shows in the answer too."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from access_cases import leaves_docs
from kb_support import kb_event
from support import make_engine, synthetic_docs
from tenant_cases import QuotingGenerator

SECRET = ["group:board"]
QUESTION = "telescope comet recipe league garden river"
MODEL_ARN = "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0"


@dataclass
class Store:
    engine: object
    secret: set[str]      # the documents only group:board may read
    signals: list[str]    # what no response to another caller may hold (ids, markers, titles)
    open_signals: list[str]


def store() -> Store:
    from dataclasses import replace

    from eragraph.services.ingest import ingest
    from eragraph.services.resummarize import drain

    engine = make_engine()
    docs = synthetic_docs(12)
    secret = {d.doc_id for d in docs[::2]}
    ingest(engine, [replace(d, metadata={"access": SECRET}) if d.doc_id in secret else d for d in docs])
    drain(engine)
    engine.generator = QuotingGenerator()
    seen: dict = {}
    hidden, shown = [], []
    for layer in engine.graph.layer_sizes():
        for ref in engine.graph.layer_refs(layer):
            (hidden if leaves_docs(engine, ref.node_id, seen) & secret else shown).append(re.escape(ref.node_id))
    for d in docs:
        words = [re.escape(json.dumps(d.doc_id)), re.escape(json.dumps(d.title)), rf"Marker{re.escape(d.doc_id)}\b"]
        (hidden if d.doc_id in secret else shown).extend(words)
    return Store(engine, secret, hidden, shown)


def leaks(text: str, patterns: list[str]) -> list[str]:
    """The patterns of ``patterns`` found in ``text``."""
    return [p for p in patterns if re.search(p, text)]


def _mcp_body(tool: str, arguments: dict) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


def _kb_id(engine) -> str:
    from eragraph.domain.knowledge_base import knowledge_base_id

    return knowledge_base_id(engine.tenant or "", engine.settings.kb_id_salt)


def requests(engine, secret_doc: str) -> dict[str, tuple[str, str, dict | None]]:
    """door -> (method, path, body) of each whole-answer door."""
    kb = _kb_id(engine)
    chat = {"model": "eragraph-collapsed", "messages": [{"role": "user", "content": QUESTION}], "k": 10}
    rag = {"input": {"text": QUESTION}, "retrieveAndGenerateConfiguration": {
        "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
            "knowledgeBaseId": kb, "modelArn": MODEL_ARN, "retrievalConfiguration": {
                "vectorSearchConfiguration": {"numberOfResults": 10}}}}}
    return {
        "query": ("POST", "/query", {"query": QUESTION, "k": 10, "mode": "collapsed", "answer": True}),
        "kb_retrieve": ("POST", f"/knowledgebases/{kb}/retrieve", {
            "retrievalQuery": {"text": QUESTION},
            "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": 10,
                                                                     "overrideSearchType": "SEMANTIC"}}}),
        "kb_retrieve_and_generate": ("POST", "/retrieveAndGenerate", rag),
        "chat": ("POST", "/v1/chat/completions", chat),
        "chat_stream": ("POST", "/v1/chat/completions", {**chat, "stream": True}),
        "mcp_retrieve": ("POST", "/mcp", _mcp_body("retrieve", {"query": QUESTION, "k": 10, "mode": "collapsed"})),
        "mcp_answer": ("POST", "/mcp", _mcp_body("answer", {"query": QUESTION, "k": 10, "mode": "dense"})),
        "mcp_get_document": ("POST", "/mcp", _mcp_body("get_document", {"doc_id": secret_doc})),
        "get_document": ("GET", f"/documents/{secret_doc}", None),
        "list_documents": ("GET", "/documents", None),
    }


STREAMED = ("query_stream", "kb_stream", "chat_stream")


def streamed_requests(engine) -> dict[str, tuple[str, str, dict]]:
    rag = requests(engine, "")["kb_retrieve_and_generate"][2]
    chat = requests(engine, "")["chat_stream"][2]
    return {"query_stream": ("POST", "/query/stream", {"query": QUESTION, "k": 10, "mode": "collapsed"}),
            "kb_stream": ("POST", "/retrieveAndGenerateStream", rag),
            "chat_stream": ("POST", "/v1/chat/completions", chat)}


MCP_HEADERS = {"accept": "application/json, text/event-stream"}


def lambda_doors(app, authorizer_of: Callable[[object], dict], engine, secret_doc: str):
    """door -> ask(who) -> (status, text) through the resolver ``app`` (api.make_app)."""
    def door(method: str, path: str, body: dict | None):
        def ask(who) -> tuple[int, str]:
            ev = kb_event(method, path, body, authorizer_of(who))
            if path == "/mcp":
                ev["headers"] = {**ev["headers"], **MCP_HEADERS}
            if body is None:
                ev.pop("body", None)
            out = app.resolve(ev, None)
            return out["statusCode"], out.get("body") or ""
        return ask
    return {name: door(*r) for name, r in requests(engine, secret_doc).items()}


def http_ask(url: str, method: str, path: str, body: dict | None, headers: dict[str, str]) -> tuple[int, str]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    data = None if body is None else json.dumps(body).encode()
    sent = {**({"content-type": "application/json"} if data is not None else {}), **headers}
    if path == "/mcp":
        sent.update(MCP_HEADERS)
    conn.request(method, path, body=data, headers=sent)
    response = conn.getresponse()
    text = response.read().decode("latin-1")  # the KB stream's frames are binary around their JSON
    conn.close()
    return response.status, text


def check_door(name: str, ask: Callable, outsider, insider, data: Store, refused=None) -> None:
    """The outsider gets none of the secret documents, the insider some (or, for get_document,
    the document); ``refused``: a caller without principals gets a 403 (or the MCP/KB
    equivalent) and none of them either."""
    status, text = ask(outsider)
    assert status in (200, 404), (name, status, text[:300])
    assert not leaks(text, data.signals), (name, leaks(text, data.signals)[:5])
    if "get_document" not in name:
        assert leaks(text, data.open_signals), (name, "the outsider got nothing at all", text[:300])
    status, text = ask(insider)
    assert status == 200, (name, status, text[:300])
    assert leaks(text, data.signals), (name, "the insider got none of the documents it may read", text[:300])
    if refused is not None:
        status, text = ask(refused)
        assert status in (401, 403), (name, status, text[:300])
        assert not leaks(text, data.signals) and not leaks(text, data.open_signals), name
