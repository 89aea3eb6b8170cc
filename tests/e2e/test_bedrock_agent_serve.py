"""boto3's own ``bedrock-agent`` client, unchanged, against `eragraph serve`: an S3 data source
whose bucket is a folder (ERAGRAPH_BUCKET_FOLDER/<bucket>), ingestion jobs that ingest, replace
and delete with Bedrock's statistics and failure reasons, a stopped job and the sync it leaves to
the next one, direct ingestion into a CUSTOM data source (inline text, inline bytes, metadata,
clientToken), Get/List/Delete of its documents, and the modelled errors in words."""

from __future__ import annotations

import time
import uuid

import boto3
import pytest
from botocore.config import Config
from serve_support import eragraph, get, serving

pytest.importorskip("aws_lambda_powertools")

HARBOUR = "The ferry leaves Skarvik harbour at dawn. The harbour master keeps the timetable. " * 3
LIGHT = "# Lighthouse\n\nThe lighthouse keeper of Skarvik writes the ship log every night. " * 3


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("agent")
    folder = root / "buckets" / "notes" / "docs"
    folder.mkdir(parents=True)
    (folder / "harbour.txt").write_text(HARBOUR, encoding="utf-8")
    (folder / "lighthouse.md").write_text(LIGHT, encoding="utf-8")
    (folder / "lighthouse.md.metadata.json").write_text('{"metadataAttributes": {"year": 2019}}', encoding="utf-8")
    (folder / "blob.bin").write_bytes(bytes(range(256)) * 4)
    seed = root / "seed.txt"
    seed.write_text("Skarvik is a small island town.", encoding="utf-8")
    out = eragraph("ingest", str(seed), "--store", str(root / "store"), "--json")
    assert out.returncode == 0, out.stderr
    with serving(root / "store", env={"ERAGRAPH_BUCKET_FOLDER": str(root / "buckets")}) as url:
        _, stats = get(url, "/stats")
        client = boto3.client("bedrock-agent", region_name="us-east-1", endpoint_url=url,
                              aws_access_key_id="x", aws_secret_access_key="x",
                              config=Config(retries={"max_attempts": 1}))
        yield client, stats["knowledge_base_id"], folder, url


def until_ended(client, kb, ds, job, seconds=60):
    deadline = time.monotonic() + seconds
    while job["status"] in ("STARTING", "IN_PROGRESS") and time.monotonic() < deadline:
        time.sleep(0.3)
        job = client.get_ingestion_job(knowledgeBaseId=kb, dataSourceId=ds,
                                       ingestionJobId=job["ingestionJobId"])["ingestionJob"]
    return job


def sync(client, kb, ds):
    job = client.start_ingestion_job(knowledgeBaseId=kb, dataSourceId=ds)["ingestionJob"]
    return until_ended(client, kb, ds, job)


def test_a_data_source_syncs_new_modified_and_deleted_documents(served):
    client, kb, folder, url = served
    ds = client.create_data_source(knowledgeBaseId=kb, name="notes", description="the harbour notes",
                                   dataSourceConfiguration={"type": "S3", "s3Configuration": {
                                       "bucketArn": "arn:aws:s3:::notes", "inclusionPrefixes": ["docs/"]}})
    ds_id = ds["dataSource"]["dataSourceId"]
    assert ds["dataSource"]["status"] == "AVAILABLE"
    assert client.get_data_source(knowledgeBaseId=kb, dataSourceId=ds_id)["dataSource"]["name"] == "notes"
    # other tests of this module (one served store) may have made data sources of their own first
    assert ds_id in [d["dataSourceId"] for d in client.list_data_sources(knowledgeBaseId=kb)["dataSourceSummaries"]]

    job = sync(client, kb, ds_id)
    assert job["status"] == "COMPLETE", job
    stats = job["statistics"]
    assert (stats["numberOfDocumentsScanned"], stats["numberOfNewDocumentsIndexed"],
            stats["numberOfMetadataDocumentsScanned"], stats["numberOfDocumentsFailed"]) == (3, 2, 1, 1)
    assert any("blob.bin" in r and "binary" in r for r in job["failureReasons"])
    details = client.list_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id)["documentDetails"]
    assert sorted((d["identifier"]["s3"]["uri"], d["status"]) for d in details) == [
        ("s3://notes/docs/harbour.txt", "INDEXED"), ("s3://notes/docs/lighthouse.md", "INDEXED")]
    _, found = get(url, "/documents?prefix=notes/")
    assert {d["source"] for d in found["documents"]} == {"notes/docs/harbour.txt", "notes/docs/lighthouse.md"}

    # one file changed, one sidecar changed, one deleted: modified, metadata modified, deleted
    (folder / "harbour.txt").write_text(HARBOUR.replace("dawn", "noon"), encoding="utf-8")
    (folder / "blob.bin").unlink()
    (folder / "lighthouse.md.metadata.json").write_text('{"metadataAttributes": {"year": 2020}}', encoding="utf-8")
    job = sync(client, kb, ds_id)
    stats = job["statistics"]
    assert job["status"] == "COMPLETE", job
    assert (stats["numberOfModifiedDocumentsIndexed"], stats["numberOfMetadataDocumentsModified"],
            stats["numberOfDocumentsFailed"]) == (1, 1, 0)
    (folder / "lighthouse.md").unlink()
    (folder / "lighthouse.md.metadata.json").unlink()
    job = sync(client, kb, ds_id)
    assert job["statistics"]["numberOfDocumentsDeleted"] == 1 and job["statistics"]["numberOfDocumentsSkipped"] == 1
    details = client.list_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id)["documentDetails"]
    assert [d["identifier"]["s3"]["uri"] for d in details] == ["s3://notes/docs/harbour.txt"]
    # nothing changed since: the next sync skips it all
    assert sync(client, kb, ds_id)["statistics"]["numberOfNewDocumentsIndexed"] == 0

    jobs = client.list_ingestion_jobs(knowledgeBaseId=kb, dataSourceId=ds_id)["ingestionJobSummaries"]
    assert len(jobs) == 4 and all(j["status"] == "COMPLETE" for j in jobs)
    assert jobs[0]["startedAt"] >= jobs[-1]["startedAt"]  # newest first (Bedrock's default order)


