"""The DynamoDB store's live-document counter, per tenant: kept where documents are written
(put, replace, tombstone, delete, conditional writes), read by GET /stats with one GetItem and
no scan, and recounted by the reindex."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from contract.aws_factories import REGION, create_graph_table, fake_credentials
from eragraph.domain.model import DELETED, ConflictError, Document
from eragraph.services import stats

TABLE = "graph-counter"


@pytest.fixture
def stores():
    fake_credentials()
    import boto3
    from moto import mock_aws

    from eragraph.adapters.aws.graph_dynamodb import DynamoGraphStore

    with mock_aws():
        create_graph_table(boto3.client("dynamodb", region_name=REGION), TABLE)
        yield {t: DynamoGraphStore(TABLE, region=REGION, code_bits=5, tenant=t) for t in ("", "acme")}


def doc(doc_id: str, content_hash: str = "h1", status: str = "indexed") -> Document:
    return Document(doc_id=doc_id, source=f"s3://b/{doc_id}", content_hash=content_hash, chunk_ids=("c1",),
                    status=status)


def no_scan(store, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a scan on the query path")

    monkeypatch.setattr(store.Item, "scan", refuse)


def test_the_counter_follows_every_document_write(stores, monkeypatch):
    default, acme = stores[""], stores["acme"]
    assert default.document_count() == 0  # no counter, no chunks: nothing there
    steps = [
        lambda: default.put_document(doc("a")),
        lambda: default.put_document(doc("b")),
        lambda: default.put_document(doc("a", "h2")),  # a replacement: no change
        lambda: default.put_document(doc("b", status=DELETED)),  # a tombstone: one fewer
        lambda: default.put_document(doc("b", "h3")),  # back from the tombstone
        lambda: default.put_document(doc("c"), expected=None),
        lambda: default.put_document(doc("c", status=DELETED), expected=doc("c")),
        lambda: default.put_document(doc("c", "h4"), expected=doc("c", status=DELETED)),
        lambda: default.delete_document("a"),
        lambda: default.delete_document("a"),  # absent: no change
        lambda: acme.put_document(doc("a")),  # another tenant's counter
    ]
    for step in steps:
        step()
        for store in stores.values():
            assert store.document_count() in (None, len(store.list_documents())), step
    with pytest.raises(ConflictError):
        default.put_document(doc("c", "h5"), expected=doc("c", "stale"))
    assert default.document_count() == 2 and acme.document_count() == 1
    no_scan(default, monkeypatch)
    assert stats.document_count(SimpleNamespace(graph=default)) == 2


def test_the_reindex_recounts(stores):
    from eragraph.services.reindex import audit_documents

    store = stores["acme"]
    store.put_document(doc("a"))
    store.put_document(doc("b"))
    store.repair_document_count(7)  # drift (a crash between the write and the counter)
    assert store.document_count() == 7
    report: dict = {}
    with pytest.raises(AttributeError):  # the audit goes on to the chunks, which this view lacks
        audit_documents(SimpleNamespace(graph=SimpleNamespace(
            documents_page=store.documents_page, get_nodes=lambda ids: {i: None for i in ids},
            repair_document_count=store.repair_document_count)), report)
    assert report["document_count_correction"] == -5
    assert store.document_count() == 2


def test_a_store_from_before_the_counter_is_unknown_until_the_reindex(stores):
    store = stores[""]
    store.Item(PK="COUNT", SK="LAYER#0", version=3).save()  # chunks written by an older version
    assert store.document_count() is None
    store.repair_document_count(1)
    assert store.document_count() == 1
