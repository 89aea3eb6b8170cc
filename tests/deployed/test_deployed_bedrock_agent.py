"""The Bedrock Knowledge Bases write routes (the ``bedrock-agent`` service) of the built query
function, in its deployed environment (Python 3.12, only its code and layers): boto3's
``bedrock-agent`` client, unchanged, its requests turned into API Gateway (payload v2) events by
kb_support's before-send hook. A CUSTOM data source's direct ingestion and an S3 data source's
ingestion job put objects in the documents bucket; the bucket's notifications reach the ingest
queue, and the ingest function (the built one) ingests them: the one ingest path. Then the
documents read as INDEXED, the job completes with Bedrock's statistics, and a removal takes the
same path back."""

from __future__ import annotations

import time

import pytest
from kb_support import kb_client

from deployed import SMALL_GRAPH, STACK_UUID, drain_summarize, failure_lines
from eragraph.domain.knowledge_base import knowledge_base_id

pytestmark = pytest.mark.timeout(900)

SOURCE = "eragraph-test-kb-source"  # a bucket the deployment may read (its DataSourceBuckets)
KB = knowledge_base_id("", STACK_UUID)  # the default tenant's (SMALL_GRAPH: an untagged caller)
COMETS = "The Starglass telescope followed comet Vantor through the winter of 2031. " * 3
HARBOUR = "The harbour master of Gdynia logged the tall ship Dar Pomorza in the spring. " * 3


@pytest.fixture(scope="module")
def functions(launch, cloud):
    cloud.s3.create_bucket(Bucket=SOURCE)
    settings = {**SMALL_GRAPH, "ERAGRAPH_SOURCE_BUCKETS": SOURCE}
    return {"ingest": launch("ingest"), "summarize": launch("summarize"), "query": launch("query", settings)}


@pytest.fixture(scope="module")
def agent(functions):
    def invoke(event: dict) -> dict:
        reply = functions["query"].invoke(event)
        assert reply["ok"], (reply, failure_lines(functions["query"]))
        return reply["result"]

    return kb_client(invoke, service="bedrock-agent")


def deliver(cloud, functions) -> int:
    """What the ingest queue's event source mapping does, until the queue is empty (the bucket's
    notifications of what the query function put or deleted), then the summarize queue."""
    ingest, delivered = functions["ingest"], 0
    for _ in range(40):
        n, failed = cloud.deliver(ingest, cloud.ingest_url, cloud.ingest_arn, ingest.fn.batch_size())
        assert not failed, failure_lines(ingest)
        delivered += n
        if n == 0 and cloud.queue_depth(cloud.ingest_url) == 0:
            break
    drain_summarize(cloud, functions["summarize"])
    return delivered


def removed(cloud, key: str) -> None:
    """The bucket's ObjectRemoved notification of ``key`` on the ingest queue, as S3 sends it (its
    sequencer after any put's)."""
    import copy
    import json

    from lambda_support import event

    body = copy.deepcopy(event("s3_delete.json"))
    record = body["Records"][0]["s3"]
    record["bucket"].update(name=cloud.bucket, arn=f"arn:aws:s3:::{cloud.bucket}")
    record["object"].update(key=key, sequencer="F" * 32)
    extra = {"MessageGroupId": "s3", "MessageDeduplicationId": key[:100]} if cloud.ingest_url.endswith(".fifo") else {}
    cloud.sqs.send_message(QueueUrl=cloud.ingest_url, MessageBody=json.dumps(body), **extra)


def custom(doc_id: str) -> dict:
    return {"dataSourceType": "CUSTOM", "custom": {"id": doc_id}}


