"""The entity graph kept in memory by the query function (adapters/aws/entity_warm, moto):
inside a walk its reads answer what the DynamoDB store answers after adds, replacements,
removals and synonyms; keeping up costs one GetItem when nothing changed, and a GetItem, a
Query of the writers' log and a BatchGetItem of the changed records otherwise; a gap in the
log (a writer between its ADD and its log write) holds the reader at the generation before
it until the gap is filled or outlives GAP_SECONDS; outside a walk every read is the store's."""

from __future__ import annotations

import boto3
import pytest

from contract.aws_factories import REGION, create_graph_table, fake_credentials
from eragraph.adapters.aws.entity_dynamodb import LOG_PK, DynamoEntityStore, log_sk
from eragraph.adapters.aws.entity_warm import GAP_SECONDS, WarmEntityReads
from eragraph.ports.entity import ChunkEntities, SentenceMentions

TABLE = "entity-warm-graph"


@pytest.fixture
def store():
    fake_credentials()
    from moto import mock_aws

    with mock_aws():
        create_graph_table(boto3.client("dynamodb", region_name=REGION), TABLE)
        yield DynamoEntityStore(TABLE, region=REGION)


def chunk(cid: str, *sentences: tuple[str, ...]) -> ChunkEntities:
    return ChunkEntities(cid, tuple(SentenceMentions(f"{cid} {i}", s) for i, s in enumerate(sentences)))


