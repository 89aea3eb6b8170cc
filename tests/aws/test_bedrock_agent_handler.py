"""boto3's ``bedrock-agent`` client, unchanged, against the query Lambda handler (moto + the
OpenSearch fake), as the runtime routes are tested (kb_support.kb_client): a tenant creates an S3
data source on a bucket the deployment may read (ERAGRAPH_SOURCE_BUCKETS), an ingestion job
copies what is new into the documents bucket under the tenant's prefix, and the bucket's
notification (its event fed to the ingest function) ingests it -- the one ingest path; the job
completes with Bedrock's statistics once the documents are in. IngestKnowledgeBaseDocuments
takes the same path. Another tenant sees none of it."""

from __future__ import annotations

import boto3
import pytest
from kb_support import kb_client
from test_tenants_api import http_event, jwt, s3_event, tenant_env  # noqa: F401 (fixtures)

from aws_helpers import BUCKET, load_handler
from eragraph.domain.knowledge_base import knowledge_base_id

SOURCE = "kb-source-bucket"
TEXT = "The Starglass telescope followed comet Vantor through the winter of 2031. " * 3


def client_as(tenant: str, lambda_context):
    handler = load_handler("query").handler
    return kb_client(lambda ev: handler(ev, lambda_context),
                     lambda method, path, body: http_event(method, path, body, authorizer=jwt(tenant)),
                     service="bedrock-agent")


def notify(keys, lambda_context) -> None:
    """The documents bucket's notifications of ``keys``: the ingest function's events."""
    ingest = load_handler("ingest")
    for key in keys:
        out = ingest.handler(s3_event(key), lambda_context)
        assert out["rejected"] == 0, out


def documents_keys(tenant: str) -> list[str]:
    listed = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=BUCKET, Prefix=f"tenants/{tenant}/")
    return sorted(o["Key"] for o in listed.get("Contents", []) if not o["Key"].endswith(".metadata.json"))


def test_a_sync_and_a_direct_ingest_take_the_buckets_path_in_the_callers_tenant(tenant_env, lambda_context):
    _engine, env, _fake = tenant_env
    env["ERAGRAPH_SOURCE_BUCKETS"] = SOURCE  # the DataSourceBuckets parameter
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=SOURCE)
    s3.put_object(Bucket=SOURCE, Key="tenants/a/docs/comets.txt", Body=TEXT.encode())  # a's area of the bucket
    s3.put_object(Bucket=SOURCE, Key="tenants/a/docs/comets.txt.metadata.json",
                  Body=b'{"metadataAttributes": {"year": 2031}}')
    s3.put_object(Bucket=SOURCE, Key="tenants/a/other/skipped.txt", Body=b"not under the prefix")
    a, kb = client_as("a", lambda_context), knowledge_base_id("a")

    with pytest.raises(a.exceptions.ValidationException) as info:  # a bucket the deployment may not read
        a.create_data_source(knowledgeBaseId=kb, name="elsewhere", dataSourceConfiguration={
            "type": "S3", "s3Configuration": {"bucketArn": "arn:aws:s3:::not-allowed"}})
    assert "DataSourceBuckets" in str(info.value)
    ds = a.create_data_source(knowledgeBaseId=kb, name="comets", dataSourceConfiguration={
        "type": "S3", "s3Configuration": {"bucketArn": f"arn:aws:s3:::{SOURCE}", "inclusionPrefixes": ["tenants/a/docs/"]}})
    ds_id = ds["dataSource"]["dataSourceId"]
    job = a.start_ingestion_job(knowledgeBaseId=kb, dataSourceId=ds_id)["ingestionJob"]
    assert job["status"] == "IN_PROGRESS"
    assert job["statistics"]["numberOfNewDocumentsIndexed"] == 1
    assert job["statistics"]["numberOfMetadataDocumentsScanned"] == 1
    # the job's hand-over is the documents bucket, under the tenant's prefix
    assert documents_keys("a") == ["tenants/a/comets/tenants/a/docs/comets.txt"]
    with pytest.raises(a.exceptions.ConflictException):  # one running job a data source
        a.start_ingestion_job(knowledgeBaseId=kb, dataSourceId=ds_id)
    notify(documents_keys("a"), lambda_context)
    job = a.get_ingestion_job(knowledgeBaseId=kb, dataSourceId=ds_id, ingestionJobId=job["ingestionJobId"])
    assert job["ingestionJob"]["status"] == "COMPLETE", job
    details = a.list_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id)["documentDetails"]
    assert [(d["identifier"]["s3"]["uri"], d["status"]) for d in details] == [(f"s3://{SOURCE}/tenants/a/docs/comets.txt",
                                                                                "INDEXED")]
    out = a.get_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, documentIdentifiers=[
        {"dataSourceType": "S3", "s3": {"uri": f"s3://{SOURCE}/tenants/a/docs/comets.txt"}}])
    assert out["documentDetails"][0]["status"] == "INDEXED"

    custom = a.create_data_source(knowledgeBaseId=kb, name="notes", dataSourceConfiguration={"type": "CUSTOM"})
    custom_id = custom["dataSource"]["dataSourceId"]
    a.ingest_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=custom_id, documents=[{"content": {
        "dataSourceType": "CUSTOM", "custom": {"customDocumentIdentifier": {"id": "n1"}, "sourceType": "IN_LINE",
                                               "inlineContent": {"type": "TEXT", "textContent": {"data": TEXT}}}}}])
    assert "tenants/a/notes/n1" in documents_keys("a")

    # tenant b: a's knowledge base is not one it may read, and its own has no data source
    b = client_as("b", lambda_context)
    with pytest.raises(b.exceptions.ResourceNotFoundException):
        b.list_data_sources(knowledgeBaseId=kb)
    with pytest.raises(b.exceptions.ResourceNotFoundException):
        b.get_data_source(knowledgeBaseId=knowledge_base_id("b"), dataSourceId=ds_id)
    assert b.list_data_sources(knowledgeBaseId=knowledge_base_id("b"))["dataSourceSummaries"] == []


