"""clientToken idempotency (services.idempotency), on the store's meta as every profile keeps it:
a retry answers what the first request made, the same token with another request is Bedrock's
ConflictException, a record lapses after its TTL, and no token means no memory."""

from __future__ import annotations

import pytest

from eragraph.bootstrap import build_engine
from eragraph.config import settings_from_env
from eragraph.domain.kb_sync import SyncError
from eragraph.services.idempotency import KEY, TOKEN_TTL_SECONDS, once


@pytest.fixture
def meta():
    return build_engine("memory", None, settings_from_env(embedder="hash")).graph


def counted():
    runs = []

    def make():
        runs.append(1)
        return {"made": len(runs)}, len(runs)
    return runs, make


def test_a_retry_with_the_same_request_answers_again_and_makes_nothing(meta):
    runs, make = counted()
    request = {"documents": [{"id": "a"}], "clientToken": "t1"}
    first = once(meta, "Ingest", "t1", request, make, lambda n: {"made": n}, now=100.0)
    again = once(meta, "Ingest", "t1", {"clientToken": "t1", "documents": [{"id": "a"}]}, make,
                 lambda n: {"made": n}, now=200.0)
    assert first == again == {"made": 1} and len(runs) == 1


def test_the_same_token_with_another_request_is_a_conflict_and_makes_nothing(meta):
    runs, make = counted()
    once(meta, "Ingest", "t1", {"documents": [{"id": "a"}]}, make, lambda n: n, now=100.0)
    with pytest.raises(SyncError) as refused:
        once(meta, "Ingest", "t1", {"documents": [{"id": "b"}]}, make, lambda n: n, now=101.0)
    assert refused.value.code == "ConflictException" and "another request" in str(refused.value)
    assert len(runs) == 1
    assert once(meta, "Delete", "t1", {"documents": [{"id": "b"}]}, make, lambda n: n, now=102.0) == {"made": 2}


def test_a_record_lapses_after_its_ttl(meta):
    runs, make = counted()
    once(meta, "Ingest", "t1", {"x": 1}, make, lambda n: n, now=100.0)
    assert meta.get_meta(f"{KEY}Ingest:t1")["expires"] == 100.0 + TOKEN_TTL_SECONDS
    later = 100.0 + TOKEN_TTL_SECONDS + 1
    assert once(meta, "Ingest", "t1", {"x": 2}, make, lambda n: n, now=later) == {"made": 2}  # no conflict: lapsed
    assert len(runs) == 2


def test_without_a_token_every_request_runs(meta):
    runs, make = counted()
    once(meta, "Ingest", None, {"x": 1}, make, lambda n: n)
    once(meta, "Ingest", "", {"x": 1}, make, lambda n: n)
    assert len(runs) == 2 and meta.meta_keys(KEY) == []


def test_a_record_written_before_fingerprints_is_replayed(meta):
    runs, make = counted()
    meta.put_meta(f"{KEY}Ingest:old", {"documentDetails": []})
    assert once(meta, "Ingest", "old", {"x": 1}, make, lambda v: v) == {"documentDetails": []} and runs == []


def test_local_jobs_and_client_tokens_lapse_and_are_swept(tmp_path, monkeypatch):
    """The local store forgets ingestion jobs and clientToken records as DynamoDB's TTL does
    (domain.expiry): past its life a record is neither read nor listed, and a later write of
    such a key deletes lapsed ones (at most SWEEP a write); other meta keys never lapse."""
    import time as clock

    from eragraph.adapters.local import meta_sqlite
    from eragraph.bootstrap import build_engine
    from eragraph.config import settings_from_env
    from eragraph.domain.expiry import DAY, SWEEP

    graph = build_engine("local", tmp_path / "kb", settings=settings_from_env(
        {"ERAGRAPH_EMBEDDER": "hash", "ERAGRAPH_SUMMARIZER": "extractive", "ERAGRAPH_GENERATOR": "none"})).graph
    now = [clock.time()]
    monkeypatch.setattr(meta_sqlite, "time", type("Clock", (), {"time": staticmethod(lambda: now[0])}))
    for n in range(SWEEP + 6):
        graph.put_meta(f"kb-token:StartIngestionJob:t-{n:03d}", {"value": n})
    graph.put_meta("kb-job:DS:J1", {"status": "COMPLETE"})
    graph.put_meta("kb-source:DS", {"name": "notes"})
    now[0] += DAY + 10  # the tokens have lapsed, the job (90 days) has not
    assert graph.get_meta("kb-token:StartIngestionJob:t-000") is None
    assert graph.meta_keys("kb-token:") == []
    assert graph.get_meta("kb-job:DS:J1") == {"status": "COMPLETE"} and graph.meta_keys("kb-job:") == ["kb-job:DS:J1"]

    def stored() -> int:
        return graph._query("SELECT count(*) FROM meta WHERE key LIKE 'kb-token:%'")[0][0]

    assert stored() == SWEEP + 6  # lapsed, not yet swept
    graph.put_meta("kb-token:StartIngestionJob:fresh", {"value": "new"})
    assert stored() == 6 + 1  # SWEEP of them deleted by the write
    graph.put_meta("kb-token:StartIngestionJob:fresher", {"value": "new"})
    assert stored() == 2 and graph.meta_keys("kb-token:") == ["kb-token:StartIngestionJob:fresh",
                                                              "kb-token:StartIngestionJob:fresher"]
    now[0] += 90 * DAY
    graph.put_meta("kb-token:StartIngestionJob:last", {"value": "new"})
    assert graph.get_meta("kb-job:DS:J1") is None and graph.get_meta("kb-source:DS") == {"name": "notes"}
