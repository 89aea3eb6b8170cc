"""services.ingest when a write is interrupted or raced, and what it tells the rest of the
system, on the memory engine: an ingest that died before its follow-up is finished by its rerun;
a writer that loses to a newer version undoes only its own chunks; one that loses to an older
version replaces it; chunks a concurrent writer took away are put back; the announcement names
every chunk a batch added or dropped; a document too large for the store is refused whole
without taking its batch down; every stored or refused document gets its status.

The races are made deterministic by a graph store that runs the competing write right before
(or right after) the contested ``put_document``: the store is the real memory store, only the
interleaving is chosen."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support import RecordingQueue, make_engine, synthetic_docs

from eragraph.adapters.memory.graph_memory import MemoryGraphStore
from eragraph.domain.doc_status import FAILED, INDEXED
from eragraph.domain.ids import content_hash
from eragraph.domain.model import ANY_VERSION, ConflictError, ItemTooLargeError
from eragraph.domain.text import embedding_text
from eragraph.services import followup
from eragraph.services.announce import shard_of
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.remove import remove

V1, V2, V3, V4 = (f"{n:016d}" for n in (1, 2, 3, 4))
NEW_TEXT = "Entirely new words for this one, nothing like the first. " * 3
OTHER_TEXT = "A third text about something else again, rivers and bridges. " * 3


class RacingStore(MemoryGraphStore):
    """The memory store; ``before`` / ``after`` run once around the next put_document of
    ``doc_id`` (another writer's work, interleaved there)."""

    def __init__(self) -> None:
        super().__init__()
        self.doc_id = ""
        self.before = self.after = None

    def put_document(self, doc, expected=ANY_VERSION):
        if doc.doc_id == self.doc_id and self.before is not None:
            run, self.before = self.before, None
            run()
        out = super().put_document(doc, expected)
        if doc.doc_id == self.doc_id and self.after is not None:
            run, self.after = self.after, None
            run()
        return out


class LimitedStore(MemoryGraphStore):
    """The memory store with an item limit (as DynamoDB has): a document whose source starts
    with ``huge`` or whose metadata says ``size: huge`` does not fit."""

    def check_fits(self, doc=None, nodes=()):
        if doc is not None and (doc.source.startswith("huge") or (doc.metadata or {}).get("size") == "huge"):
            raise ItemTooLargeError(f"{doc.source}: too large for one item")
        if any("enormous" in n.text for n in nodes):
            raise ItemTooLargeError("a chunk too large for one item")


def _engine(**graph) -> object:
    return replace(make_engine(chunk_tokens=10, chunk_overlap=2), queue=RecordingQueue(), **graph)


def _doc(engine, src):
    return engine.graph.get_document(src.resolved_id, include_deleted=True)


def _announced(engine) -> tuple[set, set, set]:
    msgs = engine.queue.messages
    return ({i for m in msgs for i in m.added}, {i for m in msgs for i in m.removed}, {m.reason for m in msgs})


def _held(engine, ids) -> set:
    """The chunks of ``ids`` that both the graph and the vector index hold."""
    ids = set(ids)
    return set(engine.graph.get_nodes(ids)) & engine.vectors.ids() & ids


# ---------------------------------------------------------------- interrupted writes

def test_an_ingest_that_died_before_dropping_the_old_chunks_is_finished_by_its_rerun():
    engine = _engine()
    doc = replace(synthetic_docs(1)[0], doc_id="")
    ingest(engine, [doc])
    old = _doc(engine, doc)
    new = replace(doc, text=NEW_TEXT)
    calls = []

    def dies_once(eng, d, ids):  # the process dies at its first drop, after the commit
        calls.append((eng, d, list(ids)))
        if len(calls) == 1:
            raise RuntimeError("killed")
    engine.remove_hooks.append(dies_once)
    with pytest.raises(RuntimeError, match="killed"):
        ingest(engine, [new])
    stored = _doc(engine, doc)
    left = set(old.chunk_ids) - set(stored.chunk_ids)
    assert stored.content_hash == content_hash(NEW_TEXT) and left and _held(engine, left) == left

    engine.queue.messages.clear()
    report = ingest(engine, [new])  # the redelivered event: its own version is stored
    assert report.errors == [] and (report.documents_unchanged, report.chunks_added) == (1, 0)
    assert _held(engine, left) == set() and _held(engine, stored.chunk_ids) == set(stored.chunk_ids)
    eng, dropped_from, ids = calls[-1]  # the remove hooks are told whose chunks go
    assert eng is engine and dropped_from.doc_id == doc.resolved_id and set(ids) == left
    assert _announced(engine) == (set(stored.chunk_ids), left, {"ingest"})
    assert engine.graph.meta_keys(followup.PREFIX) == []  # finished: its record is gone

    engine.queue.messages.clear()
    again = ingest(engine, [new])  # finished: a third delivery changes and announces nothing
    assert again.documents_unchanged == 1 and engine.queue.messages == []


# ---------------------------------------------------------------- concurrent writers

def test_a_writer_that_loses_to_a_newer_version_undoes_only_its_own_chunks():
    engine = _engine(graph=RacingStore())
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1)
    ingest(engine, [doc])
    engine.graph.doc_id = doc.resolved_id
    engine.graph.before = lambda: ingest(engine, [replace(doc, text=OTHER_TEXT, version=V3)])
    told = []
    engine.remove_hooks.append(lambda eng, d, ids: told.append(d.doc_id))
    report = ingest(engine, [replace(doc, text=NEW_TEXT, version=V2)])
    winner = _doc(engine, doc)
    assert winner.version == V3 and _held(engine, winner.chunk_ids) == set(winner.chunk_ids)
    layer0 = {n.node_id for n in engine.graph.get_nodes(engine.vectors.ids()).values() if n.layer == 0}
    assert layer0 == set(winner.chunk_ids)  # the loser's chunks are gone, the winner's all there
    assert (report.documents_stale, report.documents_replaced, report.chunks_added) == (1, 0, 0)
    assert told and set(told) == {doc.resolved_id}


