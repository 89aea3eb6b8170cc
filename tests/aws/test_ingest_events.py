"""The ingest handler on every shape an S3 event reaches it in (tests/events: S3 notifications,
an SNS envelope, EventBridge Object Created / Object Deleted), delivered directly or in SQS
batches, on moto. Each batch is [good, X, good]: the good records are ingested whatever X is,
an X the function cannot use is a batch-item failure with one log line naming the reason, and
a key that no longer exists is a logged skip."""

from __future__ import annotations

import json
from urllib.parse import quote_plus

import pytest
from aws_helpers import BUCKET, event, load_handler

TEXT = ("Lighthouse keepers on the northern cape logged every passing ship in a leather ledger. "
        "The lighthouse is called Farbeacon and the ledger is named Tidewright. ") * 3


def s3_put(key: str, sequencer: str = "0A1B2C3D4E5F678901", raw_key: str | None = None) -> dict:
    body = event("s3_put.json")
    obj = body["Records"][0]["s3"]["object"]
    obj["key"], obj["sequencer"] = raw_key if raw_key is not None else quote_plus(key), sequencer
    return body


def sqs_batch(bodies: list) -> dict:
    """An SQS event of one record per body (a dict is sent as JSON, a str as it is)."""
    template = event("sqs_ingest_batch.json")["Records"][1]
    records = []
    for n, body in enumerate(bodies):
        record = json.loads(json.dumps(template))
        record["messageId"] = f"msg-{n}"
        record["body"] = body if isinstance(body, str) else json.dumps(body)
        records.append(record)
    return {"Records": records}


def sources(engine) -> set[str]:
    return {d.source for d in engine.graph.list_documents()}


def reasons(caplog) -> list[str]:
    return [r.reason for r in caplog.records if getattr(r, "reason", None)]


def _with(body: dict, path: tuple, value) -> dict:
    node = body
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return body


