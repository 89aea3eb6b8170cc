"""The entity graph's snapshot in S3 (adapters/aws/entity_snapshot_s3), which a cold query
function reads instead of every chunk's entity record: the scheduled reindex writes it; a cold
reader takes it when it is young enough and not ahead of the store, then keeps up from the log,
and answers what the table answers; an old, future or unreadable object is not taken (the reader
reads everything, as without one); a tenant's deletion removes it. Through the handlers with real
event JSON, every call judged against the functions' roles."""

from __future__ import annotations

import gzip
import json

import boto3
import pytest

from contract.aws_factories import REGION, create_graph_table, fake_credentials
from eragraph.adapters.aws import entity_snapshot_s3 as snap
from eragraph.adapters.aws.entity_dynamodb import GEN_KEY, LOG_PK, DynamoEntityStore, log_sk
from eragraph.adapters.aws.entity_snapshot_s3 import MAX_AGE, S3EntitySnapshots, Snapshot, decode, encode
from eragraph.adapters.aws.entity_warm import WarmEntityReads
from eragraph.ports.entity import ChunkEntities, SentenceMentions

TABLE = "entity-snapshot-graph"
SNAPSHOTS = "eragraph-test-snapshots"


def chunk(cid: str, *sentences: tuple[str, ...]) -> ChunkEntities:
    return ChunkEntities(cid, tuple(SentenceMentions(f"{cid} {i}", s) for i, s in enumerate(sentences)))


@pytest.fixture
def store():
    fake_credentials()
    from moto import mock_aws

    with mock_aws():
        create_graph_table(boto3.client("dynamodb", region_name=REGION), TABLE)
        boto3.client("s3", region_name=REGION).create_bucket(Bucket=SNAPSHOTS)
        yield DynamoEntityStore(TABLE, region=REGION)


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Calls:
    """The DynamoDB and S3 operations sent from now on."""

    def __init__(self, store: DynamoEntityStore, s3) -> None:
        self.names: list[str] = []
        store.Item._get_connection().connection.client.meta.events.register(
            "before-call.dynamodb.*", lambda model, **_: self.names.append(model.name))
        s3.meta.events.register("before-call.s3.*", lambda model, **_: self.names.append("s3:" + model.name))

    def take(self) -> list[str]:
        out, self.names[:] = list(self.names), []
        return out


def reads(warm: WarmEntityReads, entities: list[str], chunk_ids: list[str]) -> dict:
    with warm.reading():
        return {"postings": warm.postings(entities), "cooccurring": warm.cooccurring(entities),
                "sentences_of": warm.sentences_of(entities), "frequencies": warm.frequencies(entities),
                "chunk_entities": warm.chunk_entities(chunk_ids)}


def table_reads(store: DynamoEntityStore, entities: list[str], chunk_ids: list[str]) -> dict:
    return {"postings": store.postings(entities), "cooccurring": store.cooccurring(entities),
            "sentences_of": store.sentences_of(entities), "frequencies": store.frequencies(entities),
            "chunk_entities": store.chunk_entities(chunk_ids)}


ENTS = ["alice", "bob", "carol", "dave", "nobody"]
CHUNKS = ["k1", "k2", "k3", "k4"]


def test_the_codec_keeps_every_record_and_refuses_what_is_not_a_snapshot():
    records = {"k1": chunk("k1", ("alice", "bob"), ()), "k2": chunk("k2", ("zoë",))}
    back = decode(encode(Snapshot(7, 123.5, records)))
    assert (back.generation, back.taken_at, back.records) == (7, 123.5, records)
    for bad in (b"", b"not gzip", gzip.compress(b"[1, 2]"), gzip.compress(b'{"format": 99}'),
                gzip.compress(json.dumps({"format": 1, "generation": -1, "taken_at": 0, "records": {}}).encode()),
                gzip.compress(json.dumps({"format": 1, "generation": 1, "taken_at": 0, "records": {"k": [5]}}).encode())):
        with pytest.raises(ValueError):
            decode(bad)