def test_a_writer_that_loses_to_a_newer_delete_leaves_nothing_behind():
    engine = _engine(graph=RacingStore())
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1)
    ingest(engine, [doc])
    engine.graph.doc_id = doc.resolved_id
    engine.graph.before = lambda: remove(engine, [doc.source], version=V3)
    report = ingest(engine, [replace(doc, text=NEW_TEXT, version=V2)])
    assert _doc(engine, doc).is_tombstone and engine.graph.get_document(doc.resolved_id) is None
    assert engine.vectors.ids() == set() and report.documents_stale == 1


def test_a_writer_that_loses_to_an_older_version_replaces_it():
    engine = _engine(graph=RacingStore())
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1)
    ingest(engine, [doc])
    engine.graph.doc_id = doc.resolved_id
    engine.graph.before = lambda: ingest(engine, [replace(doc, text=OTHER_TEXT, version=V2)])
    report = ingest(engine, [replace(doc, text=NEW_TEXT, version=V3)])
    stored = _doc(engine, doc)
    assert stored.version == V3 and stored.content_hash == content_hash(NEW_TEXT)
    layer0 = {n.node_id for n in engine.graph.get_nodes(engine.vectors.ids()).values() if n.layer == 0}
    assert layer0 == set(stored.chunk_ids)
    assert (report.documents_replaced, report.documents_stale) == (1, 0) and report.chunks_removed > 0


def test_chunks_a_newer_winner_shares_with_the_replaced_version_stay():
    engine = _engine(graph=RacingStore())
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1)
    ingest(engine, [doc])
    first = set(_doc(engine, doc).chunk_ids)
    engine.graph.doc_id = doc.resolved_id
    # right after this writer's commit, a newer one writes the first text back
    engine.graph.after = lambda: ingest(engine, [replace(doc, version=V3)])
    ingest(engine, [replace(doc, text=NEW_TEXT, version=V2)])
    stored = _doc(engine, doc)
    assert stored.version == V3 and set(stored.chunk_ids) == first
    assert _held(engine, first) == first


