"""Partitioned placement (domain.access, services.placement, services.resummarize): chunks are
placed by (access partition, LSH bucket), each partition's code range cut on its own, so no
segment at any layer holds two partitions and every summary's readers are its members'. A
partition with at most S_max nodes at a layer is not summarized there (served as its nodes); an
insert into one partition writes no summary of another; a retag that changes a document's list
moves its chunks (new ids, the new partition's range) and re-summarizes the segments they left
and joined only; an unpartitioned store keeps exactly the codes and segments it had."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from access_cases import check_no_mixing, node_partitions, partition_index_of, tagged
from support import make_engine, synthetic_docs

from eragraph.domain.access import canonical, index_of, lsh_part, partition_of
from eragraph.services import invariants, placement
from eragraph.services.ingest import ingest
from eragraph.services.resummarize import drain


def local_engine(tmp_path):
    from eragraph.bootstrap.local import build_local_engine

    return build_local_engine(tmp_path / "store", make_engine().settings)


@pytest.fixture(params=["memory", "local"])
def engine(request, tmp_path):
    made = make_engine() if request.param == "memory" else local_engine(tmp_path)
    yield made
    if request.param == "local":
        from eragraph.bootstrap.local import close

        close(made)


def test_chunks_lie_in_their_documents_partition_and_no_segment_mixes_partitions(engine):
    rng = random.Random(7)
    docs = tagged(synthetic_docs(90), rng)
    ingest(engine, docs)
    drain(engine)
    index = partition_index_of(engine)
    assert len(set(index.values())) == 4 and index[next(d.doc_id for d in docs if not d.metadata)] == 0
    for doc in engine.graph.list_documents():
        for node in engine.graph.get_nodes(doc.chunk_ids).values():
            assert index_of(node.code, engine.settings.n_planes) == index[doc.doc_id]
    assert check_no_mixing(engine) > 4  # every partition of ~22 documents has summaries
    assert invariants.check(engine).ok
    layers = {index_of(r.code, engine.settings.n_planes) for r in engine.graph.layer_refs(1)}
    assert layers == set(index.values())  # each partition kept its layers


def test_an_insert_into_one_partition_writes_no_summary_of_another(engine):
    rng = random.Random(3)
    ingest(engine, tagged(synthetic_docs(80), rng))
    drain(engine)
    finance = placement.partition_index(engine, ["group:finance"])
    before = node_partitions(engine)
    extra = [replace(d, metadata={"access": ["group:finance"]}) for d in synthetic_docs(3, seed=9, prefix="x")]
    ingest(engine, extra)
    report = drain(engine)
    made = [i for ids in report.summary_ids.values() for i in ids]
    gone = [i for ids in report.removed_summary_ids.values() for i in ids]
    after = node_partitions(engine)
    assert made and {after[i] for i in made} == {finance}
    assert {before[i] for i in gone} <= {finance}
    check_no_mixing(engine)


def test_a_retag_moves_the_documents_chunks_and_only_the_segments_they_left_and_joined(engine):
    rng = random.Random(5)
    docs = tagged(synthetic_docs(80), rng, groups=(["group:finance"], ["user:bob"], None))
    ingest(engine, docs)
    drain(engine)
    n = engine.settings.n_planes
    doc = next(d for d in docs if (d.metadata or {}).get("access") == ["group:finance"])
    old = engine.graph.get_document(doc.doc_id)
    before = node_partitions(engine)
    ingest(engine, [replace(doc, metadata={"access": ["user:bob"]})])
    report = drain(engine)
    bob = placement.partition_index(engine, ["user:bob"])
    finance = placement.partition_index(engine, ["group:finance"])
    new = engine.graph.get_document(doc.doc_id)
    assert set(new.chunk_ids).isdisjoint(old.chunk_ids)  # new chunks ...
    assert not engine.graph.get_nodes(old.chunk_ids)     # ... the old ones gone
    assert {index_of(x.code, n) for x in engine.graph.get_nodes(new.chunk_ids).values()} == {bob}
    after = node_partitions(engine)
    touched = {after[i] for ids in report.summary_ids.values() for i in ids} | \
        {before[i] for ids in report.removed_summary_ids.values() for i in ids}
    assert touched <= {bob, finance} and touched
    check_no_mixing(engine)
    assert invariants.check(engine).ok


def test_a_small_partition_is_served_as_its_chunks_not_summarized_with_others(engine):
    docs = synthetic_docs(40)
    docs[0] = replace(docs[0], metadata={"access": ["user:carol"]})
    ingest(engine, docs)
    drain(engine)
    carol = placement.partition_index(engine, ["user:carol"])
    where = node_partitions(engine)
    assert carol in where.values()
    assert all(where[m] != carol for layer in engine.graph.layer_sizes()
               for seg in engine.graph.get_segments(layer) for m in seg.members)
    check_no_mixing(engine)


def test_an_unpartitioned_store_keeps_its_codes():
    engine = make_engine()
    ingest(engine, synthetic_docs(30))
    drain(engine)
    n = engine.settings.n_planes
    assert all(r.code == lsh_part(r.code, n) for layer in engine.graph.layer_sizes()
               for r in engine.graph.layer_refs(layer))
    assert placement.partitions(engine) == {0: ()}


def test_partition_indexes_are_one_per_partition_even_on_a_clash(engine, monkeypatch):
    monkeypatch.setattr(placement, "index_candidate", lambda key, n, probe: 1 + probe)  # all clash
    a = placement.partition_index(engine, ["group:a"])
    b = placement.partition_index(engine, ["group:b"])
    assert (a, b) == (1, 2)
    assert placement.partition_index(engine, ["group:a", "group:a"]) == 1
    assert placement.partitions(engine) == {0: (), 1: ("group:a",), 2: ("group:b",)}
    assert partition_of(canonical(["group:b"])) == partition_of(["group:b"])