def test_a_cold_reader_takes_the_snapshot_then_keeps_up_from_the_log(store):
    s3 = boto3.client("s3", region_name=REGION)
    clock = Clock()
    listed: set[str] = set()
    store.add_chunks([chunk("k1", ("alice", "bob")), chunk("k2", ("bob", "carol"))])
    listed |= {"k1", "k2"}
    writer = WarmEntityReads(store, lambda: sorted(listed), snapshots=S3EntitySnapshots(SNAPSHOTS, s3, "acme"),
                             wall=clock)
    done = writer.keep_snapshot()  # no object yet: everything read, then written
    assert done["read"] == "everything" and done["chunks"] == 2 and done["generation"] == store.generation()
    calls = Calls(store, s3)

    cold = WarmEntityReads(store, lambda: pytest.fail("a cold reader with a snapshot lists no chunk"),
                           snapshots=S3EntitySnapshots(SNAPSHOTS, s3, "acme"), wall=clock)
    got = reads(cold, ENTS, CHUNKS)
    assert [c for c in calls.take() if c in ("GetItem", "Query", "BatchGetItem", "s3:GetObject")] == \
        ["GetItem", "s3:GetObject"]  # the generation, the object: nothing else
    assert got == table_reads(store, ENTS, CHUNKS)
    assert cold.snapshot_reads == 1 and cold.full_reads == 0

    # the store moves on; a new cold reader takes the old object and reads only what changed
    store.add_chunks([chunk("k3", ("carol", "dave")), chunk("k1", ("dave",))])
    store.delete_chunks(["k2"])
    listed |= {"k3"}
    listed -= {"k2"}
    calls.take()
    later = WarmEntityReads(store, lambda: pytest.fail("not listed"), snapshots=S3EntitySnapshots(SNAPSHOTS, s3, "acme"),
                            wall=clock)
    got = reads(later, ENTS, CHUNKS)
    sent = [c for c in calls.take() if c in ("GetItem", "Query", "BatchGetItem", "s3:GetObject")]
    assert sent == ["GetItem", "s3:GetObject", "Query", "BatchGetItem"], sent  # and the log, and what it names
    assert got == table_reads(store, ENTS, CHUNKS)
    assert later.full_reads == 0

    # the reindex's next run goes on from the object and the log, without reading everything
    clock.now += 3600
    done = writer.keep_snapshot()
    assert done["read"] == "snapshot and log" and done["chunks"] == 2 and done["generation"] == store.generation()
    assert decode(s3.get_object(Bucket=SNAPSHOTS, Key=writer.snapshots.key)["Body"].read()).taken_at == clock.now


def test_an_old_a_future_or_an_unreadable_snapshot_is_not_taken(store, caplog):
    s3 = boto3.client("s3", region_name=REGION)
    clock = Clock()
    store.add_chunks([chunk("k1", ("alice", "bob"))])
    snapshots = S3EntitySnapshots(SNAPSHOTS, s3, "")
    assert snapshots.key == "entity-graph/_default/records.json.gz"  # no tenant id can be _default

    def cold() -> WarmEntityReads:
        warm = WarmEntityReads(store, lambda: ["k1"], snapshots=snapshots, wall=clock)
        assert reads(warm, ENTS, CHUNKS) == table_reads(store, ENTS, CHUNKS)
        return warm

    assert cold().full_reads == 1  # none yet
    wrong = {"k1": chunk("k1", ("mallory",))}  # what a taken snapshot would answer
    snapshots.save(Snapshot(store.generation(), clock.now - MAX_AGE, wrong))  # its log may be gone
    assert cold().full_reads == 1
    snapshots.save(Snapshot(store.generation() + 1, clock.now, wrong))  # ahead: another store's
    assert cold().full_reads == 1
    s3.put_object(Bucket=SNAPSHOTS, Key=snapshots.key, Body=b"\x1f\x8bnot really")
    assert cold().full_reads == 1
    assert "not taken" in caplog.text
    snapshots.save(Snapshot(store.generation(), clock.now - MAX_AGE + 60, wrong))  # young enough: taken as is
    warm = WarmEntityReads(store, lambda: ["k1"], snapshots=snapshots, wall=clock)
    assert reads(warm, ["mallory"], ["k1"])["frequencies"] == {"mallory": 1} and warm.snapshot_reads == 1


