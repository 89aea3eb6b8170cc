"""A tenant's daily ingestion quota (ERAGRAPH_INGEST_DAILY_BYTES): a submission that would go past
it is refused whole before anything is stored (429 on POST /documents), the quota is the
tenant's own, and it starts again the next day (UTC)."""

from __future__ import annotations

import pytest

from eragraph.bootstrap import build_engine, document_pipeline
from eragraph.config import settings_from_env
from eragraph.services import ingest_quota, uploads

ENV = {"ERAGRAPH_EMBEDDER": "hash", "ERAGRAPH_SUMMARIZER": "extractive", "ERAGRAPH_GENERATOR": "none",
       "ERAGRAPH_INGEST_DAILY_BYTES": "100"}
TEXT = b"The ferry log, " * 4  # 60 bytes


@pytest.fixture
def served():
    engine = build_engine("memory", settings=settings_from_env(ENV))
    pipeline = document_pipeline("memory", None, engine.settings, lambda tenant: engine)
    try:
        yield engine, pipeline
    finally:
        pipeline.close()


def test_a_submission_past_the_daily_quota_is_refused_whole(served):
    engine, pipeline = served
    uploads.submit(engine, pipeline, [uploads.Upload(source="a.txt", data=TEXT)])
    with pytest.raises(uploads.UploadError, match="daily ingestion quota is 100 bytes") as info:
        uploads.submit(engine, pipeline, [uploads.Upload(source="b.txt", data=b"x" * 10),
                                          uploads.Upload(source="c.txt", data=TEXT)])
    assert info.value.status == 429
    assert [s.source for s in engine.graph.doc_statuses("")] == ["a.txt"]  # nothing of the refused request
    uploads.submit(engine, pipeline, [uploads.Upload(source="d.txt", data=b"y" * 40)])  # to the byte: 100


def test_the_quota_starts_again_the_next_day_and_zero_is_none(served):
    engine, _ = served
    day = 1_800_000_000.0
    ingest_quota.charge(engine, 100, now=day)
    with pytest.raises(ingest_quota.QuotaExceeded):
        ingest_quota.charge(engine, 1, now=day)
    ingest_quota.charge(engine, 100, now=day + 86_400)
    off = build_engine("memory", settings=settings_from_env({**ENV, "ERAGRAPH_INGEST_DAILY_BYTES": "0"}))
    ingest_quota.charge(off, 10 ** 12)
    assert off.graph.get_meta(ingest_quota.KEY) is None


def test_the_bedrock_agent_route_answers_service_quota_exceeded(served):
    import json

    pytest.importorskip("aws_lambda_powertools")
    from eragraph.domain.knowledge_base import knowledge_base_id
    from eragraph.entrypoints.http.api import make_app
    from eragraph.services import kb_sources

    engine, pipeline = served
    ds = kb_sources.create(engine, knowledge_base_id(""), {"name": "notes", "dataSourceConfiguration": {"type": "CUSTOM"}})
    app = make_app(lambda _t: engine, tenant_of=lambda _e: "", uploads=pipeline)
    path = f"/knowledgebases/{knowledge_base_id('')}/datasources/{ds['dataSourceId']}/documents"
    body = {"documents": [{"content": {"dataSourceType": "CUSTOM", "custom": {
        "customDocumentIdentifier": {"id": "big"}, "sourceType": "IN_LINE",
        "inlineContent": {"type": "TEXT", "textContent": {"data": "x" * 200}}}}}]}
    event = {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
             "headers": {"content-type": "application/json"}, "body": json.dumps(body), "isBase64Encoded": False,
             "requestContext": {"http": {"method": "PUT", "path": path}, "requestId": "r-1", "stage": "$default"}}
    out = app.resolve(event, None)
    headers = {k.lower(): v for k, v in (out.get("headers") or {}).items()}
    assert headers.get("x-amzn-errortype") == "ServiceQuotaExceededException", out
    assert "daily ingestion quota" in json.loads(out["body"])["message"]


def test_simultaneous_charges_on_sqlite_never_pass_the_quota_together(tmp_path):
    """Eight writers at once, each through its own connection to one SQLite store, each asking
    for 30 bytes of a 100-byte quota: exactly three pass and the counter says 90 (a read then a
    write let several pass on the same reading)."""
    import threading

    settings = settings_from_env(ENV)
    build_engine("local", tmp_path / "kb", settings=settings).graph.put_meta("settings", {})
    engines = [build_engine("local", tmp_path / "kb", settings=settings) for _ in range(8)]
    barrier, passed, refused = threading.Barrier(len(engines)), [], []

    def writer(engine):
        barrier.wait()
        try:
            ingest_quota.charge(engine, 30)
            passed.append(1)
        except ingest_quota.QuotaExceeded:
            refused.append(1)

    threads = [threading.Thread(target=writer, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert (len(passed), len(refused)) == (3, 5)
    assert engines[0].graph.get_meta(ingest_quota.KEY)["total"] == 90


class _Died(BaseException):
    """The function's process ending mid-event (no fault recorded: nothing runs after it)."""


def test_an_objects_charge_is_once_per_version_on_the_local_store(tmp_path, monkeypatch):
    """An object put straight into the bucket is charged by its event, marked with its version
    in the same write: a retry after the function died between the charge and ``received`` is
    not charged again, and a second put of the key while the first is in flight (``received``)
    is charged for itself."""
    import logging

    from eragraph.domain.object_changes import ObjectChange
    from eragraph.services import object_events

    settings = settings_from_env({**ENV, "ERAGRAPH_INGEST_DAILY_BYTES": "1000"})
    engine = build_engine("local", tmp_path / "kb", settings=settings)
    engine.blobs.put("docs/a.txt", TEXT)
    events = object_events.ObjectEvents(engines=None, log=logging.getLogger("test"))

    def put(sequencer: str):
        return ObjectChange(bucket="docs", key="docs/a.txt", removed=False, sequencer=sequencer, shape="s3",
                            size=len(TEXT))

    def die(*_a, **_k):
        raise _Died()

    def total() -> int:
        return engine.graph.get_meta(ingest_quota.KEY)["total"]

    with monkeypatch.context() as m:  # dies after the charge, before ``received``
        m.setattr(object_events.doc_status, "record_received", die)
        with pytest.raises(_Died):
            events.apply_change(engine, put("0A01"), object_events.new_counts())
    assert total() == len(TEXT)
    counts = object_events.new_counts()
    events.apply_change(engine, put("0A01"), counts)  # its retry
    assert counts["ingested"] == 1 and total() == len(TEXT)

    with monkeypatch.context() as m:  # a second put, in flight (``received``) when a third's event comes
        m.setattr(object_events, "read_document", die)
        with pytest.raises(_Died):
            events.apply_change(engine, put("0A02"), object_events.new_counts())
    assert engine.graph.get_doc_status(engine.graph.list_documents()[0].doc_id).state == "received"
    events.apply_change(engine, put("0A03"), object_events.new_counts())
    assert total() == 3 * len(TEXT)
