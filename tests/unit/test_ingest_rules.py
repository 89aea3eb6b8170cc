"""services.ingest rules a user would notice, on the memory engine: a ``tenant`` attribute must
name the store's tenant; ``true`` is not ``1``; a document id twice in a batch is refused; batches
keep their size and order; versions order the writes (older is stale, newer same text restamps);
replacements count what they dropped; every chunk has its own text's LSH code; a retag keeps the
chunks findable by tenant and by the new metadata."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import make_engine, synthetic_docs

from eragraph.domain.ids import content_hash
from eragraph.services.ingest import SourceDoc, batches, ingest, same_attributes
from eragraph.services.remove import remove


def test_metadata_naming_another_tenant_is_refused_with_both_tenants_named():
    engine = replace(make_engine(), tenant="acme")
    good, bad = (replace(d, doc_id="") for d in synthetic_docs(2))
    bad = replace(bad, metadata={"tenant": "globex", "team": "x"})
    good = replace(good, metadata={"tenant": "acme", "team": "y"})
    report = ingest(engine, [bad, good])  # the refused one does not stop the batch
    assert report.errors == [{"source": bad.source, "error":
                              f"{bad.source}: its metadata names tenant 'globex' but it belongs to tenant 'acme'"}]
    assert engine.graph.get_document(bad.resolved_id) is None
    stored = engine.graph.get_document(good.resolved_id)
    # the tenant attribute is the namespace, not metadata: the rest is kept as given
    assert stored is not None and stored.metadata == {"team": "y"}


def test_default_tenant_store_refuses_a_document_naming_a_tenant():
    engine = make_engine()
    doc = replace(synthetic_docs(1)[0], doc_id="", metadata={"tenant": "acme"})
    report = ingest(engine, [doc])
    assert report.errors == [{"source": doc.source, "error":
                              f"{doc.source}: its metadata names tenant 'acme', not this store's (the default tenant)"}]
    assert engine.graph.get_document(doc.resolved_id) is None


def test_true_is_not_the_number_one_but_a_tuple_is_the_list_it_was():
    engine = make_engine()
    doc = replace(synthetic_docs(1)[0], doc_id="", metadata={"flag": 1, "tags": ["a", "b"]})
    ingest(engine, [doc])
    stored = engine.graph.get_document(doc.resolved_id)
    assert same_attributes(stored, {"flag": 1.0, "tags": ("a", "b")}, stored.title)
    assert not same_attributes(stored, {"flag": True, "tags": ["a", "b"]}, stored.title)
    assert not same_attributes(stored, {"flag": "1", "tags": ["a", "b"]}, stored.title)


def test_a_document_id_given_twice_in_one_batch_is_refused_once_and_named():
    engine = make_engine()
    first, second, third = synthetic_docs(3)
    twin = replace(second, doc_id=first.resolved_id)
    report = ingest(engine, [first, twin, third])
    assert report.errors == [{"source": twin.source,
                              "error": f"duplicate document id {first.resolved_id} in batch"}]
    assert engine.graph.get_document(first.resolved_id).source == first.source
    assert engine.graph.get_document(third.resolved_id) is not None and report.documents_added == 2


def test_batches_hold_at_most_size_documents_in_order_and_size_zero_is_refused():
    docs = synthetic_docs(7)
    assert [len(b) for b in batches(iter(docs), 3)] == [3, 3, 1]
    assert [d for b in batches(iter(docs), 1) for d in b] == docs
    again = []
    stream = batches(iter(docs), 3, again)
    assert next(stream) == docs[:3]
    again += docs[:2]  # put back: they come first in the next batch, which stays at 3
    assert next(stream) == [*docs[:2], docs[3]]
    with pytest.raises(ValueError, match="^batch size must be at least 1$"):
        next(batches(iter(docs), 0))


def test_every_document_is_ingested_whatever_the_batch_size():
    for size in (1, 2, 256):
        engine = make_engine(chunk_tokens=10, chunk_overlap=2)
        docs = synthetic_docs(5)
        done = []
        report = ingest(engine, docs, progress=done.append, batch_docs=size)
        assert report.errors == [] and report.documents_added == 5 and sum(done) == 5
        stored = [engine.graph.get_document(d.resolved_id) for d in docs]
        assert report.chunks_added == sum(len(d.chunk_ids) for d in stored) > 5


def test_an_older_version_is_stale_and_a_newer_one_of_the_same_text_only_restamps():
    engine = make_engine()
    doc = replace(synthetic_docs(1)[0], doc_id="", version="0000000000000002")
    ingest(engine, [doc])
    chunks = engine.graph.get_document(doc.resolved_id).chunk_ids

    older = ingest(engine, [replace(doc, version="0000000000000001", text=doc.text + " changed")])
    assert (older.documents_stale, older.documents_unchanged, older.documents_replaced) == (1, 0, 0)
    assert engine.graph.get_document(doc.resolved_id).version == "0000000000000002"

    older_same = ingest(engine, [replace(doc, version="0000000000000001")])
    assert (older_same.documents_stale, older_same.documents_unchanged) == (1, 0)

    newer = ingest(engine, [replace(doc, version="0000000000000003")])
    assert (newer.documents_stale, newer.documents_unchanged, newer.chunks_added) == (0, 1, 0)
    stored = engine.graph.get_document(doc.resolved_id)
    assert stored.version == "0000000000000003" and stored.chunk_ids == chunks

    # the same event delivered again is not newer than what it wrote: stale, nothing changes
    again = ingest(engine, [replace(doc, version="0000000000000003")])
    assert (again.documents_stale, again.documents_unchanged) == (1, 0)
    assert engine.graph.get_document(doc.resolved_id) == stored


def test_replacing_documents_counts_each_and_the_chunks_they_dropped():
    engine = make_engine()
    docs = [replace(d, doc_id="") for d in synthetic_docs(3)]
    ingest(engine, docs)
    before = {d.resolved_id: set(engine.graph.get_document(d.resolved_id).chunk_ids) for d in docs}
    changed = [replace(d, text="Entirely new words for this one. " * 3) for d in docs[:2]]
    report = ingest(engine, [*changed, docs[2]])
    after = {d.resolved_id: set(engine.graph.get_document(d.resolved_id).chunk_ids) for d in changed}
    dropped = sum(len(before[i] - after[i]) for i in after)
    assert (report.documents_replaced, report.documents_unchanged, report.documents_added) == (2, 1, 0)
    assert dropped > 0 and report.chunks_removed == dropped
    assert not engine.graph.get_nodes([c for i in after for c in before[i] - after[i]])


def test_every_chunk_carries_the_lsh_code_of_the_text_it_is_embedded_with():
    from eragraph.domain.lsh import hash_vectors
    from eragraph.domain.text import embedding_text
    engine = make_engine(chunk_tokens=10, chunk_overlap=2)
    docs = synthetic_docs(4)  # several documents of several chunks in one batch
    ingest(engine, docs)
    ids = [c for d in docs for c in engine.graph.get_document(d.resolved_id).chunk_ids]
    nodes = engine.graph.get_nodes(ids)
    assert len(ids) > len(docs) and len(nodes) == len(ids)
    texts = [embedding_text(d.title, nodes[c].text) for d in docs  # its own text with its document's title
             for c in engine.graph.get_document(d.resolved_id).chunk_ids]
    assert all(t != nodes[c].text for t, c in zip(texts, ids))  # the titles do not begin these texts
    expected = hash_vectors(engine.lsh(), engine.embedder.embed(texts))
    assert [nodes[c].code for c in ids] == [int(x) for x in expected]


def test_a_retag_in_a_tenant_store_keeps_the_chunks_findable_by_tenant_and_new_metadata():
    from eragraph.domain.filters import parse_filter
    engine = replace(make_engine(), tenant="acme")
    doc = replace(synthetic_docs(1)[0], doc_id="", metadata={"team": "red"})
    ingest(engine, [doc])
    chunks = set(engine.graph.get_document(doc.resolved_id).chunk_ids)
    query = engine.embedder.embed([doc.text])[0]
    tenant_acme = parse_filter({"equals": {"key": "tenant", "value": "acme"}})
    assert {h.node_id for h in engine.vectors.search(query, 50, layers=[0], where=tenant_acme)} == chunks
    report = ingest(engine, [replace(doc, metadata={"team": "blue"})])
    assert (report.documents_retagged, report.chunks_added) == (1, 0)

    def found(where):
        return {h.node_id for h in engine.vectors.search(query, 50, layers=[0], where=parse_filter(where))}
    assert found({"andAll": [{"equals": {"key": "team", "value": "blue"}},
                             {"equals": {"key": "tenant", "value": "acme"}}]}) == chunks
    assert found({"equals": {"key": "team", "value": "red"}}) == set()
    assert engine.graph.get_document(doc.resolved_id).metadata == {"team": "blue"}


V1, V2, V3 = (f"{n:016d}" for n in (1, 2, 3))


def test_every_stale_document_of_a_batch_is_counted_and_none_stops_the_batch():
    engine = make_engine()
    a, b, c, d = (replace(x, doc_id="", version=V2) for x in synthetic_docs(4))
    ingest(engine, [a, b, c])
    report = ingest(engine, [replace(a, version=V1, text="older"), replace(b, version=V1, text="older too"),
                             replace(c, version=V3), d])
    assert (report.documents_stale, report.documents_unchanged, report.documents_added) == (2, 1, 1)
    assert engine.graph.get_document(a.resolved_id).content_hash == content_hash(a.text)
    assert engine.graph.get_document(c.resolved_id).version == V3


def test_an_unversioned_reingest_of_unchanged_text_keeps_the_stored_version():
    engine = make_engine()
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V2)
    ingest(engine, [doc])
    report = ingest(engine, [replace(doc, version="")])  # a local file: no sequencer
    assert report.documents_unchanged == 1 and engine.graph.get_document(doc.resolved_id).version == V2


def test_a_newer_delete_makes_an_older_write_of_the_document_stale():
    engine = make_engine()
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1)
    ingest(engine, [doc])
    remove(engine, [doc.source], version=V3)
    report = ingest(engine, [replace(doc, version=V2)])
    assert (report.documents_stale, report.documents_added) == (1, 0)
    assert engine.graph.get_document(doc.resolved_id) is None and engine.vectors.ids() == set()


def test_repeated_passages_of_one_document_are_kept_as_separate_chunks():
    engine = make_engine(chunk_tokens=10, chunk_overlap=0)
    doc = SourceDoc(source="refrain.txt", text="the same five words here " * 20)
    ingest(engine, [doc])
    ids = engine.graph.get_document(doc.resolved_id).chunk_ids
    texts = {n.text for n in engine.graph.get_nodes(ids).values()}
    assert len(ids) > 2 and len(texts) < len(ids)  # identical texts, yet one chunk each
    assert len(set(ids)) == len(ids) and len(engine.graph.get_nodes(ids)) == len(ids)
    query = engine.embedder.embed([doc.text])[0]
    assert {h.node_id for h in engine.vectors.search(query, 50, doc_ids=[doc.resolved_id])} == set(ids)


def test_a_document_keeps_the_meta_it_was_given():
    engine = make_engine()
    doc = replace(synthetic_docs(1)[0], doc_id="", meta={"origin": "upload"})
    ingest(engine, [doc])
    assert engine.graph.get_document(doc.resolved_id).meta["origin"] == "upload"


def test_removing_a_document_tells_the_remove_hooks_which_document_lost_which_chunks():
    engine = make_engine()
    doc = replace(synthetic_docs(1)[0], doc_id="")
    ingest(engine, [doc])
    stored = engine.graph.get_document(doc.resolved_id)
    told = []
    engine.remove_hooks.append(lambda eng, d, ids: told.append((eng is engine, d.doc_id, list(ids))))
    remove(engine, [doc.resolved_id])
    assert told == [(True, doc.resolved_id, list(stored.chunk_ids))]
    assert engine.vectors.ids() == set() and engine.graph.get_document(doc.resolved_id) is None
