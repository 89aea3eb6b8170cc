"""services.remove on the memory engine: removal by id and by source, the versioned removal of
S3 delete events (a tombstone in place of the document, stale deletes refused, a delete that
overtakes its put, lost conditional writes retried), each with its report counted exactly and
the graph's invariants holding once drained."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import make_engine, synthetic_docs

from eragraph.domain.ids import document_id_for_source
from eragraph.domain.model import DELETED, ConflictError
from eragraph.services import invariants
from eragraph.services.ingest import COMMIT_ATTEMPTS, SourceDoc, ingest
from eragraph.services.remove import remove, tombstone
from eragraph.services.resummarize import drain


def built(n: int = 10, version: str = ""):
    engine = make_engine()
    # ids derived from the sources, as for S3 objects: one document id per source key
    docs = [replace(d, version=version, doc_id="") for d in synthetic_docs(n)]
    ingest(engine, docs)
    drain(engine)
    return engine, docs


def leaves(engine) -> set[str]:
    return {r.node_id for r in engine.graph.layer_refs(0)}


def test_remove_by_id_and_by_source_counts_what_left():
    engine, docs = built()
    first, second = (engine.graph.get_document(d.resolved_id) for d in docs[:2])
    report = remove(engine, [first.doc_id, second.source, "no/such/doc"])
    assert (report.documents_removed, report.chunks_removed) == (2, len(first.chunk_ids) + len(second.chunk_ids))
    assert report.errors == [{"source": "no/such/doc", "error": "no such document"}]
    assert engine.graph.get_document(first.doc_id) is None and engine.graph.get_document(second.doc_id) is None
    assert not (set(first.chunk_ids) | set(second.chunk_ids)) & leaves(engine)
    drain(engine)
    assert invariants.check(engine).ok
    assert len(engine.graph.list_documents()) == len(docs) - 2


def test_a_versioned_delete_leaves_a_tombstone_of_its_version():
    engine, docs = built(version="0A")
    doc = engine.graph.get_document(docs[0].resolved_id)
    report = remove(engine, [doc.source], version="0B")
    assert (report.documents_removed, report.chunks_removed, report.documents_stale) == (1, len(doc.chunk_ids), 0)
    dead = engine.graph.get_document(doc.doc_id, include_deleted=True)
    assert dead.status == DELETED and dead.version == "0B" and dead.source == doc.source
    assert dead.content_hash == "" and dead.chunk_ids == () and "deleted_at" in dead.meta
    assert engine.graph.get_document(doc.doc_id) is None  # a tombstone is no document
    assert not set(doc.chunk_ids) & leaves(engine)
    drain(engine)
    assert invariants.check(engine).ok


def test_an_older_or_equal_delete_is_stale_and_changes_nothing():
    engine, docs = built(version="0B")
    doc = engine.graph.get_document(docs[0].resolved_id)
    for older in ("0A", "0B", "0A00"):
        report = remove(engine, [doc.source], version=older)
        assert (report.documents_removed, report.chunks_removed, report.documents_stale) == (0, 0, 1), older
    assert engine.graph.get_document(doc.doc_id) == doc
    assert set(doc.chunk_ids) <= leaves(engine)


def test_a_delete_that_overtakes_its_put_makes_the_put_stale():
    engine = make_engine()
    source = "s3://bucket/late.txt"
    report = remove(engine, [source], version="0C")
    assert (report.documents_removed, report.documents_stale) == (0, 0)
    dead = engine.graph.get_document(document_id_for_source(source), include_deleted=True)
    assert dead is not None and dead.is_tombstone and dead.version == "0C"
    late = ingest(engine, [SourceDoc(source=source, text="An older put, delivered after the delete.", version="0B")])
    assert late.documents_stale == 1 and late.documents_added == 0
    newer = ingest(engine, [SourceDoc(source=source, text="A newer put replaces the tombstone.", version="0D")])
    assert newer.documents_added == 1
    assert engine.graph.get_document(document_id_for_source(source)).version == "0D"


def test_a_redelivered_delete_removes_nothing_twice():
    engine, docs = built(version="01")
    doc = engine.graph.get_document(docs[3].resolved_id)
    assert remove(engine, [doc.source], version="02").documents_removed == 1
    again = remove(engine, [doc.source], version="02")
    assert (again.documents_removed, again.chunks_removed) == (0, 0)
    drain(engine)
    assert invariants.check(engine).ok


class LosingWrites:
    """The graph store, whose conditional document writes lose ``n`` times (another writer)."""

    def __init__(self, inner, n: int):
        self._inner, self.left, self.tries = inner, n, 0

    def put_document(self, doc, expected=None, **kw):
        self.tries += 1
        if self.left > 0:
            self.left -= 1
            raise ConflictError("lost")
        return self._inner.put_document(doc, expected, **kw)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_a_lost_conditional_write_is_retried_then_given_up():
    engine, docs = built(version="0A")
    doc = engine.graph.get_document(docs[0].resolved_id)
    engine.graph = LosingWrites(engine.graph, COMMIT_ATTEMPTS - 1)
    assert remove(engine, [doc.source], version="0B").documents_removed == 1
    assert engine.graph.tries == COMMIT_ATTEMPTS
    other = engine.graph._inner.get_document(docs[1].resolved_id)
    engine.graph = LosingWrites(engine.graph._inner, COMMIT_ATTEMPTS)
    with pytest.raises(ConflictError, match=f"{COMMIT_ATTEMPTS} conditional writes lost in a row"):
        remove(engine, [other.source], version="0B")


def test_tombstone_fields():
    dead = tombstone("s3://b/x", "doc-x", "0F", now=12.34567)
    assert (dead.doc_id, dead.source, dead.version, dead.status, dead.content_hash) == (
        "doc-x", "s3://b/x", "0F", DELETED, "")
    assert dead.meta == {"deleted_at": 12.346}


class Crash(Exception):
    """The process dies (a Lambda timeout, a kill) between two writes."""


def test_a_versioned_delete_that_died_before_dropping_its_chunks_is_finished_by_its_redelivery(monkeypatch):
    from eragraph.services import remove as remove_module

    engine, docs = built(version="0A")
    doc = engine.graph.get_document(docs[2].resolved_id)
    real = remove_module.remove_chunks

    def crash(*_a, **_kw):
        raise Crash()

    monkeypatch.setattr(remove_module, "remove_chunks", crash)
    with pytest.raises(Crash):
        remove(engine, [doc.source], version="0B")
    assert engine.graph.get_document(doc.doc_id, include_deleted=True).is_tombstone  # written ...
    assert set(doc.chunk_ids) <= leaves(engine)  # ... but its chunks are still there
    monkeypatch.setattr(remove_module, "remove_chunks", real)
    again = remove(engine, [doc.source], version="0B")  # the event, redelivered
    assert not set(doc.chunk_ids) & leaves(engine)
    assert again.documents_stale == 0
    drain(engine)
    assert invariants.check(engine).ok
    assert remove(engine, [doc.source], version="0B").documents_stale == 1  # done: now only stale


def test_several_refs_in_one_call_all_count_and_announce():
    engine, docs = built(version="0A")
    a, b, c = (engine.graph.get_document(d.resolved_id) for d in docs[:3])
    report = remove(engine, [a.source, b.source], version="0B")
    assert (report.documents_removed, report.chunks_removed) == (2, len(a.chunk_ids) + len(b.chunk_ids))
    batch = engine.queue.receive(100)  # one message per code shard
    assert batch and all(m.layer == 0 and m.reason == "delete" for _, m in batch)
    assert {i for _, m in batch for i in m.removed} == set(a.chunk_ids) | set(b.chunk_ids)
    engine.queue.send([m for _, m in batch])  # put back for the drain below
    engine.queue.ack([r for r, _ in batch])
    stale = remove(engine, [a.source, b.source], version="01")
    assert stale.documents_stale == 2 and stale.documents_removed == 0
    report = remove(engine, ["no/such/doc", c.doc_id, "no/such/either"])  # unversioned: by id or source
    assert report.documents_removed == 1 and [e["source"] for e in report.errors] == ["no/such/doc", "no/such/either"]
    drain(engine)
    assert invariants.check(engine).ok
    assert not (set(a.chunk_ids) | set(b.chunk_ids) | set(c.chunk_ids)) & leaves(engine)
