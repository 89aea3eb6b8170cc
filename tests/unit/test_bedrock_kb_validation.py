"""The Bedrock KB routes validate as Bedrock does (issue 46): the service model's required members,
enums, patterns and ranges, the modelled error type on every error path, no Python type name in
any message, the documented filter depth on every route, and no configuration silently dropped.
The two server errors the independent fuzz found are regression tests here."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("aws_lambda_powertools")

from test_bedrock_kb_generate import CitingGenerator, kb_engine, request  # noqa: E402,F401 (fixture)

from eragraph.domain.knowledge_base import knowledge_base_id  # noqa: E402
from eragraph.entrypoints.http.api import make_app  # noqa: E402

KB = knowledge_base_id("")
RETRIEVE = f"/knowledgebases/{KB}/retrieve"


def call(engine, path: str, body, content_type: str = "application/json") -> tuple[int, dict, dict]:
    """(status, lower-case headers, JSON body) of one request through the API's resolver."""
    app = make_app(lambda _tenant: engine, tenant_of=lambda _event: engine.tenant)
    text = body if isinstance(body, str) else json.dumps(body)
    event = {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
             "headers": {"content-type": content_type}, "body": text, "isBase64Encoded": False,
             "requestContext": {"http": {"method": "POST", "path": path}, "requestId": "req-9", "stage": "$default"}}
    out = app.resolve(event, None)
    headers = {k.lower(): v for k, v in (out.get("headers") or {}).items()}
    return out["statusCode"], headers, json.loads(out.get("body") or "null")


def refused(out, code: str = "ValidationException", status: int = 400) -> str:
    got_status, headers, body = out
    assert (got_status, headers.get("x-amzn-errortype")) == (status, code), body
    message = body["message"]
    assert "<class" not in message and "Error:" not in message
    return message


def deep_filter(depth: int) -> dict:
    """A filter nested ``depth`` levels (Bedrock's documented maximum is 6)."""
    leaf: dict = {"equals": {"key": "lang", "value": "en"}}
    for _ in range(depth - 1):
        leaf = {"andAll": [leaf, {"in": {"key": "year", "value": [2019, 2021]}}]}
    return leaf


@pytest.mark.parametrize("query", [{}, {"type": "TEXT"}, {"type": "IMAGE", "image": {"format": "png",
                                                                                      "inlineContent": "aGk="}}])
def test_a_retrieval_query_without_text_is_a_validation_exception_not_a_500(kb_engine, query):
    message = refused(call(kb_engine, RETRIEVE, {"retrievalQuery": query}))
    assert "retrievalQuery" in message


@pytest.mark.parametrize("session", ["bad\r\nx-injected: 1", "nul\x00byte", "a", "x" * 101])
def test_a_session_id_outside_the_model_rule_is_refused_before_any_work(kb_engine, session):
    kb_engine.generator = CitingGenerator()
    message = refused(call(kb_engine, "/retrieveAndGenerate", request(KB, sessionId=session)))
    assert "sessionId" in message
    assert kb_engine.generator.questions == []  # no model call was paid for


def test_a_session_id_is_refused_before_the_stream_starts(kb_engine):
    from eragraph.entrypoints.bedrock_kb.runtime import KbError, validate

    with pytest.raises(KbError) as info:
        validate("RetrieveAndGenerateStream", request(KB, sessionId="line\nbreak"))
    assert info.value.code == "ValidationException" and "sessionId" in str(info.value)


class AnyEvidenceGenerator(CitingGenerator):
    def answer(self, question, evidence, **_):
        from eragraph.ports.records import Answer

        self.questions.append(question)
        return Answer(text="Nothing matches.", cited_ids=(), tokens_in=1, tokens_out=1, model="stand-in")


def test_a_filter_of_the_documented_depth_passes_on_every_route(kb_engine):
    kb_engine.generator = AnyEvidenceGenerator()
    where = deep_filter(6)
    status, _, body = call(kb_engine, RETRIEVE, {"retrievalQuery": {"text": "ship log"}, "retrievalConfiguration": {
        "vectorSearchConfiguration": {"filter": where}}})
    assert status == 200, body
    generate = request(KB)
    generate["retrieveAndGenerateConfiguration"]["knowledgeBaseConfiguration"]["retrievalConfiguration"][
        "vectorSearchConfiguration"]["filter"] = where
    status, _, body = call(kb_engine, "/retrieveAndGenerate", generate)
    assert status == 200, body
    status, _, body = call(kb_engine, "/query", {"query": "ship log", "filter": where})
    assert status == 200, body
    # one level more is refused in words, as the filter language says
    deeper = refused(call(kb_engine, RETRIEVE, {"retrievalQuery": {"text": "ship log"}, "retrievalConfiguration": {
        "vectorSearchConfiguration": {"filter": deep_filter(7)}}}))
    assert "deeper than 6" in deeper


