"""boto3's ``bedrock-agent`` client against `eragraph serve`: a clientToken reused with another
request is Bedrock's ConflictException, and the second request's documents are not ingested."""

from __future__ import annotations

import uuid

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from serve_support import eragraph, get, serving

pytest.importorskip("aws_lambda_powertools")


def _text(doc_id: str, text: str) -> dict:
    return {"content": {"dataSourceType": "CUSTOM", "custom": {
        "customDocumentIdentifier": {"id": doc_id}, "sourceType": "IN_LINE",
        "inlineContent": {"type": "TEXT", "textContent": {"data": text}}}}}


def test_a_client_token_reused_with_another_body_is_a_conflict(tmp_path):
    seed = tmp_path / "seed.txt"
    seed.write_text("Skarvik is a small island town.", encoding="utf-8")
    assert eragraph("ingest", str(seed), "--store", str(tmp_path / "store"), "--json").returncode == 0
    with serving(tmp_path / "store") as url:
        _, stats = get(url, "/stats")
        kb = stats["knowledge_base_id"]
        client = boto3.client("bedrock-agent", region_name="us-east-1", endpoint_url=url, aws_access_key_id="x",
                              aws_secret_access_key="x", config=Config(retries={"max_attempts": 1}))
        ds = client.create_data_source(knowledgeBaseId=kb, name="inline",
                                       dataSourceConfiguration={"type": "CUSTOM"})["dataSource"]["dataSourceId"]
        token = uuid.uuid4().hex + "-retry"
        first = client.ingest_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds, clientToken=token,
                                                       documents=[_text("tides", "The tide turns twice a day.")])
        assert first["documentDetails"][0]["status"] == "STARTING"
        with pytest.raises(ClientError) as refused:
            client.ingest_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds, clientToken=token,
                                                   documents=[_text("crane", "The crane was built in 1931.")])
        assert refused.value.response["Error"]["Code"] == "ConflictException"
        assert "clientToken" in refused.value.response["Error"]["Message"]
        again = client.ingest_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds, clientToken=token,
                                                       documents=[_text("tides", "The tide turns twice a day.")])
        assert again["documentDetails"] == first["documentDetails"]
        ids = [{"dataSourceType": "CUSTOM", "custom": {"id": "crane"}}]
        got = client.get_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds, documentIdentifiers=ids)
        assert got["documentDetails"][0]["status"] == "NOT_FOUND"  # the refused request ingested nothing
