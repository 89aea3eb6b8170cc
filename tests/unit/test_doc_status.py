"""Document statuses on the memory engine: indexed -> summaries pending -> done through ingest
and drain, failures with their reason, a replaced and a removed document, counts per prefix."""

from __future__ import annotations

from dataclasses import replace

from support import make_engine, synthetic_docs

from eragraph.domain.ids import document_id_for_source
from eragraph.services import doc_status
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.remove import remove
from eragraph.services.resummarize import drain


def test_a_document_is_pending_until_the_drain_then_done():
    engine = make_engine()
    docs = synthetic_docs(6)
    ingest(engine, docs)
    first = doc_status.read(engine, docs[0].doc_id)
    assert first["state"] == "summaries_pending" and first["source"] == docs[0].source
    assert first["received_at"] <= first["updated_at"]
    assert engine.graph.get_doc_status(docs[0].doc_id).pending_shards  # the shards it waits on
    drain(engine)
    assert {doc_status.read(engine, d.doc_id)["state"] for d in docs} == {"done"}


def test_a_new_document_sharing_shards_makes_only_itself_pending_until_drained():
    engine = make_engine()
    docs = synthetic_docs(6)
    ingest(engine, docs)
    drain(engine)
    [late] = synthetic_docs(1, seed=3, prefix="late")
    ingest(engine, [late])
    assert doc_status.read(engine, late.doc_id)["state"] == "summaries_pending"
    counts, views = doc_status.listing(engine, "mem://")
    assert counts.counts["summaries_pending"] >= 1
    assert counts.counts["summaries_pending"] + counts.counts["done"] == 7
    drain(engine)
    assert doc_status.read(engine, late.doc_id)["state"] == "done"


def test_failures_keep_their_reason_and_count_under_their_prefix():
    engine = make_engine()
    good = SourceDoc(source="mem://in/good.txt", text="The harbour master logged a tall ship in Gdynia.")
    bad = SourceDoc(source="mem://in/bad.txt", text="text", metadata={"bad key!": 1})
    ingest(engine, [good, bad])
    doc_status.record_failures(engine, [{"source": "mem://in/empty.txt", "error": "empty file"}])
    failed = doc_status.read(engine, bad.resolved_id)
    assert failed["state"] == "failed" and "bad key!" in failed["reason"]
    assert doc_status.read(engine, document_id_for_source("mem://in/empty.txt"))["reason"] == "empty file"
    drain(engine)
    counts, views = doc_status.listing(engine, "mem://in/")
    body = counts.to_json()
    assert (body["total"], body["done"], body["failed"]) == (3, 1, 2)
    assert body["bedrock"] == {"numberOfDocumentsScanned": 3, "numberOfNewDocumentsIndexed": 1,
                               "numberOfDocumentsFailed": 2}
    assert [v["source"] for v in views] == ["mem://in/bad.txt", "mem://in/empty.txt", "mem://in/good.txt"]
    assert doc_status.listing(engine, "mem://out/")[0].to_json()["total"] == 0


def test_a_fixed_document_replaces_its_failure_and_a_removed_one_has_no_status():
    engine = make_engine()
    source = "mem://in/fixed.txt"
    doc_status.record_failures(engine, [{"source": source, "error": "binary file (NUL bytes), not text"}])
    doc = SourceDoc(source=source, text="Now it is text about the council meeting in Torun.")
    ingest(engine, [doc])
    assert doc_status.read(engine, doc.resolved_id)["state"] == "summaries_pending"
    assert "reason" not in doc_status.read(engine, doc.resolved_id)
    ingest(engine, [replace(doc, text="Replaced text about a different meeting in Gdansk.")])
    drain(engine)
    assert doc_status.read(engine, doc.resolved_id)["state"] == "done"
    remove(engine, [source])
    assert doc_status.read(engine, doc.resolved_id) is None
    assert doc_status.listing(engine, "mem://in/")[0].to_json()["total"] == 0
