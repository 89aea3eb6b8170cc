"""Export and import of a store with access lists (services.portable, dump version 2): the
partition registry travels in ``partition`` records before the documents, is loaded at the same
indexes (a chunk's code holds its partition's index), and the imported store answers every
caller as the source does, summaries kept (their vectors carry their partition's readers). A dump
whose document names a partition it does not carry, or a partition record with a bad list, is
refused in words before anything is written."""

from __future__ import annotations

import random

import pytest
from access_cases import check_no_mixing, node_partitions, tagged
from support import synthetic_docs

from eragraph.bootstrap import build_engine
from eragraph.config import settings_from_env
from eragraph.domain.access import caller
from eragraph.services import placement, portable
from eragraph.services.dump_records import DumpError, check_dump
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.query import query
from eragraph.services.resummarize import drain

ENV = {"ERAGRAPH_EMBEDDER": "hash", "ERAGRAPH_S_MIN": "2", "ERAGRAPH_S_MAX": "3"}
USES = ("embedder", "summarizer", "ner")
CALLERS = (["group:finance"], ["user:alice"], ["user:bob"], ["user:nobody"])
QUESTIONS = ("football league goal season", "stock market bank bond", "planet orbit star", "Markerd3")


def answers(engine):
    out = []
    for principals in CALLERS:
        for default in ("tenant", "deny"):
            who = caller(principals, default)
            for text in QUESTIONS:
                out.append([(r.id, round(r.score, 5)) for r in query(engine, text, mode="collapsed", k=6,
                                                                       caller=who).results])
    return out


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    engine = build_engine("local", tmp_path_factory.mktemp("dumps") / "a", settings_from_env(ENV), uses=USES)
    ingest(engine, tagged(synthetic_docs(40), random.Random(7)))
    drain(engine)
    return engine


def test_a_store_with_access_lists_round_trips_with_its_partitions(source, tmp_path):
    records = list(portable.dump(source))
    assert records[0]["version"] == portable.DUMP_VERSION == 2
    parts = [r for r in records if r.get("kind") == "partition"]
    first_doc = next(n for n, r in enumerate(records) if r.get("kind") == "document")
    assert len(parts) == 3 and all(records.index(p) < first_doc for p in parts)
    assert check_dump(iter(records), "")["partition"] == 3

    target = build_engine("local", tmp_path / "b", settings_from_env(ENV), uses=USES)
    portable.load(target, iter(records))
    assert placement.partitions(target) == placement.partitions(source)
    assert node_partitions(target) == node_partitions(source)
    assert check_no_mixing(target) > 0
    mine = answers(target)
    assert mine == answers(source)
    # a caller keeps the summaries of its partitions in the imported store
    finance = caller(["group:finance"])
    assert any(r.layer > 0 for q in QUESTIONS for r in query(target, q, mode="collapsed", k=10, caller=finance).results)
    # a new document of a known list joins its partition; of a new list, gets a new index
    ingest(target, [SourceDoc(source="mem://n.txt", doc_id="n0", title="n", text="A new finance note about bonds.",
                              metadata={"access": ["group:finance"]})])
    assert placement.partitions(target) == placement.partitions(source)


def test_a_dump_naming_a_partition_it_does_not_carry_is_refused(source):
    records = [r for r in portable.dump(source) if r.get("kind") != "partition"]
    with pytest.raises(DumpError, match="partition"):
        check_dump(iter(records), "")
    bad = list(portable.dump(source))
    part = next(n for n, r in enumerate(bad) if r.get("kind") == "partition")
    bad[part] = {**bad[part], "access": ["finance"]}
    with pytest.raises(DumpError, match="not a principal"):
        check_dump(iter(bad), "")
    bad[part] = {**bad[part], "access": ["group:x"], "index": 0}
    with pytest.raises(DumpError, match="positive"):
        check_dump(iter(bad), "")


def test_an_import_refuses_nodes_of_an_unnamed_partition(source, tmp_path):
    records = list(portable.dump(source))
    dropped = next(r for r in records if r.get("kind") == "partition")
    kept = [r for r in records if r is not dropped and not (r.get("kind") == "document" and r.get("metadata"))]
    target = build_engine("memory", settings=settings_from_env(ENV), uses=USES)
    with pytest.raises(DumpError, match="access partition"):
        portable.load(target, iter(kept))