def test_the_writer_reads_everything_across_a_gap_in_the_log(store):
    """A writer that died between its ADD and its log write leaves a gap, which a query reader
    waits out; the reindex does not wait: its snapshot is of the store's generation."""
    s3 = boto3.client("s3", region_name=REGION)
    listed = ["k1", "k2"]
    store.add_chunks([chunk("k1", ("alice",))])
    writer = WarmEntityReads(store, lambda: listed, snapshots=S3EntitySnapshots(SNAPSHOTS, s3, "t"), wall=Clock())
    writer.keep_snapshot()
    store.add_chunks([chunk("k2", ("bob",))])
    gap = store.generation()
    store.Item(PK=LOG_PK, SK=log_sk(gap)).delete()  # as if its writer died before logging it
    done = writer.keep_snapshot()
    assert done["read"] == "everything" and done["generation"] == gap and done["chunks"] == 2


def test_a_snapshot_written_while_its_tenant_was_deleted_is_removed(store, monkeypatch):
    """A reindex that read the records before the tenant's deletion and writes after it: the
    generation it then reads is below its snapshot's, so it removes what it wrote."""
    s3 = boto3.client("s3", region_name=REGION)
    store.add_chunks([chunk("k1", ("alice",)), chunk("k2", ("bob",))])
    writer = WarmEntityReads(store, lambda: ["k1", "k2"], snapshots=S3EntitySnapshots(SNAPSHOTS, s3, "t"), wall=Clock())
    save = writer.snapshots.save

    def deleted_meanwhile(snapshot):
        size = save(snapshot)
        store.Item(*GEN_KEY).delete()  # the deletion's items (its removal of the object came before)
        return size

    monkeypatch.setattr(writer.snapshots, "save", deleted_meanwhile)
    assert writer.keep_snapshot()["chunks"] == 0
    assert writer.snapshots.load() is None


def test_a_snapshot_larger_than_the_cap_is_not_read(store, monkeypatch):
    s3 = boto3.client("s3", region_name=REGION)
    store.add_chunks([chunk("k1", ("alice",))])
    snapshots = S3EntitySnapshots(SNAPSHOTS, s3, "t")
    snapshots.save(Snapshot(store.generation(), Clock()(), {"k1": chunk("k1", ("alice",))}))
    monkeypatch.setattr(snap, "MAX_BYTES", 10)
    assert snapshots.load() is None


# ---------------------------------------------------------------- through the handlers
CORPUS = {"birth": "Marie Curie was born in Warsaw in 1867.",
          "river": "The Vistula runs north past Warsaw to the Baltic Sea."}