class Chunks:
    """The layer-0 chunk ids the composition root would list (here: what was added)."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.listed = 0

    def __call__(self):
        self.listed += 1
        return sorted(self.ids)


def requests_of(store: DynamoEntityStore) -> list[str]:
    seen: list[str] = []
    client = store.Item._get_connection().connection.client
    client.meta.events.register("before-call.dynamodb.*", lambda model, **_: seen.append(model.name))
    return seen


def same_reads(warm: WarmEntityReads, store: DynamoEntityStore, entities: list[str], chunk_ids: list[str]) -> None:
    expected = {"postings": store.postings(entities), "cooccurring": store.cooccurring(entities),
                "sentences_of": store.sentences_of(entities), "frequencies": store.frequencies(entities),
                "existing": store.existing(entities), "chunk_entities": store.chunk_entities(chunk_ids),
                "sentence_ids_of_chunks": store.sentence_ids_of_chunks(chunk_ids)}
    sids = [s for ss in expected["sentences_of"].values() for s in ss] + ["nochunk#s0", "bad"]
    expected["get_sentences"] = store.get_sentences(sids)
    with warm.reading():
        got = {name: getattr(warm, name)(sids if name == "get_sentences" else
                                         chunk_ids if name in ("chunk_entities", "sentence_ids_of_chunks") else entities)
               for name in expected}
    assert got == expected


def test_a_walk_reads_what_the_store_holds_through_every_change(store):
    listed = Chunks()
    warm = WarmEntityReads(store, listed)
    ents = ["alice", "bob", "carol", "dave", "eve", "nobody"]
    chunks = ["k1", "k2", "k3", "k4", "gone"]
    store.add_chunks([chunk("k1", ("alice", "bob"), ("alice",)), chunk("k2", ("bob", "carol"))])
    listed.ids |= {"k1", "k2"}
    same_reads(warm, store, ents, chunks)
    assert warm.full_reads == 1 and listed.listed == 1
    store.add_chunks([chunk("k3", ("carol", "dave", "alice")), chunk("k1", ("eve", "bob"))])  # k1 replaced
    listed.ids |= {"k3"}
    same_reads(warm, store, ents, chunks)
    store.delete_chunks(["k2"])
    listed.ids -= {"k2"}
    store.add_synonyms([("alice", "eve", 0.9)])
    same_reads(warm, store, ents, chunks)
    assert warm.synonyms(["alice"]) == store.synonyms(["alice"]) == {"alice": {"eve": pytest.approx(0.9)}}
    store.add_chunks([chunk("k4", ("dave",)), chunk("k5", ("alice", "dave", "alice"), ("dave", "dave"))])  # repeats
    same_reads(warm, store, ents, chunks + ["k5"])
    store.delete_chunks(["k1", "k3"])
    same_reads(warm, store, ents, chunks + ["k5"])
    assert warm.full_reads == 1 and listed.listed == 1  # kept up from the log alone


def test_co_occurrences_counted_when_asked_stay_right_when_few_are_kept(store, monkeypatch):
    from eragraph.adapters.aws import entity_warm

    monkeypatch.setattr(entity_warm, "COOC_MEMO", 2)
    listed = Chunks()
    warm = WarmEntityReads(store, listed)
    store.add_chunks([chunk("k1", ("alice", "bob", "carol")), chunk("k2", ("bob", "carol"), ("carol", "dave"))])
    listed.ids |= {"k1", "k2"}
    ents = ["alice", "bob", "carol", "dave"]
    same_reads(warm, store, ents, ["k1", "k2"])
    assert len(warm._cooc) <= 2
    store.add_chunks([chunk("k1", ("alice", "dave"))])
    same_reads(warm, store, ents, ["k1", "k2"])


def test_keeping_up_costs_a_read_of_the_generation_and_of_what_changed(store):
    listed = Chunks()
    warm = WarmEntityReads(store, listed)
    store.add_chunks([chunk(f"c{i}", ("alice", f"e{i}")) for i in range(30)])
    listed.ids |= {f"c{i}" for i in range(30)}
    seen = requests_of(store)
    with warm.reading():
        pass
    assert seen.count("BatchGetItem") == 1 and warm.full_reads == 1  # 30 records: one batch
    seen.clear()
    with warm.reading():
        assert warm.postings(["alice"])["alice"] == {f"c{i}": 1 for i in range(30)}
        assert warm.frequencies(["alice", "e3"]) == {"alice": 30, "e3": 1}
    assert seen == ["GetItem"]  # unchanged: the generation only
    store.add_chunks([chunk("c0", ("bob",))])
    seen.clear()
    with warm.reading():
        assert warm.postings(["bob", "e0"]) == {"bob": {"c0": 1}}
    assert seen == ["GetItem", "Query", "BatchGetItem"]
    seen.clear()
    assert warm.postings(["bob"]) == {"bob": {"c0": 1}}  # outside a walk: the store's read
    assert seen == ["Query"]


def test_a_gap_in_the_log_holds_the_reader_until_it_is_filled_or_too_old(store):
    now = [0.0]
    listed = Chunks()
    warm = WarmEntityReads(store, listed, clock=lambda: now[0])
    store.add_chunks([chunk("k1", ("alice",))])
    listed.ids |= {"k1"}
    with warm.reading():
        pass
    held = warm.generation_held
    store.add_chunks([chunk("k2", ("bob",))])
    listed.ids |= {"k2"}
    store.add_chunks([chunk("k3", ("carol",))])
    listed.ids |= {"k3"}
    gap = store.Item.get(LOG_PK, log_sk(held + 1))  # the log of k2's generation, not written yet
    gap.delete()
    with warm.reading():
        assert warm.existing(["alice", "bob", "carol"]) == {"alice"}  # held before the gap
    assert warm.generation_held == held
    gap.save()  # the writer's log lands
    with warm.reading():
        assert warm.existing(["alice", "bob", "carol"]) == {"alice", "bob", "carol"}
    assert warm.full_reads == 1
    store.add_chunks([chunk("k4", ("dave",))])
    listed.ids |= {"k4"}
    store.Item.get(LOG_PK, log_sk(warm.generation_held + 1)).delete()  # a writer that died there
    with warm.reading():
        assert "dave" not in warm.existing(["dave"])
    now[0] += GAP_SECONDS
    with warm.reading():
        assert warm.existing(["dave"]) == {"dave"}
    assert warm.full_reads == 2


def test_a_log_too_long_to_hold_makes_readers_read_everything(store, monkeypatch):
    from eragraph.adapters.aws import entity_dynamodb

    listed = Chunks()
    warm = WarmEntityReads(store, listed)
    with warm.reading():
        pass
    monkeypatch.setattr(entity_dynamodb, "LOG_BYTES", 10)
    store.add_chunks([chunk(f"c{i}", ("alice",)) for i in range(5)])
    listed.ids |= {f"c{i}" for i in range(5)}
    with warm.reading():
        assert warm.frequencies(["alice"]) == {"alice": 5}
    assert warm.full_reads == 2
