"""Query decomposition (Bedrock's QUERY_DECOMPOSITION): the model's reply parsed defensively, the
sub-questions' lists fused by reciprocal rank, and the whole path through boto3's
``retrieve_and_generate`` against the served app (eragraph.entrypoints.http.server) with an
OpenAI-compatible generator that is a real HTTP server on 127.0.0.1 (test_openai_compat's)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from support import make_engine

from eragraph.domain.decomposition import (MAX_REPLY_CHARS, MAX_SUB_QUESTION_CHARS, MAX_SUB_QUESTIONS, MODEL,
                                           ORIGINAL, fuse, parse_sub_questions)
from eragraph.domain.knowledge_base import knowledge_base_id
from eragraph.services import ingest

Q = "Who founded the Lighthouse Trust, and where did the founder die?"

DOCS = {
    "trust.txt": "The Lighthouse Trust was founded by Mary Reed in 1901 to keep the lamps of the northern coast.",
    "reed.txt": "Mary Reed died in 1950 at Skarvik, where she had kept the harbour light for forty years.",
    "boats.txt": "Fishing boats of the fjord carry nets, ropes and ice; their crews sell cod at the market.",
    "opera.txt": "The opera house of Bergen opened in 1876 with a concert of Norwegian folk songs.",
    "rail.txt": "The railway from Oslo to Bergen crosses the mountain plateau of Hardangervidda.",
}


# --- parsing ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("reply", [
    "1. Who founded the Lighthouse Trust?\n2. Where did Mary Reed die?",
    "Here are the sub-questions:\n- Who founded the Lighthouse Trust?\n- Where did Mary Reed die?\n",
    '["Who founded the Lighthouse Trust?", "Where did Mary Reed die?"]',
    'Q1: "Who founded the Lighthouse Trust?"\n\nQ2: "Where did Mary Reed die?"',
    "(1) Who founded the Lighthouse Trust?\n(2) Where did Mary Reed die?\n(3) who founded the lighthouse trust?",
])
def test_the_sub_questions_are_read_from_the_usual_reply_forms(reply):
    out = parse_sub_questions(reply, Q)
    assert out.questions == ("Who founded the Lighthouse Trust?", "Where did Mary Reed die?")
    assert out.how == MODEL


def test_a_long_list_is_cut_to_the_cap_and_an_overlong_line_dropped_said_in_the_note():
    lines = [f"What is fact number {i}?" for i in range(MAX_SUB_QUESTIONS + 3)]
    lines.insert(1, "W" * (MAX_SUB_QUESTION_CHARS + 1) + "?")
    out = parse_sub_questions("\n".join(lines), Q)
    assert out.questions == tuple(f"What is fact number {i}?" for i in range(MAX_SUB_QUESTIONS))
    assert out.dropped == 4 and "4 line(s)" in out.note and out.how == MODEL


@pytest.mark.parametrize("reply", ["", "   \n\n", "Sub-questions:", "- \n* \n1.", "x" * (MAX_SUB_QUESTION_CHARS + 5),
                                   None, '["unclosed'])
def test_a_reply_without_sub_questions_falls_back_to_the_question_and_says_so(reply):
    out = parse_sub_questions(reply, Q)
    if reply == '["unclosed':  # not JSON: read as a line, which is a (poor) question of its own
        assert out.questions == ('["unclosed',)
        return
    assert out.questions == (Q,) and out.how == ORIGINAL
    assert "original question" in out.note


def test_only_the_replys_capped_prefix_is_read_in_linear_time():
    huge = ("Who founded the Lighthouse Trust?\n" + "a" * 50 + "\n") * 200_000  # about 17 MB
    started = time.perf_counter()
    out = parse_sub_questions(huge, Q)
    assert time.perf_counter() - started < 1.0  # reads MAX_REPLY_CHARS, not the reply (loaded machine: generous)
    assert out.questions[0] == "Who founded the Lighthouse Trust?" and len(out.questions) <= MAX_SUB_QUESTIONS
    assert sum(len(q) + 1 for q in out.questions) <= MAX_REPLY_CHARS


# --- fusion -------------------------------------------------------------------------------------------

def test_fusion_ranks_what_several_sub_questions_found_first_and_says_who_found_it():
    fused, found = fuse([["a", "b", "c"], ["d", "b", "e"]], k=3)
    assert [i for i, _ in fused] == ["b", "a", "d"]  # b: 1/62 + 1/62 > a: 1/61 > d (ties: by id)
    assert fused[0][1] == pytest.approx(2 / 62)
    assert found == {"b": (0, 1), "a": (0,), "d": (1,)}
    assert fuse([], 5) == ([], {})


def test_the_fused_list_keeps_the_evidence_budget_as_every_mode_does():
    from eragraph.domain.decomposition import Decomposition
    from eragraph.domain.ranking import Candidate
    from eragraph.services.decomposition import retrieve

    lists = {"q1": [Candidate("a", 0, 0.9, 60), Candidate("b", 0, 0.5, 30)],
             "q2": [Candidate("c", 0, 0.8, 60), Candidate("b", 0, 0.4, 30)]}
    out, parts = retrieve(Decomposition(("q1", "q2")), lambda q: lists[q], k=3, budget=100)
    assert [c.node_id for c in out] == ["b", "a"]  # b (both lists) first; c no longer fits 100 tokens
    assert sum(c.tokens for c in out) <= 100 and parts.found == {"b": (0, 1), "a": (0,)}


# --- the service -----------------------------------------------------------------------------------------

class SplittingGenerator:
    """Splits by a script; answers with the question it was given (the stream test's)."""

    identity = "splitter"

    def __init__(self, reply: str) -> None:
        self.reply, self.asked, self.answered = reply, [], []

    def decompose(self, question):
        from eragraph.ports.records import Answer

        self.asked.append(question)
        return Answer(text=self.reply, cited_ids=(), tokens_in=20, tokens_out=10, model="splitter")

    def answer(self, question, evidence, **_):
        from eragraph.ports.records import Answer

        self.answered.append(question)
        return Answer(text=f"Answer [{evidence[0][0]}].", cited_ids=(evidence[0][0],), tokens_in=1, tokens_out=1,
                      model="splitter")

    def stream(self, question, evidence, **_):
        answer = self.answer(question, evidence)
        yield answer.text
        yield answer


def engine_with(generator=None):
    engine = make_engine()
    ingest.ingest(engine, [ingest.SourceDoc(source=s, text=t) for s, t in DOCS.items()])
    engine.generator = generator
    return engine


def sources(results) -> list[str]:
    return [r.source for r in results]


def test_each_sub_question_is_retrieved_for_and_the_lists_fused():
    from eragraph.services.query import query

    engine = engine_with(SplittingGenerator("1. Who founded the Lighthouse Trust?\n2. Where did Mary Reed die?"))
    out = query(engine, Q, mode="dense", k=3, decompose=True)
    assert {"trust.txt", "reed.txt"} <= set(sources(out.results))
    assert out.decomposition["found"][out.results[0].id] == [0, 1]  # found by both: first
    assert out.decomposition["questions"] == ["Who founded the Lighthouse Trust?", "Where did Mary Reed die?"]
    assert out.decomposition["how"] == MODEL
    assert set(out.decomposition["found"]) == {r.id for r in out.results}
    assert any(key.startswith("decompose") for key in engine.graph.ledger())
    assert "decompose" in str(out.usage)
    plain = query(engine, Q, mode="dense", k=3)
    assert "reed.txt" not in sources(plain.results)  # the whole question alone misses the second hop
    assert plain.decomposition is None and "decomposition" not in plain.to_dict()


def test_without_a_model_that_splits_decomposition_is_refused_in_words():
    from eragraph.services.query import BadQueryError, query

    for generator in (None, type("Plain", (), {"identity": "plain"})()):
        with pytest.raises(BadQueryError, match="query decomposition needs a model to split the question"):
            query(engine_with(generator), Q, mode="dense", k=2, decompose=True)


# --- boto3 against the served app, the model a real HTTP server ---------------------------------------

@pytest.fixture
def served():
    pytest.importorskip("aws_lambda_powertools")
    from test_openai_compat import FakeChatServer

    from eragraph.entrypoints.http.server import make_server
    from eragraph.providers.openai_compat import OpenAICompatGenerator

    chat = FakeChatServer()
    engine = engine_with(OpenAICompatGenerator(chat.base_url, "m", max_tokens=64))
    server = make_server(engine, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield engine, chat, server.url
    finally:
        server.shutdown()
        server.server_close()
        chat.close()


def rag(url: str, mode: str = "SEMANTIC", **extra):
    import boto3
    from botocore.config import Config

    client = boto3.client("bedrock-agent-runtime", region_name="us-east-1", endpoint_url=url,
                          aws_access_key_id="x", aws_secret_access_key="x", config=Config(retries={"max_attempts": 1}))
    return client.retrieve_and_generate(input={"text": Q}, retrieveAndGenerateConfiguration={
        "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
            "knowledgeBaseId": knowledge_base_id(""), "modelArn": "arn:aws:bedrock:us-east-1::foundation-model/m",
            "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": 3,
                                                                     "overrideSearchType": mode}},
            "orchestrationConfiguration": {"queryTransformationConfiguration": {"type": "QUERY_DECOMPOSITION"}}}},
        **extra)