def test_the_reindex_writes_it_a_cold_query_function_reads_it_and_a_deletion_removes_it(aws_engine, lambda_context):
    import iam_judge
    from aws_helpers import load_handler
    from test_handlers import drain

    from eragraph.bootstrap.aws import LAMBDA_ENGINE, build_aws_engine
    from eragraph.services.query import query

    engine, env, fake = aws_engine
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=SNAPSHOTS)
    env.update({"ERAGRAPH_SNAPSHOT_BUCKET": SNAPSHOTS, "ERAGRAPH_ENTITY_GRAPH_WARM": "true"})  # the judge sees them
    LAMBDA_ENGINE.set_builder(lambda tenant: build_aws_engine(environ=env, opensearch_client=fake, refresh=True,
                                                              tenant=tenant))
    ingest, summarize, reindex = load_handler("ingest"), load_handler("summarize"), load_handler("reindex")
    from aws_helpers import event

    for name, text in CORPUS.items():
        key = f"tenants/acme/{name}.txt"
        with iam_judge.running_as(None):  # the uploader's write
            s3.put_object(Bucket=env["ERAGRAPH_BUCKET"], Key=key, Body=text.encode())
        ev = event("s3_put.json")
        ev["Records"][0]["s3"]["object"]["key"] = key
        ingest.handler(ev, lambda_context)
    acme = LAMBDA_ENGINE.get("acme", register=False)
    drain(acme, summarize, lambda_context)

    report = reindex.handler({"tenant": "acme"}, lambda_context)
    written = report["tenants"]["acme"]["entity_snapshot"]
    assert written["chunks"] == 2 and written["read"] == "everything" and written["bytes"] > 0
    assert report["metrics"]["EntitySnapshotBytes"] == written["bytes"]
    key = "entity-graph/acme/records.json.gz"
    assert decode(s3.get_object(Bucket=SNAPSHOTS, Key=key)["Body"].read()).generation == written["generation"]

    # a cold query function (a new engine) and one without the snapshot answer alike; the cold
    # one read the object, not every chunk's record
    question = "Which waterway passes the town where Marie Curie was born?"
    cold = build_aws_engine(environ=env, opensearch_client=fake, refresh=True, tenant="acme")
    plain_env = {k: v for k, v in env.items() if k not in ("ERAGRAPH_SNAPSHOT_BUCKET", "ERAGRAPH_ENTITY_GRAPH_WARM")}
    plain = build_aws_engine(environ=plain_env, opensearch_client=fake, refresh=True, tenant="acme")
    with iam_judge.running_as("query"):
        got = [(r.id, round(r.score, 9)) for r in query(cold, question, mode="tri_graph", k=3).results]
    assert got and got == [(r.id, round(r.score, 9)) for r in query(plain, question, mode="tri_graph", k=3).results]
    assert cold.entities.store.snapshot_reads == 1 and cold.entities.store.full_reads == 0

    out = reindex.handler({"delete_tenant": "acme"}, lambda_context)
    assert out["tenant"] == "acme"
    assert "Contents" not in s3.list_objects_v2(Bucket=SNAPSHOTS, Prefix="entity-graph/acme/")


# ---------------------------------------------------------------- a tenant too large to hold
def test_a_snapshot_of_more_chunks_than_the_reader_holds_is_refused_from_its_metadata(store):
    s3 = boto3.client("s3", region_name=REGION)
    store.add_chunks([chunk("k1", ("alice", "bob")), chunk("k2", ("bob", "carol")), chunk("k3", ("dave",))])
    snapshots = S3EntitySnapshots(SNAPSHOTS, s3, "big")
    WarmEntityReads(store, lambda: ["k1", "k2", "k3"], snapshots=snapshots, wall=Clock()).keep_snapshot()
    head = s3.head_object(Bucket=SNAPSHOTS, Key=snapshots.key)
    assert head["Metadata"]["chunks"] == "3"
    with pytest.raises(snap.TooManyChunks) as refused:
        snapshots.load(max_chunks=2)
    assert refused.value.chunks == 3
    assert len(snapshots.load(max_chunks=3).records) == 3

    calls = Calls(store, s3)
    cold = WarmEntityReads(store, lambda: pytest.fail("a refused tenant's chunks are not listed"),
                           snapshots=snapshots, wall=Clock(), max_chunks=2)
    assert reads(cold, ENTS, CHUNKS) == table_reads(store, ENTS, CHUNKS)
    assert cold.over_cap == 3 and cold.records == {} and cold.snapshot_reads == 0 and cold.full_reads == 0
    sent = calls.take()
    assert sent.count("s3:GetObject") == 1 and sent.count("Query") >= len(ENTS)  # the table's own reads
    reads(cold, ENTS, CHUNKS)  # and from then on nothing is tried again: no generation, no object
    assert "s3:GetObject" not in calls.take()