@pytest.mark.parametrize("path", [RETRIEVE, "/retrieveAndGenerate"])
@pytest.mark.parametrize("body, words", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ("[" * 40 + "]" * 40, "deeper than"),
])
def test_a_body_that_is_no_object_is_the_modelled_validation_exception(kb_engine, path, body, words):
    assert words in refused(call(kb_engine, path, body))


@pytest.mark.parametrize("path", [RETRIEVE, "/retrieveAndGenerate"])
def test_a_text_body_is_refused(kb_engine, path):
    body = {"retrievalQuery": {"text": "q"}} if path == RETRIEVE else request(KB)
    assert "application/json" in refused(call(kb_engine, path, body, content_type="text/plain"))
    status, _, answer = call(kb_engine, "/query", {"query": "ship log"}, content_type="text/plain")
    assert status == 415, answer


@pytest.mark.parametrize("config, words", [
    ({"overrideSearchType": "BOGUS"}, "must be one of HYBRID, SEMANTIC"),
    ({"overrideSearchType": "hybrid"}, "must be one of HYBRID, SEMANTIC"),
    ({"numberOfResults": True}, "must be an integer (got a boolean)"),
    ({"numberOfResults": "5"}, "must be an integer (got a string)"),
    ({"numberOfResults": 0}, "at least 1"),
    ({"numberOfResults": 101}, "at most 100"),
])
def test_values_the_model_forbids_are_refused(kb_engine, config, words):
    message = refused(call(kb_engine, RETRIEVE, {"retrievalQuery": {"text": "q"},
                                                 "retrievalConfiguration": {"vectorSearchConfiguration": config}}))
    assert words in message
    assert "<class" not in message


def test_another_querys_next_token_is_refused(kb_engine):
    from eragraph.services import ingest

    ingest.ingest(kb_engine, [ingest.SourceDoc(source=f"s3://bucket/d{i}.txt", text=f"The ship log {i} of Skarvik. " * 4)
                              for i in range(4)])
    first = {"retrievalQuery": {"text": "ship log"},
             "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": 1}}}
    status, _, page = call(kb_engine, RETRIEVE, first)
    assert status == 200 and "nextToken" in page
    status, _, _ = call(kb_engine, RETRIEVE, {**first, "nextToken": page["nextToken"]})
    assert status == 200
    other = {**first, "retrievalQuery": {"text": "lighthouse keeper"}, "nextToken": page["nextToken"]}
    assert "another query" in refused(call(kb_engine, RETRIEVE, other))


@pytest.mark.parametrize("where, member", [
    (("guardrailConfiguration",), {"guardrailId": "abc", "guardrailVersion": "1"}),
    (("retrieveAndGenerateConfiguration", "knowledgeBaseConfiguration", "generationConfiguration"),
     {"promptTemplate": {"textPromptTemplate": "Answer: $search_results$"}}),
    (("retrieveAndGenerateConfiguration", "knowledgeBaseConfiguration", "generationConfiguration"),
     {"guardrailConfiguration": {"guardrailId": "abc", "guardrailVersion": "1"}}),
    (("retrieveAndGenerateConfiguration", "knowledgeBaseConfiguration", "orchestrationConfiguration"),
     {"promptTemplate": {"textPromptTemplate": "Rewrite: $query$"}}),
    (("retrieveAndGenerateConfiguration", "knowledgeBaseConfiguration", "retrievalConfiguration",
      "managedSearchConfiguration"), {"numberOfResults": 3}),
])
def test_an_unsupported_configuration_is_refused_in_words_never_dropped(kb_engine, where, member):
    kb_engine.generator = CitingGenerator()
    body = request(KB)
    if where == ("guardrailConfiguration",):  # Retrieve's own
        message = refused(call(kb_engine, RETRIEVE, {"retrievalQuery": {"text": "q"}, where[0]: member}))
        assert "guardrailConfiguration is not supported" in message
        return
    node = body
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = member
    message = refused(call(kb_engine, "/retrieveAndGenerate", body))
    assert f"{where[-1]} is not supported" in message or f"{next(iter(member))} is not supported" in message
    assert kb_engine.generator.questions == []