def test_boto3_retrieve_and_generate_decomposes_with_the_model_and_shows_the_sub_questions(served):
    from test_openai_compat import completion

    from eragraph.providers.prompts import DECOMPOSE_MAX_TOKENS, DECOMPOSE_SYSTEM

    engine, chat, url = served
    chat.reply(200, completion("Sub-questions:\n1. Who founded the Lighthouse Trust?\n2. Where did Mary Reed die?",
                               {"prompt_tokens": 30, "completion_tokens": 14}))
    chat.reply(200, completion("Mary Reed founded it and died at Skarvik.",
                               {"prompt_tokens": 90, "completion_tokens": 9}))
    out = rag(url)
    split, answered = chat.requests[0]["body"], chat.requests[1]["body"]
    assert split["messages"][0] == {"role": "system", "content": DECOMPOSE_SYSTEM}
    assert Q in split["messages"][1]["content"] and split["max_tokens"] == DECOMPOSE_MAX_TOKENS
    assert Q in answered["messages"][1]["content"]  # the answer is to the whole question
    refs = [ref for c in out["citations"] for ref in c["retrievedReferences"]]
    assert {ref["location"]["s3Location"]["uri"] if "s3Location" in ref["location"]
            else ref["location"]["customDocumentLocation"]["id"] for ref in refs} >= {"trust.txt", "reed.txt"}
    found = {q for ref in refs for q in ref["metadata"]["x-eragraph-sub-questions"]}
    assert found == {"Who founded the Lighthouse Trust?", "Where did Mary Reed die?"}
    assert all(ref["metadata"]["x-eragraph-decomposition"] == "model" for ref in refs)
    assert any(key.startswith("decompose") for key in engine.graph.ledger())