def test_without_a_snapshot_the_layer_size_refuses_before_any_record_is_read(store):
    store.add_chunks([chunk("k1", ("alice",)), chunk("k2", ("bob",))])
    counted = []
    cold = WarmEntityReads(store, lambda: pytest.fail("not listed: the counter said too many"),
                           max_chunks=1, chunk_count=lambda: counted.append(1) or 2)
    assert reads(cold, ENTS, CHUNKS) == table_reads(store, ENTS, CHUNKS)
    assert counted == [1] and cold.over_cap == 2 and cold.full_reads == 0
    # with no counter, the listed ids decide, still before any record is read
    listed = WarmEntityReads(store, lambda: ["k1", "k2"], max_chunks=1)
    listed._read_records = lambda ids: pytest.fail("no record read")
    assert reads(listed, ENTS, CHUNKS) == table_reads(store, ENTS, CHUNKS) and listed.over_cap == 2


def test_a_held_tenant_that_grows_past_the_cap_is_let_go(store):
    store.add_chunks([chunk("k1", ("alice",)), chunk("k2", ("bob",))])
    warm = WarmEntityReads(store, lambda: ["k1", "k2"], max_chunks=2)
    assert reads(warm, ENTS, CHUNKS) == table_reads(store, ENTS, CHUNKS) and len(warm.records) == 2
    store.add_chunks([chunk("k3", ("alice", "carol"))])
    assert reads(warm, ENTS, CHUNKS) == table_reads(store, ENTS, CHUNKS)
    assert warm.over_cap == 3 and warm.records == {} and warm._post == {} and warm._cooc == {}


def test_the_writer_of_a_tenant_above_its_cap_writes_no_object_and_removes_the_old_one(store):
    s3 = boto3.client("s3", region_name=REGION)
    store.add_chunks([chunk("k1", ("alice",)), chunk("k2", ("bob",))])
    snapshots = S3EntitySnapshots(SNAPSHOTS, s3, "t")
    WarmEntityReads(store, lambda: ["k1", "k2"], snapshots=snapshots, wall=Clock()).keep_snapshot()
    assert snapshots.load() is not None
    store.add_chunks([chunk("k3", ("carol",))])
    writer = WarmEntityReads(store, lambda: ["k1", "k2", "k3"], snapshots=snapshots, wall=Clock(), max_chunks=2)
    done = writer.keep_snapshot()
    assert done["bytes"] == 0 and done["chunks"] == 3 and done["read"].startswith("not written")
    assert snapshots.load() is None
    store.delete_chunks(["k3"])  # smaller again: the next run holds it and writes it
    assert WarmEntityReads(store, lambda: ["k1", "k2"], snapshots=snapshots, wall=Clock(),
                           max_chunks=2).keep_snapshot()["chunks"] == 2


def test_the_cap_follows_the_functions_memory():
    from eragraph.adapters.aws.entity_warm import BASELINE_MB, HELD_BYTES_PER_CHUNK, held_chunk_cap

    assert held_chunk_cap(None) is None and held_chunk_cap(0) is None
    assert held_chunk_cap(1024) == (1024 - BASELINE_MB) * 2 ** 20 // HELD_BYTES_PER_CHUNK == 87_381
    assert held_chunk_cap(2048) > 2 * held_chunk_cap(1024) and held_chunk_cap(128) == 0