def test_chunks_a_concurrent_writer_took_away_are_put_back_with_their_vectors():
    engine = _engine(graph=RacingStore())
    first, doc = (replace(d, doc_id="") for d in synthetic_docs(2))  # the raced one second in its batch

    def stale_writer_drops_some():  # what a losing writer's undo can do to shared chunks
        ids = [n.node_id for n in engine.graph.get_nodes(engine.vectors.ids()).values()
               if n.doc_id == doc.resolved_id][:2]
        engine.graph.delete_nodes(ids)
        engine.vectors.delete(ids)
    engine.graph.doc_id = doc.resolved_id
    engine.graph.before = stale_writer_drops_some
    ingest(engine, [first, doc])
    stored = _doc(engine, doc)
    assert len(stored.chunk_ids) > 2 and _held(engine, stored.chunk_ids) == set(stored.chunk_ids)
    nodes = engine.graph.get_nodes(stored.chunk_ids)
    vectors = engine.vectors.get_vectors(stored.chunk_ids)
    expected = engine.embedder.embed([embedding_text(stored.title, nodes[c].text) for c in stored.chunk_ids])
    assert np.allclose(np.stack([vectors[c] for c in stored.chunk_ids]), expected, atol=1e-6)
    query = engine.embedder.embed([doc.text])[0]
    found = {h.node_id for h in engine.vectors.search(query, 50, doc_ids=[doc.resolved_id])}
    assert found == set(stored.chunk_ids)  # the put-back chunks carry their document


# ---------------------------------------------------------------- what a batch tells the system

def test_the_announcement_names_every_chunk_the_batch_added_or_dropped():
    engine = _engine()
    a, b = (replace(d, doc_id="") for d in synthetic_docs(2))
    ingest(engine, [a])
    old_a = set(_doc(engine, a).chunk_ids)
    engine.queue.messages.clear()
    seen = []
    engine.ingest_hooks.append(lambda eng, nodes: seen.append((eng, {n.node_id for n in nodes})))
    ingest(engine, [replace(a, text=NEW_TEXT), b])  # a replacement that drops chunks, then a new one
    new_a, new_b = set(_doc(engine, a).chunk_ids), set(_doc(engine, b).chunk_ids)
    added, removed, reasons = _announced(engine)
    assert added == new_a | new_b and removed == old_a - new_a and reasons == {"ingest"}
    nodes = engine.graph.get_nodes(added)
    for m in engine.queue.messages:  # each message is the shard of the codes it names
        assert {nodes[i].code for i in m.added} <= set(m.codes)
        assert {shard_of(c, engine.settings.n_planes) for c in m.codes} == {m.group}
    assert seen == [(engine, new_a | new_b)]  # the ingest hooks see the written chunks


def test_a_stored_document_has_an_indexed_status_and_a_refused_one_a_failed_status():
    engine = replace(_engine(), tenant="acme")
    good = replace(synthetic_docs(1)[0], doc_id="")
    empty = SourceDoc(source="empty.txt", text="")
    bad = SourceDoc(source="bad.txt", text="some words here", doc_id="own-id", metadata={"tenant": "globex"})
    report = ingest(engine, [good, empty, bad])
    assert [e["source"] for e in report.errors] == ["bad.txt"]
    status = engine.graph.get_doc_status(good.resolved_id)
    codes = [n.code for n in engine.graph.get_nodes(_doc(engine, good).chunk_ids).values()]
    assert (status.state, status.source, status.content_hash) == (INDEXED, good.source, content_hash(good.text))
    assert status.pending_shards == tuple(sorted({shard_of(c, engine.settings.n_planes) for c in codes}))
    assert engine.graph.get_doc_status(empty.resolved_id).state == INDEXED  # no chunks, still stored
    failed = engine.graph.get_doc_status("own-id")  # under the id the document named
    assert failed.state == FAILED and "globex" in failed.reason


