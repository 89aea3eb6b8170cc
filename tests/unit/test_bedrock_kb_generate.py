"""RetrieveAndGenerate with boto3's ``bedrock-agent-runtime`` client, unchanged, against the
shared resolver (eragraph.entrypoints.http.api.make_app, what `eragraph serve` and the query function run): a
``before-send`` hook hands each prepared request to the resolver as a payload v2 event. The
generator is a stand-in that cites its first piece of evidence; without one the request is a
ValidationException that says so."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from support import make_engine

pytest.importorskip("aws_lambda_powertools")

from eragraph.entrypoints.http.api import make_app  # noqa: E402
from eragraph.domain.knowledge_base import knowledge_base_id  # noqa: E402
from eragraph.ports.records import Answer  # noqa: E402
from eragraph.services import ingest  # noqa: E402

TEXT = "The lighthouse keeper of Skarvik island writes the ship log every night. " * 3


class CitingGenerator:
    identity = "stand-in"

    def __init__(self) -> None:
        self.questions: list[str] = []

    def answer(self, question, evidence, **_):
        self.questions.append(question)
        first_id, first_text = evidence[0]
        return Answer(text=f"From the log: {first_text[:40]}", cited_ids=(first_id,), tokens_in=10, tokens_out=5,
                      model="stand-in")


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_):
        yield self.data


def client_of(engine):
    app = make_app(lambda _tenant: engine, tenant_of=lambda _event: engine.tenant)
    client = boto3.client("bedrock-agent-runtime", region_name="us-east-1", endpoint_url="https://kb.example.com",
                          aws_access_key_id="x", aws_secret_access_key="x", config=Config(retries={"max_attempts": 1}))

    def send(request, **_):
        path = request.url.split("kb.example.com", 1)[1]
        body = request.body.decode() if isinstance(request.body, bytes) else (request.body or "")
        event = {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
                 "headers": {"content-type": "application/json"}, "body": body, "isBase64Encoded": False,
                 "requestContext": {"http": {"method": "POST", "path": path}, "requestId": "r1", "stage": "$default"}}
        out = app.resolve(event, None)
        headers = {k.lower(): v for k, v in (out.get("headers") or {}).items()}
        return AWSResponse(request.url, out["statusCode"], headers, _Raw((out.get("body") or "").encode()))

    client.meta.events.register_first("before-send.bedrock-agent-runtime.*", send)
    return client


@pytest.fixture
def kb_engine():
    engine = make_engine()
    ingest.ingest(engine, [ingest.SourceDoc(source="s3://bucket/skarvik.txt", text=TEXT, title="Skarvik")])
    return engine


def request(kb_id: str, **extra):
    return {"input": {"text": "Who writes the ship log?"}, "retrieveAndGenerateConfiguration": {
        "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
            "knowledgeBaseId": kb_id, "modelArn": "arn:aws:bedrock:us-east-1::foundation-model/stand-in",
            "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": 2,
                                                                     "overrideSearchType": "SEMANTIC"}}}}, **extra}


def test_the_answer_cites_the_retrieved_references(kb_engine):
    kb_engine.generator = CitingGenerator()
    client = client_of(kb_engine)
    out = client.retrieve_and_generate(**request(knowledge_base_id("")))
    assert out["output"]["text"].startswith("From the log: ") and out["sessionId"]  # a new session's id
    [citation] = out["citations"]
    part = citation["generatedResponsePart"]["textResponsePart"]
    assert part["text"] == out["output"]["text"] and part["span"] == {"start": 0, "end": len(part["text"]) - 1}
    [ref] = citation["retrievedReferences"]  # the generator cited one piece of evidence
    assert "lighthouse" in ref["content"]["text"] and ref["location"]["s3Location"]["uri"] == "s3://bucket/skarvik.txt"
    assert kb_engine.generator.questions == ["Who writes the ship log?"]


def test_no_generator_is_a_validation_exception_that_says_so(kb_engine):
    client = client_of(kb_engine)
    with pytest.raises(client.exceptions.ValidationException) as info:
        client.retrieve_and_generate(**request(knowledge_base_id("")))
    assert "generator" in str(info.value)


def test_an_unknown_knowledge_base_and_a_foreign_configuration_are_refused(kb_engine):
    kb_engine.generator = CitingGenerator()
    client = client_of(kb_engine)
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.retrieve_and_generate(**request(knowledge_base_id("other")))
    with pytest.raises(client.exceptions.ValidationException) as info:
        client.retrieve_and_generate(input={"text": "q"}, retrieveAndGenerateConfiguration={
            "type": "EXTERNAL_SOURCES", "externalSourcesConfiguration": {
                "modelArn": "arn:aws:bedrock:us-east-1::foundation-model/x",
                "sources": [{"sourceType": "BYTE_CONTENT", "byteContent": {
                    "contentType": "text/plain", "data": b"x", "identifier": "x"}}]}})
    assert "KNOWLEDGE_BASE" in str(info.value)
    assert kb_engine.generator.questions == []


class SlowStreamingGenerator(CitingGenerator):
    """Streams three pieces, ``pause`` seconds apart, then its Answer."""

    pause = 0.3

    def stream(self, question, evidence, **_):
        import time

        self.questions.append(question)
        for piece in ("From ", "the ", "log."):
            time.sleep(self.pause)
            yield piece
        yield Answer(text="From the log.", cited_ids=(evidence[0][0],), tokens_in=10, tokens_out=3, model="stand-in")


def test_the_stream_frames_leave_as_the_generator_writes(kb_engine):
    import time

    from botocore.eventstream import EventStream
    from botocore.parsers import EventStreamJSONParser

    from eragraph.entrypoints.bedrock_kb.runtime import retrieve_and_generate_stream, service_model

    kb_engine.generator = SlowStreamingGenerator()
    frames = retrieve_and_generate_stream(kb_engine, request(knowledge_base_id("")))

    class Raw:
        def stream(self, **_):
            yield from frames

    shape = service_model().operation_model("RetrieveAndGenerateStream").output_shape.members["stream"]
    started = time.perf_counter()
    seen = []
    for ev in EventStream(Raw(), shape, EventStreamJSONParser(), "RetrieveAndGenerateStream"):
        seen.append((time.perf_counter() - started, ev))
    first_at, first = seen[0]
    assert first == {"output": {"text": "From "}}
    # the first piece did not wait for the rest: it came at least one pause before the last (sleep
    # bounds the gap from below, so a loaded machine cannot break this; buffering would make it ~0)
    assert seen[-1][0] - first_at > SlowStreamingGenerator.pause
    assert "".join(ev["output"]["text"] for _, ev in seen if "output" in ev) == "From the log."
    citation = seen[-1][1]["citation"]
    assert citation["generatedResponsePart"]["textResponsePart"]["text"] == "From the log."
    assert len(citation["retrievedReferences"]) == 1


def test_serve_streams_the_first_event_before_the_generator_finishes(kb_engine):
    """boto3's retrieve_and_generate_stream against the real ASGI server (eragraph.entrypoints.http.server),
    read event by event."""
    import threading
    import time

    from eragraph.entrypoints.http.server import make_server

    kb_engine.generator = SlowStreamingGenerator()
    server = make_server(kb_engine, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = boto3.client("bedrock-agent-runtime", region_name="us-east-1", endpoint_url=server.url,
                              aws_access_key_id="x", aws_secret_access_key="x",
                              config=Config(retries={"max_attempts": 1}))
        started = time.perf_counter()
        out = client.retrieve_and_generate_stream(**request(knowledge_base_id("")))
        assert out["sessionId"]  # a new session's id, in Bedrock's header
        seen = [(time.perf_counter() - started, ev) for ev in out["stream"]]
        assert seen[0][1] == {"output": {"text": "From "}}
        assert seen[-1][0] - seen[0][0] > SlowStreamingGenerator.pause  # streamed, not buffered (load-proof)
        assert "citation" in seen[-1][1]
        kb_engine.generator = None
        with pytest.raises(client.exceptions.ValidationException) as info:
            client.retrieve_and_generate_stream(**request(knowledge_base_id("")))
        assert "generator" in str(info.value)
    finally:
        server.shutdown()
        server.server_close()


class FailingGenerator(CitingGenerator):
    """A model that gives up (providers.prompts.ModelCallError), at once or after ``after`` pieces."""

    def __init__(self, after: int | None = None) -> None:
        super().__init__()
        self.after = after

    def answer(self, question, evidence, **_):
        from eragraph.providers.prompts import ModelCallError

        raise ModelCallError("Bedrock answer failed: ModelErrorException: the model broke")

    def stream(self, question, evidence, **_):
        from eragraph.providers.prompts import ModelCallError

        for n in range(self.after or 0):
            yield f"piece{n} "
        raise ModelCallError("Bedrock answer stream broke")


def test_a_failed_model_call_is_a_dependency_failure_not_a_500(kb_engine):
    """The model gave up: RetrieveAndGenerate raises boto3's DependencyFailedException, the
    stream raises it before its first frame, or ends in the stream's own exception event after
    pieces were sent; POST /query answers 502 with the reason."""
    from botocore.exceptions import EventStreamError
    from botocore.eventstream import EventStream
    from botocore.parsers import EventStreamJSONParser

    from eragraph.entrypoints.bedrock_kb.runtime import retrieve_and_generate_stream, service_model

    kb_engine.generator = FailingGenerator()
    client = client_of(kb_engine)
    with pytest.raises(client.exceptions.DependencyFailedException) as info:
        client.retrieve_and_generate(**request(knowledge_base_id("")))
    # the provider's text stays in the log (it can carry account ids and role ARNs): the caller
    # gets a stable reason and the request id
    assert "a model call failed" in str(info.value) and "request id" in str(info.value)
    assert "the model broke" not in str(info.value)

    from eragraph.entrypoints.bedrock_kb.runtime import KbError

    with pytest.raises(KbError) as before:
        next(retrieve_and_generate_stream(kb_engine, request(knowledge_base_id(""))))
    assert before.value.code == "DependencyFailedException" and before.value.status == 424

    kb_engine.generator = FailingGenerator(after=2)
    frames = retrieve_and_generate_stream(kb_engine, request(knowledge_base_id("")))

    class Raw:
        def stream(self, **_):
            yield from frames

    shape = service_model().operation_model("RetrieveAndGenerateStream").output_shape.members["stream"]
    seen = []
    with pytest.raises(EventStreamError) as mid:
        for ev in EventStream(Raw(), shape, EventStreamJSONParser(), "RetrieveAndGenerateStream"):
            seen.append(ev)
    assert seen == [{"output": {"text": "piece0 "}}, {"output": {"text": "piece1 "}}]
    assert mid.value.response["Error"]["Code"] == "dependencyFailedException"

    kb_engine.generator = FailingGenerator()
    app = make_app(lambda _tenant: kb_engine, tenant_of=lambda _event: kb_engine.tenant)
    event = {"version": "2.0", "routeKey": "$default", "rawPath": "/query", "rawQueryString": "",
             "headers": {"content-type": "application/json"}, "isBase64Encoded": False,
             "body": json.dumps({"query": "Who writes the ship log?", "mode": "dense", "answer": True}),
             "requestContext": {"http": {"method": "POST", "path": "/query"}, "requestId": "r2", "stage": "$default"}}
    out = app.resolve(event, None)
    message = json.loads(out["body"])["message"]
    assert out["statusCode"] == 502 and "the model broke" not in message and "request id r2" in message
