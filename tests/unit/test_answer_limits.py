"""Limits per tenant on what costs (issue 46, item 4), through `eragraph serve`'s ASGI app (the app
the stream function runs too): the answer budget cap on every path that generates (the KB routes
and their stream, POST /query/stream, MCP's answer, the chat endpoint's stream), and the answers
a tenant may have streaming at once (429 with Retry-After when full, the slot freed at the end)."""

from __future__ import annotations

import http.client
import json
import threading
import time

import boto3
import pytest
from botocore.config import Config
from support import make_engine

pytest.importorskip("aws_lambda_powertools")
pytest.importorskip("uvicorn")

from eragraph.adapters.memory.stream_slots_memory import MemoryStreamSlots  # noqa: E402
from eragraph.config import ApiLimits  # noqa: E402
from eragraph.domain.knowledge_base import knowledge_base_id  # noqa: E402
from eragraph.domain.stream_slots import open_slot  # noqa: E402
from eragraph.entrypoints.http.server import make_server  # noqa: E402
from eragraph.ports.records import Answer  # noqa: E402
from eragraph.services import ingest  # noqa: E402

CAP = 120


class EvidenceGenerator:
    """A generator that keeps how many tokens of evidence each answer was given."""

    identity = "stand-in"

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.evidence = tokenizer, []

    def answer(self, question, evidence, **_):
        self.evidence.append(sum(self.tokenizer.count(text) for _, text in evidence))
        return Answer(text="An answer.", cited_ids=(evidence[0][0],), tokens_in=1, tokens_out=1, model="stand-in")

    def stream(self, question, evidence, **_):
        answer = self.answer(question, evidence)
        yield answer.text
        yield answer


@pytest.fixture(scope="module")
def served():
    engine = make_engine(token_budget=50000)
    words = " ".join(f"word{i}" for i in range(60))
    ingest.ingest(engine, [ingest.SourceDoc(source=f"docs/{i}.txt", text=f"Document {i}. {words}.", doc_id=f"d{i}")
                           for i in range(12)])
    engine.generator = EvidenceGenerator(engine.tokenizer)
    server = make_server(engine, port=0, limits=ApiLimits(answer_max_budget=CAP), streams=MemoryStreamSlots(1))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server, engine
    server.shutdown()
    server.server_close()


def post(server, path: str, body: dict) -> tuple[int, dict[str, str], bytes]:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("POST", path, body=json.dumps(body).encode(),
                 headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
    response = conn.getresponse()
    out = response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    conn.close()
    return out


def kb_client(server):
    return boto3.client("bedrock-agent-runtime", region_name="us-east-1", endpoint_url=server.url,
                        aws_access_key_id="x", aws_secret_access_key="x", config=Config(retries={"max_attempts": 1}))


def kb_request(**extra):
    return {"input": {"text": "word7 word9"}, "retrieveAndGenerateConfiguration": {
        "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
            "knowledgeBaseId": knowledge_base_id(""), "modelArn": "arn:aws:bedrock:us-east-1::foundation-model/x",
            "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": 12,
                                                                     "overrideSearchType": "SEMANTIC"}}}}, **extra}


QUERY = {"query": "word7 word9", "mode": "dense", "k": 12}
CHAT = {"model": "eragraph-dense", "stream": True, "messages": [{"role": "user", "content": "word7 word9"}]}
MCP = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
       "params": {"name": "answer", "arguments": {"query": "word7 word9", "k": 12, "mode": "dense"}}}


def last_evidence(engine, call) -> int:
    engine.generator.evidence.clear()
    call()
    assert len(engine.generator.evidence) == 1
    return engine.generator.evidence[0]


def test_without_an_answer_the_default_budget_holds(served):
    server, engine = served
    status, _, body = post(server, "/query", QUERY)
    assert status == 200
    assert sum(engine.tokenizer.count(r["text"]) for r in json.loads(body)["results"]) > CAP  # nothing caps it


@pytest.mark.parametrize("path", ["kb", "kb_stream", "query_stream", "chat_stream", "mcp"])
def test_every_path_that_generates_caps_the_evidence(served, path):
    server, engine = served
    client = kb_client(server)
    calls = {
        "kb": lambda: client.retrieve_and_generate(**kb_request()),
        "kb_stream": lambda: list(client.retrieve_and_generate_stream(**kb_request())["stream"]),
        "query_stream": lambda: post(server, "/query/stream", QUERY),
        "chat_stream": lambda: post(server, "/v1/chat/completions", CHAT),
        "mcp": lambda: post(server, "/mcp", MCP),
    }
    assert 0 < last_evidence(engine, calls[path]) <= CAP


def test_a_requested_budget_over_the_cap_is_refused_on_the_stream(served):
    server, _ = served
    status, _, body = post(server, "/query/stream", {**QUERY, "budget": CAP + 1})
    assert status == 422 and f"at most {CAP}" in json.loads(body)["message"]


def test_a_tenant_with_its_streams_open_is_refused_until_one_ends(served):
    server, engine = served
    slots = server.app.streams
    held, lease = slots.acquire("")  # one answer of this tenant streaming (the limit is 1)
    assert held.allowed
    try:
        status, headers, body = post(server, "/query/stream", QUERY)
        assert status == 429 and headers["retry-after"] == "1" and "streaming already" in json.loads(body)["message"]
        status, headers, _ = post(server, "/v1/chat/completions", CHAT)
        assert status == 429 and headers["retry-after"] == "1"
        with pytest.raises(kb_client(server).exceptions.ThrottlingException):
            kb_client(server).retrieve_and_generate_stream(**kb_request())
        assert post(server, "/query", {**QUERY, "answer": True})[0] == 200  # whole answers are rate-limited only
    finally:
        slots.release("", lease)
    for _ in range(2):  # each stream frees its slot as it ends
        assert post(server, "/query/stream", QUERY)[0] == 200
        assert list(kb_client(server).retrieve_and_generate_stream(**kb_request())["stream"])
    deadline = time.monotonic() + 10  # the last slot is freed just after the last byte
    while slots._leases[""]:
        assert time.monotonic() < deadline, "a finished stream still holds its slot"
        time.sleep(0.05)


def test_a_slot_lapses_and_tenants_do_not_share_them():
    clock = [0.0]
    slots = MemoryStreamSlots(2, clock=lambda: clock[0], lease_seconds=10)
    assert [slots.acquire("acme")[0].allowed for _ in range(3)] == [True, True, False]
    assert slots.acquire("globex")[0].allowed
    clock[0] = 11.0  # the two leases of a stream that never said it ended lapse
    assert slots.acquire("acme")[0].allowed
    decision = open_slot({"a": 5.0, "b": 20.0}, 10.0, 1, "c", 30.0)
    assert not decision.allowed and decision.leases == {"b": 20.0} and decision.retry_after == 1


def test_a_tenant_share_that_could_fill_the_stream_function_is_refused():
    assert ApiLimits.from_env({"ERAGRAPH_TENANT_STREAMS": "3", "ERAGRAPH_STREAM_CAPACITY": "10"}).tenant_streams == 3
    for streams in ("10", "12", "0"):
        with pytest.raises(ValueError, match="one tenant can fill every stream"):
            ApiLimits.from_env({"ERAGRAPH_TENANT_STREAMS": streams, "ERAGRAPH_STREAM_CAPACITY": "10"})
    assert ApiLimits.from_env({"ERAGRAPH_TENANT_STREAMS": "50"}).tenant_streams == 50  # capacity unknown
