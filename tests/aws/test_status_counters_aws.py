"""The DynamoDB status store's counters and pages, on moto: a page of GET /documents reads at
most limit + 1 items; the counts are one read; two writers of one status count it once; a
store written before the counters is counted by ``migrate_status_counters``, online,
resumable after a crash midway and idempotent; a warm GET /stats does not read the
hyperplanes again."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest

from contract.aws_factories import REGION, create_graph_table, fake_credentials
from eragraph.bench.counting import DynamoCounter
from eragraph.domain.doc_status import FAILED, INDEXED, RECEIVED, DocStatus
from eragraph.domain.lsh import draw_hyperplanes
from eragraph.services import doc_status

TABLE = "graph-status-counters"


@pytest.fixture
def store():
    fake_credentials()
    import boto3
    from moto import mock_aws

    from eragraph.adapters.aws.graph_dynamodb import DynamoGraphStore

    with mock_aws():
        create_graph_table(boto3.client("dynamodb", region_name=REGION), TABLE)
        yield DynamoGraphStore(TABLE, region=REGION, code_bits=5, tenant="acme")


def counter_on(store) -> DynamoCounter:
    counter = DynamoCounter()
    counter.attach(store._connection().client)
    return counter


def status(i: int, state: str = RECEIVED, folder: str = "in") -> DocStatus:
    extra = {"reason": "binary file"} if state == FAILED else {}
    return DocStatus(doc_id=f"d{i:04d}", source=f"s3://b/{folder}/{i:04d}.txt", state=state, **extra)


def engine_of(store):
    return SimpleNamespace(graph=store, settings=SimpleNamespace(n_planes=5))


def test_a_page_reads_its_items_and_one_more_and_the_counts_one_read(store):
    store.put_lsh(draw_hyperplanes("hash-128", 8, 5, seed=1))
    for i in range(250):
        store.put_doc_status(status(i, FAILED if i % 10 == 0 else RECEIVED))
    counter = counter_on(store)
    counts, views, cursor, more = doc_status.page(engine_of(store), "", 100, "")
    assert len(views) == 100 and more and cursor
    assert counts.to_json()["total"] == 250 and counts.counts[FAILED] == 25
    assert counter.items_read <= 101 + 1, counter.snapshot()  # the page and one more; the counter
    assert counter.requests == {"Query": 1, "BatchGetItem": 1}, counter.requests
    seen = [v["doc_id"] for v in views]
    while cursor:
        counter.reset()
        _, views, cursor, _ = doc_status.page(engine_of(store), "", 100, cursor)
        assert counter.items_read <= 102
        seen += [v["doc_id"] for v in views]
    assert seen == [f"d{i:04d}" for i in range(250)]
    counter.reset()
    counts, views, _, _ = doc_status.page(engine_of(store), "s3://b/in/", 10, "")
    assert counts.to_json()["total"] == 250 and len(views) == 10
    assert counter.requests == {"Query": 1, "BatchGetItem": 1} and counter.items_read <= 13


def test_concurrent_writers_of_one_status_count_it_once(store, atomic_requests):
    store.put_lsh(draw_hyperplanes("hash-128", 8, 5, seed=1))
    states = [RECEIVED, FAILED, INDEXED]
    barrier = threading.Barrier(6)

    def write(k: int) -> None:
        barrier.wait()
        for n in range(5):
            s = states[(k + n) % 3]
            store.put_doc_status(DocStatus(doc_id="one", source="s3://b/in/one.txt", state=s,
                                           reason="binary file" if s == FAILED else "", pending_shards=(1,)))

    store._connection().client  # made before the threads (botocore clients are not made thread-safely)
    threads = [threading.Thread(target=write, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = store.get_doc_status("one").state
    assert store.status_counts("") == {final: 1}
    assert store.status_counts("s3://b/in/") == {final: 1}


def old_write(store, s: DocStatus) -> None:
    """A status as the code before the counters wrote it: the listing copy and the record."""
    value = json.dumps(s.to_json())
    store.Item(PK="STATUSBY", SK=f"{s.source}\0{s.doc_id}", value=value).save()
    store.Item(PK=f"STATUS#{s.doc_id}", SK="STATUS", value=value).save()


def test_the_migration_counts_an_old_store_once_resuming_after_a_crash(store, monkeypatch):
    store.Item(PK="META", SK="LSH", value="{}").save()  # an old store: hyperplanes long stored
    old = [status(i, FAILED if i % 4 == 0 else RECEIVED, "old" if i % 2 else "in") for i in range(60)]
    for s in old:
        old_write(store, s)
    assert store.status_counts("") is None  # not counted yet: the counts are read from the records
    assert doc_status.counts(engine_of(store), "s3://b/").to_json()["total"] == 60

    real = type(store)._count_record
    calls = {"n": 0}

    def dies_after_25(self, doc_id):
        calls["n"] += 1
        if calls["n"] > 25:
            raise RuntimeError("killed")
        return real(self, doc_id)

    monkeypatch.setattr(type(store), "_count_record", dies_after_25)
    with pytest.raises(RuntimeError):
        store.migrate_status_counters(page=10)
    monkeypatch.setattr(type(store), "_count_record", real)
    assert store.status_counts("") is None  # still incomplete
    # meanwhile the new code writes: a new status, one old record replaced, one deleted
    store.put_doc_status(status(100, RECEIVED, "in"))
    store.put_doc_status(DocStatus(doc_id=old[1].doc_id, source=old[1].source, state=INDEXED, pending_shards=(2,)))
    store.delete_doc_status(old[3].doc_id)
    store.delete_doc_status(old[2].doc_id)  # one the first run counted
    resumed = store.migrate_status_counters(page=10)
    assert 0 < resumed < 60 - 20  # the first run's pages are not walked again
    assert store.migrate_status_counters() == 0  # done: idempotent
    now = store.doc_statuses("")
    want: dict[str, dict[str, int]] = {}
    for prefix in ("", "s3://b/", "s3://b/in/", "s3://b/old/"):
        row = {}
        for s in now:
            if s.source.startswith(prefix):
                key = "done" if s.state == INDEXED and not s.pending_shards else s.state
                row[key] = row.get(key, 0) + 1
        want[prefix] = row
        assert store.status_counts(prefix) == row, prefix
    assert sum(want[""].values()) == 60 + 1 - 2


def test_a_warm_stats_does_not_read_the_hyperplanes_again(store):
    store.put_lsh(draw_hyperplanes("hash-128", 8, 5, seed=1))
    fresh = type(store)(TABLE, region=REGION, code_bits=5, tenant="acme")
    counter = counter_on(fresh)
    assert fresh.known_lsh() == store.get_lsh()
    reads = counter.requests.get("GetItem", 0)
    assert reads == 1
    fresh.known_lsh()
    assert counter.requests.get("GetItem", 0) == reads  # kept: the hyperplanes never change
    fresh.get_lsh()  # but a read path that must know the tenant is still there reads them
    assert counter.requests.get("GetItem", 0) == reads + 1