def test_direct_ingestion_then_removal_through_the_bucket(agent, cloud, functions):
    ds = agent.create_data_source(knowledgeBaseId=KB, name="notes", dataSourceConfiguration={"type": "CUSTOM"})
    ds_id = ds["dataSource"]["dataSourceId"]
    docs = [{"content": {"dataSourceType": "CUSTOM", "custom": {
        "customDocumentIdentifier": {"id": doc_id}, "sourceType": "IN_LINE",
        "inlineContent": {"type": "TEXT", "textContent": {"data": text}}}}}
        for doc_id, text in (("comets", COMETS), ("harbour", HARBOUR))]
    out = agent.ingest_knowledge_base_documents(knowledgeBaseId=KB, dataSourceId=ds_id, documents=docs,
                                                clientToken="direct-ingestion-token-0001-of-this-test")
    assert [d["status"] for d in out["documentDetails"]] == ["STARTING", "STARTING"]
    keys = [o["Key"] for o in cloud.s3.list_objects_v2(Bucket=cloud.bucket).get("Contents", [])]
    assert any(k.endswith("comets") or "comets" in k for k in keys), keys  # the bucket is the hand-over
    assert deliver(cloud, functions) >= 2
    got = agent.get_knowledge_base_documents(knowledgeBaseId=KB, dataSourceId=ds_id,
                                             documentIdentifiers=[custom("comets"), custom("harbour")])
    assert [d["status"] for d in got["documentDetails"]] == ["INDEXED", "INDEXED"], got["documentDetails"]
    listed = agent.list_knowledge_base_documents(knowledgeBaseId=KB, dataSourceId=ds_id)
    assert {d["identifier"]["custom"]["id"] for d in listed["documentDetails"]} == {"comets", "harbour"}

    before = {o["Key"] for o in cloud.s3.list_objects_v2(Bucket=cloud.bucket).get("Contents", [])}
    agent.delete_knowledge_base_documents(knowledgeBaseId=KB, dataSourceId=ds_id, documentIdentifiers=[custom("harbour")],
                                          clientToken="direct-removal-token-0001-of-this-test")
    after = {o["Key"] for o in cloud.s3.list_objects_v2(Bucket=cloud.bucket).get("Contents", [])}
    [gone] = sorted(k for k in before - after if not k.endswith(".metadata.json"))  # the route deleted the object
    # moto's S3 sends no ObjectRemoved notification to the queue: send the one S3 would
    removed(cloud, gone)
    deliver(cloud, functions)  # the delete event removes the document
    got = agent.get_knowledge_base_documents(knowledgeBaseId=KB, dataSourceId=ds_id,
                                             documentIdentifiers=[custom("comets"), custom("harbour")])
    assert [d["status"] for d in got["documentDetails"]] == ["INDEXED", "NOT_FOUND"], got["documentDetails"]


def test_an_ingestion_job_syncs_an_s3_data_source(agent, cloud, functions):
    cloud.s3.put_object(Bucket=SOURCE, Key="docs/comets.txt", Body=COMETS.encode())
    cloud.s3.put_object(Bucket=SOURCE, Key="docs/harbour.txt", Body=HARBOUR.encode())
    cloud.s3.put_object(Bucket=SOURCE, Key="other/skipped.txt", Body=b"not under the prefix")
    ds = agent.create_data_source(knowledgeBaseId=KB, name="archive", dataSourceConfiguration={
        "type": "S3", "s3Configuration": {"bucketArn": f"arn:aws:s3:::{SOURCE}", "inclusionPrefixes": ["docs/"]}})
    ds_id = ds["dataSource"]["dataSourceId"]
    job = agent.start_ingestion_job(knowledgeBaseId=KB, dataSourceId=ds_id)["ingestionJob"]
    deadline = time.monotonic() + 300
    while True:
        deliver(cloud, functions)
        job = agent.get_ingestion_job(knowledgeBaseId=KB, dataSourceId=ds_id,
                                      ingestionJobId=job["ingestionJobId"])["ingestionJob"]
        if job["status"] in ("COMPLETE", "FAILED", "STOPPED") or time.monotonic() > deadline:
            break
    assert job["status"] == "COMPLETE", job
    stats = job["statistics"]
    assert stats["numberOfDocumentsScanned"] == 2 and stats["numberOfNewDocumentsIndexed"] == 2, stats
    assert stats["numberOfDocumentsFailed"] == 0, stats
    jobs = agent.list_ingestion_jobs(knowledgeBaseId=KB, dataSourceId=ds_id)["ingestionJobSummaries"]
    assert [j["ingestionJobId"] for j in jobs] == [job["ingestionJobId"]]
    # a second source of this test's own: the listing names both, whichever tests ran before
    agent.create_data_source(knowledgeBaseId=KB, name="ledger", dataSourceConfiguration={"type": "CUSTOM"})
    sources = agent.list_data_sources(knowledgeBaseId=KB)["dataSourceSummaries"]
    assert {s["name"] for s in sources} >= {"archive", "ledger"}
    assert ds_id in {s["dataSourceId"] for s in sources}
