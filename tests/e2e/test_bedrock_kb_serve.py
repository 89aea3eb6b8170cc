"""boto3's own ``bedrock-agent-runtime`` client, unchanged, against `eragraph serve`: Retrieve
with a filter, the knowledge base id of the store's tenant, the modelled errors (an unknown id,
bad input, a rerank asked of a store without a reranker) and nextToken paging."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.config import Config
from serve_support import eragraph, get, serving

pytest.importorskip("aws_lambda_powertools")

DOCS = {
    "harbour.txt": ("The ferry leaves Skarvik harbour at dawn. The harbour master keeps the ferry timetable. " * 3,
                    {"lang": "en", "year": 2021}),
    "lighthouse.txt": ("The lighthouse keeper of Skarvik island writes the ship log every night. " * 3,
                       {"lang": "no", "year": 2019}),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("kb")
    store = root / "store"
    paths = []
    for name, (text, meta) in DOCS.items():
        path = root / name
        path.write_text(text, encoding="utf-8")
        (root / (name + ".metadata.json")).write_text(json.dumps({"metadataAttributes": meta}), encoding="utf-8")
        paths.append(str(path))
    out = eragraph("ingest", *paths, "--store", str(store), "--json")
    assert out.returncode == 0, out.stderr
    with serving(store) as url:
        status, stats = get(url, "/stats")
        assert status == 200
        client = boto3.client("bedrock-agent-runtime", region_name="us-east-1", endpoint_url=url,
                              aws_access_key_id="x", aws_secret_access_key="x",
                              config=Config(retries={"max_attempts": 1}))
        yield client, stats["knowledge_base_id"]


def retrieve(client, kb_id, text, **config):
    request = {"knowledgeBaseId": kb_id, "retrievalQuery": {"text": text}}
    if config:
        request["retrievalConfiguration"] = {"vectorSearchConfiguration": config}
    return client.retrieve(**request)


def test_retrieve_returns_modelled_results(served):
    client, kb_id = served
    out = retrieve(client, kb_id, "Who keeps the lighthouse log?", numberOfResults=3, overrideSearchType="SEMANTIC")
    results = out["retrievalResults"]
    assert 1 <= len(results) <= 3
    top = results[0]
    assert "lighthouse" in top["content"]["text"] and top["content"]["type"] == "TEXT"
    assert top["location"]["type"] == "CUSTOM"
    assert top["location"]["customDocumentLocation"]["id"].endswith("lighthouse.txt")
    assert top["metadata"]["x-eragraph-route"] == "dense"
    assert top["metadata"]["x-eragraph-node-id"] and top["metadata"]["x-eragraph-layer"] == 0
    assert isinstance(top["score"], float)


def test_retrieve_with_a_filter_keeps_only_matching_documents(served):
    client, kb_id = served
    where = {"equals": {"key": "lang", "value": "en"}}
    out = retrieve(client, kb_id, "Who keeps the lighthouse log?", numberOfResults=5, filter=where,
                   overrideSearchType="HYBRID")
    assert out["retrievalResults"]
    for result in out["retrievalResults"]:
        assert result["metadata"]["x-eragraph-source"].endswith("harbour.txt")
        assert result["metadata"]["x-eragraph-route"] == "hybrid"


def test_next_token_pages_without_repeating(served):
    client, kb_id = served
    first = retrieve(client, kb_id, "Skarvik", numberOfResults=1, overrideSearchType="SEMANTIC")
    assert "nextToken" in first
    second = client.retrieve(knowledgeBaseId=kb_id, retrievalQuery={"text": "Skarvik"}, nextToken=first["nextToken"],
                             retrievalConfiguration={"vectorSearchConfiguration": {
                                 "numberOfResults": 1, "overrideSearchType": "SEMANTIC"}})
    ids = [r["metadata"]["x-eragraph-node-id"] for r in first["retrievalResults"] + second["retrievalResults"]]
    assert len(ids) == 2 and len(set(ids)) == 2


def test_an_unknown_knowledge_base_is_resource_not_found(served):
    client, kb_id = served
    other = "ZZZZZZZZZZ" if kb_id != "ZZZZZZZZZZ" else "YYYYYYYYYY"
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        retrieve(client, other, "Skarvik")


def test_bad_input_is_a_validation_exception_in_words(served):
    client, kb_id = served
    # botocore checks some input itself; bad input reaches the server through a client that does not
    raw = boto3.client("bedrock-agent-runtime", region_name="us-east-1", endpoint_url=client.meta.endpoint_url,
                       aws_access_key_id="x", aws_secret_access_key="x",
                       config=Config(parameter_validation=False, retries={"max_attempts": 1}))
    with pytest.raises(raw.exceptions.ValidationException) as info:
        retrieve(raw, kb_id, "Skarvik", numberOfResults=500)
    assert "numberOfResults" in str(info.value)
    with pytest.raises(raw.exceptions.ValidationException) as info:
        retrieve(raw, kb_id, "Skarvik", filter={"equals": {"key": "lang"}})
    assert '"value"' in str(info.value)


def test_rerank_without_a_reranker_is_a_validation_exception(served):
    client, kb_id = served
    rerank = {"type": "BEDROCK_RERANKING_MODEL", "bedrockRerankingConfiguration": {
        "numberOfRerankedResults": 10,
        "modelConfiguration": {"modelArn": "arn:aws:bedrock:us-east-1::foundation-model/amazon.rerank-v1:0"}}}
    with pytest.raises(client.exceptions.ValidationException) as info:
        retrieve(client, kb_id, "Skarvik", rerankingConfiguration=rerank)
    assert "rerank" in str(info.value).lower()


def test_langchain_retriever_reads_the_knowledge_base_unchanged(served):
    """langchain-aws's AmazonKnowledgeBasesRetriever, as an app written for Bedrock KB builds it,
    with only the endpoint changed: Documents with the result text, the score and the location."""
    import langchain_aws  # the dev extra

    client, kb_id = served
    retriever = langchain_aws.AmazonKnowledgeBasesRetriever(
        knowledge_base_id=kb_id, client=client,
        retrieval_config={"vectorSearchConfiguration": {
            "numberOfResults": 2, "filter": {"equals": {"key": "lang", "value": "no"}}}})
    docs = retriever.invoke("Who writes the ship log?")
    assert 1 <= len(docs) <= 2
    for doc in docs:
        assert "lighthouse" in doc.page_content
        assert doc.metadata["location"]["customDocumentLocation"]["id"].endswith("lighthouse.txt")
        assert isinstance(doc.metadata["score"], float)
        assert doc.metadata["source_metadata"]["x-eragraph-source"].endswith("lighthouse.txt")
        assert doc.metadata["source_metadata"]["lang"] == "no"  # the document's own metadata, beside Eragraph's
