"""BedrockGenerator.stream over ConverseStream, against a real boto3 bedrock-runtime client whose
HTTP reply is an AWS event stream framed byte for byte (eragraph.entrypoints.bedrock_kb.eventstream): botocore's own event-stream parser
decodes it, so the frames, the order of pieces and the metadata token counts are the real path."""

from __future__ import annotations

import json

import pytest
from botocore.awsrequest import AWSResponse

from eragraph.entrypoints.bedrock_kb.eventstream import event, exception
from eragraph.ports.records import Answer
from eragraph.providers.bedrock import BedrockGenerator, make_client
from eragraph.providers.prompts import ModelCallError
from eragraph.services.generation import stream_answer

TEXT_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
EVIDENCE = [("chk-aaa111", "Marie Curie won two Nobel prizes."), ("sum-bbb222", "Curie worked in Paris.")]


def frame(event_type: str, payload: dict, message_type: str = "event") -> bytes:
    """One event-stream message, framed by eragraph.entrypoints.bedrock_kb.eventstream (prelude, headers, CRCs)."""
    return event(event_type, payload) if message_type == "event" else exception(event_type, payload["message"])


class Raw:
    """The HTTP body: yields one frame per read and records how far it has been read."""

    def __init__(self, frames: list[bytes]) -> None:
        self.frames, self.sent = frames, 0

    def stream(self, *args, **kwargs):
        for chunk in self.frames:
            self.sent += 1
            yield chunk

    def close(self) -> None:
        pass


@pytest.fixture
def client(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return make_client("us-east-1")


def answer_with(client, raw: Raw, requests: list):
    def send(request, **kwargs):
        requests.append(json.loads(request.body))
        return AWSResponse(request.url, 200, {"content-type": "application/vnd.amazon.eventstream"}, raw)
    client.meta.events.register_first("before-send.bedrock-runtime.ConverseStream", send)


def deltas(*texts: str) -> list[bytes]:
    return [frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": t}}) for t in texts]


def test_pieces_in_order_then_answer_with_metadata_tokens(client):
    raw = Raw([frame("messageStart", {"role": "assistant"}),
               *deltas("Marie Curie ", "won two ", "Nobel prizes [chk-aaa111] [chk-zzz999]."),
               frame("contentBlockStop", {"contentBlockIndex": 0}),
               frame("messageStop", {"stopReason": "end_turn"}),
               frame("metadata", {"usage": {"inputTokens": 120, "outputTokens": 17, "totalTokens": 137},
                                  "metrics": {"latencyMs": 40}})])
    requests: list = []
    answer_with(client, raw, requests)
    gen = BedrockGenerator(TEXT_MODEL, client=client, max_tokens=300)
    items = gen.stream("Who won two Nobel prizes?", EVIDENCE)
    first = next(items)
    assert first == "Marie Curie " and raw.sent == 2  # yielded before the rest was read
    rest = list(items)
    assert rest[:2] == ["won two ", "Nobel prizes [chk-aaa111] [chk-zzz999]."]
    final = rest[-1]
    assert isinstance(final, Answer) and len(rest) == 3
    assert final.text == "Marie Curie won two Nobel prizes [chk-aaa111] [chk-zzz999]."
    assert final.cited_ids == ("chk-aaa111",)
    assert (final.tokens_in, final.tokens_out) == (120, 17)
    assert final.model == f"bedrock:{TEXT_MODEL}"
    assert requests[0]["inferenceConfig"] == {"maxTokens": 300, "temperature": 0.0}
    assert "[chk-aaa111]" in requests[0]["messages"][0]["content"][0]["text"]


def test_stream_answer_uses_the_stream(client):
    answer_with(client, Raw([*deltas("a [chk-aaa111]", " b"),
                             frame("metadata", {"usage": {"inputTokens": 5, "outputTokens": 2}})]), [])
    out = list(stream_answer(BedrockGenerator(TEXT_MODEL, client=client), "q?", EVIDENCE))
    assert out[:2] == ["a [chk-aaa111]", " b"] and out[-1].tokens_out == 2


def test_error_event_mid_stream_is_a_model_call_error_in_words(client):
    raw = Raw([*deltas("partial "),
               frame("throttlingException", {"message": "slow down"}, message_type="exception")])
    answer_with(client, raw, [])
    items = BedrockGenerator(TEXT_MODEL, client=client).stream("q?", EVIDENCE)
    assert next(items) == "partial "
    with pytest.raises(ModelCallError, match="broke after 1 pieces.*slow down"):
        list(items)


def test_no_evidence_streams_the_refusal_without_a_call(client):
    requests: list = []
    answer_with(client, Raw([]), requests)
    items = list(BedrockGenerator(TEXT_MODEL, client=client).stream("q?", []))
    assert isinstance(items[-1], Answer) and items[-1].tokens_in == 0 and not requests
