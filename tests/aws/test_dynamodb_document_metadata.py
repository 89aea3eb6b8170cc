"""A document's metadata in the DynamoDB graph store (under moto): its own ``metadata`` attribute on
the document item, a JSON string that reads back exactly as written, through every document read
and the conditional writes, and counted against the 400 KB item limit."""

from __future__ import annotations

import json

import pytest

from contract.aws_factories import REGION, create_graph_table, fake_credentials
from eragraph.domain.filters import MAX_KEYS, MAX_STRING, check_metadata
from eragraph.domain.model import ConflictError, Document, ItemTooLargeError

TABLE = "graph-metadata"
METADATA = check_metadata({"year": 2020, "ratio": 2020.0, "score": -1.25, "draft": False, "lang": "日本語",
                           "tags": ["a", "", "b"], "empty": [], "blank": ""})


@pytest.fixture
def store():
    fake_credentials()
    import boto3
    from moto import mock_aws

    from eragraph.adapters.aws.graph_dynamodb import DynamoGraphStore

    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        create_graph_table(client, TABLE)
        yield DynamoGraphStore(TABLE, region=REGION, code_bits=5), client


def doc(doc_id: str, metadata: dict, content_hash: str = "h1", source: str = "s3://b/a.md") -> Document:
    return Document(doc_id=doc_id, source=source, content_hash=content_hash, title="A", chunk_ids=("c1",),
                    metadata=metadata)


def test_metadata_round_trips_through_every_document_read(store):
    graph, client = store
    graph.put_document(doc("d1", METADATA))
    graph.put_document(doc("d2", {}))
    for read in (graph.get_document("d1"), graph.find_documents("s3://b/a.md")[0], graph.list_documents()[0]):
        assert read.metadata == METADATA
        assert [type(v) for v in read.metadata.values()] == [type(v) for v in METADATA.values()]  # 2020.0 stays a float
    assert graph.get_document("d2").metadata == {}
    items = {i["PK"]["S"]: i for i in client.scan(TableName=TABLE)["Items"] if i["SK"]["S"] == "DOC"}
    assert json.loads(items["DOC#d1"]["metadata"]["S"]) == METADATA  # its own attribute, a JSON string
    assert "日本語" in items["DOC#d1"]["metadata"]["S"]  # stored as UTF-8, not \\u escapes
    assert "metadata" not in items["DOC#d2"]


def test_conditional_writes_carry_and_replace_the_metadata(store):
    graph, _ = store
    first = doc("d1", {"lang": "en"})
    graph.put_document(first, expected=None)
    with pytest.raises(ConflictError):
        graph.put_document(doc("d1", {"lang": "de"}), expected=None)  # a stored one is there
    assert graph.get_document("d1").metadata == {"lang": "en"}
    second = doc("d1", {"lang": "de", "year": 2021}, content_hash="h2")
    graph.put_document(second, expected=first)
    assert graph.get_document("d1").metadata == {"lang": "de", "year": 2021}
    with pytest.raises(ConflictError):
        graph.put_document(doc("d1", {"lang": "fr"}, content_hash="h3"), expected=first)  # a stale stamp
    graph.put_document(doc("d1", {}, content_hash="h3"), expected=second)
    assert graph.get_document("d1").metadata == {}  # cleared, not left over


def test_metadata_counts_against_the_item_limit(store):
    graph, _ = store
    big = check_metadata({f"k{i}": ["x" * MAX_STRING] * 8 for i in range(MAX_KEYS)})  # ~420 KB of JSON
    with pytest.raises(ItemTooLargeError, match="document d1 .1 chunks.: its DynamoDB item DOC#d1"):
        graph.check_fits(doc("d1", big))
    with pytest.raises(ItemTooLargeError):
        graph.put_document(doc("d1", big))
    assert graph.get_document("d1") is None
    fits = check_metadata({f"k{i}": ["x" * MAX_STRING] * 7 for i in range(MAX_KEYS)})  # ~370 KB
    graph.put_document(doc("d1", fits))
    assert graph.get_document("d1").metadata == fits
