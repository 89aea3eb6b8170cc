"""The OpenAI-compatible chat endpoint driven by the official ``openai`` SDK, unchanged, against
`eragraph serve`'s ASGI server (eragraph.entrypoints.http.server) over a memory engine: models
are retrieval modes, answers come from the configured generator (a stand-in that streams and
cites its first piece of evidence), citations are in the text and in the ``citations`` field,
streaming sends pieces as they are written, and bad requests are 4xx errors in words."""

from __future__ import annotations

import threading

import pytest
from support import make_engine, synthetic_docs

pytest.importorskip("aws_lambda_powertools")
openai = pytest.importorskip("openai")

from eragraph.entrypoints.http.server import make_server  # noqa: E402
from eragraph.ports.records import Answer  # noqa: E402
from eragraph.services.ingest import ingest  # noqa: E402
from eragraph.services.modes import available_modes  # noqa: E402


class StreamingCiter:
    """Streams "It ", "is ", "so [1]."; with ``hold`` set, it holds the last piece until the
    event is set (``released``: whether it was, within ``HOLD_S``, rather than timed out)."""

    identity = "stand-in"
    hold: threading.Event | None = None
    released: bool | None = None

    def __init__(self) -> None:
        self.questions: list[str] = []

    def answer(self, question, evidence, **_):
        self.questions.append(question)
        return Answer(text=f"It is {evidence[0][1][:30]} [1].", cited_ids=(evidence[0][0],), tokens_in=12,
                      tokens_out=6, model="stand-in")

    def stream(self, question, evidence, **_):
        self.questions.append(question)
        for piece in ("It ", "is "):
            yield piece
        if self.hold is not None:
            self.released = self.hold.wait(HOLD_S)
        yield "so [1]."
        yield Answer(text="It is so [1].", cited_ids=(evidence[0][0],), tokens_in=12, tokens_out=3, model="stand-in")


HOLD_S = 30.0  # a bound on a hold that no read releases (a buffered stream), not a measure


