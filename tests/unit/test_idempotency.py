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
