"""The entity graph in the AWS profile: the engine built by ``build_aws_engine`` (moto DynamoDB,
S3, SQS and the OpenSearch fake) writes postings, mentions and co-occurrences to the graph table
and entity-name vectors to their own OpenSearch index; the three graph modes answer a 2-hop
question through a bridge entity from those stores (push execution, no table Scan per query);
deleting a document removes its postings and the entities only it mentioned."""

from __future__ import annotations

import boto3
import pytest
from support import with_graph_settings

from eragraph.adapters.aws.entity_dynamodb import DynamoEntityStore
from eragraph.bootstrap.aws import DEFAULT_ENTITY_INDEX
from eragraph.services import invariants
from eragraph.services.entity_index import entity_vector_id
from eragraph.services.graph_query import use_exact
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.query import available_modes, query
from eragraph.services.remove import remove
from eragraph.services.resummarize import drain

QUESTION = "Which waterway passes the town where Marie Curie was born?"
CORPUS = {
    "birth": "Marie Curie was born in Warsaw in 1867.",
    "river": "The Vistula runs north past Warsaw to the Baltic Sea.",
    "d1": "Which waterway passes the town? Every waterway passes some town where people were born.",
    "d2": "The town where the Seine waterway passes was where many painters were born.",
    "d3": "A waterway passes the old town where the Danube was born as a small stream.",
}
MODES = ("tri_graph", "paths", "concept_ppr", "local_global")


def table_items(table: str, pk: str) -> dict[str, dict]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    items = client.query(TableName=table, KeyConditionExpression="PK = :pk",
                         ExpressionAttributeValues={":pk": {"S": pk}}, ConsistentRead=True)["Items"]
    return {i["SK"]["S"]: i for i in items}


@pytest.fixture
def graph_engine(aws_engine):
    engine, env, fake = aws_engine
    with_graph_settings(engine, threshold=0.05, hops=2, match_threshold=0.9)
    ingest(engine, [SourceDoc(source=f"s3://bucket/{k}.txt", doc_id=k, text=v) for k, v in CORPUS.items()])
    drain(engine)
    return engine, env, fake


def test_the_aws_engine_writes_the_entity_graph_to_dynamodb_and_opensearch(graph_engine):
    engine, env, fake = graph_engine
    store = engine.entities.store
    assert isinstance(store, DynamoEntityStore) and not store.can_export and not use_exact(engine)
    assert set(MODES) <= set(available_modes(engine))
    chunks = {d.doc_id: set(d.chunk_ids) for d in engine.graph.list_documents()}
    table = env["ERAGRAPH_TABLE"]
    warsaw = table_items(table, "ENT#warsaw")
    assert {sk for sk in warsaw if sk.startswith("CHUNK#")} == {f"CHUNK#{c}" for c in chunks["birth"] | chunks["river"]}
    assert warsaw["ENT"]["freq"]["N"] == "2"
    assert warsaw["COOC#vistula"]["weight"]["N"] == "1" and "COOC#marie curie" in warsaw
    [river_chunk] = chunks["river"]
    assert "ENTITIES" in table_items(table, f"CHUNK#{river_chunk}")
    # entity names live in their own index; the node index holds nodes only
    entity_docs = fake.indexes[DEFAULT_ENTITY_INDEX]["docs"]
    assert {entity_vector_id(e) for e in ("warsaw", "vistula", "marie curie")} <= set(entity_docs)
    assert all(d["layer"] == -1 for d in entity_docs.values())
    assert not any(i.startswith("ent:") for i in engine.vectors.ids())
    assert invariants.check(engine).ok


def test_graph_modes_answer_through_the_bridge_entity_without_scans(graph_engine):
    engine, _, _ = graph_engine
    store = engine.entities.store
    calls: list[str] = []
    events = store.Item._get_connection().connection.client.meta.events
    handler = lambda **kwargs: calls.append(kwargs["model"].name)  # noqa: E731
    events.register("before-call.dynamodb.*", handler)
    try:
        dense = [r.doc_id for r in query(engine, QUESTION, mode="dense", k=3).results]
        assert "river" not in dense
        for mode in ("tri_graph", "concept_ppr"):
            docs = [r.doc_id for r in query(engine, QUESTION, mode=mode, k=3).results]
            assert "birth" in docs and "river" in docs, (mode, docs)
        docs = [r.doc_id for r in query(engine, "Is the Vistula near Warsaw or near the Baltic Sea?",
                                        mode="local_global", k=2).results]
        assert docs[0] == "river", docs
    finally:
        events.unregister("before-call.dynamodb.*", handler)
    assert {"Query", "BatchGetItem"} <= set(calls) and "Scan" not in calls, sorted(set(calls))