def test_a_stopped_job_is_refused_a_second_stop_and_the_next_job_resumes(served):
    client, kb, folder, _url = served
    extra = folder.parent / "more"
    extra.mkdir()
    for n in range(30):  # more than one step's documents (kb_jobs.STEP_DOCUMENTS)
        (extra / f"note{n:02}.txt").write_text(f"Note {n}: the harbour crane lifted crate {n} at dawn. " * 3,
                                               encoding="utf-8")
    ds_id = client.create_data_source(knowledgeBaseId=kb, name="more", dataSourceConfiguration={
        "type": "S3", "s3Configuration": {"bucketArn": "arn:aws:s3:::notes", "inclusionPrefixes": ["more/"]}}
    )["dataSource"]["dataSourceId"]
    job = client.start_ingestion_job(knowledgeBaseId=kb, dataSourceId=ds_id, description="first")["ingestionJob"]
    assert job["status"] == "IN_PROGRESS" and job["statistics"]["numberOfNewDocumentsIndexed"] == 25
    stopped = client.stop_ingestion_job(knowledgeBaseId=kb, dataSourceId=ds_id,
                                        ingestionJobId=job["ingestionJobId"])["ingestionJob"]
    assert stopped["status"] == "STOPPED"
    with pytest.raises(client.exceptions.ConflictException) as info:
        client.stop_ingestion_job(knowledgeBaseId=kb, dataSourceId=ds_id, ingestionJobId=job["ingestionJobId"])
    assert "STOPPED" in str(info.value)
    again = client.get_ingestion_job(knowledgeBaseId=kb, dataSourceId=ds_id, ingestionJobId=job["ingestionJobId"])
    assert again["ingestionJob"]["status"] == "STOPPED"  # polling a stopped job does not run it
    time.sleep(2)  # the first 25 are ingested meanwhile (what was handed over still goes in)
    job = sync(client, kb, ds_id)
    assert job["status"] == "COMPLETE"
    assert job["statistics"]["numberOfNewDocumentsIndexed"] == 5  # the rest only: the sync resumes
    listed = client.list_ingestion_jobs(knowledgeBaseId=kb, dataSourceId=ds_id, filters=[
        {"attribute": "STATUS", "operator": "EQ", "values": ["STOPPED"]}])["ingestionJobSummaries"]
    assert [j["description"] for j in listed] == ["first"]
    details = client.list_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, maxResults=20)
    assert len(details["documentDetails"]) == 20 and "nextToken" in details
    rest = client.list_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, nextToken=details["nextToken"])
    assert len(rest["documentDetails"]) == 10 and "nextToken" not in rest


def _inline(doc_id: str, text: str | None = None, data: bytes | None = None, **metadata) -> dict:
    inline = ({"type": "TEXT", "textContent": {"data": text}} if text is not None
              else {"type": "BYTE", "byteContent": {"mimeType": "text/html", "data": data}})
    doc = {"content": {"dataSourceType": "CUSTOM", "custom": {"customDocumentIdentifier": {"id": doc_id},
                                                              "sourceType": "IN_LINE", "inlineContent": inline}}}
    if metadata:
        doc["metadata"] = {"type": "IN_LINE_ATTRIBUTE", "inlineAttributes": [
            {"key": k, "value": {"type": "NUMBER", "numberValue": v}} for k, v in metadata.items()]}
    return doc