def test_query_decomposition_without_a_model_that_splits_is_refused_in_words(kb_engine):
    """QUERY_DECOMPOSITION needs a generator that can split questions (tests/unit/test_decomposition.py
    runs one): a generator without ``decompose`` is refused before any retrieval or answer."""
    kb_engine.generator = CitingGenerator()
    body = request(KB)
    body["retrieveAndGenerateConfiguration"]["knowledgeBaseConfiguration"]["orchestrationConfiguration"] = {
        "queryTransformationConfiguration": {"type": "QUERY_DECOMPOSITION"}}
    message = refused(call(kb_engine, "/retrieveAndGenerate", body))
    assert "QUERY_DECOMPOSITION needs a model to split the question" in message and "stand-in" in message
    assert kb_engine.generator.questions == []


def test_a_foreign_knowledge_base_answers_as_an_unknown_one(kb_engine):
    app_tenants = ["acme", "globex"]
    app = make_app(lambda _tenant: kb_engine, tenant_of=lambda _event: "acme", tenants=lambda: app_tenants)
    answers = []
    for kb_id in (knowledge_base_id("globex"), "ZZZZZZZZZZ"):
        path = f"/knowledgebases/{kb_id}/retrieve"
        event = {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
                 "headers": {"content-type": "application/json"}, "isBase64Encoded": False,
                 "body": json.dumps({"retrievalQuery": {"text": "q"}}),
                 "requestContext": {"http": {"method": "POST", "path": path}, "requestId": "r", "stage": "$default"}}
        out = app.resolve(event, None)
        message = json.loads(out["body"])["message"].replace(kb_id, "ID")
        answers.append((out["statusCode"], out["headers"]["x-amzn-errortype"], message))
    assert answers[0] == answers[1] and answers[0][:2] == (404, "ResourceNotFoundException")


def _ingest(mime: str) -> dict:
    return {"knowledgeBaseId": KB, "dataSourceId": "ABCDEFGHIJ", "documents": [{"content": {
        "dataSourceType": "CUSTOM", "custom": {"customDocumentIdentifier": {"id": "d"}, "sourceType": "IN_LINE",
                                               "inlineContent": {"type": "BYTE", "byteContent": {
                                                   "mimeType": mime, "data": "eA=="}}}}}]}


@pytest.mark.parametrize("mime", ["a" * 16_000 + "z/" + "b" * 16, "a/" * 8_000, "a" * 1025])
def test_a_long_patterned_value_is_refused_by_its_length_before_any_match(mime):
    """The mimeType's pattern (``.*[a-z]{1,20}/.{1,20}.*``) has no maximum in the model: a value
    over 1024 characters is refused by its length, in microseconds (a search took 6.3 s at 16 KB)."""
    import time

    from eragraph.entrypoints.bedrock_kb.runtime import KbError, validate

    validate("IngestKnowledgeBaseDocuments", _ingest("text/plain"), "bedrock-agent")  # the model loaded once
    started = time.perf_counter()
    with pytest.raises(KbError, match="mimeType must have at most 1024 characters"):
        validate("IngestKnowledgeBaseDocuments", _ingest(mime), "bedrock-agent")
    assert time.perf_counter() - started < 0.05


def test_a_patterned_value_just_under_the_cap_is_matched_fast():
    import time

    from eragraph.entrypoints.bedrock_kb.runtime import KbError, validate

    validate("IngestKnowledgeBaseDocuments", _ingest("text/plain"), "bedrock-agent")  # the model loaded once
    started = time.perf_counter()
    with pytest.raises(KbError, match="must match the pattern"):
        validate("IngestKnowledgeBaseDocuments", _ingest("a" * 1024), "bedrock-agent")  # no slash anywhere
    validate("IngestKnowledgeBaseDocuments", _ingest("text/plain"), "bedrock-agent")
    assert time.perf_counter() - started < 0.1


@pytest.mark.parametrize("operation, params, member", [
    ("CreateDataSource", {"knowledgeBaseId": KB, "name": "fine name", "dataSourceConfiguration": {"type": "CUSTOM"}},
     "name"),
    ("GetDataSource", {"knowledgeBaseId": KB, "dataSourceId": "ABCDEFGHIJK"}, "dataSourceId"),
    ("GetDataSource", {"knowledgeBaseId": "x" + KB, "dataSourceId": "ABCDEFGHIJ"}, "knowledgeBaseId"),
])
def test_a_value_that_merely_contains_a_valid_one_is_refused(operation, params, member):
    from eragraph.entrypoints.bedrock_kb.runtime import KbError, validate

    with pytest.raises(KbError, match=f"{member} must match the pattern"):
        validate(operation, params, "bedrock-agent")
