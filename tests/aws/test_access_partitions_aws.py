"""Partitioned placement on the AWS profile's adapters (moto DynamoDB, the OpenSearch fake, SQS
FIFO): chunks of documents with random access lists lie in their partition's code range of the
ref index (sort keys ``~<index><lsh code>`` after the open partition's), no segment mixes
partitions, and an insert into one partition writes no summary of another."""

from __future__ import annotations

import random
from dataclasses import replace

from access_cases import check_no_mixing, node_partitions, partition_index_of, tagged
from support import synthetic_docs

from eragraph.domain.access import index_of
from eragraph.services import invariants, placement
from eragraph.services.ingest import ingest
from eragraph.services.resummarize import drain


def test_partitions_on_dynamodb_never_mix_and_an_insert_stays_in_its_partition(few_partitions, aws_engine,
                                                                                atomic_requests):
    engine, _env, _fake = aws_engine
    rng = random.Random(11)
    ingest(engine, tagged(synthetic_docs(40), rng))
    drain(engine)
    index = partition_index_of(engine)
    assert len(set(index.values())) == 4
    n = engine.settings.n_planes
    for doc in engine.graph.list_documents():
        assert {index_of(x.code, n) for x in engine.graph.get_nodes(doc.chunk_ids).values()} == {index[doc.doc_id]}
    assert check_no_mixing(engine) >= 4
    assert invariants.check(engine).ok
    finance = placement.partition_index(engine, ["group:finance"])
    before = node_partitions(engine)
    ingest(engine, [replace(d, metadata={"access": ["group:finance"]}) for d in synthetic_docs(2, seed=4, prefix="x")])
    report = drain(engine)
    after = node_partitions(engine)
    assert {after[i] for ids in report.summary_ids.values() for i in ids} <= {finance}
    assert {before[i] for ids in report.removed_summary_ids.values() for i in ids} <= {finance}
    check_no_mixing(engine)
    assert invariants.check(engine).ok


def test_a_callers_view_on_opensearch_keeps_its_layers_and_nothing_else(few_partitions, aws_engine, atomic_requests):
    """The view's filter term (``readers``) on the OpenSearch adapters (the recording fake):
    every mode the engine has, random callers; no result is of a document the caller may not
    read, summaries walked down to their leaves."""
    from access_cases import leaves_docs

    from eragraph.domain.access import caller
    from eragraph.services.modes import available_modes
    from eragraph.services.query import query

    engine, _env, _fake = aws_engine
    rng = random.Random(21)
    docs = tagged(synthetic_docs(30), rng)
    ingest(engine, docs)
    drain(engine)
    access = {d.doc_id: (d.metadata or {}).get("access") for d in docs}
    summaries = 0
    seen: dict = {}
    for n in range(24):
        who = caller(rng.sample(["group:finance", "group:board", "user:alice", "user:bob"], rng.randint(1, 2)),
                     rng.choice(("tenant", "deny")))
        mode = available_modes(engine)[n % len(available_modes(engine))]
        response = query(engine, f"item number d{rng.randrange(30)} football finance", mode=mode, k=5, caller=who)
        allowed = {d for d, a in access.items() if who.may_read(a)}
        for r in response.results:
            assert leaves_docs(engine, r.id, seen) <= allowed, (mode, who, r.id)
            summaries += r.layer > 0
    assert summaries > 0
