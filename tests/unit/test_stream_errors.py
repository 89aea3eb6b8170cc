"""The streamed routes of `eragraph serve` (POST /query/stream: NDJSON; the chat endpoint with
``stream: true``: server-sent events) in words, never internals (issue 46, item 3): a refusal of
the API's (errors.ANSWERS: a foreign tenant, a budget over the cap, too many open streams) has its
status before the head, never uvicorn's 500; a fault says what failed and the request id, before
the head (a JSON 500) or after it (an error line or event), and its text and type are only in
the log."""

from __future__ import annotations

import http.client
import json
import re
import threading

import pytest
from support import make_engine

pytest.importorskip("uvicorn")

from eragraph.adapters.memory.stream_slots_memory import MemoryStreamSlots  # noqa: E402
from eragraph.config import ApiLimits  # noqa: E402
from eragraph.entrypoints.http.server import make_server  # noqa: E402
from eragraph.ports.records import Answer  # noqa: E402
from eragraph.services import ingest  # noqa: E402

SECRET = "arn:aws:iam::123456789012:role/eragraph-secret at /home/ops/app.py"
INTERNAL = re.compile(r"123456789012|arn:aws|/home/|RuntimeError|Traceback|<class")
WITHHELD = re.compile(r"\(request id [^;]+; the detail is in the service's log\)")


class Flaky:
    """A generator that writes one piece, then fails with internal text (when ``fail`` is set)."""

    identity = "stand-in"

    def __init__(self) -> None:
        self.fail = False

    def answer(self, question, evidence, **_):
        return Answer(text="An answer.", cited_ids=(evidence[0][0],), tokens_in=1, tokens_out=1, model="stand-in")

    def stream(self, question, evidence, **_):
        yield "An "
        if self.fail:
            raise RuntimeError(SECRET)
        yield self.answer(question, evidence)


@pytest.fixture(scope="module")
def served():
    engine = make_engine()
    ingest.ingest(engine, [ingest.SourceDoc(source=f"d{i}.txt", text=f"Harbour note {i} about the lighthouse.")
                           for i in range(4)])
    engine.generator = Flaky()
    server = make_server(engine, port=0, limits=ApiLimits(answer_max_budget=400), streams=MemoryStreamSlots(1))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server, engine
    server.shutdown()
    server.server_close()


def post(server, path: str, body: dict, **headers) -> tuple[int, dict[str, str], bytes]:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("POST", path, body=json.dumps(body).encode(), headers={"content-type": "application/json", **headers})
    response = conn.getresponse()
    out = response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    conn.close()
    return out


QUERY = {"query": "lighthouse", "mode": "dense", "k": 3}
CHAT = {"model": "eragraph-dense", "stream": True, "messages": [{"role": "user", "content": "lighthouse"}]}


def sse_events(body: bytes) -> list:
    return [json.loads(line[6:]) for line in body.decode().split("\n\n") if line.startswith("data: {")]


def test_a_fault_after_the_head_is_an_error_line_in_words(served, capfd):
    server, engine = served
    engine.generator.fail = True
    try:
        status, _, body = post(server, "/query/stream", QUERY)
        chat_status, _, chat = post(server, "/v1/chat/completions", CHAT)
    finally:
        engine.generator.fail = False
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert status == 200 and [x["type"] for x in lines] == ["results", "piece", "error"]
    assert lines[-1]["message"].startswith("the answer broke off (request id ")
    assert WITHHELD.search(lines[-1]["message"]) and not INTERNAL.search(body.decode())
    errors = [e for e in sse_events(chat) if "error" in e]
    assert chat_status == 200 and len(errors) == 1 and WITHHELD.search(errors[0]["error"]["message"])
    assert not INTERNAL.search(chat.decode())
    logged = [json.loads(line) for line in capfd.readouterr().out.splitlines() if '"withheld"' in line]
    rid = re.search(r"request id ([^;]+);", lines[-1]["message"]).group(1)
    assert any(e["request_id"] == rid and SECRET in e["detail"] for e in logged)  # the detail: the log's


def test_a_fault_before_the_head_is_a_json_500_in_words(served, monkeypatch):
    server, engine = served

    def broken(_texts):
        raise RuntimeError(SECRET)

    monkeypatch.setattr(engine.embedder, "embed", broken)
    status, headers, body = post(server, "/query/stream", QUERY)
    assert status == 500 and headers["content-type"] == "application/json"
    message = json.loads(body)["message"]
    assert message.startswith("the query failed (request id ") and not INTERNAL.search(body.decode())
    status, headers, body = post(server, "/v1/chat/completions", CHAT)
    assert status == 500 and headers["content-type"] == "application/json", body
    assert WITHHELD.search(json.loads(body)["message"]) and not INTERNAL.search(body.decode())


def test_the_chat_stream_answers_the_api_s_refusals_before_its_head(served):
    server, _ = served
    status, _, body = post(server, "/v1/chat/completions", CHAT, **{"x-eragraph-tenant": "globex"})
    assert status == 403 and "another tenant" in json.loads(body)["message"], body  # was uvicorn's 500
    slots = server.app.streams
    held, lease = slots.acquire("")  # the tenant's one stream is open
    assert held.allowed
    try:
        status, headers, body = post(server, "/v1/chat/completions", CHAT)
        assert status == 429 and headers["retry-after"] and "streaming already" in json.loads(body)["message"]
        status, headers, body = post(server, "/query/stream", QUERY)
        assert status == 429 and headers["retry-after"]
    finally:
        slots.release("", lease)
    assert post(server, "/v1/chat/completions", CHAT)[0] == 200
