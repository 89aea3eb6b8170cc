"""Bedrock providers against a real boto3 bedrock-runtime client whose HTTP layer is replaced by
botocore's Stubber: exact request shapes, usage accounting, retries and giving up."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from eragraph.ports.providers import Embedder, Generator, Summarizer
from eragraph.providers.bedrock import BedrockEmbedder, BedrockGenerator, BedrockSummarizer, make_client
from eragraph.providers.hashing import RegexTokenizer
from eragraph.providers.prompts import ANSWER_SYSTEM, SUMMARY_SYSTEM, ModelCallError, answer_prompt, summary_prompt

TEXT_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"


@pytest.fixture
def client(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return make_client("us-east-1")


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def titan_body(vec, tokens=3) -> dict:
    data = json.dumps({"embedding": list(vec), "inputTextTokenCount": tokens}).encode()
    return {"body": StreamingBody(io.BytesIO(data), len(data)), "contentType": "application/json"}


def titan_params(text: str, dim: int) -> dict:
    return {"modelId": "amazon.titan-embed-text-v2:0",
            "body": json.dumps({"inputText": text, "dimensions": dim, "normalize": True}),
            "contentType": "application/json", "accept": "application/json"}


def converse_reply(text: str, tokens_in: int, tokens_out: int) -> dict:
    return {"output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": tokens_in, "outputTokens": tokens_out, "totalTokens": tokens_in + tokens_out},
            "metrics": {"latencyMs": 12}}


def test_client_has_no_builtin_retries(client):
    assert client.meta.config.retries["total_max_attempts"] == 1
    assert client.meta.region_name == "us-east-1"


def test_embedder_one_call_per_text_with_exact_body(client):
    emb = BedrockEmbedder(dim=256, client=client, max_workers=1)
    assert isinstance(emb, Embedder)
    assert emb.identity == "bedrock:amazon.titan-embed-text-v2:0@256" and emb.dim == 256
    rng = np.random.default_rng(0)
    raw = [rng.normal(size=256) for _ in range(2)]
    with Stubber(client) as stub:
        stub.add_response("invoke_model", titan_body(raw[0], 4), titan_params("first text", 256))
        stub.add_response("invoke_model", titan_body(raw[1], 5), titan_params("second", 256))
        out = emb.embed(["first text", "", "second"])  # the blank text needs no call
        stub.assert_no_pending_responses()
    assert out.shape == (3, 256) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(out[0], raw[0] / np.linalg.norm(raw[0]), rtol=1e-5)
    np.testing.assert_allclose(out[2], raw[1] / np.linalg.norm(raw[1]), rtol=1e-5)
    assert out[1, 0] == 1.0
    assert emb.calls == 2 and emb.tokens_in == 9


def test_embedder_thread_pool_embeds_every_text(client):
    emb = BedrockEmbedder(dim=256, client=client, max_workers=4)
    texts = [f"text {i}" for i in range(6)]
    vec = np.ones(256)
    with Stubber(client) as stub:
        for _ in texts:  # every reply is the same, so the calls may come in any order
            stub.add_response("invoke_model", titan_body(vec))
        out = emb.embed(texts)
        stub.assert_no_pending_responses()
    assert out.shape == (6, 256)
    np.testing.assert_allclose(out, np.full((6, 256), 1 / 16.0), rtol=1e-6)


def test_embedder_rejects_bad_dim_and_wrong_shape(client):
    with pytest.raises(ValueError):
        BedrockEmbedder(dim=384, client=client)
    emb = BedrockEmbedder(dim=512, client=client, max_workers=1)
    with Stubber(client) as stub:
        stub.add_response("invoke_model", titan_body(np.ones(256)), titan_params("x", 512))
        with pytest.raises(ModelCallError, match="expected"):
            emb.embed(["x"])


def test_embedder_retries_throttling_then_succeeds(client):
    sleeps = Sleeps()
    emb = BedrockEmbedder(dim=256, client=client, max_workers=1, base_delay=1.0, max_delay=8.0, sleep=sleeps)
    with Stubber(client) as stub:
        stub.add_client_error("invoke_model", "ThrottlingException", "Rate exceeded", 429,
                              expected_params=titan_params("hello", 256))
        stub.add_client_error("invoke_model", "ModelNotReadyException", "warming up", 429,
                              expected_params=titan_params("hello", 256))
        stub.add_response("invoke_model", titan_body(np.ones(256)), titan_params("hello", 256))
        out = emb.embed(["hello"])
        stub.assert_no_pending_responses()
    assert out.shape == (1, 256)
    assert len(sleeps) == 2 and emb.retries == 2
    assert 0.0 <= sleeps[0] <= 1.0 and 0.0 <= sleeps[1] <= 2.0  # jittered exponential backoff


def summarizer(client, sleep=None, attempts=4):
    return BedrockSummarizer(TEXT_MODEL, RegexTokenizer(), client=client, max_attempts=attempts,
                             base_delay=0.01, sleep=sleep if sleep is not None else Sleeps())


def converse_params(system: str, prompt: str, max_tokens: int) -> dict:
    return {"modelId": TEXT_MODEL,
            "messages": [{"role": "user", "content": [{"text": prompt}]}],
            "system": [{"text": system}],
            "inferenceConfig": {"maxTokens": max_tokens, "temperature": 0.0}}


def test_summarizer_request_and_usage(client):
    summ = summarizer(client)
    assert isinstance(summ, Summarizer) and summ.identity == f"bedrock:{TEXT_MODEL}"
    texts = ["Ada Lovelace wrote the first program.", "She worked with Charles Babbage."]
    expected = converse_params(SUMMARY_SYSTEM, summary_prompt(texts, 40), 40 + 32)
    assert "Ada Lovelace wrote the first program." in expected["messages"][0]["content"][0]["text"]
    with Stubber(client) as stub:
        stub.add_response("converse", converse_reply(
            "Here is a summary: Ada Lovelace wrote the first program, working with Charles Babbage.", 57, 14),
            expected)
        result = summ.summarize(texts, 40)
        stub.assert_no_pending_responses()
    assert result.text == "Ada Lovelace wrote the first program, working with Charles Babbage."
    assert (result.tokens_in, result.tokens_out) == (57, 14)


def test_summarizer_clips_to_budget_at_sentence(client):
    summ = summarizer(client)
    long = "First short sentence here. Then " + " ".join(["word"] * 50) + "."
    with Stubber(client) as stub:
        stub.add_response("converse", converse_reply(long, 10, 60))
        result = summ.summarize(["some text"], 10)
    assert result.text == "First short sentence here."
    assert RegexTokenizer().count(result.text) <= 10


def test_summarizer_empty_input_makes_no_call(client):
    with Stubber(client) as stub:
        result = summarizer(client).summarize(["", "  "], 30)
        stub.assert_no_pending_responses()
    assert result.text == "" and result.tokens_in == 0


def test_summarizer_gives_up_after_max_attempts(client):
    sleeps = Sleeps()
    summ = summarizer(client, sleeps, attempts=3)
    with Stubber(client) as stub:
        for _ in range(3):
            stub.add_client_error("converse", "ThrottlingException", "Too many requests", 429)
        stub.add_response("converse", converse_reply("never reached", 1, 1))
        with pytest.raises(ModelCallError, match=r"after 3 attempts.*ThrottlingException"):
            summ.summarize(["text"], 30)
        assert len(stub._queue) == 1  # the 4th reply was never asked for
    assert len(sleeps) == 2


def test_non_retryable_error_raises_at_once(client):
    sleeps = Sleeps()
    summ = summarizer(client, sleeps)
    with Stubber(client) as stub:
        stub.add_client_error("converse", "AccessDeniedException", "no model access", 403)
        with pytest.raises(ModelCallError, match="AccessDeniedException: no model access"):
            summ.summarize(["text"], 30)
    assert sleeps == []


def test_generator_cites_only_evidence_ids(client):
    sleeps = Sleeps()
    gen = BedrockGenerator(TEXT_MODEL, client=client, max_tokens=300, base_delay=0.01, sleep=sleeps)
    assert isinstance(gen, Generator)
    evidence = [("chk-aaa111", "Marie Curie won two Nobel prizes."),
                ("sum-bbb222", "Curie worked in Paris on radioactivity.")]
    prompt = answer_prompt("Who won two Nobel prizes?", evidence)
    assert "Evidence 1 [chk-aaa111]:" in prompt and "Evidence 2 [sum-bbb222]:" in prompt
    reply = ("Marie Curie won two Nobel prizes [chk-aaa111] and worked in Paris [sum-bbb222, chk-aaa111]; "
             "see also [chk-zzz999] and [1].")
    with Stubber(client) as stub:
        stub.add_client_error("converse", "ServiceUnavailableException", "try later", 503)
        stub.add_response("converse", converse_reply(reply, 120, 30),
                          converse_params(ANSWER_SYSTEM, prompt, 300))
        ans = gen.answer("Who won two Nobel prizes?", evidence)
        stub.assert_no_pending_responses()
    assert ans.text == reply
    assert ans.cited_ids == ("chk-aaa111", "sum-bbb222")  # chk-zzz999 was not evidence
    assert (ans.tokens_in, ans.tokens_out) == (120, 30)
    assert ans.model == f"bedrock:{TEXT_MODEL}"
    assert len(sleeps) == 1


def test_generator_without_evidence_makes_no_call(client):
    gen = BedrockGenerator(TEXT_MODEL, client=client)
    with Stubber(client) as stub:
        ans = gen.answer("anything?", [])
        stub.assert_no_pending_responses()
    assert ans.cited_ids == () and ans.tokens_in == 0 and "No evidence" in ans.text


def test_model_without_system_prompt_gets_it_folded_into_the_user_turn(client):
    summ = summarizer(client)
    texts = ["Otters hold hands while sleeping."]
    prompt = summary_prompt(texts, 30)
    with Stubber(client) as stub:
        stub.add_client_error("converse", "ValidationException",
                              "This model doesn't support system messages.", 400,
                              expected_params=converse_params(SUMMARY_SYSTEM, prompt, 62))
        stub.add_response("converse", converse_reply("Otters hold hands asleep.", 20, 5), {
            "modelId": TEXT_MODEL,
            "messages": [{"role": "user", "content": [{"text": SUMMARY_SYSTEM + "\n\n" + prompt}]}],
            "inferenceConfig": {"maxTokens": 62, "temperature": 0.0}})
        result = summ.summarize(texts, 30)
        stub.assert_no_pending_responses()
    assert result.text == "Otters hold hands asleep." and result.tokens_in == 20


def test_generator_decomposes_with_its_own_prompt_and_output_cap(client):
    """QUERY_DECOMPOSITION's call: the split prompt, DECOMPOSE_MAX_TOKENS, the reply as it is
    (domain.decomposition parses it) and the call's usage for pricing."""
    from eragraph.domain.decomposition import parse_sub_questions
    from eragraph.providers.prompts import DECOMPOSE_MAX_TOKENS, DECOMPOSE_SYSTEM, decompose_prompt

    gen = BedrockGenerator(TEXT_MODEL, client=client)
    question = "Who founded the Trust, and where did the founder die?"
    reply = "1. Who founded the Trust?\n2. Where did Mary Reed die?"
    with Stubber(client) as stub:
        stub.add_response("converse", converse_reply(reply, 40, 12),
                          converse_params(DECOMPOSE_SYSTEM, decompose_prompt(question), DECOMPOSE_MAX_TOKENS))
        out = gen.decompose(question)
        stub.assert_no_pending_responses()
    assert (out.text, out.tokens_in, out.tokens_out, out.model) == (reply, 40, 12, f"bedrock:{TEXT_MODEL}")
    assert parse_sub_questions(out.text, question).questions == ("Who founded the Trust?", "Where did Mary Reed die?")
