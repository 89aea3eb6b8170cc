"""DynamoDB entity store specifics (moto): counts reaching 0 delete their items, concurrent
ingests through separate handles lose no increment, and an ingest that lands between a
decrement to 0 and the conditional delete keeps the entity alive."""

from __future__ import annotations

import threading

import boto3
import pytest

from contract.aws_factories import REGION, create_graph_table, fake_credentials
from eragraph.adapters.aws.entity_dynamodb import DynamoEntityStore
from eragraph.adapters.memory_entity import MemoryEntityStore
from eragraph.ports_entity import ChunkEntities, SentenceMentions

TABLE = "entity-test-graph"


@pytest.fixture
def table():
    fake_credentials()
    from moto import mock_aws

    with mock_aws():
        create_graph_table(boto3.client("dynamodb", region_name=REGION), TABLE)
        yield TABLE


def all_keys(table: str) -> set[tuple[str, str]]:
    client = boto3.client("dynamodb", region_name=REGION)
    items = client.scan(TableName=table, ConsistentRead=True)["Items"]
    return {(i["PK"]["S"], i["SK"]["S"]) for i in items}


def chunk(cid: str, *sentences: tuple[str, ...]) -> ChunkEntities:
    return ChunkEntities(cid, tuple(SentenceMentions(f"{cid} {i}", s) for i, s in enumerate(sentences)))


def test_counts_that_reach_zero_delete_their_items(table):
    store = DynamoEntityStore(table, region=REGION)
    store.add_chunks([chunk("k1", ("alice", "bob"), ("alice",)), chunk("k2", ("bob", "carol"))])
    keys = all_keys(table)
    assert {("ENT#alice", "ENT"), ("ENT#alice", "CHUNK#k1"), ("ENT#alice", "SENT#k1#s1"),
            ("ENT#alice", "COOC#bob"), ("ENT#bob", "COOC#alice"), ("CHUNK#k1", "ENTITIES")} <= keys
    assert sorted(store.remove_chunks(["k1"])) == ["alice"]
    keys = all_keys(table)
    assert not {k for k in keys if k[0] in ("ENT#alice", "CHUNK#k1")}
    assert ("ENT#bob", "COOC#alice") not in keys and ("ENT#bob", "COOC#carol") in keys
    store.remove_chunks(["k2"])
    assert {k[0] for k in all_keys(table)} == {"META"}  # only the generation and count counters
    assert store.entity_count() == 0 and store.export().entities == []


def test_concurrent_ingests_lose_no_increment(table):
    shared = ("alice", "bob", "carol")
    batches = [[chunk(f"w{w}c{i}", shared, ("alice", f"solo{w}")) for i in range(6)] for w in range(3)]
    errors: list[BaseException] = []

    def work(batch):
        store = DynamoEntityStore(table, region=REGION, workers=2)  # a handle per writer
        try:
            for c in batch:
                store.add_chunks([c])
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    reference = MemoryEntityStore()
    reference.add_chunks([c for b in batches for c in b])
    store = DynamoEntityStore(table, region=REGION)
    names = ["alice", "bob", "carol", "solo0", "solo1", "solo2"]
    assert store.frequencies(names) == reference.frequencies(names) == {
        "alice": 36, "bob": 18, "carol": 18, "solo0": 6, "solo1": 6, "solo2": 6}
    assert store.cooccurring(names) == reference.cooccurring(names)
    assert store.entity_count() == 6 and store.generation() == 18


def test_an_ingest_between_decrement_and_delete_keeps_the_entity(table):
    remover = DynamoEntityStore(table, region=REGION, workers=1)
    writer = DynamoEntityStore(table, region=REGION, workers=1)
    remover.add_chunks([chunk("k1", ("alice",))])
    fired: list[str] = []

    def ingest_in_between(params, **kwargs):
        key = params.get("Key", {})
        if key.get("PK", {}).get("S") == "ENT#alice" and key.get("SK", {}).get("S") == "ENT" and not fired:
            fired.append("alice")
            assert writer.add_chunks([chunk("k2", ("alice", "alice"))]) == []  # the item still exists

    events = remover.Item._get_connection().connection.client.meta.events
    events.register("before-parameter-build.dynamodb.DeleteItem", ingest_in_between)
    try:
        gone = remover.remove_chunks(["k1"])
    finally:
        events.unregister("before-parameter-build.dynamodb.DeleteItem", ingest_in_between)
    assert fired == ["alice"]
    assert gone == []  # the conditional delete lost: alice is alive with k2's occurrences
    assert remover.frequencies(["alice"]) == {"alice": 2}
    assert remover.postings(["alice"]) == {"alice": {"k2": 2}}
    assert remover.entity_count() == 1
