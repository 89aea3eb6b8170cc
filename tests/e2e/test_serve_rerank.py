"""POST /query with rerank on the served API: true or {candidates, model}, strict; 4xx in words."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from eragraph.bootstrap import build_engine
from eragraph.config import Settings
from eragraph.services import resummarize
from eragraph.services.ingest import ingest
from support import synthetic_docs


class Reversed:
    """Scores the passages so that the last retrieved comes first."""
    identity = "reversed"
    model = "reversed"
    arn = "arn:aws:bedrock:us-east-1::foundation-model/reversed"  # Bedrock's request model takes ARNs only

    def score(self, query, texts):
        return [float(i) for i in range(len(texts))]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from eragraph.entrypoints.http.server import make_server

    engine = build_engine("local", tmp_path_factory.mktemp("rr"), Settings(embedder="hash", s_min=2, s_max=3,
                                                                             n_planes=8, embed_cache=False))
    ingest(engine, synthetic_docs(12, seed=5))
    resummarize.drain(engine)
    server = make_server(engine, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield engine, f"http://127.0.0.1:{server.server_address[1]}/query"
    server.shutdown()
    server.server_close()


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_rerank_needs_a_reranker_then_reorders(served):
    engine, url = served
    status, body = post(url, {"query": "comet orbit", "mode": "dense", "k": 3, "rerank": True})
    assert status == 400 and "no reranker is configured" in body["message"]
    engine.reranker = Reversed()
    try:
        _, plain = post(url, {"query": "comet orbit", "mode": "dense", "k": 6})
        status, body = post(url, {"query": "comet orbit", "mode": "dense", "k": 3, "rerank": {"candidates": 6}})
        assert status == 200, body
        assert [r["id"] for r in body["results"]] == [r["id"] for r in plain["results"]][::-1][:3]
        assert body["rerank"]["model"] == "reversed" and body["rerank"]["candidates"] == 6
        status, body = post(url, {"query": "comet orbit", "rerank": {"model": "cohere.rerank-v3-5:0"}})
        assert status == 400 and "not available" in body["message"]
    finally:
        engine.reranker = None


@pytest.mark.parametrize("rerank,words", [({"candidates": 0}, "candidates"), ({"colour": 1}, "colour"),
                                          ("yes", "rerank"), ({"candidates": "5"}, "candidates")])
def test_bad_rerank_is_422_in_words(served, rerank, words):
    status, body = post(served[1], {"query": "comet", "rerank": rerank})
    assert status == 422 and words in body["message"], body


def test_bedrock_retrieve_reranks_number_of_results_and_returns_number_of_reranked_results(served):
    """Bedrock's reranking configuration through boto3's own client: numberOfResults are
    retrieved and reranked, numberOfRerankedResults of them come back, in the reranker's order."""
    import boto3
    from botocore.config import Config

    from eragraph.domain.knowledge_base import knowledge_base_id

    engine, url = served
    client = boto3.client("bedrock-agent-runtime", region_name="us-east-1", endpoint_url=url[: -len("/query")],
                          aws_access_key_id="x", aws_secret_access_key="x", config=Config(retries={"max_attempts": 1}))
    _, plain = post(url, {"query": "comet orbit", "mode": "dense", "k": 6})
    engine.reranker = Reversed()
    try:
        out = client.retrieve(knowledgeBaseId=knowledge_base_id("", engine.settings.kb_id_salt), retrievalQuery={"text": "comet orbit"},
                              retrievalConfiguration={"vectorSearchConfiguration": {
                                  "numberOfResults": 6, "overrideSearchType": "SEMANTIC",
                                  "rerankingConfiguration": {"type": "BEDROCK_RERANKING_MODEL",
                                                             "bedrockRerankingConfiguration": {
                                                                 "numberOfRerankedResults": 2,
                                                                 "modelConfiguration": {"modelArn": Reversed.arn}}}}})
    finally:
        engine.reranker = None
    got = [r["metadata"]["x-eragraph-node-id"] for r in out["retrievalResults"]]
    assert got == [r["id"] for r in plain["results"]][::-1][:2]
