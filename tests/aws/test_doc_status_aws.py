"""Document statuses through the ingest handler (real S3 event JSON in SQS batches, on moto):
a good object is summaries-pending, then done once the summarize queue is drained; a binary
and an empty object are failed with their reason; a fault that SQS retries (and would leave in
the DLQ) is a failed status with its reason until a later delivery succeeds."""

from __future__ import annotations

from aws_helpers import BUCKET, load_handler
from test_ingest_events import TEXT, s3_put, sqs_batch

from eragraph.domain.ids import document_id_for_source
from eragraph.domain.refusals import is_vocabulary
from eragraph.services import doc_status
from eragraph.services.resummarize import drain


def status(engine, key: str) -> dict | None:
    return doc_status.read(engine, document_id_for_source(f"s3://{BUCKET}/{key}"))


def test_good_binary_and_empty_objects_then_the_drain(aws_engine, lambda_context):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    objects = {"in/good.txt": TEXT.encode(), "in/photo.txt": b"\x89PNG\r\n\x1a\n" + bytes(64), "in/empty.txt": b""}
    for key, data in objects.items():
        engine.blobs.put(key, data)
    out = ingest.handler(sqs_batch([s3_put(k, f"0A1B2C3D4E5F6789{n:02d}") for n, k in enumerate(objects)]),
                         lambda_context)
    assert out == {"batchItemFailures": []}
    assert status(engine, "in/good.txt")["state"] == "summaries_pending"
    photo, empty = status(engine, "in/photo.txt"), status(engine, "in/empty.txt")
    assert photo["state"] == "failed" and "a PNG image" in photo["reason"]
    assert empty["state"] == "failed" and "empty" in empty["reason"]
    counts, _ = doc_status.listing(engine, f"s3://{BUCKET}/in/")
    assert (counts.counts["summaries_pending"], counts.counts["failed"]) == (1, 2)
    drain(engine)
    assert status(engine, "in/good.txt")["state"] == "done"
    assert doc_status.listing(engine, f"s3://{BUCKET}/other/")[0].to_json()["total"] == 0


def test_a_retried_fault_is_a_failed_status_until_a_delivery_succeeds(aws_engine, lambda_context, monkeypatch):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    engine.blobs.put("in/flaky.txt", TEXT.encode())
    engine.blobs.put("in/steady.txt", b"A short steady note about the harbour of Gdynia.")
    batch = sqs_batch([s3_put("in/flaky.txt"), s3_put("in/steady.txt", "0A1B2C3D4E5F678902")])
    embed = engine.embedder.embed

    def down(texts):  # the flaky object's text fails to embed (a batch of one record alone fails whole)
        if any("Lighthouse" in t for t in texts):
            raise TimeoutError("embedding endpoint arn:aws:sagemaker:us-east-1:123456789012:endpoint/e timed out")
        return embed(texts)

    with monkeypatch.context() as m:
        m.setattr(engine.embedder, "embed", down)
        out = ingest.handler(batch, lambda_context)
    assert out == {"batchItemFailures": [{"itemIdentifier": "msg-0"}]}
    failed = status(engine, "in/flaky.txt")
    assert failed["state"] == "failed" and "dead-letter queue" in failed["reason"]
    # in words: never the exception's text (an ARN, an account id) nor its type; that is the log's
    assert "123456789012" not in failed["reason"] and "TimeoutError" not in failed["reason"]
    assert "internal error" in failed["reason"] and is_vocabulary(failed["reason"])
    assert ingest.handler(batch, lambda_context) == {"batchItemFailures": []}  # the retry
    assert status(engine, "in/flaky.txt")["state"] == "summaries_pending"


def test_an_invocation_killed_mid_ingest_leaves_received(aws_engine, lambda_context, monkeypatch):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    engine.blobs.put("in/slow.txt", TEXT.encode())

    def killed(*args, **kwargs):  # the Lambda's timeout: no except clause runs
        raise SystemExit("timed out")

    monkeypatch.setattr("eragraph.services.ingest.ingest", killed)
    try:
        ingest.handler(sqs_batch([s3_put("in/slow.txt")]), lambda_context)
    except SystemExit:
        pass
    received = status(engine, "in/slow.txt")
    assert received["state"] == "received" and received["received_at"] > 0
