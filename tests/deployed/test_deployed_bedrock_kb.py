"""The Bedrock Knowledge Bases runtime routes of the built query function, in its deployed
environment (Python 3.12, only its code and layers): boto3's ``bedrock-agent-runtime`` client and
langchain-aws's ``AmazonKnowledgeBasesRetriever``, unchanged, their requests turned into API
Gateway (payload v2) events by kb_support's before-send hook. The documents arrive as S3 uploads
with their ``.metadata.json`` sidecars (a Bedrock KB's metadata files) through the ingest
function; RetrieveAndGenerate's generator is Bedrock Converse, answered inside botocore by the
driver's BedrockStub (the template's ERAGRAPH_GENERATOR=bedrock)."""

from __future__ import annotations

import json

import pytest
from kb_support import kb_client
from test_deployed_handlers import QUESTION, sample_documents

from deployed import SMALL_GRAPH, STACK_UUID, drain_summarize, upload_and_ingest
from eragraph.domain.knowledge_base import knowledge_base_id as salted_id


def knowledge_base_id(tenant: str) -> str:
    """The id the deployed functions answer for ``tenant``: salted with the stack's id (the
    template's KnowledgeBaseIdSalt at its default)."""
    return salted_id(tenant, STACK_UUID)


pytestmark = pytest.mark.timeout(900)

SKY = ("sample-jupiter", "sample-europa", "sample-galileo", "sample-titan", "sample-saturn")
EARTH = ("sample-nile", "sample-amazon", "sample-danube", "sample-vistula")
MODEL = "anthropic.claude-3-haiku-20240307-v1:0"  # one the deployment allows (the template's AnswerModelArns)
MODEL_ARN = f"arn:aws:bedrock:us-east-1::foundation-model/{MODEL}"
GENERATING = {**SMALL_GRAPH, "ERAGRAPH_GENERATOR": "bedrock", "ERAGRAPH_ANSWER_MODELS": MODEL_ARN}


def topic(key: str) -> str:
    return "sky" if any(name in key for name in SKY) else "earth"


@pytest.fixture(scope="module")
def functions(launch):
    out = {name: launch(name) for name in ("ingest", "summarize")}
    out["query"] = launch("query", GENERATING, stub_bedrock=1024)  # the stub answers Converse
    return out


@pytest.fixture(scope="module")
def ingested(cloud, functions):
    docs = {k: v for k, v in sample_documents().items() if any(name in k for name in SKY + EARTH)}
    sidecars = {f"{key}.metadata.json": json.dumps({"metadataAttributes": {"topic": topic(key)}}) for key in docs}
    upload_and_ingest(cloud, functions["ingest"], {**docs, **sidecars})
    drain_summarize(cloud, functions["summarize"])
    return {f"s3://{cloud.bucket}/{key}": topic(key) for key in docs}


REPLIES: list[dict] = []  # the driver's replies to the query function's events, newest last


def invoke(query_fn, event: dict) -> dict:
    reply = query_fn.invoke(event)
    REPLIES.append(reply)
    assert reply["ok"], reply
    return reply["result"]


@pytest.fixture(scope="module")
def client(functions):
    return kb_client(lambda event: invoke(functions["query"], event))


KB = knowledge_base_id("")  # the default tenant's (SMALL_GRAPH: an untagged caller)


def test_retrieve_with_a_filter(client, ingested):
    out = client.retrieve(knowledgeBaseId=KB, retrievalQuery={"text": QUESTION}, retrievalConfiguration={
        "vectorSearchConfiguration": {"numberOfResults": 4, "overrideSearchType": "HYBRID",
                                      "filter": {"equals": {"key": "topic", "value": "earth"}}}})
    results = out["retrievalResults"]
    assert 1 <= len(results) <= 4
    for r in results:
        assert r["content"]["type"] == "TEXT" and r["content"]["text"]
        assert r["location"]["type"] == "S3", r["location"]
        assert ingested[r["location"]["s3Location"]["uri"]] == "earth", r["location"]
        assert r["metadata"]["topic"] == "earth" and isinstance(r["score"], float)
    # unfiltered, the same question finds the moon under the ice
    out = client.retrieve(knowledgeBaseId=KB, retrievalQuery={"text": QUESTION},
                          retrievalConfiguration={"vectorSearchConfiguration": {"numberOfResults": 3}})
    assert any("Europa" in r["content"]["text"] for r in out["retrievalResults"])


def test_retrieve_modelled_errors(client, ingested):
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.retrieve(knowledgeBaseId=knowledge_base_id("nobody"), retrievalQuery={"text": QUESTION})
    with pytest.raises(client.exceptions.ValidationException) as info:
        client.retrieve(knowledgeBaseId=KB, retrievalQuery={"text": QUESTION}, nextToken="not-a-token")
    assert "nextToken is not a token this service returned" in str(info.value)


def test_retrieve_and_generate(client, functions, ingested):
    out = client.retrieve_and_generate(input={"text": "Which moon of Jupiter hides an ocean under its ice?"},
                                       retrieveAndGenerateConfiguration={
                                           "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
                                               "knowledgeBaseId": KB,
                                               "modelArn": MODEL_ARN,
                                               "retrievalConfiguration": {"vectorSearchConfiguration": {
                                                   "numberOfResults": 3, "overrideSearchType": "SEMANTIC"}}}})
    text = out["output"]["text"]
    assert text.endswith("[1]") and len(text) > 20, text  # the stub's answer: the first evidence's sentence
    (citation,) = out["citations"]
    assert citation["generatedResponsePart"]["textResponsePart"]["text"] == text
    refs = citation["retrievedReferences"]
    # the stub cites evidence 1: its text holds the sentence the answer repeats
    assert refs and text[:-4].strip() in " ".join(refs[0]["content"]["text"].split())
    assert refs[0]["location"]["s3Location"]["uri"] in ingested
    assert out["sessionId"]
    # the function's Bedrock client called Converse with the model modelArn names
    assert REPLIES[-1]["bedrock_answers"][-1] == {"model": MODEL, "text": text}
    assert REPLIES[-1]["bedrock_refused"] == []


def test_langchain_retriever(client, ingested):
    import langchain_aws

    retriever = langchain_aws.AmazonKnowledgeBasesRetriever(
        knowledge_base_id=KB, client=client,
        retrieval_config={"vectorSearchConfiguration": {
            "numberOfResults": 3, "filter": {"equals": {"key": "topic", "value": "sky"}}}})
    docs = retriever.invoke("Which river flows through Poland?")
    assert 1 <= len(docs) <= 3
    for doc in docs:
        assert ingested[doc.metadata["location"]["s3Location"]["uri"]] == "sky"
        assert isinstance(doc.metadata["score"], float) and doc.page_content