def test_a_tenant_can_reach_no_other_tenants_objects_in_a_shared_bucket(tenant_env, lambda_context):
    """The sharing model (domain.kb_sync): tenant b's area of the shared source bucket is
    ``tenants/b/``. Tenant a can create no S3 data source over it (nor over the whole bucket),
    and can name none of b's objects as a CUSTOM document's s3Location or a metadata
    s3Location: each is AccessDeniedException, and nothing of b's is ingested for a."""
    _engine, env, _fake = tenant_env
    env["ERAGRAPH_SOURCE_BUCKETS"] = SOURCE
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=SOURCE)
    s3.put_object(Bucket=SOURCE, Key="tenants/b/private/plans.txt", Body=TEXT.encode())
    s3.put_object(Bucket=SOURCE, Key="tenants/b/private/plans.txt.metadata.json",
                  Body=b'{"metadataAttributes": {"year": 2031}}')
    a, kb = client_as("a", lambda_context), knowledge_base_id("a")
    for prefixes in (["tenants/b/"], ["tenants/b/private/"], ["tenants/"], [], ["tenants/ab/"]):
        config = {"bucketArn": f"arn:aws:s3:::{SOURCE}", **({"inclusionPrefixes": prefixes} if prefixes else {})}
        with pytest.raises(a.exceptions.AccessDeniedException) as info:
            a.create_data_source(knowledgeBaseId=kb, name="theirs", dataSourceConfiguration={
                "type": "S3", "s3Configuration": config})
        assert "tenants/a/" in str(info.value), prefixes
    assert a.list_data_sources(knowledgeBaseId=kb)["dataSourceSummaries"] == []

    custom = a.create_data_source(knowledgeBaseId=kb, name="notes", dataSourceConfiguration={"type": "CUSTOM"})
    custom_id = custom["dataSource"]["dataSourceId"]
    theirs = f"s3://{SOURCE}/tenants/b/private/plans.txt"
    with pytest.raises(a.exceptions.AccessDeniedException) as info:
        a.ingest_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=custom_id, documents=[{"content": {
            "dataSourceType": "CUSTOM", "custom": {"customDocumentIdentifier": {"id": "stolen"},
                                                   "sourceType": "S3_LOCATION", "s3Location": {"uri": theirs}}}}])
    assert "tenant 'a'" in str(info.value)
    with pytest.raises(a.exceptions.AccessDeniedException):
        a.ingest_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=custom_id, documents=[{
            "content": {"dataSourceType": "CUSTOM", "custom": {
                "customDocumentIdentifier": {"id": "mine"}, "sourceType": "IN_LINE",
                "inlineContent": {"type": "TEXT", "textContent": {"data": "mine"}}}},
            "metadata": {"type": "S3_LOCATION", "s3Location": {"uri": theirs + ".metadata.json"}}}])
    assert documents_keys("a") == []