def test_direct_ingestion_into_a_custom_data_source(served):
    client, kb, _folder, url = served
    ds_id = client.create_data_source(knowledgeBaseId=kb, name="inline",
                                      dataSourceConfiguration={"type": "CUSTOM"})["dataSource"]["dataSourceId"]
    token = uuid.uuid4().hex + "-retry"
    html = b"<html><head><title>Tides</title></head><body><p>The tide turns at Skarvik pier twice a day.</p></body></html>"
    docs = [_inline("tides", data=html), _inline("crane", text="The harbour crane was built in 1931.", year=1931)]
    out = client.ingest_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, documents=docs,
                                                 clientToken=token)
    assert [d["status"] for d in out["documentDetails"]] == ["STARTING", "STARTING"]
    again = client.ingest_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, documents=docs,
                                                   clientToken=token)
    assert again["documentDetails"] == out["documentDetails"]  # the same call: nothing submitted twice
    ids = [{"dataSourceType": "CUSTOM", "custom": {"id": i}} for i in ("tides", "crane", "nope")]
    deadline = time.monotonic() + 30
    while True:
        got = client.get_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, documentIdentifiers=ids)
        states = [d["status"] for d in got["documentDetails"]]
        if states[:2] == ["INDEXED", "INDEXED"] or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert states == ["INDEXED", "INDEXED", "NOT_FOUND"]
    _, doc = get(url, "/documents?prefix=inline/crane")
    assert doc["documents"][0]["state"] in ("summaries_pending", "done")
    out = client.delete_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, documentIdentifiers=ids[:1])
    assert out["documentDetails"][0]["status"] == "DELETING"
    deadline = time.monotonic() + 30
    while True:
        left = client.list_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id)["documentDetails"]
        if len(left) == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert [d["identifier"]["custom"]["id"] for d in left] == ["crane"]


def test_bad_input_gets_the_modelled_error_in_words(served):
    client, kb, folder, _url = served
    ds_id = client.create_data_source(knowledgeBaseId=kb, name="strict",
                                      dataSourceConfiguration={"type": "CUSTOM"})["dataSource"]["dataSourceId"]
    errors = client.exceptions
    cases = [
        (errors.ResourceNotFoundException, "no data source",
         lambda: client.get_data_source(knowledgeBaseId=kb, dataSourceId="ABCDEFGHIJ")),
        (errors.ResourceNotFoundException, "knowledge base",
         lambda: client.list_data_sources(knowledgeBaseId="ZZZZZZZZZZ")),
        (errors.ConflictException, "named 'strict'",
         lambda: client.create_data_source(knowledgeBaseId=kb, name="strict", dataSourceConfiguration={"type": "CUSTOM"})),
        (errors.ValidationException, "WEB",
         lambda: client.create_data_source(knowledgeBaseId=kb, name="web", dataSourceConfiguration={"type": "WEB"})),
        (errors.ValidationException, "no folder",
         lambda: client.create_data_source(knowledgeBaseId=kb, name="gone", dataSourceConfiguration={
             "type": "S3", "s3Configuration": {"bucketArn": "arn:aws:s3:::absent"}})),
        (errors.ValidationException, "at most 10",
         lambda: client.ingest_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id,
                                                        documents=[_inline(f"d{n}", text="x") for n in range(11)])),
        (errors.ValidationException, "CUSTOM",  # an S3 document in a CUSTOM data source
         lambda: client.ingest_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, documents=[
             {"content": {"dataSourceType": "S3", "s3": {"s3Location": {"uri": "s3://notes/docs/harbour.txt"}}}}])),
        (errors.ValidationException, "inlineAttributes",  # a STRING attribute without its stringValue
         lambda: client.ingest_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, documents=[
             {**_inline("m", text="x"), "metadata": {"type": "IN_LINE_ATTRIBUTE", "inlineAttributes": [
                 {"key": "year", "value": {"type": "STRING", "numberValue": 3}}]}}])),
        (errors.ValidationException, "must have at most 5242880 characters",  # past Bedrock's 5 MB inline limit
         lambda: client.ingest_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, documents=[
             _inline("big", text="y" * (5 * 1024 * 1024 + 1))])),
        (errors.ValidationException, "nothing to sync",
         lambda: client.start_ingestion_job(knowledgeBaseId=kb, dataSourceId=ds_id)),
        (errors.ResourceNotFoundException, "no ingestion job",
         lambda: client.get_ingestion_job(knowledgeBaseId=kb, dataSourceId=ds_id, ingestionJobId="ABCDEFGHIJ")),
    ]
    for kind, words, call in cases:
        with pytest.raises(kind) as info:
            call()
        assert words in str(info.value), (words, str(info.value))
        assert str(folder.parent.parent) not in str(info.value), str(info.value)  # no server path in any answer
    # a byte document Eragraph cannot read is accepted, then fails with its reason
    client.ingest_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id,
                                           documents=[_inline("raw", data=bytes(range(256)) * 4)])
    ident = [{"dataSourceType": "CUSTOM", "custom": {"id": "raw"}}]
    deadline = time.monotonic() + 30
    while True:
        [detail] = client.get_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id,
                                                       documentIdentifiers=ident)["documentDetails"]
        if detail["status"] == "FAILED" or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert detail["status"] == "FAILED" and "binary" in detail["statusReason"]