def test_a_function_whose_cap_the_tenant_passes_walks_the_table_and_the_reindex_writes_no_object(
        aws_engine, lambda_context):
    import iam_judge
    from aws_helpers import event, load_handler
    from test_handlers import drain

    from eragraph.bootstrap.aws import LAMBDA_ENGINE, build_aws_engine
    from eragraph.services.query import query

    engine, env, fake = aws_engine
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=SNAPSHOTS)
    env.update({"ERAGRAPH_SNAPSHOT_BUCKET": SNAPSHOTS, "ERAGRAPH_ENTITY_GRAPH_WARM": "true",
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024", "ERAGRAPH_ENTITY_GRAPH_MAX_CHUNKS": "1"})
    LAMBDA_ENGINE.set_builder(lambda tenant: build_aws_engine(environ=env, opensearch_client=fake, refresh=True,
                                                              tenant=tenant))
    ingest, summarize, reindex = load_handler("ingest"), load_handler("summarize"), load_handler("reindex")
    for name, text in CORPUS.items():
        key = f"tenants/acme/{name}.txt"
        with iam_judge.running_as(None):
            s3.put_object(Bucket=env["ERAGRAPH_BUCKET"], Key=key, Body=text.encode())
        ev = event("s3_put.json")
        ev["Records"][0]["s3"]["object"]["key"] = key
        ingest.handler(ev, lambda_context)
    drain(LAMBDA_ENGINE.get("acme", register=False), summarize, lambda_context)

    written = reindex.handler({"tenant": "acme"}, lambda_context)["tenants"]["acme"]["entity_snapshot"]
    assert written["bytes"] == 0 and written["chunks"] == 2 and written["read"].startswith("not written")
    assert "Contents" not in s3.list_objects_v2(Bucket=SNAPSHOTS, Prefix="entity-graph/acme/")

    question = "Which waterway passes the town where Marie Curie was born?"
    capped = build_aws_engine(environ=env, opensearch_client=fake, refresh=True, tenant="acme")
    assert capped.entities.store.max_chunks == 1
    plain_env = {k: v for k, v in env.items() if k not in ("ERAGRAPH_SNAPSHOT_BUCKET", "ERAGRAPH_ENTITY_GRAPH_WARM")}
    plain = build_aws_engine(environ=plain_env, opensearch_client=fake, refresh=True, tenant="acme")
    with iam_judge.running_as("query"):  # the layer-size read is the query role's too
        got = [(r.id, round(r.score, 9)) for r in query(capped, question, mode="tri_graph", k=3).results]
    assert got and got == [(r.id, round(r.score, 9)) for r in query(plain, question, mode="tri_graph", k=3).results]
    assert capped.entities.store.over_cap == 2 and capped.entities.store.records == {}

    by_memory = {k: v for k, v in env.items() if k != "ERAGRAPH_ENTITY_GRAPH_MAX_CHUNKS"}
    assert build_aws_engine(environ=by_memory, opensearch_client=fake, tenant="acme").entities.store.max_chunks == 87_381
    with pytest.raises(ValueError, match="whole number"):
        build_aws_engine(environ={**env, "ERAGRAPH_ENTITY_GRAPH_MAX_CHUNKS": "lots"}, opensearch_client=fake,
                         tenant="acme").entities.store


def test_an_unchanged_tenants_object_is_kept_from_its_metadata_until_it_ages(store):
    from eragraph.adapters.aws.entity_warm import REWRITE_AGE

    s3 = boto3.client("s3", region_name=REGION)
    clock = Clock()
    store.add_chunks([chunk("k1", ("alice",)), chunk("k2", ("bob",))])
    snapshots = S3EntitySnapshots(SNAPSHOTS, s3, "t")
    writer = WarmEntityReads(store, lambda: ["k1", "k2"], snapshots=snapshots, wall=clock)
    first = writer.keep_snapshot()
    assert first["bytes"] > 0
    head = snapshots.head()
    assert head == snap.SnapshotHead(store.generation(), clock.now, 2)
    calls = Calls(store, s3)
    clock.now += REWRITE_AGE - 1
    done = writer.keep_snapshot()
    assert done["bytes"] == 0 and done["read"].startswith("unchanged") and done["chunks"] == 2
    assert calls.take() == ["s3:HeadObject", "GetItem"]  # the metadata and the generation: no body, no write
    clock.now += 2  # old enough: written again, with its new time
    assert writer.keep_snapshot()["bytes"] > 0 and snapshots.head().taken_at == clock.now
    store.add_chunks([chunk("k3", ("carol",))])  # changed: written at once
    clock.now += 1
    again = writer.keep_snapshot()
    assert again["bytes"] > 0 and again["chunks"] == 3 and snapshots.head().generation == store.generation()
    s3.put_object(Bucket=SNAPSHOTS, Key=snapshots.key, Body=s3.get_object(Bucket=SNAPSHOTS, Key=snapshots.key)["Body"].read())
    assert snapshots.head() is None  # an object without the metadata (an older writer's) is rewritten
    assert writer.keep_snapshot()["bytes"] > 0
