"""Conversations on the chat doors, through the real clients: the openai SDK sends a three-turn
conversation and the follow-ups are retrieved for as standalone questions; boto3's
retrieve_and_generate keeps a session's turns under its sessionId, and a session that is
unknown, lapsed or another tenant's is Bedrock's ValidationException. The deterministic rewrite
(domain.conversation) is tested on its own rules."""

from __future__ import annotations

import pytest
from support import make_engine

from eragraph.domain.conversation import (ASSISTANT, LOCAL, MAX_SESSION_BYTES, NONE, USER, Message, capped,
                                          local_rewrite)
from eragraph.domain.knowledge_base import knowledge_base_id
from eragraph.ports.records import Answer
from eragraph.services import conversation as conversations
from eragraph.services import ingest

pytest.importorskip("aws_lambda_powertools")

DOCS = {
    "trust.txt": "The Lighthouse Trust was founded by Mary Reed in 1901 to keep the lamps of the northern coast.",
    "reed.txt": "Mary Reed died in 1950 at Skarvik, where she had kept the harbour light for forty years.",
    "boats.txt": "Fishing boats of the fjord carry nets, ropes and ice; their crews sell cod at the market.",
    "opera.txt": "The opera house of Bergen opened in 1876 with a concert of Norwegian folk songs.",
}


def tenant_engine(tenant: str = ""):
    engine = make_engine()
    engine.tenant = tenant
    ingest.ingest(engine, [ingest.SourceDoc(source=s, text=t) for s, t in DOCS.items()])
    return engine


class EchoGenerator:
    """Answers with the question it was given and cites the first evidence."""

    identity = "echo"

    def __init__(self) -> None:
        self.questions: list[str] = []

    SCRIPT = {"Who founded the Lighthouse Trust?": "Mary Reed founded it in 1901"}

    def answer(self, question, evidence, **_):
        self.questions.append(question)
        said = self.SCRIPT.get(question, f"Answer to: {question}")
        return Answer(text=f"{said} [{evidence[0][0]}].", cited_ids=(evidence[0][0],),
                      tokens_in=1, tokens_out=1, model="echo")


# --- the rules ------------------------------------------------------------------------------

def test_pronouns_resolve_to_the_most_recent_entity_that_fits():
    history = [("Who founded the Lighthouse Trust?", [("Lighthouse Trust", "ORG", 16)]),
               ("Mary Reed founded it in 1901.", [("Mary Reed", "PERSON", 0)])]
    got = local_rewrite("And when did she die?", history, "Who founded the Lighthouse Trust?")
    assert got.how == LOCAL and got.resolved == {"she": "Mary Reed"}
    assert got.question.startswith("And when did Mary Reed die?") and "founded" in got.question
    it = local_rewrite("When did it open?", history, "Who founded the Lighthouse Trust?")
    assert it.resolved == {"it": "Lighthouse Trust"}  # "it" skips the person
    own = local_rewrite("What did her husband do?", history, "")
    assert own.question.startswith("What did Mary Reed's husband do?")


def test_a_question_that_stands_alone_is_left_alone():
    history = [("Who founded the Lighthouse Trust?", [("Lighthouse Trust", "ORG", 16)])]
    alone = local_rewrite("Which fishing boats of the fjord sell cod at the market?", history, "Who founded it?")
    assert alone.how == NONE and alone.question == "Which fishing boats of the fjord sell cod at the market?"
    assert local_rewrite("When did she die?", [], "").how == NONE


def test_a_short_follow_up_without_pronoun_gets_the_entity_and_earlier_terms():
    history = [("Tell me about the Lighthouse Trust.", [("Lighthouse Trust", "", 18)])]
    got = local_rewrite("What about funding?", history, "Tell me about the Lighthouse Trust.")
    assert got.how == LOCAL and got.added[0] == "Lighthouse Trust" and "funding" in got.question


def test_a_session_is_capped_in_turns_and_bytes():
    many = [Message(USER if i % 2 == 0 else ASSISTANT, f"message {i}") for i in range(100)]
    kept = capped(many, max_turns=5)
    assert sum(m.role == USER for m in kept) == 5 and kept[-1] == many[-1]
    big = [Message(USER, "x" * 40_000), Message(ASSISTANT, "y" * 40_000), Message(USER, "z")]
    assert capped(big) == big[1:] and sum(len(m.text) for m in capped(big)) <= MAX_SESSION_BYTES


# --- the openai SDK ---------------------------------------------------------------------------

