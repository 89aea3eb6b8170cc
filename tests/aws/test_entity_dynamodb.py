"""DynamoDB entity store specifics (moto): counts reaching 0 delete their items, concurrent
ingests through separate handles lose no increment, and an ingest that lands between a
decrement to 0 and the conditional delete keeps the entity alive."""

from __future__ import annotations

import json
import threading

import boto3
import pytest

from contract.aws_factories import REGION, create_graph_table, fake_credentials
from eragraph.adapters.aws.entity_dynamodb import DynamoEntityStore
from eragraph.adapters.memory.entity_memory import MemoryEntityStore
from eragraph.ports.entity import ChunkEntities, SentenceMentions

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
    assert sorted(store.delete_chunks(["k1"])) == ["alice"]
    keys = all_keys(table)
    assert not {k for k in keys if k[0] in ("ENT#alice", "CHUNK#k1")}
    assert ("ENT#bob", "COOC#alice") not in keys and ("ENT#bob", "COOC#carol") in keys
    store.delete_chunks(["k2"])
    assert {k[0] for k in all_keys(table)} == {"META", "ENTLOG"}  # the counters, the log of generations
    assert store.entity_count() == 0 and store.export().entities == []


def test_concurrent_ingests_lose_no_increment(table, atomic_requests):
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
        # the entity's deletion (with the count's decrement) is one TransactWriteItems
        keys = [op["Delete"].get("Key", {}) for op in params.get("TransactItems", ()) if "Delete" in op]
        if any(k.get("PK", {}).get("S") == "ENT#alice" and k.get("SK", {}).get("S") == "ENT" for k in keys) \
                and not fired:
            fired.append("alice")
            assert writer.add_chunks([chunk("k2", ("alice", "alice"))]) == []  # the item still exists

    events = remover.Item._get_connection().connection.client.meta.events
    events.register("before-parameter-build.dynamodb.TransactWriteItems", ingest_in_between)
    try:
        gone = remover.delete_chunks(["k1"])
    finally:
        events.unregister("before-parameter-build.dynamodb.TransactWriteItems", ingest_in_between)
    assert fired == ["alice"]
    assert gone == []  # the conditional delete lost: alice is alive with k2's occurrences
    assert remover.frequencies(["alice"]) == {"alice": 2}
    assert remover.postings(["alice"]) == {"alice": {"k2": 2}}
    assert remover.entity_count() == 1


# --- a writer that dies after any write request, then is retried ---------------------------

WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")


class Crash(Exception):
    """The writer's process died here."""


def crash_after(store: DynamoEntityStore, k: int | None) -> list[int]:
    """Make the store's client raise before its (k+1)-th write request (None: count only);
    returns the live write counter."""
    events = store.Item._get_connection().connection.client.meta.events
    done = [0]

    def before(**kwargs):
        if k is not None and done[0] >= k:
            raise Crash(f"after {k} writes")
        done[0] += 1

    for op in WRITES:
        events.register(f"before-call.dynamodb.{op}", before, unique_id=f"crash-{op}")
    return done


def disarm(store: DynamoEntityStore) -> None:
    events = store.Item._get_connection().connection.client.meta.events
    for op in WRITES:
        events.unregister(f"before-call.dynamodb.{op}", unique_id=f"crash-{op}")


BEFORE = [chunk("k1", ("alice", "bob"), ("alice", "carol")), chunk("k2", ("bob", "carol", "dave")),
          chunk("k3", ("erin",))]
OPERATIONS = {
    # replace k1 (bob stays, alice leaves, frank arrives) and add k4
    "add": lambda s: s.add_chunks([chunk("k1", ("bob", "frank"), ("frank",)),
                                   chunk("k4", ("alice", "erin", "grace"), ("grace", "heidi"))]),
    # k2 and k3 leave: dave and erin die, bob and carol lose co-occurrences
    "remove": lambda s: s.delete_chunks(["k2", "k3"]),
}
AFTER = {
    "add": [chunk("k1", ("bob", "frank"), ("frank",)), BEFORE[1], BEFORE[2],
            chunk("k4", ("alice", "erin", "grace"), ("grace", "heidi"))],
    "remove": [BEFORE[0]],
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_retry_after_a_crash_at_any_write_leaves_exact_counts(operation):
    from contract.test_entity_store import recount

    fake_credentials()
    from moto import mock_aws

    names = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]

    def reads(store):
        return {"postings": store.postings(names), "frequencies": store.frequencies(names),
                "cooccurring": store.cooccurring(names), "sentences_of": store.sentences_of(names),
                "existing": store.existing(names), "count": store.entity_count()}

    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        create_graph_table(client, "dry-run")
        dry = DynamoEntityStore("dry-run", region=REGION, workers=1)
        dry.add_chunks(BEFORE)
        counter = crash_after(dry, None)
        OPERATIONS[operation](dry)
        disarm(dry)
        total = counter[0]
        assert total >= 8
        expected = recount(AFTER[operation])
        assert reads(dry) == expected
        for k in range(total):
            table = f"crash-{operation}-{k}"
            create_graph_table(client, table)
            store = DynamoEntityStore(table, region=REGION, workers=1)
            store.add_chunks(BEFORE)
            crash_after(store, k)
            with pytest.raises(Crash):
                OPERATIONS[operation](store)
            disarm(store)
            OPERATIONS[operation](store)  # the redelivered message
            assert reads(store) == expected, f"crash after write {k} of {total}"
            assert store.chunk_ids() == {c.chunk_id for c in AFTER[operation]}
            leftovers = {key for key in all_keys(table) if key[1] == "PENDING"}
            assert not leftovers, f"crash after write {k}: {leftovers}"
            client.delete_table(TableName=table)


def test_records_written_before_part_markers_are_removed_and_repaired_exactly(table):
    """A table written by the earlier scheme (counters applied, no part markers, records
    without a format field): removing such a chunk still subtracts its counts once, and
    repair_counts gives the others their markers."""
    from contract.test_entity_store import recount

    store = DynamoEntityStore(table, region=REGION, workers=1)
    old = [chunk("k1", ("alice", "bob"), ("alice",)), chunk("k2", ("bob", "carol")), chunk("k3", ("carol",))]
    store.add_chunks(old)
    client = boto3.client("dynamodb", region_name=REGION)
    for c in old:  # back to the earlier format
        for key in [k for k in all_keys(table) if k[0] == f"CHUNK#{c.chunk_id}" and k[1].startswith("PART#")]:
            client.delete_item(TableName=table, Key={"PK": {"S": key[0]}, "SK": {"S": key[1]}})
        raw = json.dumps({"s": [[s.text, list(s.entities)] for s in c.sentences]})
        client.put_item(TableName=table, Item={"PK": {"S": f"CHUNK#{c.chunk_id}"}, "SK": {"S": "ENTITIES"},
                                               "value": {"S": raw}})
    assert store.delete_chunks(["k1"]) == ["alice"]
    names = ["alice", "bob", "carol"]
    expected = recount(old[1:])
    assert store.frequencies(names) == expected["frequencies"]
    assert store.cooccurring(names) == expected["cooccurring"]
    fixed = store.repair_counts()
    assert fixed["markers"] == 2 and not fixed["frequencies"] and not fixed["cooccurrence"]
    assert store.delete_chunks(["k2"]) == ["bob"]
    assert store.frequencies(names) == {"carol": 1} and store.entity_count() == 1
