"""The AWS default embedder, Bedrock Titan Text Embeddings V2 (ERAGRAPH_EMBEDDER=bedrock, the
template's dimension), in the deployed environment: the functions' own boto3 client, answered
inside botocore by the driver's BedrockStub (lambda_driver.py) with vectors computed from each
request's inputText -- the before-call event hook that botocore's Stubber uses, since a Stubber's
fixed queue cannot answer texts chosen by the code under test, sent from a thread pool."""

from __future__ import annotations

import copy
import json

import pytest
from lambda_support import event
from test_deployed_handlers import sample_documents

from deployed import SMALL_GRAPH, drain_summarize, function_for, upload_and_ingest

BEDROCK = {**SMALL_GRAPH, "ERAGRAPH_EMBEDDER": "bedrock"}
PICK = ("sample-mercury", "sample-venus", "sample-europa", "sample-galileo", "sample-amazon", "sample-marie_curie",
        "sample-nile")


@pytest.fixture(scope="module")
def dim(sam_build, cloud) -> int:
    env = cloud.environment(function_for(sam_build, "ingest"), BEDROCK)
    assert env["ERAGRAPH_EMBEDDER"] == "bedrock"
    return int(env["ERAGRAPH_BEDROCK_EMBED_DIM"])


@pytest.fixture(scope="module")
def functions(launch, dim):
    return {name: launch(name, BEDROCK, stub_bedrock=dim) for name in ("ingest", "summarize", "query")}


@pytest.fixture(scope="module")
def ingested(cloud, functions):
    docs = {k: v for k, v in sample_documents().items() if any(p in k for p in PICK)}
    assert len(docs) >= 4
    upload_and_ingest(cloud, functions["ingest"], docs)
    drain_summarize(cloud, functions["summarize"])
    return docs


def ask(query_fn, text: str, mode: str = "dense") -> dict:
    ev = copy.deepcopy(event("api_query_valid.json"))
    ev["body"] = json.dumps({"query": text, "mode": mode, "k": 3})
    reply = query_fn.invoke(ev)
    assert reply["ok"], reply
    assert reply["result"]["statusCode"] == 200, reply["result"]
    return {"body": json.loads(reply["result"]["body"]), "calls": reply["bedrock_calls"],
            "refused": reply["bedrock_refused"]}


def test_ingest_embeds_with_titan_v2(cloud, functions, ingested, dim):
    probe = functions["ingest"].invoke({"Event": "s3:TestEvent"})  # a no-op: reports the stub's counters
    assert probe["ok"] and probe["bedrock_calls"] > len(ingested), probe
    assert probe["bedrock_refused"] == []
    assert cloud.search.fake.indexes["eragraph-nodes"]["dim"] == dim
    assert cloud.search.fake.indexes["eragraph-entities"]["dim"] == dim
    assert cloud.search.errors == [] and cloud.search.unsigned == []


@pytest.mark.parametrize("question, source", [
    ("Which is the smallest planet, the closest to the Sun?", "sample-mercury"),
    ("Who discovered radium and polonium?", "sample-marie_curie"),
    ("What does the Europa Clipper mission study?", "sample-europa"),
])
def test_dense_query_depends_on_the_question(functions, ingested, question, source):
    before = ask(functions["query"], "warm up")["calls"]
    out = ask(functions["query"], question)
    assert out["calls"] > before  # the question itself was embedded by (the stubbed) Bedrock
    assert out["refused"] == []
    top = out["body"]["results"][0]
    assert source in top["source"], (question, [r["source"] for r in out["body"]["results"]])