@pytest.fixture(scope="module")
def served():
    engine = make_engine()
    ingest(engine, synthetic_docs(12))
    engine.generator = StreamingCiter()
    server = make_server(engine, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    try:
        yield engine, client
    finally:
        server.shutdown()
        server.server_close()


def test_models_are_the_stores_retrieval_modes(served):
    engine, client = served
    ids = [m.id for m in client.models.list()]
    assert ids == [f"eragraph-{m}" for m in available_modes(engine)]
    assert "eragraph-collapsed" in ids


def test_a_completion_answers_with_citations_in_the_text_and_a_field(served):
    engine, client = served
    out = client.chat.completions.create(model="eragraph-collapsed", messages=[
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": [{"type": "text", "text": "What is item d3 called?"}]}])
    assert engine.generator.questions[-1] == "What is item d3 called?"
    text = out.choices[0].message.content
    assert out.choices[0].finish_reason == "stop" and out.model == "eragraph-collapsed"
    assert text.startswith("It is so [1].") or text.startswith("It is ")
    citations = out.model_extra["citations"]
    assert len(citations) == 1 and citations[0]["index"] == 1 and citations[0]["source"].startswith("mem://")
    assert f"[1] {citations[0]['title']} ({citations[0]['source']})" in text.split("Sources:", 1)[1]
    assert out.usage.prompt_tokens == 12 and out.usage.total_tokens == 18


def test_a_stream_sends_pieces_as_the_generator_writes_them(served):
    engine, client = served
    release = threading.Event()
    engine.generator.hold, engine.generator.released = release, None
    try:
        stream = client.chat.completions.create(model="eragraph-collapsed", stream=True,
                                                stream_options={"include_usage": True},
                                                messages=[{"role": "user", "content": "What is item d5 called?"}])
        seen = []
        for chunk in stream:
            seen.append((release.is_set(), chunk))
            if chunk.choices and chunk.choices[0].delta.content == "It ":
                release.set()  # the first piece is here while the generator still holds the last
    finally:
        engine.generator.hold = None
        release.set()
    text = "".join(c.choices[0].delta.content or "" for _, c in seen if c.choices)
    assert text.startswith("It is so [1].") and "Sources:\n[1] " in text
    # streamed, not buffered: the client's read of the first piece released the generator (a
    # buffered reply would have reached the client only after the hold timed out)
    assert engine.generator.released is True
    assert [held for held, c in seen if c.choices and c.choices[0].delta.content == "so [1]."] == [True]
    finish = [c for _, c in seen if c.choices and c.choices[0].finish_reason == "stop"]
    assert len(finish) == 1 and finish[0].model_extra["citations"][0]["index"] == 1
    assert seen[-1][1].usage.completion_tokens == 3


def test_without_a_generator_the_reply_is_the_evidence(served):
    engine, client = served
    generator, engine.generator = engine.generator, None
    try:
        out = client.chat.completions.create(model="eragraph-dense", messages=[
            {"role": "user", "content": "Markerd4"}])
    finally:
        engine.generator = generator
    text = out.choices[0].message.content
    assert "No generator is configured" in text and "Markerd4" in text
    assert out.model_extra["citations"] and "Sources:" in text


@pytest.mark.parametrize("kwargs, status, words", [
    ({"model": "gpt-4o"}, 404, "the model 'gpt-4o' does not exist: choose one of eragraph-"),
    ({"messages": []}, 400, "messages is required"),
    ({"messages": [{"role": "user", "content": "   "}]}, 400, "must end with a user message that has text"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages[0] must be an object whose role"),
    ({"messages": [{"role": "user", "content": 7}]}, 400, "messages[0].content must be a string"),
    ({"messages": [{"role": "user", "content": "x" * 5000}]}, 400, "longer than"),
    ({"extra_body": {"k": 0}}, 400, "k must be an integer within 1..100"),
    ({"extra_body": {"filter": {"near": {"key": "a", "value": 1}}}}, 400, "unknown operator 'near'"),
    ({"extra_body": {"warp": 1}}, 400, "unknown field 'warp'"),
    ({"n": 2}, 400, "n must be 1"),
    ({"temperature": 5}, 400, "Invalid 'temperature': decimal above maximum value"),
    ({"temperature": -0.5}, 400, "Invalid 'temperature': decimal below minimum value"),
    ({"top_p": 7}, 400, "Invalid 'top_p': decimal above maximum value"),
    ({"max_tokens": -1}, 400, "Invalid 'max_tokens': integer below minimum value"),
    ({"max_completion_tokens": 0}, 400, "Invalid 'max_completion_tokens': integer below minimum value"),
    ({"extra_body": {"temperature": "hot"}}, 400, "Invalid type for 'temperature': expected a decimal"),
])
def test_bad_requests_are_4xx_in_words(served, kwargs, status, words):
    _, client = served
    args = {"model": "eragraph-collapsed", "messages": [{"role": "user", "content": "comet"}], **kwargs}
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(**args)
    assert info.value.status_code == status
    assert words in info.value.message
    assert info.value.body["message"] == info.value.body["error"]["message"] if isinstance(info.value.body, dict) \
        and "error" in info.value.body else True


def test_the_resolver_answers_a_stream_whole_as_server_sent_events(served):
    """What the API Gateway function answers (the resolver of make_app): the same events, whole."""
    import json

    from eragraph.entrypoints.http.api import make_app

    engine, _ = served
    app = make_app(lambda _tenant: engine, tenant_of=lambda _event: engine.tenant)
    body = json.dumps({"model": "eragraph-collapsed", "stream": True,
                       "messages": [{"role": "user", "content": "What is item d2 called?"}]})
    event = {"version": "2.0", "routeKey": "$default", "rawPath": "/v1/chat/completions", "rawQueryString": "",
             "headers": {"content-type": "application/json"}, "body": body, "isBase64Encoded": False,
             "requestContext": {"http": {"method": "POST", "path": "/v1/chat/completions"}, "requestId": "r1",
                                "stage": "$default"}}
    out = app.resolve(event, None)
    assert out["statusCode"] == 200 and out["headers"]["Content-Type"].startswith("text/event-stream")
    lines = [line[6:] for line in out["body"].split("\n\n") if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(line) for line in lines[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks).startswith("It is so [1].")
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["citations"]


def test_sampling_fields_in_range_are_accepted_and_the_refusal_has_openais_code(served):
    _, client = served
    out = client.chat.completions.create(model="eragraph-collapsed", messages=[{"role": "user", "content": "comet"}],
                                         temperature=2, top_p=0, max_tokens=1, max_completion_tokens=50)
    assert out.choices[0].message.content
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="eragraph-collapsed", messages=[{"role": "user", "content": "comet"}],
                                       temperature=2.5)
    assert info.value.body["param"] == "temperature" and info.value.body["code"] == "decimal_above_max_value"