def test_a_document_too_large_for_the_store_is_refused_whole_and_its_batch_goes_on():
    engine = _engine(graph=LimitedStore())
    first, last = (replace(d, doc_id="") for d in synthetic_docs(2))
    huge = SourceDoc(source="huge.txt", text=OTHER_TEXT)
    ingest(engine, [last])
    last = replace(last, text=NEW_TEXT)  # a replacement after the refused one
    report = ingest(engine, [first, huge, last])
    assert report.errors == [{"source": "huge.txt", "error": "huge.txt: too large for one item"}]
    assert _doc(engine, huge) is None and engine.graph.get_doc_status(huge.resolved_id).state == FAILED
    assert (report.documents_added, report.documents_replaced) == (1, 1)
    ids = [c for d in (first, last) for c in _doc(engine, d).chunk_ids]
    assert engine.vectors.ids() == set(ids)  # nothing of the refused document is left
    nodes = engine.graph.get_nodes(ids)
    vectors = engine.vectors.get_vectors(ids)  # each chunk got its own text's vector (with its title)
    titles = {d.resolved_id: d.title for d in (first, last)}
    assert np.allclose(np.stack([vectors[c] for c in ids]),
                       engine.embedder.embed([embedding_text(titles[nodes[c].doc_id], nodes[c].text) for c in ids]),
                       atol=1e-6)


def test_a_retag_too_large_for_the_store_is_refused_and_keeps_the_old_attributes():
    engine = _engine(graph=LimitedStore())
    doc, other = (replace(d, doc_id="") for d in synthetic_docs(2))
    doc = replace(doc, metadata={"size": "small"})
    ingest(engine, [doc])
    report = ingest(engine, [replace(doc, metadata={"size": "huge"}), other])
    assert report.errors == [{"source": doc.source, "error": f"{doc.source}: too large for one item"}]
    assert _doc(engine, doc).metadata == {"size": "small"} and report.documents_added == 1
    assert engine.graph.get_doc_status(doc.resolved_id).state == FAILED


# ---------------------------------------------------------------- raced restamps and retags

def _found(engine, doc, where: dict) -> set:
    from eragraph.domain.filters import parse_filter
    query = engine.embedder.embed([doc.text])[0]
    return {h.node_id for h in engine.vectors.search(query, 50, layers=[0], where=parse_filter(where))}


def test_a_restamp_that_loses_to_a_newer_delete_does_not_bring_the_document_back():
    engine = _engine(graph=RacingStore())
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1)
    ingest(engine, [doc])
    engine.graph.doc_id = doc.resolved_id
    engine.graph.before = lambda: remove(engine, [doc.source], version=V4)
    report = ingest(engine, [replace(doc, version=V3)])  # same text, newer: a restamp
    assert report.documents_stale == 1 and report.documents_unchanged == 0
    assert _doc(engine, doc).is_tombstone and engine.vectors.ids() == set()


def test_a_restamp_that_loses_to_a_newer_write_of_the_same_text_is_stale():
    engine = _engine(graph=RacingStore())
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1)
    ingest(engine, [doc])
    engine.graph.doc_id = doc.resolved_id
    engine.graph.before = lambda: ingest(engine, [replace(doc, version=V4)])
    report = ingest(engine, [replace(doc, version=V3)])
    assert (report.documents_stale, report.documents_unchanged) == (1, 0) and _doc(engine, doc).version == V4


def test_a_restamp_that_loses_to_an_older_write_of_other_text_writes_its_own_text_in_full():
    engine = _engine(graph=RacingStore())
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1)
    ingest(engine, [doc])
    first = set(_doc(engine, doc).chunk_ids)
    engine.graph.doc_id = doc.resolved_id
    engine.graph.before = lambda: ingest(engine, [replace(doc, text=NEW_TEXT, version=V2)])
    report = ingest(engine, [replace(doc, version=V3)])  # the first text again, newest
    stored = _doc(engine, doc)
    assert stored.version == V3 and stored.content_hash == content_hash(doc.text)
    assert set(stored.chunk_ids) == first and _held(engine, first) == first
    assert report.documents_replaced == 1 and report.chunks_added == len(first)


def test_a_retag_that_loses_to_a_newer_retag_leaves_the_winners_attributes_on_the_chunks():
    engine = replace(_engine(graph=RacingStore()), tenant="acme")
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1, metadata={"team": "red"})
    ingest(engine, [doc])
    chunks = set(_doc(engine, doc).chunk_ids)
    engine.graph.doc_id = doc.resolved_id
    engine.graph.before = lambda: ingest(engine, [replace(doc, version=V4, metadata={"team": "green"})])
    report = ingest(engine, [replace(doc, version=V3, metadata={"team": "blue"})])
    assert (report.documents_stale, report.documents_retagged) == (1, 0)
    assert _doc(engine, doc).metadata == {"team": "green"}
    green_here = {"andAll": [{"equals": {"key": "team", "value": "green"}},
                             {"equals": {"key": "tenant", "value": "acme"}}]}
    assert _found(engine, doc, green_here) == chunks
    assert _found(engine, doc, {"equals": {"key": "team", "value": "blue"}}) == set()


