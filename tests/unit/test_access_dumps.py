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


def _hidden_marks(source, who) -> tuple[list, set[str]]:
    """What of the documents ``who`` may not read may not appear in its dump (their ids, titles,
    sources and markers: the marker is their text's and, lower-cased, their entity's), and the
    ids of the nodes over any of them (chunks and summaries)."""
    import re

    from access_cases import leaves_docs

    docs = {d.doc_id: d for d in source.graph.list_documents()}
    hidden = {i for i, d in docs.items() if not who.may_read((d.metadata or {}).get("access"))}
    marks = [re.compile(rf"(?<![\w]){re.escape(m)}(?!\d)", re.IGNORECASE)
             for i in hidden for m in (f'"{i}"', docs[i].title, docs[i].source, f"Marker{i}")]
    seen: dict = {}
    nodes = {r.node_id for layer in source.graph.layer_sizes() for r in source.graph.layer_refs(layer)
             if leaves_docs(source, r.node_id, seen) & hidden}
    return marks, nodes


@pytest.mark.parametrize("principals,default", [(["group:finance"], "tenant"), (["user:alice"], "deny"),
                                                (["user:bob", "group:board"], "tenant"), (["user:nobody"], "deny")])
def test_an_export_as_a_caller_holds_only_what_it_may_read(source, tmp_path, principals, default):
    """``dump(engine, caller)``: no text, title, source, id, entity, chunk or summary of a document
    outside the caller's view; everything inside it; no cost ledger. It imports as a store of its
    own, whole by the invariants, whose operator sees what the caller saw in the source."""
    import json

    from eragraph.services import invariants

    who = caller(principals, default)
    records = list(portable.dump(source, who))
    text = json.dumps(records)
    marks, hidden_nodes = _hidden_marks(source, who)
    for mark in marks:
        assert not mark.search(text), mark.pattern
    for node_id in hidden_nodes:
        assert node_id not in text, node_id
    assert not any(r.get("kind") == "ledger" for r in records)
    readable = {d.doc_id for d in source.graph.list_documents() if who.may_read((d.metadata or {}).get("access"))}
    assert {r["doc_id"] for r in records if r.get("kind") == "document"} == readable
    everything = list(portable.dump(source))
    kinds = {"node", "segment", "entity_chunk", "partition"}
    mine = [r for r in records if r.get("kind") in kinds]
    # completeness: every record of the operator's dump that is of no hidden node or document is there
    shown = [r for r in everything if r.get("kind") in kinds and not any(m.search(json.dumps(r)) for m in marks)
             and not any(n in json.dumps(r) for n in hidden_nodes)
             and (r.get("kind") != "partition" or who.may_read(r["access"]))]
    assert mine == shown
    if readable:
        assert any(r.get("kind") == "node" and r["layer"] > 0 for r in records) or len(readable) < 4

    assert check_dump(iter(records), "")
    target = build_engine("local", tmp_path / "view", settings_from_env(ENV), uses=USES)
    portable.load(target, iter(records))
    report = invariants.check(target)
    assert report.ok, report.violations
    for q in QUESTIONS:
        assert [r.id for r in query(target, q, mode="collapsed", k=6).results] == \
            [r.id for r in query(source, q, mode="collapsed", k=6, caller=who).results], q


def test_export_as_on_the_command_line(tmp_path, capsys):
    """``eragraph export --as``: the dump of a local store as those principals see it (the same
    records as the service's); a malformed principal is a usage error in words, no file written."""
    import gzip
    import json

    from eragraph.cli.app import main

    engine = build_engine("local", tmp_path / "kb", settings_from_env(ENV), uses=USES)
    ingest(engine, tagged(synthetic_docs(16), random.Random(3)))
    drain(engine)
    who = caller(["user:bob"])
    hidden = [d.doc_id for d in engine.graph.list_documents() if not who.may_read((d.metadata or {}).get("access"))]
    assert hidden
    out = tmp_path / "bob.dump.gz"
    assert main(["export", "--store", str(tmp_path / "kb"), "--as", "user:bob", str(out), "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    with gzip.open(out, "rt", encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines]
    assert said["as"] == ["user:bob"] and said["records"] == len(records)
    assert records[1:] == json.loads(json.dumps(list(portable.dump(engine, who))[1:]))
    assert not {r["doc_id"] for r in records if r.get("kind") == "document"} & set(hidden)
    bad = tmp_path / "bad.dump.gz"
    assert main(["export", "--store", str(tmp_path / "kb"), "--as", "bob", str(bad)]) == 2
    assert "not a principal" in capsys.readouterr().err and not bad.exists()