def test_boto3_a_bad_split_falls_back_to_the_question_and_says_so(served):
    from test_openai_compat import completion

    _, chat, url = served
    chat.reply(200, completion("Sub-questions:\n\n", {"prompt_tokens": 30, "completion_tokens": 2}))
    chat.reply(200, completion("It does not say.", {"prompt_tokens": 90, "completion_tokens": 6}))
    out = rag(url)
    refs = [ref for c in out["citations"] for ref in c["retrievedReferences"]]
    assert refs and all("original question" in ref["metadata"]["x-eragraph-decomposition"] for ref in refs)
    assert all(ref["metadata"]["x-eragraph-sub-questions"] == [Q] for ref in refs)


def test_the_stream_decomposes_too_and_post_query_takes_decompose():
    pytest.importorskip("aws_lambda_powertools")
    from kb_support import kb_event
    from tenant_doors import _authorizer, api_app

    from eragraph.entrypoints.bedrock_kb.runtime import retrieve_and_generate_stream

    generator = SplittingGenerator("- Who founded the Lighthouse Trust?\n- Where did Mary Reed die?")
    engine = engine_with(generator)
    body = {"input": {"text": Q}, "retrieveAndGenerateConfiguration": {
        "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
            "knowledgeBaseId": knowledge_base_id(""), "modelArn": "m",
            "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": 2,
                                                                     "overrideSearchType": "SEMANTIC"}},
            "orchestrationConfiguration": {"queryTransformationConfiguration": {"type": "QUERY_DECOMPOSITION"}}}}}
    frames = b"".join(retrieve_and_generate_stream(engine, body))
    assert generator.asked == [Q] and b"x-eragraph-sub-questions" in frames and b"Mary Reed die" in frames
    app = api_app({"": engine})
    for decompose, status in ((True, 200), (False, 200)):
        out = app.resolve(kb_event("POST", "/query", {"query": Q, "mode": "dense", "k": 2, "decompose": decompose},
                                   _authorizer("")), None)
        answer = json.loads(out["body"])
        assert out["statusCode"] == status
        assert ("decomposition" in answer) is decompose
    engine.generator = None
    out = app.resolve(kb_event("POST", "/query", {"query": Q, "mode": "dense", "decompose": True}, _authorizer("")),
                      None)
    assert out["statusCode"] == 400 and "needs a model to split" in json.loads(out["body"])["message"]


def test_the_mcp_tools_take_decompose():
    pytest.importorskip("mcp")
    from eragraph.entrypoints import mcp

    generator = SplittingGenerator("Who founded the Lighthouse Trust?\nWhere did Mary Reed die?")
    engine = engine_with(generator)
    out = mcp.call(engine, "retrieve", {"query": Q, "mode": "dense", "k": 3, "decompose": True})
    assert out["decomposition"]["questions"] == ["Who founded the Lighthouse Trust?", "Where did Mary Reed die?"]
    assert {"trust.txt", "reed.txt"} <= {r["source"] for r in out["results"]}
    engine.generator = None
    with pytest.raises(mcp.query_service.BadQueryError, match="needs a model to split"):  # the server's tool error
        mcp.call(engine, "retrieve", {"query": Q, "decompose": True})
