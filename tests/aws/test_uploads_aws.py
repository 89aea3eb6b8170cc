"""POST /documents and DELETE /documents/{id} on the AWS profile, through the query and ingest
handlers (moto + the OpenSearch fake): the route puts the object (and its metadata sidecar) in
the documents bucket under the caller's tenant prefix and records it received; the bucket's
notification (its event JSON fed to the ingest function) ingests it, so its status and document
appear in that tenant only; DELETE deletes the object, and its delete event removes the document;
GET /changes lists the caller's change records only."""

from __future__ import annotations

import json

import boto3
from aws_helpers import BUCKET, load_handler
from test_tenants_api import A_TEXT, call, http_event, jwt, s3_event, tenant_env  # noqa: F401

from eragraph.services import resummarize


def obj(key: str) -> bytes | None:
    try:
        return boto3.client("s3", region_name="us-east-1").get_object(Bucket=BUCKET, Key=key)["Body"].read()
    except Exception:  # noqa: BLE001 (NoSuchKey)
        return None


def test_a_submitted_document_takes_the_buckets_pipeline_in_its_tenant(tenant_env, lambda_context):
    from eragraph.bootstrap.aws import LAMBDA_ENGINE

    query, ingest = load_handler("query"), load_handler("ingest")
    status, body, _ = call(query.handler, http_event("POST", "/documents", {"documents": [
        {"source": "notes/comets.md", "text": A_TEXT, "metadata": {"year": 2024}}]}, jwt("a")), lambda_context)
    assert status == 202, body
    [doc] = body["documents"]
    key = "tenants/a/notes/comets.md"
    assert doc == {"doc_id": doc["doc_id"], "source": f"s3://{BUCKET}/{key}", "state": "received"}
    assert obj(key) == A_TEXT.encode()
    assert json.loads(obj(key + ".metadata.json")) == {"metadataAttributes": {"year": 2024}}
    # a is registered by the ingest function (the query function's role writes no registry item):
    # until then its reads find nothing, and its status is in its own namespace
    assert LAMBDA_ENGINE.writer("a").graph.get_doc_status(doc["doc_id"]).state == "received"
    assert LAMBDA_ENGINE.get("", register=False).graph.get_doc_status(doc["doc_id"]) is None
    status, _, _ = call(query.handler, http_event("GET", f"/documents/{doc['doc_id']}", authorizer=jwt("b")),
                        lambda_context)
    assert status == 404  # another tenant sees nothing of it

    out = ingest.handler(s3_event(key), lambda_context)  # the bucket's notification
    assert out["ingested"] == 1 and out["rejected"] == 0, out
    a = LAMBDA_ENGINE.get("a", register=False)
    resummarize.drain(a)
    stored = a.graph.get_document(doc["doc_id"])
    assert stored is not None and stored.metadata == {"year": 2024}
    status, seen, _ = call(query.handler, http_event("GET", f"/documents/{doc['doc_id']}", authorizer=jwt("a")),
                           lambda_context)
    assert status == 200 and seen["status"] in ("summaries_pending", "done"), seen
    status, found, _ = call(query.handler, http_event("POST", "/query", {"query": "Which telescope observed the comet?"},
                                                      jwt("a")), lambda_context)
    assert status == 200 and found["results"]
    status, changes, _ = call(query.handler, http_event("GET", "/changes", authorizer=jwt("a")), lambda_context)
    assert status == 200 and any(c["kind"] == "ingest" and c["documents"] == [doc["source"]]
                                 for c in changes["changes"]), changes
    status, other, raw = call(query.handler, http_event("GET", "/changes", authorizer=jwt("b")), lambda_context)
    assert status == 200 and other["changes"] == [] and "comets" not in raw

    status, body, _ = call(query.handler, http_event("DELETE", f"/documents/{doc['doc_id']}", authorizer=jwt("b")),
                           lambda_context)
    assert status == 404  # b cannot remove a's document
    assert obj(key) is not None
    status, body, _ = call(query.handler, http_event("DELETE", f"/documents/{doc['doc_id']}", authorizer=jwt("a")),
                           lambda_context)
    assert status == 202 and body["state"] == "deleting"
    assert obj(key) is None and obj(key + ".metadata.json") is None
    out = ingest.handler(s3_event(key, removed=True, sequencer="0A1B2C3D4E5F6789FF"), lambda_context)
    assert out["removed"] == 1
    assert a.graph.get_document(doc["doc_id"]) is None


def test_the_default_tenant_uploads_without_a_prefix_and_bad_requests_are_refused(tenant_env, lambda_context):
    query = load_handler("query")
    status, body, _ = call(query.handler, http_event("POST", "/documents", {"documents": [
        {"source": "docs/a.txt", "text": "hello there"}]}, jwt(None)), lambda_context)
    assert status == 202 and body["documents"][0]["source"] == f"s3://{BUCKET}/docs/a.txt"
    assert obj("docs/a.txt") == b"hello there"
    for payload, code, words in (
            ({"documents": [{"source": "tenants/b/x.txt", "text": "x"}]}, 400, "reserved"),
            ({"documents": [{"source": "x.txt", "text": "x", "metadata": {"tenant": "b"}}]}, 403, "tenant"),
            ({"documents": [{"source": "x.pdf", "bytes": "@@"}]}, 400, "base64"),
            ({"documents": []}, 422, "documents")):
        status, body, _ = call(query.handler, http_event("POST", "/documents", payload, jwt("a")), lambda_context)
        assert status == code and words in body["message"], (payload, body)
    assert obj("tenants/b/x.txt") is None and obj("tenants/a/x.txt") is None


def test_uploads_go_where_the_buckets_notification_ingests():
    """With the template's DocumentPrefix/DocumentSuffix set, an upload is put under the prefix
    (the notification's filter), and one it would never see is refused in words, not stored:
    a name without the suffix, and a named tenant's upload (a prefix makes the deployment
    single-tenant: tenants' keys are outside it). The query function is given both."""
    import pytest

    from aws_helpers import ROOT
    from contract.aws_factories import load_template
    from eragraph.bootstrap.aws_profile import AwsProfile
    from eragraph.services.uploads import BucketPipeline, UploadError

    pipeline = AwsProfile(env={"AWS_REGION": "us-east-1", "ERAGRAPH_DOCUMENT_PREFIX": "docs/",
                               "ERAGRAPH_DOCUMENT_SUFFIX": ".txt"}).uploads(None, None)
    assert pipeline.key_for("", "notes/a.txt") == "docs/notes/a.txt"
    with pytest.raises(UploadError, match="DocumentSuffix"):
        pipeline.key_for("", "notes/a.pdf")
    with pytest.raises(UploadError, match="named tenant") as refused:
        pipeline.key_for("acme", "notes/a.txt")
    assert refused.value.status == 409
    assert BucketPipeline().key_for("acme", "a.pdf") == "tenants/acme/a.pdf"  # the defaults: every key
    template = load_template(ROOT / "template.yaml")
    env = {**template["Globals"]["Function"]["Environment"]["Variables"],
           **template["Resources"]["QueryFunction"]["Properties"]["Environment"]["Variables"]}
    assert env["ERAGRAPH_DOCUMENT_PREFIX"] == {"Ref": "DocumentPrefix"}
    assert env["ERAGRAPH_DOCUMENT_SUFFIX"] == {"Ref": "DocumentSuffix"}