def test_deleting_a_document_removes_its_postings_and_entities(graph_engine):
    engine, env, fake = graph_engine
    table = env["ERAGRAPH_TABLE"]
    chunks = {d.doc_id: set(d.chunk_ids) for d in engine.graph.list_documents()}
    assert all(table_items(table, f"ENT#{e}") for e in ("vistula", "baltic sea"))
    remove(engine, ["river"])
    drain(engine)
    store = engine.entities.store
    warsaw = table_items(table, "ENT#warsaw")
    assert {sk for sk in warsaw if sk.startswith("CHUNK#")} == {f"CHUNK#{c}" for c in chunks["birth"]}
    assert warsaw["ENT"]["freq"]["N"] == "1" and "COOC#vistula" not in warsaw
    for gone in ("vistula", "baltic sea"):
        assert table_items(table, f"ENT#{gone}") == {}, gone
        assert entity_vector_id(gone) not in fake.indexes[DEFAULT_ENTITY_INDEX]["docs"]
    for c in chunks["river"]:
        assert table_items(table, f"CHUNK#{c}") == {}
    live = {c for d in engine.graph.list_documents() for c in d.chunk_ids}
    m = store.export()
    assert set(m.chunks) <= live and m.frequency.min() > 0
    assert store.entity_count() == len(m.entities)


def test_the_paths_stage_reads_its_sentences_in_two_batched_requests(graph_engine):
    """``paths`` is tri_graph's walk plus its subgraph's sentences: the chunk records read in
    one BatchGetItem for their sentence ids and one for the sentences (whatever their number),
    never one request per sentence or entity."""
    engine, _, _ = graph_engine
    store = engine.entities.store
    events = store.Item._get_connection().connection.client.meta.events
    calls: list[str] = []
    handler = lambda **kwargs: calls.append(kwargs["model"].name)  # noqa: E731
    events.register("before-call.dynamodb.*", handler)
    try:
        counted = {}
        for mode in ("tri_graph", "paths"):
            calls.clear()
            query(engine, QUESTION, mode=mode, k=3)
            counted[mode] = list(calls)
    finally:
        events.unregister("before-call.dynamodb.*", handler)
    extra = len(counted["paths"]) - len(counted["tri_graph"])
    assert extra == 2 and counted["paths"].count("BatchGetItem") - counted["tri_graph"].count("BatchGetItem") == 2, \
        counted


def test_walks_from_memory_answer_as_the_table_does_without_a_query_per_entity(graph_engine):
    """The query function's entity graph in memory (ERAGRAPH_ENTITY_GRAPH_WARM, adapters/aws/
    entity_warm): every graph mode (and fusion, which walks tri_graph) ranks the same results with
    the same scores as the table's reads, before and after a removal, and once warm a question
    sends no Query of an entity's partition."""
    from eragraph.adapters.aws.entity_warm import WarmEntityReads

    engine, _, _ = graph_engine
    table_store = engine.entities.store
    warm = WarmEntityReads(table_store, lambda: (r.node_id for r in engine.graph.layer_refs(0)))
    questions = [(QUESTION, 3), ("Is the Vistula near Warsaw or near the Baltic Sea?", 2)]

    def answers(store) -> list:
        engine.entities.store = store
        return [[(r.id, round(r.score, 9)) for r in query(engine, q, mode=mode, k=k).results]
                for mode in (*MODES, "fusion") for q, k in questions]

    assert answers(warm) == answers(table_store)
    calls: list[str] = []
    events = table_store.Item._get_connection().connection.client.meta.events
    handler = lambda **kwargs: calls.append(kwargs["model"].name)  # noqa: E731
    events.register("before-call.dynamodb.*", handler)
    try:
        answers(warm)
    finally:
        events.unregister("before-call.dynamodb.*", handler)
    assert calls and "Query" not in calls and "Scan" not in calls, sorted(set(calls))
    engine.entities.store = table_store
    remove(engine, ["river"])
    drain(engine)
    assert answers(warm) == answers(table_store)
    assert warm.full_reads == 1