def test_a_retag_written_over_an_older_retag_puts_its_own_attributes_back_on_the_chunks():
    engine = _engine(graph=RacingStore())
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1, metadata={"team": "red"})
    ingest(engine, [doc])
    chunks = set(_doc(engine, doc).chunk_ids)
    engine.graph.doc_id = doc.resolved_id
    engine.graph.before = lambda: ingest(engine, [replace(doc, version=V2, metadata={"team": "green"})])
    report = ingest(engine, [replace(doc, version=V3, metadata={"team": "blue"})])
    assert report.documents_retagged == 1 and _doc(engine, doc).metadata == {"team": "blue"}
    assert _found(engine, doc, {"equals": {"key": "team", "value": "blue"}}) == chunks
    assert _found(engine, doc, {"equals": {"key": "team", "value": "green"}}) == set()


def test_a_retag_that_loses_to_other_text_is_ingested_in_full_after_all():
    engine = _engine(graph=RacingStore())
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1, metadata={"team": "red"})
    ingest(engine, [doc])
    first = set(_doc(engine, doc).chunk_ids)
    engine.graph.doc_id = doc.resolved_id
    engine.graph.before = lambda: ingest(engine, [replace(doc, text=NEW_TEXT, version=V2)])
    done = []
    report = ingest(engine, [replace(doc, version=V3, metadata={"team": "blue"})], progress=done.append)
    stored = _doc(engine, doc)
    assert (stored.version, stored.metadata, stored.content_hash) == (V3, {"team": "blue"}, content_hash(doc.text))
    assert _found(engine, doc, {"equals": {"key": "team", "value": "blue"}}) == first == set(stored.chunk_ids)
    assert sum(done) == 1 and report.errors == []  # counted once, when it was ingested


# ---------------------------------------------------------------- more interleavings

class DiesAtAnnouncement(RecordingQueue):
    def __init__(self) -> None:
        super().__init__()
        self.armed = False

    def send(self, messages) -> None:
        if self.armed:
            self.armed = False
            raise RuntimeError("killed")
        super().send(messages)


class AlwaysLoses(MemoryGraphStore):
    """Every conditional document write loses (another writer keeps winning)."""

    losing = False

    def put_document(self, doc, expected=ANY_VERSION):
        if self.losing and expected is not ANY_VERSION:
            raise ConflictError(f"document {doc.doc_id} changed concurrently")
        super().put_document(doc, expected)


def test_a_versioned_batch_that_died_at_its_announcement_is_announced_by_its_rerun():
    engine = replace(_engine(), queue=DiesAtAnnouncement())
    a, b = (replace(d, doc_id="", version=V1) for d in synthetic_docs(2))
    ingest(engine, [a, b])
    old = {d.resolved_id: set(_doc(engine, d).chunk_ids) for d in (a, b)}
    changed = [replace(a, text=NEW_TEXT, version=V2), replace(b, text=OTHER_TEXT, version=V2)]
    engine.queue.armed = True
    with pytest.raises(RuntimeError, match="killed"):
        ingest(engine, changed)
    engine.queue.messages.clear()
    report = ingest(engine, changed)  # both events delivered again: their own versions are stored
    assert (report.documents_unchanged, report.documents_stale, report.chunks_added) == (2, 0, 0)
    new = {d.resolved_id: set(_doc(engine, d).chunk_ids) for d in changed}
    added, removed, _ = _announced(engine)
    assert added == new[a.resolved_id] | new[b.resolved_id]
    assert removed == (old[a.resolved_id] - new[a.resolved_id]) | (old[b.resolved_id] - new[b.resolved_id])
    assert engine.graph.meta_keys(followup.PREFIX) == []


