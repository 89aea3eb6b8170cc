"""The daily ingestion quota on moto: the counter is one conditional UpdateItem (ADD within the
limit), so simultaneous charges never pass it together; and an object put straight into the
documents bucket (not through the API) is charged by the ingest function with the size its
event gives: past the quota it is not ingested, its status says why in words, and the object
stays in the bucket. A document submitted through the API (charged there) is not charged again."""

from __future__ import annotations

import threading
from urllib.parse import quote_plus

from aws_helpers import BUCKET, TEST_SETTINGS, event, load_handler

from eragraph.config import settings_from_env
from eragraph.domain.ids import document_id_for_source
from eragraph.services import doc_status, ingest_quota

TEXT = ("Lighthouse keepers on the northern cape logged every passing ship in a leather ledger. "
        "The lighthouse is called Farbeacon and the ledger is named Tidewright. ")


def _quota(aws_engine, limit: int):
    """The handlers' engines with a quota of ``limit`` bytes a day."""
    from eragraph.bootstrap.aws import LAMBDA_ENGINE, build_aws_engine

    _, env, fake = aws_engine
    settings = settings_from_env({**TEST_SETTINGS, "ERAGRAPH_INGEST_DAILY_BYTES": str(limit)})
    engine = build_aws_engine(settings, environ=env, opensearch_client=fake, refresh=True)
    LAMBDA_ENGINE.set(engine)
    LAMBDA_ENGINE.set_builder(lambda tenant: build_aws_engine(settings, environ=env, opensearch_client=fake,
                                                              refresh=True, tenant=tenant))
    return engine


def _put_event(key: str, size: int, sequencer: str) -> dict:
    body = event("s3_put.json")
    obj = body["Records"][0]["s3"]["object"]
    obj["key"], obj["size"], obj["sequencer"] = quote_plus(key), size, sequencer
    return body


def test_simultaneous_charges_never_pass_the_quota_together(aws_engine, atomic_requests):
    engine = _quota(aws_engine, 100)
    barrier, passed, refused = threading.Barrier(8), [], []

    def writer():
        barrier.wait()
        try:
            ingest_quota.charge(engine, 30)
            passed.append(1)
        except ingest_quota.QuotaExceeded:
            refused.append(1)

    threads = [threading.Thread(target=writer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert (len(passed), len(refused)) == (3, 5)
    assert engine.graph.get_meta(ingest_quota.KEY)["total"] == 90
    # the next day starts again, to the byte
    ingest_quota.charge(engine, 100, now=1_900_000_000.0)
    assert engine.graph.get_meta(ingest_quota.KEY) == {"period": "2030-03-17", "total": 100}


def test_an_object_put_straight_into_the_bucket_is_charged_and_refused_past_the_quota(aws_engine, lambda_context):
    engine = _quota(aws_engine, 3 * len(TEXT))
    ingest = load_handler("ingest")
    first, second = "docs/first.txt", "docs/second.txt"
    engine.blobs.put(first, (TEXT * 2).encode())
    out = ingest.handler(_put_event(first, 2 * len(TEXT), "0A01"), lambda_context)
    assert out["ingested"] == 1
    assert engine.graph.get_meta(ingest_quota.KEY)["total"] == 2 * len(TEXT)

    engine.blobs.put(second, (TEXT * 2).encode())  # one more copy than the day has left
    out = ingest.handler(_put_event(second, 2 * len(TEXT), "0A02"), lambda_context)
    assert out["rejected"] == 1 and out["ingested"] == 0
    source = f"s3://{BUCKET}/{second}"
    status = engine.graph.get_doc_status(document_id_for_source(source))
    assert status.state == "failed" and "daily ingestion quota" in status.reason and "object is kept" in status.reason
    assert engine.graph.get_document(document_id_for_source(source)) is None  # nothing half-done
    assert engine.blobs.get(second) == (TEXT * 2).encode()  # the object stays
    assert engine.graph.get_meta(ingest_quota.KEY)["total"] == 2 * len(TEXT)  # the refused one not counted

    # submitted through the API (charged there: the status is received): not charged again
    third = "docs/third.txt"
    received = doc_status.record_received(engine, document_id_for_source(f"s3://{BUCKET}/{third}"),
                                          f"s3://{BUCKET}/{third}", count=False)
    ingest_quota.submitted(engine, received.source, received.received_at)  # as services.uploads.submit notes it
    engine.blobs.put(third, (TEXT * 2).encode())
    out = ingest.handler(_put_event(third, 2 * len(TEXT), "0A03"), lambda_context)
    assert out["ingested"] == 1
    assert engine.graph.get_meta(ingest_quota.KEY)["total"] == 2 * len(TEXT)


class _Died(BaseException):
    """The function's process ending mid-event (no fault recorded: nothing runs after it)."""


def test_an_objects_charge_is_once_per_version(aws_engine, lambda_context, monkeypatch):
    """The charge of an object put straight into the bucket is marked with its sequencer in the
    same TransactWriteItems: a retried event after the function died between the charge and
    ``received`` is not charged again; a second put of the key while the first is in flight is
    charged for itself."""
    from eragraph.services import object_events

    engine = _quota(aws_engine, 10 * len(TEXT))
    ingest = load_handler("ingest")
    key, data = "docs/twice.txt", (TEXT * 2).encode()
    engine.blobs.put(key, data)

    def die(*_a, **_k):
        raise _Died()

    def total() -> int:
        return engine.graph.get_meta(ingest_quota.KEY)["total"]

    with monkeypatch.context() as m:  # dies after the charge, before ``received``
        m.setattr(object_events.doc_status, "record_received", die)
        try:
            ingest.handler(_put_event(key, len(data), "0B01"), lambda_context)
        except _Died:
            pass
    assert total() == len(data)
    assert ingest.handler(_put_event(key, len(data), "0B01"), lambda_context)["ingested"] == 1  # its retry
    assert total() == len(data)

    with monkeypatch.context() as m:  # a second put in flight (``received``) when a third's event comes
        m.setattr(object_events, "read_document", die)
        try:
            ingest.handler(_put_event(key, len(data), "0B02"), lambda_context)
        except _Died:
            pass
    source = f"s3://{BUCKET}/{key}"
    assert engine.graph.get_doc_status(document_id_for_source(source)).state == "received"
    ingest.handler(_put_event(key, len(data), "0B03"), lambda_context)
    assert total() == 3 * len(data)