def test_the_openai_sdk_three_turn_conversation_retrieves_for_the_follow_ups():
    from tenant_doors import api_app, chat_client

    engine = tenant_engine()
    engine.generator = EchoGenerator()
    client = chat_client(api_app({"": engine}), "")
    messages = [{"role": "user", "content": "Who founded the Lighthouse Trust?"}]
    first = client.chat.completions.create(model="eragraph-dense", messages=messages)
    assert engine.generator.questions[-1] == "Who founded the Lighthouse Trust?"
    messages += [{"role": "assistant", "content": "Mary Reed founded it in 1901."},
                 {"role": "user", "content": "And when did she die?"}]
    second = client.chat.completions.create(model="eragraph-dense", messages=messages)
    extra = second.model_extra
    assert extra["rewrite"]["how"] == "local" and extra["rewrite"]["resolved"] == {"she": "Mary Reed"}
    assert engine.generator.questions[-1].startswith("And when did Mary Reed die?")
    assert extra["citations"] and all(c["place"]["end"] > c["place"]["start"] for c in extra["citations"])
    messages += [{"role": "assistant", "content": second.choices[0].message.content},
                 {"role": "user", "content": "Where was it?"}]
    third = client.chat.completions.create(model="eragraph-dense", messages=messages)
    assert third.model_extra["rewrite"]["how"] == "local"
    assert "she" not in third.model_extra["rewrite"]["resolved"]
    assert "rewrite" not in (first.model_extra or {})  # a first question is asked as it is


# --- boto3 RetrieveAndGenerate sessions -----------------------------------------------------------

def kb(engines, tenant):
    from kb_support import kb_client, kb_event
    from tenant_doors import _authorizer, api_app

    app = api_app(engines)
    return kb_client(lambda ev: app.resolve(ev, None),
                     lambda method, path, body: kb_event(method, path, body, _authorizer(tenant)))


def rag(client, tenant, text, **extra):
    return client.retrieve_and_generate(input={"text": text}, retrieveAndGenerateConfiguration={
        "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
            "knowledgeBaseId": knowledge_base_id(tenant), "modelArn": "arn:aws:bedrock:us-east-1::foundation-model/x",
            "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": 2,
                                                                     "overrideSearchType": "SEMANTIC"}}}}, **extra)


def test_boto3_sessions_keep_turns_per_tenant_and_refuse_others():
    engines = {"acme": tenant_engine("acme"), "globex": tenant_engine("globex")}
    for e in engines.values():
        e.generator = EchoGenerator()
    acme, globex = kb(engines, "acme"), kb(engines, "globex")
    first = rag(acme, "acme", "Who founded the Lighthouse Trust?")
    session = first["sessionId"]
    second = rag(acme, "acme", "When did she die?", sessionId=session)
    assert second["sessionId"] == session
    assert engines["acme"].generator.questions[-1].startswith("When did Mary Reed die?")
    stored = conversations.load(engines["acme"], session)
    assert [m.role for m in stored] == [USER, ASSISTANT, USER, ASSISTANT]
    assert stored[2].text == "When did she die?"
    with pytest.raises(globex.exceptions.ValidationException) as foreign:
        rag(globex, "globex", "When did she die?", sessionId=session)  # acme's session, globex's caller
    assert f"Session with Id {session} is not valid" in str(foreign.value)
    with pytest.raises(acme.exceptions.ValidationException):
        rag(acme, "acme", "When did she die?", sessionId="never-issued-1")
    assert engines["globex"].generator.questions == []


def test_a_lapsed_session_is_refused():
    engine = tenant_engine("acme")
    engine.generator = EchoGenerator()
    conversations.save(engine, "lapsed-1", [Message(USER, "Who founded the Lighthouse Trust?")], now=lambda: 0.0)
    client = kb({"acme": engine}, "acme")
    with pytest.raises(client.exceptions.ValidationException):
        rag(client, "acme", "When did she die?", sessionId="lapsed-1")
    conversations.save(engine, "live-1", [Message(USER, "Who founded the Lighthouse Trust?")])
    assert rag(client, "acme", "When did she die?", sessionId="live-1")["sessionId"] == "live-1"


# --- the model rewrite ------------------------------------------------------------------------------