# X -> (its body, the key it names that exists in the bucket or None, the failure reason or
# None when X is used, the reason logged for a skip)
CASES = {
    "sns-envelope": (lambda: event("sns_s3_put.json"), "docs/sns/Keeper's notes.txt", None, None),
    "eventbridge-object-created": (lambda: event("eventbridge_object_created.json"), "docs/Harbour Log #1.txt", None, None),
    "s3-event-in-sqs": (lambda: s3_put("docs/plain c++ notes.txt"), "docs/plain c++ notes.txt", None, None),
    "test-event": (lambda: event("s3_test_event.json"), None, None, None),
    "vanished-key": (lambda: s3_put("docs/deleted since.txt"), None, None, "object-vanished"),
    "unknown-json-shape": (lambda: event("unknown_shape.json"), None, "unknown-shape", None),
    "json-list": (lambda: [event("s3_put.json")], None, "unknown-shape", None),
    "not-json": (lambda: "{this is not json", None, "not-json", None),
    "bad-percent-encoding-not-utf8": (lambda: event("s3_put_bad_key_encoding.json"), None, "bad-key-encoding", None),
    "bad-percent-encoding-not-hex": (lambda: s3_put("", raw_key="docs/100%zz+done.txt"), None, "bad-key-encoding", None),
    "s3-event-of-another-type": (lambda: _with(s3_put("docs/tagged.txt"), ("Records", 0, "eventName"), "ObjectTagging:Put"),
                                 None, "unsupported-event", None),
    "eventbridge-other-detail-type": (lambda: _with(event("eventbridge_object_created.json"), ("detail-type",),
                                                    "Object Restore Completed"), None, "unsupported-event", None),
    "eventbridge-without-key": (lambda: _with(event("eventbridge_object_created.json"), ("detail", "object"), {}),
                                None, "malformed-record", None),
    "another-bucket": (lambda: _with(s3_put("docs/theirs.txt"), ("Records", 0, "s3", "bucket", "name"), "someone-elses-bucket"),
                       None, "other-bucket", None),
    "sns-message-not-json": (lambda: _with(event("sns_s3_put.json"), ("Message",), "hello"), None, "not-json", None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_good_x_good_batch(aws_engine, lambda_context, caplog, name):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    make_x, x_key, failure, skip = CASES[name]
    for key in ("docs/good one.txt", "docs/good two.txt") + ((x_key,) if x_key else ()):
        engine.blobs.put(key, TEXT.encode())
    batch = sqs_batch([s3_put("docs/good one.txt"), make_x(), s3_put("docs/good two.txt", "0A1B2C3D4E5F678903")])
    caplog.clear()
    out = ingest.handler(batch, lambda_context)
    expected = {f"s3://{BUCKET}/docs/good one.txt", f"s3://{BUCKET}/docs/good two.txt"}
    if x_key:
        expected.add(f"s3://{BUCKET}/{x_key}")
    assert sources(engine) == expected
    if failure:
        assert out == {"batchItemFailures": [{"itemIdentifier": "msg-1"}]}
        assert reasons(caplog) == [failure]  # one log line, naming the reason
        [line] = [r for r in caplog.records if getattr(r, "reason", None)]
        assert line.levelname == "ERROR" and line.message_id == "msg-1" and line.detail
    else:
        assert out == {"batchItemFailures": []}
        assert reasons(caplog) == ([skip] if skip else [])


def test_eventbridge_delete_removes_and_an_older_create_is_stale(aws_engine, lambda_context):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    engine.blobs.put("docs/Harbour Log #1.txt", TEXT.encode())
    created, deleted = event("eventbridge_object_created.json"), event("eventbridge_object_deleted.json")
    assert ingest.handler(sqs_batch([created]), lambda_context) == {"batchItemFailures": []}
    assert sources(engine) == {f"s3://{BUCKET}/docs/Harbour Log #1.txt"}
    assert ingest.handler(sqs_batch([deleted, created]), lambda_context) == {"batchItemFailures": []}
    assert sources(engine) == set() and engine.vectors.count() == 0  # the create is older than the delete


def test_direct_invocations(aws_engine, lambda_context, caplog):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    engine.blobs.put("docs/Harbour Log #1.txt", TEXT.encode())
    out = ingest.handler(event("eventbridge_object_created.json"), lambda_context)  # an EventBridge rule target
    assert out["ingested"] == 1 and out["unusable"] == 0
    out = ingest.handler(s3_put("docs/never uploaded.txt"), lambda_context)  # S3 -> Lambda, object gone
    assert out["vanished"] == 1 and out["ingested"] == 0
    caplog.clear()
    for bad in (event("s3_put_bad_key_encoding.json"), event("unknown_shape.json"), {"Records": [{"eventSource": "aws:sns"}]}):
        with pytest.raises(ingest.UnusableEvent):
            ingest.handler(bad, lambda_context)  # the async invocation fails: retries, then on-failure
    assert reasons(caplog) == ["bad-key-encoding", "unknown-shape", "unknown-shape"]
    assert sources(engine) == {f"s3://{BUCKET}/docs/Harbour Log #1.txt"}


@pytest.mark.parametrize("raw,decoded", [
    ("docs/Field+Notes+%28draft%29.txt", "docs/Field Notes (draft).txt"),
    ("docs/caf%C3%A9+%E2%82%AC.txt", "docs/café €.txt"),
    ("docs/100%25.txt", "docs/100%.txt"),
    ("docs/a%2Bb.txt", "docs/a+b.txt"),
])
def test_decode_key_accepts_what_s3_writes(raw, decoded):
    assert load_handler("ingest").decode_key(raw) == decoded


@pytest.mark.parametrize("raw", ["docs/caf%E9.txt", "docs/100%.txt", "docs/%zz.txt", "docs/%C3.txt", "", None, 7])
def test_decode_key_refuses_what_s3_never_writes(raw):
    ingest = load_handler("ingest")
    with pytest.raises(ingest.UnusableRecord):
        ingest.decode_key(raw)


def test_s3_adapter_maps_a_missing_key_and_keeps_access_denied():
    import boto3
    from botocore.exceptions import ClientError
    from botocore.stub import Stubber

    from eragraph.adapters.aws.blob_s3 import S3BlobStore

    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    store = S3BlobStore("bucket", client=client)
    with Stubber(client) as stub:
        stub.add_client_error("get_object", service_error_code="NoSuchKey", http_status_code=404)
        stub.add_client_error("head_object", service_error_code="404", http_status_code=404)
        stub.add_client_error("get_object", service_error_code="AccessDenied", http_status_code=403)
        stub.add_client_error("get_object", service_error_code="NoSuchBucket", http_status_code=404)
        with pytest.raises(KeyError):
            store.get("docs/gone.txt")
        with pytest.raises(KeyError):
            store.size("docs/gone.txt")
        # without s3:ListBucket S3 answers a missing key with 403: that is no proof the object is
        # gone (it may be a permission fault), so it stays an error; the role has ListBucket
        with pytest.raises(ClientError):
            store.get("docs/gone.txt")
        with pytest.raises(ClientError):
            store.get("docs/gone.txt")