def test_a_writer_that_loses_to_a_newer_version_of_the_same_text_keeps_the_winners_chunks():
    engine = _engine(graph=RacingStore())
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1)
    ingest(engine, [doc])
    engine.graph.doc_id = doc.resolved_id
    engine.graph.before = lambda: ingest(engine, [replace(doc, text=NEW_TEXT, version=V3)])
    report = ingest(engine, [replace(doc, text=NEW_TEXT, version=V2)])
    winner = _doc(engine, doc)
    assert winner.version == V3 and report.documents_stale == 1
    assert _held(engine, winner.chunk_ids) == set(winner.chunk_ids)


def test_a_document_deleted_right_after_this_writers_commit_leaves_no_old_chunks():
    engine = _engine(graph=RacingStore())
    doc = replace(synthetic_docs(1)[0], doc_id="")
    ingest(engine, [doc])
    old = set(_doc(engine, doc).chunk_ids)
    engine.graph.doc_id = doc.resolved_id
    engine.graph.after = lambda: remove(engine, [doc.resolved_id])
    ingest(engine, [replace(doc, text=NEW_TEXT)])
    assert _held(engine, old) == set()


def test_a_write_that_keeps_losing_gives_up_naming_the_document():
    engine = _engine(graph=AlwaysLoses())
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1)
    ingest(engine, [doc])
    engine.graph.losing = True
    with pytest.raises(ConflictError, match=f"^document {doc.resolved_id}: 8 conditional writes lost in a row$"):
        ingest(engine, [replace(doc, text=NEW_TEXT, version=V2)])
    with pytest.raises(ConflictError, match=f"^document {doc.resolved_id}: 8 conditional writes lost in a row$"):
        ingest(engine, [replace(doc, version=V2)])  # a restamp


def test_a_restamp_that_loses_to_an_older_restamp_of_the_same_text_only_restamps_again():
    engine = _engine(graph=RacingStore())
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1)
    ingest(engine, [doc])
    engine.graph.doc_id = doc.resolved_id
    engine.graph.before = lambda: ingest(engine, [replace(doc, version=V2)])
    report = ingest(engine, [replace(doc, version=V3)])
    assert (report.documents_unchanged, report.chunks_added, report.documents_stale) == (1, 0, 0)
    assert _doc(engine, doc).version == V3


def test_a_restamp_that_loses_to_an_unversioned_delete_writes_the_document_again():
    engine = _engine(graph=RacingStore())
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1)
    ingest(engine, [doc])
    engine.graph.doc_id = doc.resolved_id
    engine.graph.before = lambda: remove(engine, [doc.resolved_id])
    report = ingest(engine, [replace(doc, version=V3)])
    stored = _doc(engine, doc)
    assert stored.version == V3 and report.documents_added == 1
    assert _held(engine, stored.chunk_ids) == set(stored.chunk_ids)


def test_a_retag_that_loses_to_a_newer_delete_leaves_no_vector_behind():
    engine = _engine(graph=RacingStore())
    doc = replace(synthetic_docs(1)[0], doc_id="", version=V1, metadata={"team": "red"})
    ingest(engine, [doc])
    engine.graph.doc_id = doc.resolved_id
    engine.graph.before = lambda: remove(engine, [doc.source], version=V4)
    report = ingest(engine, [replace(doc, version=V3, metadata={"team": "blue"})])
    assert report.documents_stale == 1 and engine.vectors.ids() == set()


def test_a_document_with_a_chunk_too_large_for_the_store_is_refused_whole():
    engine = _engine(graph=LimitedStore())
    ok = replace(synthetic_docs(1)[0], doc_id="")
    big = SourceDoc(source="big.txt", text="Some ordinary words first. " * 5 + "enormous " * 3)
    report = ingest(engine, [big, ok])
    assert report.errors == [{"source": "big.txt", "error": "a chunk too large for one item"}]
    assert _doc(engine, big) is None and engine.vectors.ids() == set(_doc(engine, ok).chunk_ids)


def test_an_empty_document_alone_is_stored_without_chunks():
    engine = _engine()
    report = ingest(engine, [SourceDoc(source="empty.txt", text="")])
    stored = _doc(engine, SourceDoc(source="empty.txt", text=""))
    assert report.documents_added == 1 and stored.chunk_ids == () and engine.vectors.ids() == set()