def test_a_configured_generator_rewrites_the_follow_up_priced_and_capped():
    """An OpenAI-compatible model (a local HTTP stand-in) rewrites the follow-up: the prompt
    carries the conversation, the output is capped, the call is in the ledger and the response's
    usage, and the response says the model ran."""
    from test_openai_compat import FakeChatServer, completion

    from eragraph.providers.openai_compat import OpenAICompatGenerator
    from eragraph.providers.prompts import REWRITE_MAX_TOKENS, REWRITE_SYSTEM
    from eragraph.services.query import query

    server = FakeChatServer()
    try:
        engine = tenant_engine()
        engine.generator = OpenAICompatGenerator(server.base_url, "m", max_tokens=64)
        server.reply(200, completion('"When did Mary Reed die?"\nExtra line.', {"prompt_tokens": 40,
                                                                                "completion_tokens": 7}))
        server.reply(200, completion("She died in 1950 [1].", {"prompt_tokens": 90, "completion_tokens": 8}))
        out = query(engine, "And when did she die?", mode="dense", k=2, answer=True,
                    conversation=[Message(USER, "Who founded the Lighthouse Trust?"),
                                  Message(ASSISTANT, "Mary Reed founded it in 1901.")])
        assert out.rewrite == {"question": "When did Mary Reed die?", "how": "model", "resolved": {}, "added": []}
        first = server.requests[0]["body"]
        assert first["messages"][0] == {"role": "system", "content": REWRITE_SYSTEM}
        assert "Mary Reed founded it in 1901." in first["messages"][1]["content"]
        assert first["max_tokens"] == REWRITE_MAX_TOKENS
        assert "When did Mary Reed die?" in server.requests[1]["body"]["messages"][1]["content"]
        assert any(key.startswith("rewrite") for key in engine.graph.ledger())
        assert out.usage and "rewrite" in str(out.usage)
    finally:
        server.close()


def test_post_query_takes_a_conversation_and_says_how_it_was_rewritten():
    import json

    from kb_support import kb_event
    from tenant_doors import _authorizer, api_app

    app = api_app({"": tenant_engine()})
    body = {"query": "And when did she die?", "mode": "dense", "conversation": [
        {"role": "user", "content": "Who founded the Lighthouse Trust?"},
        {"role": "assistant", "content": "Mary Reed founded it in 1901."}]}
    out = app.resolve(kb_event("POST", "/query", body, _authorizer("")), None)
    got = json.loads(out["body"])
    assert out["statusCode"] == 200 and got["query"] == "And when did she die?"
    assert got["rewrite"]["how"] == "local" and got["rewrite"]["question"].startswith("And when did Mary Reed die?")
    bad = app.resolve(kb_event("POST", "/query", {**body, "conversation": [{"role": "system", "content": "x"}]},
                                _authorizer("")), None)
    assert bad["statusCode"] == 422 and "role" in json.loads(bad["body"])["message"]


def test_an_unfitting_pronoun_falls_back_to_the_latest_entity_and_the_bench_pairs():
    from eragraph.bench.followup import pairs

    got = local_rewrite("What team was it's husband on?", [("Tell me about Anna Benson.", [("Anna Benson", "PERSON", 14)])],
                        "Tell me about Anna Benson.")
    assert got.question == "What team was Anna Benson's husband on?" and got.how == LOCAL
    rows = {"d1": {"title": "Anna Benson"}, "d2": {"title": "Ignored", "news_source": "The Age"},
            "d3": {"title": "Annals"}}
    qs = [{"id": "q1", "question": "What team was Anna Benson's husband on?", "supporting_ids": ["d1", "d3"]},
          {"id": "q2", "question": "Did The Age report it?", "supporting_ids": ["d2"]},
          {"id": "q3", "question": "Who wrote the Annals of Wales?", "supporting_ids": ["d1", "d3"]}]
    built = pairs(qs, rows)
    assert [(p["id"], p["turn1"], p["turn2"]) for p in built] == [
        ("q1", "Tell me about Anna Benson.", "What team was it's husband on?"),
        ("q2", "Tell me about The Age.", "Did it report it?")]


def test_the_mcp_tools_take_a_conversation():
    pytest.importorskip("mcp")
    from eragraph.entrypoints import mcp

    engine = tenant_engine()
    out = mcp.call(engine, "retrieve", {"query": "And when did she die?", "mode": "dense", "conversation": [
        {"role": "user", "content": "Who founded the Lighthouse Trust?"},
        {"role": "assistant", "content": "Mary Reed founded it in 1901."}]})
    assert out["rewrite"]["resolved"] == {"she": "Mary Reed"}
    assert all(r["place"] is not None for r in out["results"] if r["layer"] == 0)
    with pytest.raises(mcp.ToolFailed):
        mcp.call(engine, "retrieve", {"query": "x", "conversation": [{"role": "tool", "content": "x"}]})