def test_a_document_the_ingest_path_refuses_is_counted_failed_only(served):
    """A new object whose sidecar names another tenant reads and compares as new, then the ingest
    path refuses it (its metadata names a tenant not the caller's): Bedrock counts it failed,
    not new as well."""
    client, kb, folder, _url = served
    refused = folder.parent / "refused"
    refused.mkdir()
    (refused / "kept.txt").write_text("The Skarvik ferry timetable changes in winter. " * 3, encoding="utf-8")
    (refused / "foreign.txt").write_text("A note that claims another owner. " * 3, encoding="utf-8")
    (refused / "foreign.txt.metadata.json").write_text('{"metadataAttributes": {"tenant": "someone-else"}}',
                                                       encoding="utf-8")
    ds = client.create_data_source(knowledgeBaseId=kb, name="refused", dataSourceConfiguration={
        "type": "S3", "s3Configuration": {"bucketArn": "arn:aws:s3:::notes", "inclusionPrefixes": ["refused/"]}})
    job = sync(client, kb, ds["dataSource"]["dataSourceId"])
    assert job["status"] == "COMPLETE", job
    stats = job["statistics"]
    assert (stats["numberOfDocumentsScanned"], stats["numberOfNewDocumentsIndexed"],
            stats["numberOfDocumentsFailed"]) == (2, 1, 1), stats
    assert any("foreign.txt" in r and "someone-else" in r for r in job["failureReasons"]), job["failureReasons"]


def test_list_knowledge_base_documents_pages_by_cursor(served):
    """ListKnowledgeBaseDocuments pages with GET /documents' cursor (the last document given): a
    document removed after the first page does not shift the next one (an offset would skip one),
    and boto3's paginator walks every document once."""
    client, kb, _folder, _url = served
    ds = client.create_data_source(knowledgeBaseId=kb, name="paged", dataSourceConfiguration={"type": "CUSTOM"})
    ds_id = ds["dataSource"]["dataSourceId"]
    names = [f"p{i}" for i in range(5)]
    client.ingest_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, documents=[
        _inline(n, text=f"Paged note {n} of the Skarvik harbour. " * 3) for n in names])

    def states(ids):
        out = client.get_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, documentIdentifiers=[
            {"dataSourceType": "CUSTOM", "custom": {"id": i}} for i in ids])
        return [d["status"] for d in out["documentDetails"]]

    deadline = time.monotonic() + 60
    while set(states(names)) != {"INDEXED"} and time.monotonic() < deadline:
        time.sleep(0.2)
    first = client.list_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, maxResults=2)
    assert [d["identifier"]["custom"]["id"] for d in first["documentDetails"]] == ["p0", "p1"]
    client.delete_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, documentIdentifiers=[
        {"dataSourceType": "CUSTOM", "custom": {"id": "p0"}}])
    while states(["p0"]) != ["NOT_FOUND"] and time.monotonic() < deadline:
        time.sleep(0.2)
    second = client.list_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, maxResults=2,
                                                  nextToken=first["nextToken"])
    assert [d["identifier"]["custom"]["id"] for d in second["documentDetails"]] == ["p2", "p3"]
    pages = client.get_paginator("list_knowledge_base_documents").paginate(
        knowledgeBaseId=kb, dataSourceId=ds_id, PaginationConfig={"PageSize": 2})
    assert [d["identifier"]["custom"]["id"] for p in pages for d in p["documentDetails"]] == names[1:]
    with pytest.raises(client.exceptions.ValidationException) as info:
        client.list_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, nextToken="bm90LWEtdG9rZW4")
    assert "nextToken is not a token this service returned" in str(info.value)
